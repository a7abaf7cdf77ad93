"""Reporting runs to the monitor over HTTP, off the scheduler's event loop (DESIGN §8).

The scheduler is a client of the monitor like any other: it upserts one check per job
(``POST /api/v3/checks/`` with ``"unique": ["slug"]``, slug = job name, so a hundred replicas
booting make one check per job) and pings it through ``monitor_client`` — the package of
``clients/python``, shipped in the ``monitor`` wheel too.

Pinging never blocks a run: :class:`HttpReporter` puts each ping on a queue drained by one
background thread (FIFO, so a run's ``start`` goes before its finish), which sends each through
the client and retries it itself (one attempt per client call). Every ping carries
``scheduled=<tick>``, and runs carry ``rid``; the header
``Idempotency-Key: <job>:<tick>:<attempt>:<kind>`` makes a retried request harmless.

While the monitor is unreachable (no answer, 5xx, 408/425/429) the thread keeps retrying the
oldest ping (backing off up to :data:`OUTAGE_BACKOFF_MAX` s) and the others wait in order, up to
:data:`QUEUE_LIMIT` (then the oldest are dropped, logged): a monitor outage delays reports, it
does not lose them. ``scheduled=`` binds a late ping to its tick; a finish sent
:data:`monitor_client._common.LATE_FINISH` s or more after the run ended (queued behind the
outage, retried, or held up by a stalled scheduler) also carries ``finished=`` (docs/design.md
§5), the run's end (as the guard saw the process exit, :mod:`monitor.scheduler.guard`), so the
monitor does not take its arrival for the run's end. A start sent that late after the run's
spawn likewise carries ``started=``, the spawn's instant, so the monitor binds and times the run
from its real start, not from the start's arrival.

A check the monitor refuses (a 4xx other than those: a bad field, a read-only or unknown key)
does not hold the other jobs up: the refusal is logged once per job, that job's pings are
dropped, and its upsert is tried again every :data:`REFUSED_RETRY` seconds.

The liveness check (slug ``monitor-scheduler``) is shared by every replica: its period is set
only when it is created, so replicas configured differently do not keep changing it; it goes
down when no replica pings it, i.e. when ALL replicas are dead.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import httpx
from monitor_client._common import late_finish, late_start

from monitor.domain import retry
from monitor.domain.cron import schedules
from monitor.domain.jobs import LIVENESS_SLUG, Job

logger = logging.getLogger(__name__)

QUEUE_LIMIT = 10_000
"""Pings waiting for the monitor; beyond it the oldest are dropped (logged)."""
OUTAGE_BACKOFF_MAX = 30.0
"""Longest wait, seconds, between two attempts at a ping while the monitor is unreachable."""
REFUSED_RETRY = 600.0
"""Seconds before a check upsert the monitor refused (4xx) is tried again."""
REGISTER = "register"
"""A queue item that only upserts the job's check."""


class Reporter(Protocol):
    """Where the scheduler reports runs. Every method returns at once."""

    def start(self, job: Job, tick: datetime, attempt: int, rid: str, began: float | None = None) -> None:
        """The run ``rid`` started at ``began`` (unix seconds; ``None``: now)."""
        ...

    def finish(
        self,
        job: Job,
        tick: datetime,
        attempt: int,
        rid: str,
        exit_status: int,
        output: bytes,
        ended: float | None = None,
    ) -> None:
        """The run ``rid`` ended with ``exit_status`` at ``ended`` (unix seconds; ``None``:
        now)."""
        ...

    def lost(self, job: Job, tick: datetime, attempt: int, rid: str, output: bytes) -> None:
        """The run ``rid`` ended with nobody to tell how (its scheduler died): an ``unknown``
        ping, so its outcome is ``unknown``."""
        ...

    def skip(self, job: Job, tick: datetime, attempt: int, reason: str) -> None: ...

    def liveness(self) -> None: ...

    def close(self, timeout: float) -> None: ...


