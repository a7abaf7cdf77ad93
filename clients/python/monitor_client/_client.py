"""``Client`` (blocking) and ``AsyncClient`` (asyncio): pings, runs, the decorator, check upserts.

Both never raise into the job and never hold it up for longer than about ``timeout`` seconds
per call: every network problem ends as a :class:`PingResult` with ``ok=False`` and one logged
warning (per outage, not per ping).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
import time
import uuid as uuid_module
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, TypeVar, cast

import httpx

from monitor_client import _common, _logs
from monitor_client._common import (
    DEFAULT_BODY_LIMIT,
    Attempt,
    Finished,
    PingResult,
    Plan,
    PlanError,
    Scheduled,
    Settings,
    WarnOnce,
)

__version__ = "0.1.0"
# httpx logs each request's URL at INFO, and a slug ping's URL holds the ping key
_logs.install_log_filter("httpx")
F = TypeVar("F", bound=Callable[..., Any])
USER_AGENT = f"monitor-client/{__version__}"


def _refused(error: Exception, body_limit: int) -> PingResult:
    text = str(error) if isinstance(error, PlanError) else f"{type(error).__name__}: {error}"
    return PingResult(False, None, body_limit, text)


class CallTimeout(Exception):
    """A call got no complete answer within its ``timeout`` (a slow-drip server)."""


def _transient(error: BaseException) -> bool:
    """A transport problem worth retrying; a misconfiguration (no URL scheme, a non-ASCII header,
    a body that cannot be encoded) is not."""
    if isinstance(error, httpx.UnsupportedProtocol | httpx.LocalProtocolError):
        return False
    return isinstance(error, httpx.TransportError | CallTimeout | TimeoutError | OSError)


class _Base:
    def __init__(
        self,
        base_url: str | None,
        api_key: str | None,
        ping_key: str | None,
        timeout: float,
        retries: int,
        backoff: float,
    ) -> None:
        self.settings = Settings.resolve(base_url, api_key, ping_key, timeout, retries, backoff)
        #: bytes of a ping body the monitor keeps, from the last ``Ping-Body-Limit`` header seen
        self.body_limit = DEFAULT_BODY_LIMIT
        self._warn = WarnOnce()
        self._uuids: dict[str, str] = {}
        self._lock = threading.Lock()
        self._warned_scheduled = False

    @property
    def base_url(self) -> str:
        return self.settings.base_url

    def _note(self, what: str, result: PingResult) -> PingResult:
        key = self.settings.ping_key
        if key:  # the answer may echo the URL (a 404 body): the key is hidden in both
            result = result.replace(
                error=None if result.error is None else _common.mask(result.error, key),
                text=_common.mask(result.text, key),
            )
        with self._lock:
            self.body_limit = result.body_limit
            if result.ok:
                self._warn.succeeded()
            else:
                self._warn.failed(what, result)
        return result

    def _delay(self, attempt: Attempt, number: int, deadline: float) -> float | None:
        """Seconds to wait before the next try, or ``None`` when there is no next try."""
        if not attempt.retry or number >= self.settings.retries:
            return None
        delay = (
            attempt.retry_after
            if attempt.retry_after is not None
            else _common.backoff_delay(self.settings.backoff, number)
        )
        if time.monotonic() + delay >= deadline:
            return None
        return delay

    def _warn_scheduled(self, check: str, plan: Plan, result: PingResult) -> None:
        with self._lock:
            first, self._warned_scheduled = not self._warned_scheduled, True
        level = logging.WARNING if first else logging.DEBUG
        _common.logger.log(
            level,
            "the monitor refused scheduled=%s for %s (%s); sent again without it, so the run is "
            "reported but not bound to its tick",
            plan.params.get("scheduled"),
            check,
            result.text,
            extra={"action": "monitor_scheduled_refused"},
        )

    def _without_refused(self, check: str, plan: Plan, result: PingResult) -> Plan | None:
        """The ping again without the ``scheduled``, ``finished`` or ``started`` the monitor refused it for
        (logged), or ``None`` when it refused nothing of the kind."""
        name = _common.refused_field(plan, result)
        if name is None:
            return None
        if name == "scheduled":
            self._warn_scheduled(check, plan, result)
        else:
            _common.logger.debug(
                "the monitor refused %s=%s for %s (%s); sent again without it",
                name,
                plan.params.get(name),
                check,
                result.text,
                extra={"action": "monitor_finished_refused"},
            )
        return _common.without_field(plan, name)

    def _remember(self, check: dict[str, Any] | None) -> None:
        if check and isinstance(check.get("slug"), str) and isinstance(check.get("uuid"), str):
            with self._lock:
                self._uuids[check["slug"]] = check["uuid"]

    def _needs_lookup(self, check: str) -> bool:
        """A slug with no ping key but an API key: ping its uuid, found through the API."""
        return not _common.is_uuid(check) and not self.settings.ping_key and bool(self.settings.api_key)

    def _known_uuid(self, slug: str) -> str | None:
        with self._lock:
            return self._uuids.get(slug)

    def _ping_plan(self, check: str, kind: str, target: str | None, **options: Any) -> Plan:
        """The ping's request; ``target`` is the looked-up uuid of a slug (``PlanError`` if none)."""
        if self._needs_lookup(check) and target is None:
            raise PlanError(f"check: no check with slug {check!r} (and create is off)")
        return _common.ping_plan(
            self.settings, check, kind, body_limit=self.body_limit, uuid=target, **options
        )

    @staticmethod
    def _lookup_plan(settings: Settings, check: str) -> Plan:
        if _common.is_uuid(check):
            return _common.api_plan(settings, "GET", f"checks/{check.lower()}")
        return _common.api_plan(settings, "GET", "checks/", {"slug": check})

    def _check_from(
        self, what: str, result: PingResult, response: httpx.Response | None
    ) -> dict[str, Any] | None:
        """The check JSON of a management API answer (a check, or a one-check list), remembered."""
        self._note(what, result)
        data = _json(response) if result.ok else None
        if isinstance(data, dict) and "checks" in data:
            checks = data["checks"]
            data = checks[0] if isinstance(checks, list) and checks else None
        self._remember(data)
        return data if isinstance(data, dict) else None


