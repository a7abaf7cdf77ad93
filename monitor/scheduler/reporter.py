"""Reporting runs to the monitor over HTTP, off the scheduler's event loop (DESIGN §8).

The scheduler is a client of the monitor like any other: it upserts one check per job
(``POST /api/v3/checks/`` with ``"unique": ["slug"]``, slug = job name, so a hundred replicas
booting make one check per job) and pings it through ``monitor_client`` — the package of
``clients/python``, shipped in the ``monitor`` wheel too.

Pinging never blocks a run: :class:`HttpReporter` puts each ping on a queue drained by one
background thread (FIFO, so a run's ``start`` goes before its finish), which retries through the
client. Every ping carries ``scheduled=<tick>``, and runs carry ``rid``; the header
``Idempotency-Key: <job>:<tick>:<attempt>:<kind>`` makes a retried request harmless.
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

from monitor.domain import schedules
from monitor.domain.jobs import LIVENESS_SLUG, Job

logger = logging.getLogger(__name__)

QUEUE_LIMIT = 10_000
"""Pings waiting for the monitor; beyond it the oldest are dropped (logged)."""
UPSERT_BACKOFF = (0.5, 1.0, 2.0, 5.0)
"""Seconds between attempts to upsert a job's check while the monitor is unreachable."""
REGISTER = "register"
"""A queue item that only upserts the job's check."""


class Reporter(Protocol):
    """Where the scheduler reports runs. Every method returns at once."""

    def start(self, job: Job, tick: datetime, attempt: int, rid: str) -> None: ...

    def finish(
        self, job: Job, tick: datetime, attempt: int, rid: str, exit_status: int, output: bytes
    ) -> None: ...

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

    def start(self, job: Job, tick: datetime, attempt: int, rid: str) -> None:
        pass

    def finish(
        self, job: Job, tick: datetime, attempt: int, rid: str, exit_status: int, output: bytes
    ) -> None:
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
        if client is None:
            from monitor_client import Client

            client = Client(base_url, api_key=api_key, timeout=10.0, retries=3, backoff=0.5)
        self._client = client
        self._jobs = {job.name: job for job in jobs}
        self._liveness_interval = liveness_interval
        self._uuids: dict[str, str] = {}
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

    def start(self, job: Job, tick: datetime, attempt: int, rid: str) -> None:
        self._put(
            _Ping(
                slug=job.name,
                kind="start",
                scheduled=tick,
                rid=rid,
                key=idempotency_key(job.name, tick, attempt, "start"),
            )
        )

    def finish(
        self, job: Job, tick: datetime, attempt: int, rid: str, exit_status: int, output: bytes
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

    def _uuid(self, slug: str) -> str | None:
        known = self._uuids.get(slug)
        if known is not None:
            return known
        for attempt, delay in enumerate((0.0, *UPSERT_BACKOFF)):
            if self._closing.wait(delay):
                return None
            try:
                check = self._client.upsert_check(slug, **self._fields(slug))
            except Exception as error:  # the client never raises; be safe anyway
                check = None
                logger.warning("check upsert raised %s", error, extra={"action": "check_upsert_failed"})
            if check and check.get("uuid"):
                uuid = str(check["uuid"])
                self._uuids[slug] = uuid
                logger.info(
                    "check %s is %s",
                    slug,
                    uuid,
                    extra={"action": "check_upserted", "slug": slug, "uuid": uuid},
                )
                return uuid
            logger.warning(
                "could not upsert the check %s (attempt %d)",
                slug,
                attempt + 1,
                extra={"action": "check_upsert_failed", "slug": slug},
            )
        return None

    def _send(self, ping: _Ping) -> None:
        uuid = self._uuid(ping.slug)
        while uuid is None and not self._closing.is_set():
            time.sleep(1.0)
            uuid = self._uuid(ping.slug)
        if uuid is None or ping.kind == REGISTER:
            return
        result = self._client.ping(
            uuid,
            ping.kind,
            scheduled=ping.scheduled,
            rid=ping.rid,
            body=ping.body,
            exit_status=ping.exit_status,
            headers={"Idempotency-Key": ping.key} if ping.key else None,
        )
        if not getattr(result, "ok", False):
            logger.warning(
                "ping %s %s not delivered: %s %s",
                ping.slug,
                ping.kind,
                getattr(result, "status", None),
                getattr(result, "error", None),
                extra={"action": "ping_failed", "slug": ping.slug, "kind": ping.kind},
            )

    def _drain(self) -> None:
        while not self._closing.is_set():
            ping = self._queue.get()
            if ping is None or self._closing.is_set():
                return
            try:
                self._send(ping)
            except Exception:
                logger.exception("ping failed", extra={"action": "ping_failed", "slug": ping.slug})
