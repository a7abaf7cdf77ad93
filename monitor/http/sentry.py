"""Sentry Crons endpoints: what a Sentry SDK (or ``curl``) sends to the project's DSN.

* ``POST /api/<project_id>/envelope/``: envelopes, plain or ``Content-Encoding: gzip`` /
  ``deflate`` / ``br``; ``check_in`` items become pings, every other item (errors,
  transactions, sessions, …) is accepted and dropped, so an SDK that also reports errors never
  breaks. Answer ``200 {}``.
* ``GET|POST /api/<project_id>/cron/<monitor_slug>/<public_key>/?status=…[&check_in_id=…
  &environment=…&duration=…]`` (or a JSON check-in body): Sentry's HTTP check-in. Answer
  ``202 {"id": "<check_in_id>"}`` (the nil id when none was sent).
* ``GET /api/v3/project``: the API key's project and its ``sentry_dsn``.

Authentication is Sentry's: ``X-Sentry-Auth: Sentry sentry_key=…`` (or ``Authorization``), a
``sentry_key`` query parameter, or the envelope header's ``dsn``; the HTTP check-in carries the
key in its path. Errors are Sentry-shaped, ``{"detail": "<field>: <problem>"}``: 401 without a
key, 403 for a key that is not this project's, 404 for an unknown monitor without config, 400
for bad input, 413 for an oversized envelope or item. A check-in is acknowledged only after
its ping is committed (it goes through the ingest writer, DESIGN §6), and a refused one leaves
nothing stored. ``project_id`` is numeric, so these routes never collide with ``/api/v3/…``.
"""

from __future__ import annotations

import asyncio
import contextlib
import zlib
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import datetime
from typing import Any

import brotli
import msgspec
from litestar import Request, Response, get, post, route
from litestar.di import Provide
from litestar.handlers import HTTPRouteHandler

from monitor.domain import sentry as domain
from monitor.domain.sentry import CheckIn, SentryError
from monitor.http.api.common import (
    API_KEY,
    API_KEY_SECURITY,
    ApiKey,
    error_responses,
    provide_api_key,
    services_of,
)
from monitor.services import sentry as service
from monitor.services.ingest import IngestWriter, PingAnswer, PingRequest
from monitor.settings import Settings


def _detail(status: int, text: str, headers: dict[str, str] | None = None) -> Response[dict[str, str]]:
    safe = text.encode("utf-8", "backslashreplace").decode("utf-8")  # never echo a lone surrogate
    return Response({"detail": safe}, status_code=status, headers=headers)