def _response_attempt(response: httpx.Response, body_limit: int) -> Attempt:
    return _common.judge_response(response.status_code, response.headers, response.text, body_limit)


def _json(response: httpx.Response | None) -> Any:
    if response is None:
        return None
    try:
        return response.json()
    except ValueError:
        return None


class Client(_Base):
    """Blocking client of the monitor's ping and management APIs.

    Args:
        base_url: the monitor's address, e.g. ``"https://monitor.example.com"``; default
            ``$MONITOR_BASE_URL``, else ``http://127.0.0.1:8000``.
        api_key: the project's read-write API key (``upsert_check``, slug lookups); default
            ``$MONITOR_API_KEY``.
        ping_key: the project's ping key, for checks named by slug
            (``/ping/<ping_key>/<slug>``); default ``$MONITOR_PING_KEY``.
        timeout: seconds one call may take in all, retries included (about; a single attempt
            is cut at what remains).
        retries: further attempts after a transport error, a 408/425/429 or a 5xx.
        backoff: first retry delay in seconds, doubled each retry, with jitter (half fixed,
            half random); a ``Retry-After`` header is obeyed instead when it fits the budget.
        transport: an ``httpx.BaseTransport`` (tests: ``httpx.MockTransport``, or a real one).

    Example::

        from monitor_client import Client

        client = Client()                       # MONITOR_BASE_URL, MONITOR_PING_KEY …
        client.ping("nightly-billing")          # success, by slug
        with client.run("nightly-billing") as run:
            run.log("42 invoices")
            bill_everyone()                     # an exception → fail ping with its traceback
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        ping_key: str | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key, ping_key, timeout, retries, backoff)
        self._http = httpx.Client(
            transport=transport, headers={"User-Agent": USER_AGENT}, timeout=self.settings.timeout
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, plan: Plan, remaining: float) -> httpx.Response:
        """One HTTP exchange, abandoned after ``remaining`` seconds in all.

        httpx's timeouts are per phase and per read, so a server sending a byte a second
        would hold a plain request for ever: the request runs in a daemon thread and the caller
        waits for it at most ``remaining`` seconds (the thread ends with the connection).
        """
        box: list[httpx.Response | Exception] = []

        def work() -> None:
            try:
                box.append(
                    self._http.request(
                        plan.method,
                        plan.url,
                        params=plan.params,
                        headers=plan.headers,
                        content=plan.content,
                        json=plan.json,
                        timeout=remaining,
                    )
                )
            except Exception as error:  # handed to the caller
                box.append(error)

        worker = threading.Thread(target=work, name="monitor-client-request", daemon=True)
        worker.start()
        worker.join(remaining)
        if not box:
            raise CallTimeout(f"no complete answer within {remaining:.3g} s")
        outcome = box[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _send(self, plan: Plan, deadline: float | None = None) -> tuple[PingResult, httpx.Response | None]:
        deadline = time.monotonic() + self.settings.timeout if deadline is None else deadline
        number = 0
        while True:
            remaining = max(deadline - time.monotonic(), 0.001)
            response: httpx.Response | None = None
            try:
                response = self._request(plan, remaining)
                attempt = _response_attempt(response, self.body_limit)
            except Exception as error:  # never into the job: refused, timeouts, DNS, bad URL …
                attempt = _common.judge_error(error, self.body_limit, transient=_transient(error))
            delay = self._delay(attempt, number, deadline)
            if delay is None:
                return attempt.result, response
            time.sleep(delay)
            number += 1

    def ping(
        self,
        check: str,
        kind: str = "success",
        *,
        scheduled: Scheduled = None,
        rid: str | None = None,
        body: str | bytes | None = None,
        exit_status: int | None = None,
        headers: Mapping[str, str] | None = None,
        create: bool = False,
        finished: Finished = None,
        started: Finished = None,
        timeout: float | None = None,
    ) -> PingResult:
        """Send one ping; never raises.

        Args:
            check: a check's uuid, or its slug (sent to ``/ping/<ping_key>/<slug>``; without a
                ping key but with an API key the slug's uuid is looked up once).
            kind: ``"success"``, ``"start"``, ``"fail"``, ``"log"`` or ``"skip"``.
            scheduled: the tick this run belongs to: an aware ``datetime``, ISO 8601 text or
                unix seconds; default ``$MONITOR_SCHEDULED_TIME`` when set.
            rid: run id (a UUID) pairing a start with its finish.
            body: output to store with the ping; only its last ``Ping-Body-Limit`` bytes are sent.
            exit_status: 0-255, sent as ``/ping/<check>/<status>`` instead of ``kind``.
            headers: extra request headers, e.g. ``{"Idempotency-Key": "billing:2026-07-19"}``.
            create: auto-provision a check named by slug (``?create=1``, Healthchecks' defaults).
            finished: for a finish sent late (queued behind an outage, retried), when its run
                really ended: an aware ``datetime`` or unix seconds, sent as ``finished=``
                (docs/design.md §5); a monitor that refuses it gets the ping again without it.
            started: for a start sent late, when its run really started: as ``finished``, sent
                as ``started=`` (start pings only).
            timeout: seconds this call may take in all (retries included) instead of the
                client's ``timeout``; :meth:`run` gives a finish 1 s when its start got no
                answer in the whole ``timeout``.

        Returns:
            PingResult: ``ok`` when stored; otherwise ``error`` says why (a warning is logged
            once per outage).
        """
        what = f"{kind} ping of {check}"
        # one bound for the slug's lookup and the ping together
        deadline = time.monotonic() + (self.settings.timeout if timeout is None else timeout)
        try:
            target = self._uuid_for(check, create, deadline) if self._needs_lookup(check) else None
            plan = self._ping_plan(
                check,
                kind,
                target,
                scheduled=scheduled,
                rid=rid,
                body=body,
                exit_status=exit_status,
                headers=headers,
                create=create,
                finished=finished,
                started=started,
            )
        except Exception as error:  # bad arguments end as a refused result too
            return self._note(what, _refused(error, self.body_limit))
        result, _ = self._send(plan, deadline)
        while (again := self._without_refused(check, plan, result)) is not None:
            plan = again
            result, _ = self._send(plan, deadline)
        return self._note(what, result)

    def _uuid_for(self, slug: str, create: bool, deadline: float) -> str | None:
        known = self._known_uuid(slug)
        if known is not None:
            return known
        found = self._upsert(slug, {}, deadline) if create else self._get(slug, deadline)
        return found.get("uuid") if found else None

    def upsert_check(self, slug: str, **fields: Any) -> dict[str, Any] | None:
        """Create or update the check with this slug (``POST /api/v3/checks/``, ``unique: ["slug"]``).

        Args:
            slug: the check's slug (``[a-z0-9_-]``); also its name unless ``name=`` is given.
            **fields: any check field of the management API (``schedule``, ``tz``, ``grace``,
                ``max_runtime``, ``tags`` …).

        Returns:
            The check as JSON, or ``None`` when it could not be saved (no API key, refused,
            unreachable: logged once).
        """
        return self._upsert(slug, fields, None)

    def _upsert(self, slug: str, fields: dict[str, Any], deadline: float | None) -> dict[str, Any] | None:
        try:
            plan = _common.upsert_plan(self.settings, slug, fields)
        except Exception as error:  # bad arguments end as a refused result too
            self._note(f"upsert of {slug}", _refused(error, self.body_limit))
            return None
        result, response = self._send(plan, deadline)
        return self._check_from(f"upsert of {slug}", result, response)

    def get_check(self, check: str) -> dict[str, Any] | None:
        """The check as JSON (by uuid, or by slug through ``?slug=``), or ``None`` if not found."""
        return self._get(check, None)

    def _get(self, check: str, deadline: float | None) -> dict[str, Any] | None:
        try:
            plan = self._lookup_plan(self.settings, check)
        except Exception as error:  # bad arguments end as a refused result too
            self._note(f"lookup of {check}", _refused(error, self.body_limit))
            return None
        result, response = self._send(plan, deadline)
        return self._check_from(f"lookup of {check}", result, response)

    def run(self, check: str, scheduled: Scheduled = None, create: bool = False) -> Run:
        """A context manager around one run: ``start`` with a fresh ``rid``, then the finish.

        On a normal exit it sends ``success`` (with ``run.output`` as body, if set); on an
        exception ``fail`` with the exception's type, message and traceback tail as body
        (``SystemExit(n)`` sends exit status ``n``). The exception always propagates,
        ``KeyboardInterrupt`` included. ``scheduled`` is resolved once (default
        ``$MONITOR_SCHEDULED_TIME``) and sent with every ping of the run.
        """
        return Run(self, check, scheduled=scheduled, create=create)

    def monitored(self, check: str, *, scheduled: Scheduled = None, create: bool = False) -> Callable[[F], F]:
        """Decorator: each call of the function is one :meth:`run` (sync and async functions).

        Raises:
            TypeError: at decoration, for a generator or async generator function (its body
                runs only when iterated, after the call returned: use ``with client.run(...)``
                inside it instead).

        Example::

            @client.monitored("nightly-billing")
            def bill() -> None: ...
        """

        def decorate(fn: F) -> F:
            if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
                raise TypeError(
                    f"monitored cannot wrap the generator function {fn!r}: its body runs when it "
                    "is iterated, not when it is called; put `with client.run(...)` inside it"
                )
            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    run = self.run(check, scheduled=scheduled, create=create)
                    await asyncio.to_thread(run.__enter__)
                    try:
                        result = await fn(*args, **kwargs)
                    except BaseException as error:
                        await asyncio.to_thread(run.__exit__, type(error), error, error.__traceback__)
                        raise
                    await asyncio.to_thread(run.__exit__, None, None, None)
                    return result

                return cast(F, async_wrapper)

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                with self.run(check, scheduled=scheduled, create=create):
                    return fn(*args, **kwargs)

            return cast(F, wrapper)

        return decorate


class _RunState:
    def __init__(self, check: str, scheduled: Scheduled, create: bool) -> None:
        self.check = check
        self.create = create
        self.rid = str(uuid_module.uuid4())
        try:
            self.scheduled: str | None = _common.scheduled_text(scheduled, check=check)
        except PlanError:
            self.scheduled = None
        #: set this to send it as the success ping's body
        self.output: str | bytes | None = None
        self.duration: float | None = None
        self.started: PingResult | None = None
        self.finished: PingResult | None = None
        self._t0 = 0.0
        self._start_took = 0.0

    def _finish_args(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> tuple[str, int | None, str | bytes | None]:
        self.duration = time.monotonic() - self._t0
        kind, exit_status = _common.exit_outcome(exc_type, exc)
        body = self.output if exc_type is None else _common.failure_body(exc_type, exc, tb)
        return kind, exit_status, body

    def _finish_timeout(self, timeout: float) -> float | None:
        # the job already waited a whole ``timeout`` for an unanswered start: 1 s for the finish
        return _common.finish_timeout(self.started, self._start_took, timeout)


class Run(_RunState):
    """One monitored run (see :meth:`Client.run`).

    Attributes:
        rid: this run's id (a UUID), sent with every ping.
        scheduled: the ``scheduled`` text sent (or ``None``).
        output: set it to send it as the success ping's body.
        duration: seconds from entering to leaving the block (after it ends).
        started, finished: the :class:`PingResult` of the start and finish pings.
    """

    def __init__(self, client: Client, check: str, *, scheduled: Scheduled, create: bool) -> None:
        super().__init__(check, scheduled, create)
        self._client = client

    def _ping(self, kind: str, **kwargs: Any) -> PingResult:
        return self._client.ping(
            self.check, kind, rid=self.rid, scheduled=self.scheduled, create=self.create, **kwargs
        )

    def log(self, text: str | bytes) -> PingResult:
        """Send a ``log`` ping with ``text`` as body (stored, changes nothing)."""
        return self._ping("log", body=text)

    def __enter__(self) -> Run:
        self._t0 = time.monotonic()
        self.started = self._ping("start")
        self._start_took = time.monotonic() - self._t0
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        kind, exit_status, body = self._finish_args(exc_type, exc, tb)
        timeout = self._finish_timeout(self._client.settings.timeout)
        self.finished = self._ping(kind, exit_status=exit_status, body=body, timeout=timeout)


class AsyncClient(_Base):
    """The asyncio twin of :class:`Client`: same arguments (``transport`` is an
    ``httpx.AsyncBaseTransport``), the same methods as coroutines, and ``async with
    client.run(...)``.

    Example::

        async with AsyncClient() as client:
            async with client.run("nightly-billing") as run:
                await run.log("starting")
                await bill_everyone()
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        ping_key: str | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key, ping_key, timeout, retries, backoff)
        self._http = httpx.AsyncClient(
            transport=transport, headers={"User-Agent": USER_AGENT}, timeout=self.settings.timeout
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(
        self, plan: Plan, deadline: float | None = None
    ) -> tuple[PingResult, httpx.Response | None]:
        deadline = time.monotonic() + self.settings.timeout if deadline is None else deadline
        number = 0
        while True:
            remaining = max(deadline - time.monotonic(), 0.001)
            response: httpx.Response | None = None
            try:
                # a hard bound too: httpx's timeout is per phase (connect, write, read)
                async with asyncio.timeout(remaining):
                    response = await self._http.request(
                        plan.method,
                        plan.url,
                        params=plan.params,
                        headers=plan.headers,
                        content=plan.content,
                        json=plan.json,
                        timeout=remaining,
                    )
                attempt = _response_attempt(response, self.body_limit)
            except Exception as error:  # never into the job
                attempt = _common.judge_error(error, self.body_limit, transient=_transient(error))
            delay = self._delay(attempt, number, deadline)
            if delay is None:
                return attempt.result, response
            await asyncio.sleep(delay)
            number += 1

    async def ping(
        self,
        check: str,
        kind: str = "success",
        *,
        scheduled: Scheduled = None,
        rid: str | None = None,
        body: str | bytes | None = None,
        exit_status: int | None = None,
        headers: Mapping[str, str] | None = None,
        create: bool = False,
        finished: Finished = None,
        started: Finished = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a budget over retries, as Client.ping's
    ) -> PingResult:
        """Send one ping; never raises. Arguments as :meth:`Client.ping`."""
        what = f"{kind} ping of {check}"
        # one bound for the slug's lookup and the ping together
        deadline = time.monotonic() + (self.settings.timeout if timeout is None else timeout)
        try:
            target = await self._uuid_for(check, create, deadline) if self._needs_lookup(check) else None
            plan = self._ping_plan(
                check,
                kind,
                target,
                scheduled=scheduled,
                rid=rid,
                body=body,
                exit_status=exit_status,
                headers=headers,
                create=create,
                finished=finished,
                started=started,
            )
        except Exception as error:  # bad arguments end as a refused result too
            return self._note(what, _refused(error, self.body_limit))
        result, _ = await self._send(plan, deadline)
        while (again := self._without_refused(check, plan, result)) is not None:
            plan = again
            result, _ = await self._send(plan, deadline)
        return self._note(what, result)

    async def _uuid_for(self, slug: str, create: bool, deadline: float) -> str | None:
        known = self._known_uuid(slug)
        if known is not None:
            return known
        found = await self._upsert(slug, {}, deadline) if create else await self._get(slug, deadline)
        return found.get("uuid") if found else None

    async def upsert_check(self, slug: str, **fields: Any) -> dict[str, Any] | None:
        """As :meth:`Client.upsert_check`."""
        return await self._upsert(slug, fields, None)

    async def _upsert(
        self, slug: str, fields: dict[str, Any], deadline: float | None
    ) -> dict[str, Any] | None:
        try:
            plan = _common.upsert_plan(self.settings, slug, fields)
        except Exception as error:  # bad arguments end as a refused result too
            self._note(f"upsert of {slug}", _refused(error, self.body_limit))
            return None
        result, response = await self._send(plan, deadline)
        return self._check_from(f"upsert of {slug}", result, response)

    async def get_check(self, check: str) -> dict[str, Any] | None:
        """As :meth:`Client.get_check`."""
        return await self._get(check, None)

    async def _get(self, check: str, deadline: float | None) -> dict[str, Any] | None:
        try:
            plan = self._lookup_plan(self.settings, check)
        except Exception as error:  # bad arguments end as a refused result too
            self._note(f"lookup of {check}", _refused(error, self.body_limit))
            return None
        result, response = await self._send(plan, deadline)
        return self._check_from(f"lookup of {check}", result, response)

    def run(self, check: str, scheduled: Scheduled = None, create: bool = False) -> AsyncRun:
        """As :meth:`Client.run`, used with ``async with``."""
        return AsyncRun(self, check, scheduled=scheduled, create=create)

    def monitored(self, check: str, *, scheduled: Scheduled = None, create: bool = False) -> Callable[[F], F]:
        """Decorator for ``async def`` functions: each call is one :meth:`run`.

        Raises:
            TypeError: at decoration, for a plain function (use :meth:`Client.monitored`).
        """

        def decorate(fn: F) -> F:
            if inspect.isasyncgenfunction(fn):
                raise TypeError(
                    f"AsyncClient.monitored cannot wrap the async generator function {fn!r}: its "
                    "body runs when it is iterated; put `async with client.run(...)` inside it"
                )
            if not inspect.iscoroutinefunction(fn):
                raise TypeError(
                    f"AsyncClient.monitored needs an async function; use Client.monitored for {fn!r}"
                )

            @functools.wraps(fn)
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                async with self.run(check, scheduled=scheduled, create=create):
                    return await fn(*args, **kwargs)

            return cast(F, wrapper)

        return decorate


class AsyncRun(_RunState):
    """One monitored run of an :class:`AsyncClient` (attributes as :class:`Run`)."""

    def __init__(self, client: AsyncClient, check: str, *, scheduled: Scheduled, create: bool) -> None:
        super().__init__(check, scheduled, create)
        self._client = client

    async def _ping(self, kind: str, **kwargs: Any) -> PingResult:
        return await self._client.ping(
            self.check, kind, rid=self.rid, scheduled=self.scheduled, create=self.create, **kwargs
        )

    async def log(self, text: str | bytes) -> PingResult:
        """Send a ``log`` ping with ``text`` as body."""
        return await self._ping("log", body=text)

    async def __aenter__(self) -> AsyncRun:
        self._t0 = time.monotonic()
        self.started = await self._ping("start")
        self._start_took = time.monotonic() - self._t0
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        kind, exit_status, body = self._finish_args(exc_type, exc, tb)
        # the finish goes out even when the task is being cancelled
        timeout = self._finish_timeout(self._client.settings.timeout)
        self.finished = await asyncio.shield(
            self._ping(kind, exit_status=exit_status, body=body, timeout=timeout)
        )
