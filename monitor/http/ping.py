"""The ping endpoints (DESIGN §5), Healthchecks-compatible, as a small raw ASGI app.

This is the hot path, so it is mounted under ``/ping`` without the framework's routing,
validation or serialization layers: it parses the request, hands a validated
:class:`PingRequest` to the process's :class:`IngestWriter` and answers plain text once the
ping is committed.
"""

from __future__ import annotations

import re
import uuid as uuid_module
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

from monitor.domain import pings
from monitor.domain.checks import PingKind
from monitor.domain.clock import Clock
from monitor.domain.errors import ValidationError
from monitor.edge import UUID_RE
from monitor.services.ingest import IngestWriter, PingAnswer, PingRequest
from monitor.settings import Settings

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

SLUG_RE = re.compile(r"^[a-z0-9_-]{1,100}$")
ACTIONS = {
    "start": PingKind.START,
    "fail": PingKind.FAIL,
    "unknown": PingKind.UNKNOWN,
    "log": PingKind.LOG,
    "skip": PingKind.SKIP,
}


class BadPing(Exception):
    """A malformed ping; ``str()`` is the plain-text answer."""

    def __init__(self, text: str, status: int = 400) -> None:
        super().__init__(text)
        self.status = status


def parse_scheduled(text: str, field: str = "scheduled") -> datetime:
    """``scheduled`` (or ``finished``, named by ``field``) as
    :func:`monitor.domain.pings.parse_logical_time` reads it.

    Raises:
        BadPing: ``<field>: …`` naming the problem.
    """
    try:
        return pings.parse_logical_time(text, field)
    except ValidationError as error:
        raise BadPing(str(error)) from None


def parse_action(action: str) -> tuple[PingKind, int | None]:
    if action in ACTIONS:
        return ACTIONS[action], None
    if action.isdigit() and len(action) <= 3:
        status = int(action)
        if status <= 255:
            return (PingKind.SUCCESS if status == 0 else PingKind.FAIL), status
    raise BadPing("invalid url format")


