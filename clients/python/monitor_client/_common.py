"""What the sync and async clients share: configuration, request plans, retry policy.

Everything here is pure (no I/O, no clock): a ping call is first turned into a
:class:`Plan` (method, URL, query, headers, body), and every HTTP answer or transport error
into an :class:`Attempt` that says whether to retry. The two clients only run the loop.
"""

from __future__ import annotations

import math
import os
import re
import sys
from datetime import UTC, datetime

TYPE_CHECKING = False  # not typing's: importing typing costs monitor-run's start-up ~10 ms
if TYPE_CHECKING:
    import logging
    import random
    from collections.abc import Callable, Mapping
    from types import TracebackType
    from typing import Any


# email.utils, random, traceback, uuid, logging, dataclasses and urllib.parse are imported where
# used (or not at all): ``monitor-run`` imports this module before it starts the job, and those
# cost tens of milliseconds together (benchmarks/monitor_run_startup.py)

#: set-ups waiting for the ``monitor_client`` logger (see :func:`on_first_log`)
LOG_SETUPS: list[Callable[[logging.Logger], None]] = []


def on_first_log(setup: Callable[[logging.Logger], None]) -> None:
    """Run ``setup(logger)`` on the ``monitor_client`` logger when it is first used (at once
    when it already is): ``monitor-run`` configures its stderr handler this way, so a run whose
    pings all succeed never imports :mod:`logging`."""
    loaded = sys.modules.get("monitor_client._logs")
    if loaded is not None:
        setup(loaded.logger)
    else:
        LOG_SETUPS.append(setup)


def __getattr__(name: str) -> Any:
    # the logger and its filter live in monitor_client._logs, imported on first use
    if name in ("logger", "PingKeyFilter", "install_log_filter"):
        from monitor_client import _logs

        return getattr(_logs, name)
    raise AttributeError(f"module 'monitor_client._common' has no attribute {name!r}")


