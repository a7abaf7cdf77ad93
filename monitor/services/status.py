"""What ``/ready``, the status probe and ``/metrics`` read about the service (DESIGN §6, §9).

Each function is one read unit of work over the whole database (every project, every shard);
the edges turn the values into their answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from monitor.domain import detection
from monitor.domain.checks import Status
from monitor.services import checks as check_service
from monitor.services.outages import outage_gap
from monitor.storage import engine as engine_module
from monitor.storage import leases, repositories
from monitor.storage.unit_of_work import Engine, UnitOfWork


@dataclass(frozen=True, kw_only=True, slots=True)
class Readiness:
    """``/ready``'s view: the earliest ``next_due`` of any check (``None``: none due), the
    shard count stored in the database (``None``: none recorded yet), every lease row as
    :func:`monitor.storage.leases.list_leases` shows it."""

    oldest_due: datetime | None
    stored_shards: int | None
    leases: list[dict[str, Any]]


def storage_unavailable(error: BaseException) -> bool:
    """Whether a failed request failed because the database could not be used just then (a
    restart, a lost session, no free connection): the edges answer ``503``, not ``500``
    (:func:`monitor.storage.engine.storage_unavailable`)."""
    return engine_module.storage_unavailable(error)


def concurrency_failure(error: BaseException) -> bool:
    """Whether a failed request was rolled back for a concurrent transaction's sake (a deadlock,
    a serialization failure): the edges answer ``503``, a retry may succeed
    (:func:`monitor.storage.engine.concurrency_failure`)."""
    return engine_module.concurrency_failure(error)


async def database_answers(engine: Engine) -> None:
    """Run ``SELECT 1``; raises the driver's error when the database does not answer."""
    async with UnitOfWork.read(engine) as uow:
        await uow.status.ping()


async def stored_shards(engine: Engine) -> int | None:
    """The shard count every evaluator uses: the database's, not this process's ``MONITOR_SHARDS``."""
    async with UnitOfWork.read(engine) as uow:
        return await uow.status.stored_shard_count()


async def readiness(engine: Engine) -> Readiness:
    """Check that the database answers and read :class:`Readiness`.

    Raises:
        Exception: whatever the driver raises when the database is unreachable.
    """
    async with UnitOfWork.read(engine) as uow:
        await uow.status.ping()
        oldest = await uow.checks.oldest_due()
        shards = await uow.status.stored_shard_count()
    return Readiness(oldest_due=oldest, stored_shards=shards, leases=await leases.list_leases(engine))


@dataclass(frozen=True, kw_only=True, slots=True)
class Counts:
    """What one ``/metrics`` scrape exports (see :func:`metric_counts`)."""

    leases: list[tuple[str, str | None, int, datetime | None]]
    oldest_due: datetime | None
    checks_due: int
    evaluator_replicas: int
    live_processes: int
    last_liveness: datetime | None
    outages: int
    checks_by_status: tuple[tuple[str, int], ...]
    checks_started: int
    pings_by_kind: tuple[tuple[str, int], ...]
    alerts_by_kind: tuple[tuple[str, int], ...]
    notifications_by_status: tuple[tuple[str, int], ...]
    attempts_by_result: tuple[tuple[str, int], ...]
    checks: list[CheckLine] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CheckLine:
    """One check in a per-check scrape: its status at the scrape instant, whether a run is in
    progress, its last ping."""

    uuid: str
    name: str
    status: str
    started: bool
    last_ping_at: datetime | None


async def metric_counts(engine: Engine, now: datetime, ttl: timedelta, *, per_check: bool = False) -> Counts:
    """Read everything ``/metrics`` exports in one read unit of work.

    Args:
        now: the scrape instant (aware UTC).
        ttl: the lease TTL (``MONITOR_LEASE_TTL``): an evaluator replica renewed within it is
            alive; a process within :func:`monitor.services.outages.outage_gap` of it is live.
        per_check: also read every check row and which have a run in progress
            (``MONITOR_METRICS_PER_CHECK``); otherwise only counts grouped in the database.
    """
    async with UnitOfWork.read(engine) as uow:
        status = uow.status
        check_rows: list[dict[str, Any]] = []
        started: set[int] = set()
        if per_check:
            check_rows = await status.all_checks()
            started = await check_service.started_checks(uow.connection, check_rows, now)
        by_status = await status.checks_by_status(now)
        attempts = await status.counts_by("notification_attempts.ok")
        return Counts(
            leases=await status.leases(),
            oldest_due=await uow.checks.oldest_due(),
            checks_due=await status.checks_due(now),
            evaluator_replicas=await status.renewed_replicas("evaluator", now - ttl),
            live_processes=await status.live_processes(now - outage_gap(ttl)),
            last_liveness=await status.last_liveness(),
            outages=await status.outages(),
            checks_by_status=tuple((value.value, by_status.get(value.value, 0)) for value in Status),
            checks_started=await status.started_count(now),
            pings_by_kind=tuple(await status.counts_by("pings.kind")),
            alerts_by_kind=tuple(await status.counts_by("alerts.kind")),
            notifications_by_status=tuple(await status.counts_by("notifications.status")),
            attempts_by_result=tuple(attempts),
            checks=[
                CheckLine(
                    r["uuid"],
                    r["name"],
                    detection.status(repositories.state_of(r), now).value,
                    r["id"] in started,
                    r["last_ping_at"],
                )
                for r in check_rows
            ],
        )


async def stored_shard_count(engine: Engine) -> int | None:
    """The evaluator shard count the database records (``monitor reshard`` with no count), or
    ``None`` before any process recorded one."""
    async with UnitOfWork.read(engine) as uow:
        return await uow.status.stored_shard_count()
