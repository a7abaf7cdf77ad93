"""A small blocking ping client on the standard library alone (a socket), for
``monitor-run``: a short-lived process that sends two pings should not pay for importing httpx
(hundreds of milliseconds) before the job can start.

It builds the same requests as :class:`monitor_client.Client` (:mod:`monitor_client._common`:
URLs, ``Idempotency-Key``, retry rules, a ``scheduled`` refused → sent again without it) and
never raises into the caller. Each attempt's socket operations are bounded by what remains of
the call's ``timeout``. It speaks plain HTTP/1.1 over a socket (``ssl`` for ``https://``,
imported only then): ``http.client`` would cost its ``email``, ``ssl`` and ``random`` imports on
every run (~60 ms of ``monitor-run``'s start-up, measured). ``json`` is imported only for the
management calls (a slug looked up or created), ``logging`` only when there is something to log.
"""

from __future__ import annotations

import threading
import time

from monitor_client import _common
from monitor_client._common import DEFAULT_BODY_LIMIT, PingResult, Plan, Settings, WarnOnce

TYPE_CHECKING = False  # not typing's: importing typing costs monitor-run's start-up ~10 ms
if TYPE_CHECKING:
    from typing import Any

USER_AGENT = "monitor-client/0.1.0 (monitor-run)"