class Record:
    """An immutable value with ``__slots__``, compared and hashed by its fields: what
    ``@dataclass(frozen=True, slots=True)`` gives, without importing :mod:`dataclasses` (with
    :mod:`inspect` and :mod:`ast`, ~20 ms of ``monitor-run``'s start-up). Subclasses list
    their fields in ``__slots__`` and set them in ``__init__`` with :meth:`_set`."""

    __slots__: tuple[str, ...] = ()

    def _set(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({shown})"

    def replace(self, **changes: Any) -> Any:
        """A copy with ``changes`` (field name → value), as :func:`dataclasses.replace`."""
        values = {name: getattr(self, name) for name in self.__slots__}
        unknown = set(changes) - set(values)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        return type(self)(**{**values, **changes})


DEFAULT_BASE_URL = "http://127.0.0.1:8000"
DEFAULT_BODY_LIMIT = 100_000
#: Seconds to wait for each retry: ``backoff * 2**n``, with "equal jitter" (half fixed, half random).
RETRYABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
#: the longest ``Retry-After`` obeyed (seconds); a longer one is cut to this (the call's
#: ``timeout`` bounds the wait anyway)
RETRY_AFTER_MAX = 3600.0
MASK = "****"

Kind = "Literal['success', 'start', 'fail', 'unknown', 'log', 'skip']"
#: ``unknown`` ends a run whose result nobody can tell (its runner died with it; DESIGN §8)
KINDS: frozenset[str] = frozenset({"success", "start", "fail", "unknown", "log", "skip"})
Scheduled = datetime | str | int | float | None
Finished = datetime | int | float | None
#: the finish kinds: only their pings may carry ``finished``
FINISH_KINDS: frozenset[str] = frozenset({"success", "fail", "unknown"})
#: a number from here up is unix milliseconds, not seconds (as the monitor reads ``finished``)
MILLISECONDS_FROM = 10**11
LATE_FINISH = 1.0
"""Seconds after its run's end from which a finish ping is *late* and carries ``finished=``
(the run's real end): queued behind an outage or a stall, or retried. A start ping sent this
long after its run's start is late too, and carries ``started=``."""
SILENT_FINISH_TIMEOUT = 1.0
"""Seconds a run's finish ping may take (retries included) when its start got no answer in the
whole ``timeout`` (a monitor that accepts connections and never answers): the job waits about
this long for the report, not another ``timeout``. Not queued or spooled: against a silent
monitor the finish is lost, as the start was."""

UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
SLUG_RE = re.compile(r"^[a-z0-9_-]{1,100}$")
TRACEBACK_TAIL = 4000


class PingResult(Record):
    """The outcome of one ping (after retries).

    Attributes:
        ok: the monitor stored the ping (HTTP 200 or 201).
        status: the last HTTP status received, or ``None`` when no answer arrived.
        body_limit: bytes of a ping body the monitor keeps (its ``Ping-Body-Limit`` header;
            100 000 until a response says otherwise).
        error: why the ping was not stored (``None`` when ``ok``), e.g. ``"404 not found"`` or
            ``"unreachable: ConnectError: …"``.
        text: the monitor's plain-text answer (``"OK"``, ``"Created"``, ``"not found"`` …).
    """

    __slots__ = ("body_limit", "error", "ok", "status", "text")
    ok: bool
    status: int | None
    body_limit: int
    error: str | None
    text: str

    def __init__(
        self, ok: bool, status: int | None, body_limit: int, error: str | None, text: str = ""
    ) -> None:
        self._set(ok=ok, status=status, body_limit=body_limit, error=error, text=text)


class Settings(Record):
    """Resolved client configuration (arguments first, then ``MONITOR_*`` variables)."""

    __slots__ = ("api_key", "backoff", "base_url", "ping_key", "retries", "timeout")
    base_url: str
    api_key: str | None
    ping_key: str | None
    timeout: float
    retries: int
    backoff: float

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        ping_key: str | None,
        timeout: float,
        retries: int,
        backoff: float,
    ) -> None:
        self._set(
            base_url=base_url,
            api_key=api_key,
            ping_key=ping_key,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
        )

    @classmethod
    def resolve(
        cls,
        base_url: str | None,
        api_key: str | None,
        ping_key: str | None,
        timeout: float,
        retries: int,
        backoff: float,
        env: Mapping[str, str] | None = None,
    ) -> Settings:
        env = os.environ if env is None else env
        url = (base_url or env.get("MONITOR_BASE_URL") or DEFAULT_BASE_URL).strip()
        if "://" not in url:  # "monitor.example.com:8000", as curl reads it
            url = "http://" + url
        return cls(
            base_url=url.rstrip("/"),
            api_key=api_key or env.get("MONITOR_API_KEY") or None,
            ping_key=ping_key or env.get("MONITOR_PING_KEY") or None,
            timeout=max(float(timeout), 0.001),
            retries=max(int(retries), 0),
            backoff=max(float(backoff), 0.0),
        )


class Plan(Record):
    """One HTTP request to make (possibly several times)."""

    __slots__ = ("content", "headers", "json", "method", "params", "url")
    method: str
    url: str
    params: dict[str, str]
    headers: dict[str, str]
    content: bytes | None
    json: Any

    def __init__(
        self,
        method: str,
        url: str,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
        json: Any = None,
    ) -> None:
        self._set(
            method=method,
            url=url,
            params={} if params is None else params,
            headers={} if headers is None else headers,
            content=content,
            json=json,
        )


class PlanError(ValueError):
    """A ping that cannot be sent as asked (bad kind, slug without a key …); never leaves the client."""


GRACE_MIN = 30
"""Least grace, seconds, of a check an integration creates (jitter and start-up)."""
GRACE_MAX = 3600
"""Most grace, seconds, of a check an integration creates."""


def grace_for_period(period: float) -> int:
    """The grace of an integration-created check whose runs are ``period`` seconds apart: half
    the period, at least :data:`GRACE_MIN` and at most :data:`GRACE_MAX` (an every-minute task is
    late after 30 s, not after the server's default hour)."""
    return int(max(GRACE_MIN, min(period / 2, GRACE_MAX)))


