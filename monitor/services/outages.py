"""The self-outage guard (DESIGN §6): a monitor that was down must not page for what it missed.

Every HTTP process renews a liveness row every ``MONITOR_EVALUATE_INTERVAL`` whatever roles it
runs. A span longer than 2 × ``MONITOR_LEASE_TTL`` with no fresh row is a monitor outage: no
ping could arrive, so ticks whose grace ended inside it get outcome ``unknown`` (no alert), and
each project gets one ``monitor_unavailable`` alert ("from … to …") instead of a storm.

The outage is recorded by the first HTTP process to renew after it (the row's unique
``started_at`` makes that exactly once); evaluators read it through :func:`load_guard`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from monitor.domain.checks import AlertKind
from monitor.domain.detection import OutageGuard, iso
from monitor.domain.messages import format_utc, humanize_duration
from monitor.storage import outbox
from monitor.storage.unit_of_work import Connection, Engine, UnitOfWork

logger = logging.getLogger(__name__)

GUARD_WINDOW = timedelta(days=31)
"""Outages older than this no longer matter to any deadline the evaluator still judges."""


def outage_gap(ttl: timedelta) -> timedelta:
    """How long without a fresh liveness row counts as an outage: 2 × the lease TTL."""
    return 2 * ttl


def merge_window(ttl: timedelta) -> timedelta:
    """Outages separated by less than this are one flapping outage: 2 × the lease TTL.

    An outage that begins before the monitor has been back for one outage span (at least four
    liveness renewals, as ``MONITOR_EVALUATE_INTERVAL`` ≤ TTL/2) extends the previous one
    instead of paging every project again: at most one ``monitor_unavailable`` per project
    per flapping episode; each extension is still logged.
    """
    return 2 * ttl


async def renew(engine: Engine, name: str, roles: str, now: datetime, ttl: timedelta) -> bool:
    """Renew this process's liveness row; record the outage that just ended, if any.

    Returns:
        True when this call recorded an outage (and queued the projects' alerts).
    """
    recorded = False
    async with UnitOfWork.begin(engine) as uow:
        last_seen = await uow.outages.last_renewal()
        if last_seen is not None and now - last_seen > outage_gap(ttl):
            recorded = await _record_outage(uow, last_seen, now, ttl)
        await uow.outages.renew(name, roles, now)
    return recorded


async def _record_outage(uow: UnitOfWork, started: datetime, ended: datetime, ttl: timedelta) -> bool:
    previous = await uow.outages.mergeable(started, started - merge_window(ttl))
    if previous is not None:
        # a flapping monitor: extend the previous outage, alert nobody again
        previous_id, previous_start = previous
        await uow.outages.extend(previous_id, ended)
        logger.warning(
            "monitor outage from %s to %s (merged into the outage from %s: back for less than %s)",
            iso(started),
            iso(ended),
            iso(previous_start),
            humanize_duration(merge_window(ttl).total_seconds()),
            extra={
                "action": "monitor_outage_merged",
                "started": iso(previous_start),
                "ended": iso(ended),
            },
        )
        return False
    if await uow.outages.insert(started, ended) is None:
        return False  # another process recorded it first
    logger.warning(
        "monitor outage from %s to %s",
        iso(started),
        iso(ended),
        extra={"action": "monitor_outage", "started": iso(started), "ended": iso(ended)},
    )
    await _alert_projects(uow, started, ended)
    return True


async def _alert_projects(uow: UnitOfWork, started: datetime, ended: datetime) -> None:
    """One ``monitor_unavailable`` alert per project, queued to its channels that accept it."""
    span = humanize_duration((ended - started).total_seconds())
    title = f"monitor: {AlertKind.MONITOR_UNAVAILABLE.value} — no ping could be received for {span}"
    message = (
        f"The monitor was unavailable from {format_utc(started)} to {format_utc(ended)} ({span}): no HTTP "
        "process was serving, so no ping could be received.\n"
        "Ticks whose grace window ended in that span are marked unknown instead of missed; "
        "check the jobs that should have run then.\n"
    )
    conn = uow.connection
    projects = await uow.outages.project_ids()
    kind = AlertKind.MONITOR_UNAVAILABLE.value
    ids = await outbox.insert_alerts(
        conn,
        [
            outbox.NewAlert(
                project_id=project_id,
                check_id=None,
                key=f"{kind}:{iso(started)}",
                kind=kind,
                created_at=ended,
                title=title,
                message=message,
            )
            for project_id in projects
        ],
    )
    notices: list[outbox.Notice] = []
    for project_id, alert_id in zip(projects, ids, strict=True):
        if alert_id is None:
            continue
        notices.extend(
            outbox.Notice(alert_id=alert_id, channel_id=route.channel_id, due_at=ended)
            for route in await outbox.project_routes(conn, project_id)
            if route.accepts(kind)
        )
    await outbox.enqueue(conn, notices)


async def load_guard(conn: Connection, now: datetime, ttl: timedelta) -> OutageGuard:
    """The outages a sweep at ``now`` must respect, and whether one is going on.

    Args:
        conn: the sweep's open transaction (read only).
        now: the sweep's instant (aware UTC); outages ended more than :data:`GUARD_WINDOW`
            before it are left out.
        ttl: ``MONITOR_LEASE_TTL``.

    With no liveness row at all (a database no HTTP process has served yet, or a test driving
    the services directly) there is nothing to guard.
    """
    last_seen, spans = await UnitOfWork.joining(conn).outages.guard_reads(now - GUARD_WINDOW)
    if last_seen is None:
        return OutageGuard()
    # A deadline is judged only once some HTTP process has been seen alive after it: an outage
    # is only recognised 2 x TTL after it began, and deadlines in those first seconds must wait
    # for it too (else a kill -9 of every API replica still paged for the first tick). Costs at
    # most one liveness interval of alert latency, and nothing to an evaluator in an HTTP
    # process: it renews its liveness just before each sweep it runs.
    return OutageGuard(outages=tuple((s, e) for s, e in spans), seen_until=last_seen)


async def load_ingest_guard(conn: Connection, now: datetime, ttl: timedelta) -> IngestGuard:
    """What the ingest needs to know of outages for pings received up to ``now``.

    A ping that arrives after its tick's grace is late only if the monitor could have received
    it in time: when the grace ended inside a monitor outage the tick is ``unknown`` and no
    ``late`` is raised. The outage may not be recorded yet when the ping is ingested (a stalled
    process ingests the pings queued in the kernel before its liveness loop renews), so the
    freshest liveness renewal is returned too: :meth:`IngestGuard.at` treats a gap longer than
    :func:`outage_gap` up to the ping's arrival as an outage going on.
    """
    last_seen, spans = await UnitOfWork.joining(conn).outages.guard_reads(now - GUARD_WINDOW)
    if last_seen is None:
        return IngestGuard()
    return IngestGuard(outages=tuple((s, e) for s, e in spans), last_seen=last_seen, gap=outage_gap(ttl))


@dataclass(frozen=True, kw_only=True, slots=True)
class IngestGuard:
    """Recorded outages plus the freshest liveness renewal, read once per ingest batch."""

    outages: tuple[tuple[datetime, datetime], ...] = ()
    last_seen: datetime | None = None
    gap: timedelta = timedelta(0)

    def at(self, received: datetime) -> OutageGuard:
        """The guard for a ping received at ``received``: the recorded outages, plus
        ``(last_seen, received]`` when no liveness row was renewed for longer than the gap."""
        spans = self.outages
        if self.last_seen is not None and received - self.last_seen > self.gap:
            spans = (*spans, (self.last_seen, received))
        return OutageGuard(outages=spans)