async def _read_body(request: Request[Any, Any, Any], limit: int) -> bytes:
    """The raw body, refusing more than ``limit`` bytes (413) without reading it all."""
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > limit:
        raise SentryError(413, "envelope", f"larger than the {limit}-byte limit")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise SentryError(413, "envelope", f"larger than the {limit}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


def decode_body(body: bytes, encoding: str | None, limit: int) -> bytes:
    """Undo ``Content-Encoding`` (gzip, deflate, br, identity), at most ``limit`` bytes out.

    Raises:
        SentryError: 400 for a body that does not decode; 413 past ``limit``; 415 for another
            encoding.
    """
    name = (encoding or "identity").strip().lower()
    if name in ("", "identity"):
        return body
    try:
        if name in ("gzip", "x-gzip", "deflate"):
            # gzip, zlib-wrapped deflate, or raw deflate (some clients send it as "deflate")
            if name != "deflate":
                wbits = 16 + zlib.MAX_WBITS
            else:
                wbits = zlib.MAX_WBITS if body[:1] == b"x" else -zlib.MAX_WBITS
            decompressor = zlib.decompressobj(wbits)
            out = decompressor.decompress(body, limit + 1)
            if len(out) > limit or decompressor.unconsumed_tail:
                raise SentryError(413, "envelope", f"larger than the {limit}-byte limit once decompressed")
            if not decompressor.eof:
                raise SentryError(400, "Content-Encoding", f"the body is not complete {name} data")
            return out
        if name == "br":
            brotli_decompressor = brotli.Decompressor()
            out = brotli_decompressor.process(body, output_buffer_limit=limit + 1)
            if len(out) > limit:
                raise SentryError(413, "envelope", f"larger than the {limit}-byte limit once decompressed")
            if not brotli_decompressor.is_finished():
                raise SentryError(400, "Content-Encoding", "the body is not complete br data")
            return bytes(out)
    except (zlib.error, brotli.error) as error:
        raise SentryError(400, "Content-Encoding", f"the body is not valid {name} data ({error})") from None
    raise SentryError(415, "Content-Encoding", f"{encoding!r} is not supported (gzip, deflate, br)")


def _remote(request: Request[Any, Any, Any], settings: Settings) -> str:
    remote = request.client.host if request.client else ""
    forwarded = request.headers.get("x-forwarded-for")
    if forwarded and remote in settings.trusted_proxies:
        remote = forwarded.split(",")[0].strip()
    return remote[:64]


def _header_key(request: Request[Any, Any, Any]) -> str | None:
    """The key from ``X-Sentry-Auth``, ``Authorization: Sentry|DSN …`` or ``?sentry_key=``."""
    key = domain.auth_key(request.headers.get("x-sentry-auth"))
    if key is None:
        authorization = request.headers.get("authorization")
        if authorization and authorization.strip().lower().startswith(("sentry ", "dsn ")):
            key = domain.auth_key(authorization)
    if key is None:
        key = request.query_params.get("sentry_key") or None
    return key


class _SlugLocks:
    """One lock per (project, check slug), held from the check's upsert to its ping's commit.

    SDKs send a job's check-ins concurrently (``@sentry/node`` keeps many requests in flight),
    so a finish can arrive while its start is still creating the check: it must wait for that,
    not answer 404, and be stored after the start. Within a process, check-ins of one monitor
    are thereby taken in arrival order; locks are dropped when nobody holds or awaits them.
    """

    def __init__(self) -> None:
        self._locks: dict[tuple[int, str], tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, project_id: int, slugs: Sequence[str]) -> AsyncIterator[None]:
        keys = sorted({(project_id, slug) for slug in slugs})  # one order: no deadlock
        async with contextlib.AsyncExitStack() as stack:
            for key in keys:
                lock, users = self._locks.get(key, (asyncio.Lock(), 0))
                self._locks[key] = (lock, users + 1)
                stack.callback(self._release, key)
                await stack.enter_async_context(lock)
            yield

    def _release(self, key: tuple[int, str]) -> None:
        lock, users = self._locks[key]
        if users <= 1:
            del self._locks[key]
        else:
            self._locks[key] = (lock, users - 1)


class SentryIngest:
    """The Sentry endpoints of one app; ``writer`` returns the process's ingest writer."""

    def __init__(self, writer: Callable[[], IngestWriter]) -> None:
        self._writer = writer
        self._locks = _SlugLocks()
        self._arrivals: dict[int, asyncio.Lock] = {}

    def _arrival(self, project_id: int) -> asyncio.Lock:
        """The project's arrival lock, taken before the handler's first ``await``: asyncio's
        locks serve waiters first come, first served, so a project's check-ins are stored in the
        order they arrived (an SDK sends a run's ``in_progress`` and ``ok`` in parallel, and the
        finish must not overtake the start that creates or pairs the run)."""
        return self._arrivals.setdefault(project_id, asyncio.Lock())

    async def _ingest(
        self,
        request: Request[Any, Any, Any],
        project_id: int,
        key: str | None,
        check_ins: Sequence[CheckIn],
        received: datetime,
    ) -> PingAnswer | None:
        """Authorize, upsert the checks (one transaction), then submit the pings in order.

        Returns the first answer that is not a success, or ``None`` when all were stored.
        """
        services = services_of(request.app.state)
        await service.authorize(services.engine, project_id, key)
        if not check_ins:
            return None
        async with self._locks.hold(project_id, [c.check_slug for c in check_ins]):
            return await self._store(request, project_id, check_ins, received)

    async def _store(
        self,
        request: Request[Any, Any, Any],
        project_id: int,
        check_ins: Sequence[CheckIn],
        received: datetime,
    ) -> PingAnswer | None:
        services = services_of(request.app.state)
        settings = services.settings
        uuids = await service.checks_for(
            services.engine, project_id, check_ins, received, shards=settings.shards
        )
        remote = _remote(request, settings)
        ua = request.headers.get("user-agent", "")[:200]
        failure: PingAnswer | None = None
        for check_in, check_uuid in zip(check_ins, uuids, strict=True):
            kind = check_in.status.ping_kind
            body = check_in.payload[: settings.ping_body_limit] or None
            answer = await self._writer().submit(
                PingRequest(
                    kind=kind,
                    received=received,
                    uuid=check_uuid,
                    rid=check_in.check_in_id,
                    method=request.method,
                    remote_addr=remote,
                    ua=ua,
                    body=body,
                    body_size=len(check_in.payload),
                    duration=check_in.duration if kind.is_finish else None,
                )
            )
            if answer.status >= 300 and failure is None:
                failure = answer
        return failure

    @staticmethod
    def _failure(answer: PingAnswer) -> Response[dict[str, str]]:
        if answer.status == 404:
            return _detail(404, "monitor_slug: the monitor's check no longer exists")
        headers = {"Retry-After": str(answer.retry_after)} if answer.retry_after else None
        return _detail(answer.status, answer.text, headers)

    async def envelope(self, request: Request[Any, Any, Any], project_id: int) -> Response[dict[str, str]]:
        async with self._arrival(project_id):
            return await self._envelope(request, project_id)

    async def _envelope(self, request: Request[Any, Any, Any], project_id: int) -> Response[dict[str, str]]:
        services = services_of(request.app.state)
        received = services.clock.now()
        limit = services.settings.sentry_envelope_limit
        try:
            raw = await _read_body(request, limit)
            key = _header_key(request)
            body = decode_body(raw, request.headers.get("content-encoding"), limit)
            envelope = domain.parse_envelope(body)
            if key is None and isinstance(envelope.header.get("dsn"), str):
                key = domain.dsn_key(envelope.header["dsn"])
            check_ins = [domain.parse_check_in_payload(item.payload) for item in envelope.check_ins]
            failure = await self._ingest(request, project_id, key, check_ins, received)
        except SentryError as error:
            return _detail(error.status, str(error))
        if failure is not None:
            return self._failure(failure)
        return Response({}, status_code=200)

    async def cron(
        self, request: Request[Any, Any, Any], project_id: int, monitor_slug: str, public_key: str
    ) -> Response[dict[str, str]]:
        async with self._arrival(project_id):
            return await self._cron(request, project_id, monitor_slug, public_key)

    async def _cron(
        self, request: Request[Any, Any, Any], project_id: int, monitor_slug: str, public_key: str
    ) -> Response[dict[str, str]]:
        services = services_of(request.app.state)
        received = services.clock.now()
        try:
            content_type = request.headers.get("content-type", "")
            if request.method == "POST" and content_type.startswith("application/json"):
                raw = await _read_body(request, domain.CHECK_IN_LIMIT)
                check_in = domain.parse_check_in_payload(raw, monitor_slug=monitor_slug)
            else:
                query = {name: str(request.query_params.get(name)) for name in request.query_params}
                check_in = domain.query_check_in(monitor_slug, query)
            failure = await self._ingest(request, project_id, public_key, [check_in], received)
        except SentryError as error:
            return _detail(error.status, str(error))
        if failure is not None:
            return self._failure(failure)
        return Response({"id": check_in.answer_id}, status_code=202)


class ProjectInfo(msgspec.Struct, frozen=True):
    id: int
    name: str
    sentry_dsn: str | None
    """The DSN a Sentry SDK sends this project's check-ins to (null when the project has no key)."""


@get(
    "/api/v3/project",
    summary="The API key's project and its Sentry DSN",
    tags=["project"],
    dependencies={API_KEY: Provide(provide_api_key)},
    security=API_KEY_SECURITY,
    responses=error_responses(401),
)
async def project_info(request: Request[Any, Any, Any], key: ApiKey) -> ProjectInfo:
    """``{"id", "name", "sentry_dsn"}`` of the key's project (read-only keys may ask)."""
    found = key
    services = services_of(request.app.state)
    name, dsn = await service.project_info(services.engine, found.project_id, services.settings.base_url)
    return ProjectInfo(id=found.project_id, name=name, sentry_dsn=dsn)


def route_handlers(writer: Callable[[], IngestWriter]) -> list[HTTPRouteHandler]:
    """The Sentry routes, bound to the app's ingest writer."""
    ingest = SentryIngest(writer)

    @post(
        "/api/{project_id:int}/envelope/",
        status_code=200,
        include_in_schema=False,
        request_max_body_size=None,  # bounded by MONITOR_SENTRY_ENVELOPE_LIMIT while read
    )
    async def sentry_envelope(request: Request[Any, Any, Any], project_id: int) -> Response[dict[str, str]]:
        return await ingest.envelope(request, project_id)

    @route(
        "/api/{project_id:int}/cron/{monitor_slug:str}/{public_key:str}/",
        http_method=["GET", "POST"],
        status_code=202,
        include_in_schema=False,
    )
    async def sentry_cron(
        request: Request[Any, Any, Any], project_id: int, monitor_slug: str, public_key: str
    ) -> Response[dict[str, str]]:
        return await ingest.cron(request, project_id, monitor_slug, public_key)

    return [sentry_envelope, sentry_cron, project_info]