def slugify(name: str, default: str) -> str:
    """A check slug for a job's name: lower case, ``[a-z0-9_-]``, at most 100 characters."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-")
    return slug[:100] or default


def is_uuid(check: str) -> bool:
    return bool(UUID_RE.match(check))


def env_applies(check: str | None, env: Mapping[str, str] | None = None) -> bool:
    """Whether ``$MONITOR_SCHEDULED_TIME`` / ``$MONITOR_RUN_ID`` belong to pings of ``check``.

    ``monitor-run`` exports them to its command together with ``MONITOR_CHECK`` (the check it
    reports to): a client inside that command applies them only to that same check (compared
    as text, uuids case-insensitively), so a nested job reporting to another check does not
    claim the outer run's tick. Without ``MONITOR_CHECK`` (a Kubernetes CronJob, the bundled
    scheduler) they apply to every check, as before. ``check=None`` means "no check known".
    """
    env = os.environ if env is None else env
    owner = (env.get("MONITOR_CHECK") or "").strip()
    if not owner or check is None:
        return True
    return owner.lower() == str(check).strip().lower()


def scheduled_text(
    value: Scheduled, env: Mapping[str, str] | None = None, *, check: str | None = None
) -> str | None:
    """``scheduled`` as the ping API reads it, or ``None`` for none.

    ``None`` falls back to ``$MONITOR_SCHEDULED_TIME`` (set by the bundled scheduler, by
    ``monitor-run`` for its command, or by a Kubernetes CronJob through the downward API) when
    :func:`env_applies` to ``check``. An aware ``datetime`` is sent in UTC
    (``2026-07-19T03:00:00Z``); a naive one is read as local time (Python's
    ``datetime.astimezone`` convention); ``int``/``float`` are unix seconds (or milliseconds
    from 10^11, as the server reads them); a ``str`` is sent as it is, except ISO 8601 text
    without an offset (``2026-11-29T13:00:00``, ``2026-11-29 13:00``), which the server refuses
    and this client reads as **UTC** (``2026-11-29T13:00:00Z``).
    """
    env = os.environ if env is None else env
    if value is None:
        if not env_applies(check, env):
            return None
        value = env.get("MONITOR_SCHEDULED_TIME") or None
        if value is None:
            return None
    if isinstance(value, str):
        return _naive_as_utc(value.strip())
    if isinstance(value, datetime):
        instant = value.astimezone(UTC)
        timespec = "microseconds" if instant.microsecond else "seconds"
        return instant.replace(tzinfo=None).isoformat(timespec=timespec) + "Z"
    if isinstance(value, bool):
        raise PlanError("scheduled: must be a datetime, ISO 8601 text or unix seconds")
    if isinstance(value, int | float):
        return str(value)
    return str(value)


def finished_text(value: Finished, field: str = "finished") -> str | None:
    """``finished`` (when a run really ended, docs/design.md §5) as the ping API reads it: an
    aware ``datetime`` or unix seconds (unix milliseconds from 10^11, as the monitor reads
    them), sent as RFC 3339 UTC with milliseconds (``2026-07-19T03:00:05.123Z``); ``None`` for
    none. ``started`` (a start's real start) is read the same way, with ``field="started"``.

    Raises:
        PlanError: (named by ``field``) not a datetime or a number, not finite, or outside
            what a datetime holds.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, datetime | int | float):
        raise PlanError(f"{field}: must be a datetime or unix seconds")
    if not isinstance(value, datetime) and not math.isfinite(value):
        raise PlanError(f"{field}: {value!r} is not a finite number of unix seconds")
    try:
        if isinstance(value, datetime):
            instant = value.astimezone(UTC)
        else:
            instant = datetime.fromtimestamp(value / 1000 if value >= MILLISECONDS_FROM else value, UTC)
    except (OverflowError, ValueError, OSError):
        raise PlanError(f"{field}: {value!r} is out of range") from None
    return instant.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


def finish_timeout(started: PingResult | None, took: float, timeout: float) -> float | None:
    """The ``timeout`` (seconds) for a run's finish ping after its start ping gave ``started``
    in ``took`` seconds: :data:`SILENT_FINISH_TIMEOUT` (at most ``timeout``) when the start got
    no answer for about its whole ``timeout`` (a silent monitor), else ``None`` (the client's
    own). A quick refusal keeps the full timeout (a restarting monitor may be back by then)."""
    if started is None or started.status is not None or took < 0.9 * timeout:
        return None
    return min(timeout, SILENT_FINISH_TIMEOUT)


def late_finish(ended: float | None, now: float) -> float | None:
    """``ended`` (unix seconds, the run's end) when a finish sent at ``now`` is late
    (:data:`LATE_FINISH` or more after it), else ``None``: a finish sent at once is stored at
    its arrival, so a client clock that differs from the monitor's changes nothing then."""
    if ended is None or now - ended < LATE_FINISH:
        return None
    return ended