class LightClient:
    """Pings (and a slug → uuid lookup) over ``http.client``.

    Args:
        base_url: the monitor (default ``$MONITOR_BASE_URL``).
        timeout: seconds one call may take in all, retries included.
        retries: further attempts after a transport error, a 408/425/429 or a 5xx.
        backoff: first retry delay, seconds (doubled each retry, with jitter).
    """

    def __init__(
        self, base_url: str | None = None, *, timeout: float = 10.0, retries: int = 3, backoff: float = 0.5
    ) -> None:
        self.settings = Settings.resolve(base_url, None, None, timeout, retries, backoff)
        self.body_limit = DEFAULT_BODY_LIMIT
        self._warn = WarnOnce()
        self._lock = threading.Lock()
        self._uuids: dict[str, str] = {}
        self._warned_scheduled = False

    def _exchange(self, plan: Plan, remaining: float) -> tuple[int, dict[str, str], bytes]:
        """One HTTP/1.1 exchange on a fresh connection (``Connection: close``), every socket
        operation bounded by what remains of ``remaining`` seconds."""
        import socket
        from urllib.parse import urlencode, urlsplit

        deadline = time.monotonic() + remaining
        parts = urlsplit(plan.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url: unsupported URL {plan.url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        query = "&".join(q for q in (parts.query, urlencode(plan.params)) if q)
        target = (parts.path or "/") + (f"?{query}" if query else "")
        body = plan.content or b""
        headers = {"User-Agent": USER_AGENT, **plan.headers}
        if plan.json is not None:
            import json

            body = json.dumps(plan.json).encode()
            headers["Content-Type"] = "application/json"
        lines = [f"{plan.method} {target} HTTP/1.1", f"Host: {parts.netloc.rsplit('@', 1)[-1]}"]
        for name, value in {**headers, "Content-Length": str(len(body)), "Connection": "close"}.items():
            if any(c in f"{name}{value}" for c in "\r\n"):
                raise ValueError(f"headers: {name!r} holds a line break")
            lines.append(f"{name}: {value}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
        sock = socket.create_connection((parts.hostname, port), timeout=max(remaining, 0.001))
        try:
            if parts.scheme == "https":
                import ssl

                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=parts.hostname)
            sock.sendall(request)
            chunks = []
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no complete answer within {remaining:.3g} s")
                sock.settimeout(left)
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            sock.close()
        return _parse_response(b"".join(chunks))

    def _send(self, plan: Plan, deadline: float) -> tuple[PingResult, bytes]:
        number = 0
        while True:
            remaining = max(deadline - time.monotonic(), 0.001)
            data = b""
            try:
                status, headers, data = self._exchange(plan, remaining)
                attempt = _common.judge_response(
                    status, headers, data.decode("utf-8", "replace"), self.body_limit
                )
            except ValueError as error:  # a misconfiguration: not worth retrying
                attempt = _common.judge_error(error, self.body_limit, transient=False)
            except (OSError, Exception) as error:  # refused, timed out, reset, DNS …
                attempt = _common.judge_error(error, self.body_limit)
            if not attempt.retry or number >= self.settings.retries:
                return attempt.result, data
            delay = (
                attempt.retry_after
                if attempt.retry_after is not None
                else _common.backoff_delay(self.settings.backoff, number)
            )
            if time.monotonic() + delay >= deadline:
                return attempt.result, data
            time.sleep(delay)
            number += 1

    def _note(self, what: str, result: PingResult) -> PingResult:
        if result.error is not None and self.settings.ping_key:
            result = PingResult(
                result.ok,
                result.status,
                result.body_limit,
                _common.mask(result.error, self.settings.ping_key),
            )
        with self._lock:
            self.body_limit = result.body_limit
            if result.ok:
                self._warn.succeeded()
            else:
                self._warn.failed(what, result)
        return result

    def _uuid_for(self, slug: str, create: bool, deadline: float) -> str | None:
        """A slug's uuid through the management API (no ping key, an API key): looked up, or
        created when ``create``."""
        known = self._uuids.get(slug)
        if known is not None:
            return known
        if create:
            plan = _common.upsert_plan(self.settings, slug, {})
        else:
            plan = _common.api_plan(self.settings, "GET", "checks/", {"slug": slug})
        result, data = self._send(plan, deadline)
        if not result.ok:
            self._note(f"lookup of {slug}", result)
            return None
        import json

        try:
            found: Any = json.loads(data)
            if isinstance(found, dict) and "checks" in found:
                found = found["checks"][0] if found["checks"] else None
            uuid = str(found["uuid"]) if isinstance(found, dict) else None
        except (ValueError, KeyError, IndexError, TypeError):
            uuid = None
        if uuid is not None:
            self._uuids[slug] = uuid
        return uuid

    def ping(
        self,
        check: str,
        kind: str = "success",
        *,
        scheduled: _common.Scheduled = None,
        rid: str | None = None,
        body: str | bytes | None = None,
        exit_status: int | None = None,
        create: bool = False,
        finished: _common.Finished = None,
        started: _common.Finished = None,
        timeout: float | None = None,
    ) -> PingResult:
        """As :meth:`monitor_client.Client.ping` (without extra headers); never raises.
        ``timeout``: seconds this call may take in all, instead of the client's."""
        what = f"{kind} ping of {check}"
        deadline = time.monotonic() + (self.settings.timeout if timeout is None else timeout)
        try:
            target = None
            settings = self.settings
            if not _common.is_uuid(check) and not settings.ping_key and settings.api_key:
                target = self._uuid_for(check, create, deadline)
                if target is None:
                    raise _common.PlanError(f"check: no check with slug {check!r} (and create is off)")
            plan = _common.ping_plan(
                settings,
                check,
                kind,
                scheduled=scheduled,
                rid=rid,
                body=body,
                exit_status=exit_status,
                headers=None,
                create=create,
                body_limit=self.body_limit,
                uuid=target,
                finished=finished,
                started=started,
            )
        except Exception as error:  # bad arguments end as a refused result too
            return self._note(what, PingResult(False, None, self.body_limit, str(error)))
        result, _ = self._send(plan, deadline)
        while (name := _common.refused_field(plan, result)) is not None:
            if name == "scheduled":
                with self._lock:
                    first, self._warned_scheduled = not self._warned_scheduled, True
                _common.logger.log(
                    30 if first else 10,  # WARNING once, then DEBUG (as Client)
                    "the monitor refused scheduled=%s for %s (%s); sent again without it, so the run "
                    "is reported but not bound to its tick",
                    plan.params.get("scheduled"),
                    check,
                    result.text,
                    extra={"action": "monitor_scheduled_refused"},
                )
            plan = _common.without_field(plan, name)
            result, _ = self._send(plan, deadline)
        return self._note(what, result)


def _parse_response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body of a whole HTTP/1.1 response.

    Raises:
        OSError: not an HTTP response (a truncated or garbled answer is a transport error).
    """
    head, separator, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if not separator or len(status_line) < 2 or not status_line[0].startswith("HTTP/"):
        raise OSError("not an HTTP response")
    try:
        status = int(status_line[1])
    except ValueError:
        raise OSError(f"bad status line {lines[0]!r}") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        decoded, rest = bytearray(), body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0] or b"0", 16)
            if size == 0:
                break
            decoded += rest[:size]
            rest = rest[size + 2 :]
        body = bytes(decoded)
    elif "content-length" in headers and headers["content-length"].isdigit():
        body = body[: int(headers["content-length"])]
    return status, headers, body