def idempotency_key(job: str, tick: datetime, attempt: int, kind: str) -> str:
    """``<job>:<tick>:<attempt>:<kind>`` (DESIGN §8), the tick as ``YYYY-MM-DDTHH:MM:SSZ``."""
    return f"{job}:{schedules.format_utc(tick)}:{attempt}:{kind}"


def check_fields(job: Job) -> dict[str, Any]:
    """The check a job is monitored by: slug and name = job name, its schedule and grace."""
    fields: dict[str, Any] = {
        "name": job.name,
        "schedule": job.schedule.expression,
        "dialect": job.schedule.dialect.value,
        "tz": job.schedule.tz,
        "grace": job.grace,
        "desc": "run by monitor scheduler",
    }
    if job.max_runtime is not None:
        fields["max_runtime"] = job.max_runtime
    return fields


class NullReporter:
    """Reports nothing (no ``MONITOR_API_KEY``): runs are only logged."""

    def start(self, job: Job, tick: datetime, attempt: int, rid: str, began: float | None = None) -> None:
        pass

    def finish(
        self,
        job: Job,
        tick: datetime,
        attempt: int,
        rid: str,
        exit_status: int,
        output: bytes,
        ended: float | None = None,
    ) -> None:
        pass

    def lost(self, job: Job, tick: datetime, attempt: int, rid: str, output: bytes) -> None:
        pass

    def skip(self, job: Job, tick: datetime, attempt: int, reason: str) -> None:
        pass

    def liveness(self) -> None:
        pass

    def close(self, timeout: float) -> None:
        pass


@dataclass(frozen=True, kw_only=True, slots=True)
class _Ping:
    slug: str
    kind: str
    scheduled: datetime | None = None
    rid: str | None = None
    exit_status: int | None = None
    body: bytes | None = None
    key: str | None = None
    ended: float | None = None
    """A finish's run end, unix seconds (as the scheduler saw it), sent as ``finished=`` when
    the ping goes out late."""
    began: float | None = None
    """A start's run start, unix seconds (as the scheduler saw it), sent as ``started=`` when
    the ping goes out late."""