def late_start(began: float | None, now: float) -> float | None:
    """``began`` (unix seconds, the run's start) when a start sent at ``now`` is late
    (:data:`LATE_FINISH` or more after it), else ``None``: as :func:`late_finish`."""
    return late_finish(began, now)


def refused_field(plan: Plan, result: PingResult) -> str | None:
    """The query field (``scheduled`` or ``finished``) the monitor refused the ping for alone
    (``400 <field>: …``), when the ping can be sent again without it; else ``None``."""
    if result.status != 400:
        return None
    for name in ("finished", "started", "scheduled"):
        if name in plan.params and result.text.startswith(f"{name}:"):
            if name == "scheduled" and plan.url.endswith("/skip"):
                return None  # a skip names its tick or means nothing
            return name
    return None


def without_field(plan: Plan, name: str) -> Plan:
    """``plan`` without the query field ``name``; a client-made ``Idempotency-Key`` is new
    (it is another request now)."""
    params = {k: v for k, v in plan.params.items() if k != name}
    headers = dict(plan.headers)
    if headers.get("Idempotency-Key", "").startswith("monitor-client:"):
        headers["Idempotency-Key"] = new_idempotency_key()
    return Plan(plan.method, plan.url, params, headers, plan.content, plan.json)


def _naive_as_utc(text: str) -> str:
    """ISO 8601 text without an offset read as UTC (``…Z``); anything else unchanged."""
    if not re.match(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}", text):
        return text
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return text
    if parsed.tzinfo is not None:
        return text
    return scheduled_text(parsed.replace(tzinfo=UTC)) or text


def has_header(headers: Mapping[str, str] | None, name: str) -> bool:
    return any(key.lower() == name.lower() for key in (headers or {}))


def uuid4_text() -> str:
    """A random (version 4) UUID as text, without importing :mod:`uuid`."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_idempotency_key() -> str:
    """A fresh ``Idempotency-Key`` for one logical ping (reused by its retries)."""
    return f"monitor-client:{uuid4_text()}"


PING_KEY_PATH_RE = re.compile(r"/ping/([^/\s?#\"']+)/([a-z0-9_-]{1,100})(?=[/?#\s\"']|$)")


def mask_ping_keys(text: str) -> str:
    """``text`` with the ping key of every slug ping URL (``/ping/<ping_key>/<slug>``) replaced
    by ``****``; uuid ping URLs (``/ping/<uuid>/start``) are left as they are."""

    def hide(match: re.Match[str]) -> str:
        key = match.group(1)
        if UUID_RE.match(key) or key == MASK:
            return match.group(0)
        return f"/ping/{MASK}/{match.group(2)}"

    return PING_KEY_PATH_RE.sub(hide, text) if "/ping/" in text else text


def mask(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` (a ping key) replaced by ``****``."""
    if secret and len(secret) >= 4:
        from urllib.parse import quote

        return text.replace(secret, MASK).replace(quote(secret, safe=""), MASK)
    return text


def tail(body: str | bytes | None, limit: int) -> bytes | None:
    """The last ``limit`` bytes of ``body`` (a str is UTF-8 encoded first)."""
    if body is None:
        return None
    if isinstance(body, str):
        data = body.encode("utf-8", "replace")
    elif isinstance(body, bytes | bytearray | memoryview):
        data = bytes(body)
    else:  # not what the signature says; send its text rather than bytes(int) zeros
        data = str(body).encode("utf-8", "replace")
    if limit > 0 and len(data) > limit:
        data = data[-limit:]
    return data