class PingApp:
    """ASGI app for ``/ping/...``."""

    def __init__(self, settings: Settings, clock: Clock, writer: Callable[[], IngestWriter]) -> None:
        self.settings = settings
        self.clock = clock
        self._writer = writer
        self.limit_header = str(settings.ping_body_limit).encode()

    def _headers(self, extra: list[tuple[bytes, bytes]] | None = None) -> list[tuple[bytes, bytes]]:
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"ping-body-limit", self.limit_header),
            (b"access-control-allow-origin", b"*"),
            (b"cache-control", b"no-cache, no-store, must-revalidate"),
        ]
        if extra:
            headers.extend(extra)
        return headers

    async def _answer(
        self, send: Send, status: int, text: str, head: bool, extra: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        body = text.encode()
        headers = self._headers(extra)
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if head else body})

    async def refuse(self, scope: Scope, send: Send, status: int, text: str) -> None:
        """Answer ``status`` with the plain-text ``text`` and the ping answers' headers (for a
        request refused before it reaches this app, such as one with an invalid ``Host``)."""
        await self._answer(send, status, text, scope["method"] == "HEAD")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        head = method == "HEAD"
        if method == "OPTIONS":
            await self._answer(
                send,
                204,
                "",
                True,
                [
                    (b"access-control-allow-methods", b"GET, POST, HEAD, OPTIONS"),
                    (b"access-control-allow-headers", b"*"),
                    (b"access-control-max-age", b"600"),
                ],
            )
            return
        if method not in ("GET", "POST", "HEAD"):
            await self._answer(send, 405, "method not allowed", head, [(b"allow", b"GET, POST, HEAD")])
            return
        received = self.clock.now()
        try:
            body, size = await self._read_body(receive)
            request = self._parse(scope, received, method, body, size)
        except BadPing as error:
            await self._answer(send, error.status, str(error), head)
            return
        answer: PingAnswer = await self._writer().submit(request)
        extra = [(b"retry-after", str(answer.retry_after).encode())] if answer.retry_after else None
        await self._answer(send, answer.status, answer.text, head, extra)

    async def _read_body(self, receive: Receive) -> tuple[bytes, int]:
        """Keep the first ``ping_body_limit`` bytes; count (and drop) the rest."""
        limit = self.settings.ping_body_limit
        chunks: list[bytes] = []
        kept = 0
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise BadPing("client disconnected", 400)
            chunk = message.get("body", b"")
            size += len(chunk)
            if kept < limit and chunk:
                part = chunk[: limit - kept]
                chunks.append(part)
                kept += len(part)
            if not message.get("more_body", False):
                break
        return b"".join(chunks), size

    def _parse(self, scope: Scope, received: datetime, method: str, body: bytes, size: int) -> PingRequest:
        """The ping the request makes (:class:`PingRequest`), or :class:`BadPing` saying why not.

        Long because the ping request's parts (method, path, query, headers, body) are read in
        turn, each with its own plain-text error.
        """
        raw = scope.get("raw_path")
        path: str = raw.decode("latin-1").split("?", 1)[0] if raw else scope["path"]
        if path.startswith("/ping"):
            path = path[len("/ping") :]
        parts = [p for p in path.split("/") if p != ""]
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)

        uuid: str | None = None
        ping_key: str | None = None
        slug: str | None = None
        action = ""
        if len(parts) == 1:
            if not UUID_RE.match(parts[0]):
                raise BadPing("invalid uuid format")
            uuid = parts[0].lower()
        elif len(parts) == 2 and UUID_RE.match(parts[0]):
            uuid, action = parts[0].lower(), parts[1]
        elif len(parts) in (2, 3):
            ping_key, slug = parts[0], parts[1]
            action = parts[2] if len(parts) == 3 else ""
            if not SLUG_RE.match(slug):
                raise BadPing("invalid url format")
        else:
            raise BadPing("invalid url format" if parts else "not found", 400 if parts else 404)
        kind, exit_status = (PingKind.SUCCESS, None) if action == "" else parse_action(action)

        rid = _single(query, "rid")
        if rid is not None:
            if not UUID_RE.match(rid):
                raise BadPing("invalid uuid format")
            rid = str(uuid_module.UUID(rid))
        scheduled_text = _single(query, "scheduled")
        scheduled = parse_scheduled(scheduled_text) if scheduled_text not in (None, "") else None
        if kind is PingKind.SKIP and scheduled is None:
            raise BadPing("scheduled: required for a skip ping")
        finished_text = _single(query, "finished")
        finished = parse_scheduled(finished_text, "finished") if finished_text not in (None, "") else None
        if finished is not None and not kind.is_finish:
            raise BadPing("finished: only for a finish ping (success, fail, an exit status, unknown)")
        started_text = _single(query, "started")
        started = parse_scheduled(started_text, "started") if started_text not in (None, "") else None
        if started is not None and kind is not PingKind.START:
            raise BadPing("started: only for a start ping")
        create = _single(query, "create") == "1"
        if create and slug is None:
            raise BadPing("create: only for /ping/<ping_key>/<slug> URLs")

        headers = _headers(scope)
        idempotency_key = headers.get("idempotency-key")
        if idempotency_key is not None and not 1 <= len(idempotency_key) <= 200:
            raise BadPing("Idempotency-Key: must be 1-200 characters")
        client = scope.get("client") or ("", 0)
        remote = client[0] or ""
        forwarded = headers.get("x-forwarded-for")
        scheme = "https" if scope.get("scheme") == "https" else "http"
        if remote in self.settings.trusted_proxies:
            if forwarded:
                remote = forwarded.split(",")[0].strip()
            proto = headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
            if proto in ("http", "https"):
                scheme = proto  # Healthchecks records the scheme a trusted proxy was reached by
        return PingRequest(
            kind=kind,
            received=received,
            uuid=uuid,
            ping_key=ping_key,
            slug=slug,
            create=create,
            scheduled=scheduled,
            finished=finished,
            started=started,
            rid=rid,
            exit_status=exit_status,
            method=method,
            remote_addr=remote[:64],
            ua=headers.get("user-agent", "")[:200],
            body=body or None,
            body_size=size,
            idempotency_key=idempotency_key,
            scheme=scheme,
        )


def _single(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise BadPing(f"{name}: given more than once")
    return values[0]


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