class HttpReporter:
    """Pings the monitor at ``base_url`` with ``api_key`` from one background thread.

    Args:
        base_url: the monitor (``MONITOR_BASE_URL``).
        api_key: a read-write key of the project the checks belong to (``MONITOR_API_KEY``).
        jobs: the jobs whose checks to upsert.
        liveness_interval: seconds between the scheduler's liveness pings (the liveness
            check's period).
        client: a ``monitor_client.Client`` (default one built from ``base_url`` and ``api_key``).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        jobs: Sequence[Job],
        *,
        liveness_interval: float = 60.0,
        client: Any = None,
    ) -> None:
        self._owns_client = client is None  # a client built here is closed by the drain thread
        if client is None:
            from monitor_client import Client

            # no retries inside the client: every retry is this reporter's own (backing off up to
            # OUTAGE_BACKOFF_MAX), so each one decides afresh whether the finish is late
            # and carries finished= (a retry inside one client call would resend the first plan)
            client = Client(base_url, api_key=api_key, timeout=10.0, retries=0)
        self._client = client
        self._jobs = {job.name: job for job in jobs}
        self._liveness_interval = liveness_interval
        self._uuids: dict[str, str] = {}
        self._refused: dict[str, float] = {}
        """slug → monotonic time its upsert may be tried again (the monitor refused it)."""
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._queue: queue.Queue[_Ping | None] = queue.Queue()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._drain, name="monitor-reporter", daemon=True)
        self._thread.start()
        for job in jobs:  # upsert every job's check at boot, before its first tick
            self._put(_Ping(slug=job.name, kind=REGISTER))

    # ------------------------------------------------------------------ producers (event loop)

    def _put(self, ping: _Ping) -> None:
        if self._queue.qsize() >= QUEUE_LIMIT:
            try:
                dropped = self._queue.get_nowait()
                logger.warning("ping dropped: queue full", extra={"action": "ping_dropped", "ping": dropped})
            except queue.Empty:
                pass
        self._queue.put(ping)

    def start(self, job: Job, tick: datetime, attempt: int, rid: str, began: float | None = None) -> None:
        self._put(
            _Ping(
                slug=job.name,
                kind="start",
                scheduled=tick,
                rid=rid,
                key=idempotency_key(job.name, tick, attempt, "start"),
                began=time.time() if began is None else began,
            )
        )

    def finish(
        self,
        job: Job,
        tick: datetime,
        attempt: int,
        rid: str,
        exit_status: int,
        output: bytes,
        ended: float | None = None,
    ) -> None:
        kind = "success" if exit_status == 0 else "fail"
        self._put(
            _Ping(
                slug=job.name,
                kind=kind,
                scheduled=tick,
                rid=rid,
                exit_status=exit_status,
                body=output,
                key=idempotency_key(job.name, tick, attempt, kind),
                ended=time.time() if ended is None else ended,
            )
        )

    def lost(self, job: Job, tick: datetime, attempt: int, rid: str, output: bytes) -> None:
        self._put(
            _Ping(
                slug=job.name,
                kind="unknown",
                scheduled=tick,
                rid=rid,
                body=output,
                key=idempotency_key(job.name, tick, attempt, "unknown"),
            )
        )

    def skip(self, job: Job, tick: datetime, attempt: int, reason: str) -> None:
        self._put(
            _Ping(
                slug=job.name,
                kind="skip",
                scheduled=tick,
                body=f"skipped by monitor scheduler: {reason}\n".encode(),
                key=idempotency_key(job.name, tick, attempt, "skip"),
            )
        )

    def liveness(self) -> None:
        self._put(_Ping(slug=LIVENESS_SLUG, kind="success"))

    def close(self, timeout: float) -> None:
        """Send what is queued (up to ``timeout`` seconds), then stop the thread; pings still
        queued after that are dropped (logged), and the thread ends after its request in flight."""
        self._queue.put(None)
        self._thread.join(timeout)
        self._closing.set()
        if self._thread.is_alive():
            logger.warning(
                "monitor unreachable: %d pings not sent",
                self._queue.qsize(),
                extra={"action": "pings_dropped", "count": self._queue.qsize()},
            )

    @property
    def alive(self) -> bool:
        """Whether the background thread still runs."""
        return self._thread.is_alive()

    # ------------------------------------------------------------------ the thread

    def _fields(self, slug: str) -> dict[str, Any]:
        if slug == LIVENESS_SLUG:
            period = max(1, round(self._liveness_interval))
            return {"name": "monitor scheduler", "timeout": period, "grace": period}
        return check_fields(self._jobs[slug])

    def _upsert(self, slug: str) -> tuple[str | None, int | None, str]:
        """One upsert: ``(uuid, status, error text)``; status ``None`` when no answer came."""
        headers = {"X-Api-Key": self._api_key}
        url = f"{self._base_url}/api/v3/checks/"
        try:
            with httpx.Client(timeout=10.0) as http:
                if slug == LIVENESS_SLUG:  # shared by every replica: created once, never reset
                    found = http.get(url, params={"slug": slug}, headers=headers)
                    checks = found.json().get("checks") if found.is_success else None
                    if checks:
                        return str(checks[0]["uuid"]), found.status_code, ""
                payload = {"slug": slug, "unique": ["slug"], **self._fields(slug)}
                response = http.post(url, json=payload, headers=headers)
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
            return None, None, f"{type(error).__name__}: {error}"
        if response.is_success:
            try:
                return str(response.json()["uuid"]), response.status_code, ""
            except (ValueError, KeyError, TypeError) as error:
                return None, response.status_code, f"unexpected answer: {error}"
        return None, response.status_code, response.text[:500]

    def _uuid(self, slug: str) -> str | None:
        """The check's uuid (upserted once), or ``None``: refused (4xx, logged once) or closing."""
        known = self._uuids.get(slug)
        if known is not None:
            return known
        retry_at = self._refused.get(slug)
        if retry_at is not None and time.monotonic() < retry_at:
            return None
        attempt = 0
        while not self._closing.is_set():
            uuid, status, error = self._upsert(slug)
            if uuid is not None:
                self._uuids[slug] = uuid
                self._refused.pop(slug, None)
                logger.info(
                    "check %s is %s",
                    slug,
                    uuid,
                    extra={"action": "check_upserted", "slug": slug, "uuid": uuid},
                )
                return uuid
            if status is not None and _refused(status):
                if slug not in self._refused:
                    hint = (
                        " (MONITOR_API_KEY must be a read-write API key of the checks' project)"
                        if status in (401, 403)
                        else ""
                    )
                    logger.error(
                        "the monitor refused the check %s: %s %s%s; its runs are not reported",
                        slug,
                        status,
                        error,
                        hint,
                        extra={"action": "check_refused", "slug": slug, "status": status},
                    )
                self._refused[slug] = time.monotonic() + REFUSED_RETRY
                return None
            logger.warning(
                "could not upsert the check %s (attempt %d): %s %s",
                slug,
                attempt + 1,
                status,
                error,
                extra={"action": "check_upsert_failed", "slug": slug},
            )
            self._closing.wait(_backoff(attempt))
            attempt += 1
        return None

    def _send(self, ping: _Ping) -> None:
        uuid = self._uuid(ping.slug)
        if uuid is None or ping.kind == REGISTER:
            return
        attempt = 0
        while True:
            result = self._client.ping(
                uuid,
                ping.kind,
                scheduled=ping.scheduled,
                rid=ping.rid,
                body=ping.body,
                exit_status=ping.exit_status,
                headers={"Idempotency-Key": ping.key} if ping.key else None,
                **self._finished(ping),
                **self._started(ping),
            )
            if getattr(result, "ok", False):
                return
            status = getattr(result, "status", None)
            if attempt == 0 or status is not None:
                logger.warning(
                    "ping %s %s not delivered: %s %s",
                    ping.slug,
                    ping.kind,
                    status,
                    getattr(result, "error", None),
                    extra={"action": "ping_failed", "slug": ping.slug, "kind": ping.kind},
                )
            if status is not None and _refused(status):
                return  # the monitor answered no: retrying would not change it
            # unreachable: keep this ping (and the queue behind it) until the monitor is back
            if self._closing.wait(_backoff(attempt)):
                return
            attempt += 1

    @staticmethod
    def _finished(ping: _Ping) -> dict[str, float]:
        """``finished=`` for a finish that goes out late (see the module docstring), else nothing."""
        ended = late_finish(ping.ended, time.time())
        return {"finished": ended} if ended is not None else {}

    @staticmethod
    def _started(ping: _Ping) -> dict[str, float]:
        """``started=`` for a start that goes out late (see the module docstring), else nothing."""
        began = late_start(ping.began, time.time())
        return {"started": began} if began is not None else {}

    def _drain(self) -> None:
        try:
            while not self._closing.is_set():
                ping = self._queue.get()
                if ping is None or self._closing.is_set():
                    return
                try:
                    self._send(ping)
                except Exception:
                    logger.exception("ping failed", extra={"action": "ping_failed", "slug": ping.slug})
        finally:
            if self._owns_client:  # its connections die with the thread that used them
                self._client.close()


def _refused(status: int) -> bool:
    """A 4xx the monitor will answer again (not a timeout, too-early or rate limit)."""
    return 400 <= status < 500 and status not in (408, 425, 429)


def _backoff(attempt: int) -> float:
    """Seconds before the next attempt: 0.5, 1, 2 … up to :data:`OUTAGE_BACKOFF_MAX` (no jitter:
    one reporter per scheduler process, its retries never come in herds)."""
    return retry.backoff(attempt + 1, base=0.5, cap=OUTAGE_BACKOFF_MAX)