def ping_plan(
    settings: Settings,
    check: str,
    kind: str,
    *,
    scheduled: Scheduled,
    rid: str | None,
    body: str | bytes | None,
    exit_status: int | None,
    headers: Mapping[str, str] | None,
    create: bool,
    body_limit: int,
    uuid: str | None = None,
    finished: Finished = None,
    started: Finished = None,
) -> Plan:
    """The request for one ping (DESIGN §5 URLs). ``uuid`` overrides a slug's ping-key URL;
    ``finished`` (a finish's real end) is sent as ``finished=``, ``started`` (a start's real
    start) as ``started=`` (docs/design.md §5).

    Raises:
        PlanError: unknown ``kind``, ``exit_status`` outside 0-255, a slug without a ping key,
            an invalid slug, ``finished`` on a ping that is not a finish, ``started`` on a
            ping that is not a start.
    """
    if not isinstance(check, str):
        raise PlanError(f"check: {check!r} is not a uuid or slug string")
    if exit_status is not None:
        if isinstance(exit_status, bool) or not isinstance(exit_status, int) or not 0 <= exit_status <= 255:
            raise PlanError(f"exit_status: {exit_status!r} is not an integer 0-255")
        action = str(exit_status)
    elif kind not in KINDS:
        raise PlanError(f"kind: {kind!r} is not one of {', '.join(sorted(KINDS))}")
    else:
        action = "" if kind == "success" else kind
    params: dict[str, str] = {}
    if uuid is not None or is_uuid(check):
        target = (uuid or check).lower()
        path = f"/ping/{target}"
    else:
        if not SLUG_RE.match(check):
            raise PlanError(f"check: {check!r} is neither a uuid nor a slug ([a-z0-9_-], 1-100 characters)")
        if not settings.ping_key:
            raise PlanError(
                f"check: {check!r} is a slug and no ping key is set (MONITOR_PING_KEY or ping_key=)"
            )
        from urllib.parse import quote

        path = f"/ping/{quote(settings.ping_key, safe='')}/{check}"
        if create:
            params["create"] = "1"
    if action:
        path += f"/{action}"
    if rid is not None:
        params["rid"] = str(rid)
    when = scheduled_text(scheduled, check=check)
    if when is not None:
        params["scheduled"] = when
    if action == "skip" and when is None:
        raise PlanError("scheduled: a skip ping needs the tick it skips")
    ended = finished_text(finished)
    if ended is not None:
        if exit_status is None and kind not in FINISH_KINDS:
            raise PlanError(f"finished: only for a finish ping, not {kind!r}")
        params["finished"] = ended
    began = finished_text(started, "started")
    if began is not None:
        if exit_status is not None or kind != "start":
            raise PlanError(f"started: only for a start ping, not {kind!r}")
        params["started"] = began
    content = tail(body, body_limit)
    request_headers = dict(headers or {})
    if not has_header(request_headers, "Idempotency-Key"):
        # DESIGN §5: the server stores one ping per (check, kind, key) for 7 days, so a retry
        # after a lost answer is not stored twice (which would read as a duplicate run)
        request_headers["Idempotency-Key"] = new_idempotency_key()
    return Plan(
        method="POST",
        url=settings.base_url + path,
        params=params,
        headers=request_headers,
        content=content if content is not None else b"",
    )


def upsert_plan(settings: Settings, slug: str, fields: Mapping[str, Any]) -> Plan:
    """``POST /api/v3/checks/`` with ``unique: ["slug"]`` (name and slug default to ``slug``).

    Raises:
        PlanError: no API key.
    """
    if not settings.api_key:
        raise PlanError("api_key: needed to create or update checks (MONITOR_API_KEY or api_key=)")
    payload: dict[str, Any] = {"name": slug, "slug": slug, **fields}
    payload.setdefault("unique", ["slug"])
    return Plan(
        method="POST",
        url=settings.base_url + "/api/v3/checks/",
        headers={"X-Api-Key": settings.api_key},
        json=payload,
    )


def api_plan(settings: Settings, method: str, path: str, params: Mapping[str, str] | None = None) -> Plan:
    """A management API call ``method /api/v3/<path>``.

    Raises:
        PlanError: no API key.
    """
    if not settings.api_key:
        raise PlanError("api_key: needed for the management API (MONITOR_API_KEY or api_key=)")
    return Plan(
        method=method,
        url=settings.base_url + "/api/v3/" + path.lstrip("/"),
        params=dict(params or {}),
        headers={"X-Api-Key": settings.api_key},
    )


class Attempt(Record):
    """How one try ended: done (stored or refused for good) or worth retrying after ``wait``."""

    __slots__ = ("result", "retry", "retry_after")
    result: PingResult
    retry: bool
    retry_after: float | None

    def __init__(self, result: PingResult, retry: bool, retry_after: float | None = None) -> None:
        self._set(result=result, retry=retry, retry_after=retry_after)


def judge_response(status: int, headers: Mapping[str, str], text: str, body_limit: int) -> Attempt:
    """Classify an HTTP answer: 2xx done; 408/425/429/5xx retry; other 4xx refused for good."""
    limit = body_limit
    raw_limit = headers.get("ping-body-limit")
    if raw_limit is not None and raw_limit.strip().isdigit():
        limit = int(raw_limit.strip())
    short = text.strip()[:200]
    if 200 <= status < 300:
        return Attempt(PingResult(True, status, limit, None, short), retry=False)
    retry_after = parse_retry_after(headers.get("retry-after"))
    return Attempt(
        PingResult(False, status, limit, f"{status} {short}".strip(), short),
        retry=status in RETRYABLE_STATUSES,
        retry_after=retry_after,
    )


def parse_retry_after(raw: str | None, now: datetime | None = None) -> float | None:
    """Seconds of a ``Retry-After`` header (RFC 9110 §10.2.3: seconds or an HTTP-date), or
    ``None`` when absent or unusable (``nan``, ``inf``, negative, garbage); at most
    :data:`RETRY_AFTER_MAX`. Never raises. ``now`` (aware) is for an HTTP-date; default the clock.
    """
    if raw is None:
        return None
    text = raw.strip()
    try:
        if re.fullmatch(r"\d+(\.\d+)?", text):
            seconds = float(text)
        else:
            import email.utils

            when = email.utils.parsedate_to_datetime(text)
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            seconds = (when - (now or datetime.now(UTC))).total_seconds()
    except (ValueError, TypeError, OverflowError, IndexError):
        return None
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_MAX)


def judge_error(error: BaseException, body_limit: int, *, transient: bool = True) -> Attempt:
    """A transport error (refused, timed out, DNS …): retry when ``transient``; a
    misconfiguration (no URL scheme, a header that is not ASCII …) is not retried."""
    detail = str(error) or type(error).__name__
    what = "unreachable" if transient else "not sent"
    return Attempt(
        PingResult(False, None, body_limit, f"{what}: {type(error).__name__}: {detail}"), retry=transient
    )


def backoff_delay(backoff: float, attempt: int, rng: random.Random | None = None) -> float:
    """Seconds before retry number ``attempt`` (0-based): ``backoff * 2**attempt``, equal jitter."""
    import random as random_module

    base = backoff * 2.0**attempt
    draw = rng.random() if rng is not None else random_module.random()
    return base / 2 + draw * base / 2


def failure_body(
    exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
) -> str:
    """``Type: message`` and the last lines of the traceback (a failed run's ping body)."""
    if exc_type is None:
        return ""
    import traceback

    text = "".join(traceback.format_exception(exc_type, exc, tb))
    if len(text) > TRACEBACK_TAIL:
        text = "…" + text[-TRACEBACK_TAIL:]
    head = f"{exc_type.__name__}: {exc}" if exc is not None and str(exc) else exc_type.__name__
    return f"{head}\n\n{text}"


class WarnOnce:
    """Log one warning per outage: the first failure warns, later ones log at debug until a success."""

    def __init__(self) -> None:
        self.failing = False

    def failed(self, what: str, result: PingResult) -> None:
        from monitor_client._logs import logger

        if not self.failing:
            self.failing = True
            logger.warning(
                "%s not delivered to the monitor (%s); the job goes on, further failures are logged at debug",
                what,
                result.error,
                extra={"action": "monitor_ping_failed"},
            )
        else:
            logger.debug("%s not delivered to the monitor (%s)", what, result.error)

    def succeeded(self) -> None:
        if self.failing:
            from monitor_client._logs import logger

            logger.info("the monitor is reachable again", extra={"action": "monitor_reachable"})
        self.failing = False


def exit_outcome(exc_type: type[BaseException] | None, exc: BaseException | None) -> tuple[str, int | None]:
    """The finishing ping of a run: ``("success", None)``, ``("fail", None)`` or an exit status.

    ``SystemExit`` with code 0/None is a success; with an integer code that code is the exit
    status; any other exception (including ``KeyboardInterrupt``) is a failure.
    """
    if exc_type is None:
        return "success", None
    if isinstance(exc, SystemExit):
        code = exc.code
        if code is None or code == 0:
            return "success", None
        if isinstance(code, int) and not isinstance(code, bool) and 0 <= code <= 255:
            return "fail", code
        return "fail", None
    return "fail", None
