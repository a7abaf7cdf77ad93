"""Bounded storage: prune old pings, bodies and history in small batches (Healthchecks-like).

What is kept (settings in :mod:`monitor.settings`):

* pings: the newest ``MONITOR_PING_RETENTION`` (1000) per check, as Healthchecks keeps the last
  N; an older ping stays while it is still needed — it belongs to a run in progress, it is
  a run ping bound to a tick a decision may still look at (:func:`_needed_since`), or it
  carries an ``Idempotency-Key`` younger than the 7 days a repeat is recognised (DESIGN §5);
* ping bodies: ``MONITOR_PING_BODY_RETENTION`` (30 days); the ping row stays, its body goes;
* history: finished runs, judged ticks, flips and alerts (with their notifications and attempts)
  older than ``MONITOR_HISTORY_RETENTION`` (90 days) — but always the newest
  :data:`KEEP_LAST` of each kind per check (a yearly job's last run is older than 90 days and
  still decides how its next run is judged), an alert whose notifications are still open, and
  the alert that opened a check's current down episode.

Pruning walks the checks in id order, :data:`CHECKS_PER_TRANSACTION` at a time, each delete
capped at ``MONITOR_RETENTION_BATCH`` rows, every statement driven by a per-check index; so each
transaction is short and the SQLite writer is free for ingest between them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, exists, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from monitor.domain.clock import Clock
from monitor.failures import FailureLog
from monitor.settings import Settings
from monitor.storage import tables as t
from monitor.storage.outbox import OPEN_STATUSES

logger = logging.getLogger(__name__)

KEEP_LAST = 10
"""Runs, judged ticks, flips and alerts kept per check whatever their age."""

CHECKS_PER_TRANSACTION = 50
"""Checks pruned in one transaction."""

IDEMPOTENCY_WINDOW = timedelta(days=7)
"""How long a ping's ``Idempotency-Key`` is remembered (DESIGN §5); such pings are kept."""

PAUSE_BETWEEN_TRANSACTIONS = 0.02
"""Seconds the background task yields between transactions (ingest's writer goes first)."""

OPEN_NOTIFICATION_STATUSES = OPEN_STATUSES

RUN_PING_KINDS = ("start", "success", "fail", "unknown", "skip")
"""Pings that can satisfy a tick (DESIGN §2 "run pings")."""


@dataclass
class Pruned:
    """Rows removed by one pass (``bodies``: bodies cleared, rows kept)."""

    pings: int = 0
    bodies: int = 0
    runs: int = 0
    ticks: int = 0
    flips: int = 0
    alerts: int = 0

    def total(self) -> int:
        return self.pings + self.bodies + self.runs + self.ticks + self.flips + self.alerts


def _nth_newest(table: Any, order: Any, check_id: int) -> Any:
    """The ``KEEP_LAST``-th newest value of ``order`` for the check (NULL when it has fewer rows)."""
    return (
        select(order)
        .where(table.c.check_id == check_id)
        .order_by(order.desc())
        .limit(1)
        .offset(KEEP_LAST - 1)
        .scalar_subquery()
    )


async def _delete_ids(conn: AsyncConnection, table: Any, ids_query: Any) -> int:
    ids = list((await conn.execute(ids_query)).scalars().all())
    if not ids:
        return 0
    await conn.execute(delete(table).where(table.c.id.in_(ids)))
    return len(ids)


def _needed_since(check: Mapping[Any, Any]) -> datetime | None:
    """The earliest tick a decision about the check may still look at (as
    :func:`monitor.domain.runs.needed_since`): its cursor ``max(watch_from, judged_until)``, and
    for a ``simple`` check its due instant (last run ping + timeout). ``None`` for a new check."""
    marks = [x for x in (check["judged_until"], check["watch_from"]) if x is not None]
    if check["kind"] == "simple" and check["last_run_ping_at"] is not None:
        marks.append(check["last_run_ping_at"] + timedelta(seconds=check["timeout"]))
    return max(marks) if marks else None


async def _prune_check(
    conn: AsyncConnection, check: Mapping[Any, Any], now: datetime, settings: Settings, pruned: Pruned
) -> None:
    check_id = int(check["id"])
    batch = settings.retention_batch
    p, r = t.pings.c, t.runs.c
    cutoff_n = int(check["n_pings"]) - settings.ping_retention
    if cutoff_n > 0:
        cursor = _needed_since(check)
        needed = or_(
            # a run in progress
            exists(select(r.id).where(r.id == p.run_id).where(r.outcome.is_(None))),
            # a run ping bound to a tick not judged yet (log and ign pings never satisfy a tick)
            p.kind.in_(RUN_PING_KINDS)
            & (p.scheduled >= cursor if cursor is not None else p.scheduled.is_not(None)),
            # a repeat of it must still be recognised
            and_(p.idempotency_key.is_not(None), p.received_at > now - IDEMPOTENCY_WINDOW),
        )
        pruned.pings += await _delete_ids(
            conn,
            t.pings,
            select(p.id).where(p.check_id == check_id).where(p.n <= cutoff_n).where(~needed).limit(batch),
        )
    history = now - timedelta(seconds=settings.history_retention)
    if check["created_at"] >= history:
        return  # nothing of it is old enough yet
    pruned.runs += await _delete_ids(
        conn,
        t.runs,
        select(r.id)
        .where(r.check_id == check_id)
        .where(r.outcome.is_not(None))
        .where(r.scheduled < history)
        .where(r.scheduled < _nth_newest(t.runs, r.scheduled, check_id))
        .limit(batch),
    )
    m = t.tick_marks.c
    pruned.ticks += await _delete_ids(
        conn,
        t.tick_marks,
        select(m.id)
        .where(m.check_id == check_id)
        .where(m.scheduled < history)
        .where(m.scheduled < _nth_newest(t.tick_marks, m.scheduled, check_id))
        .limit(batch),
    )
    f = t.flips.c
    pruned.flips += await _delete_ids(
        conn,
        t.flips,
        select(f.id)
        .where(f.check_id == check_id)
        .where(f.created_at < history)
        .where(f.id < _nth_newest(t.flips, f.id, check_id))
        .limit(batch),
    )
    a, n = t.alerts.c, t.notifications.c
    open_notifications = exists(
        select(n.id).where(n.alert_id == a.id).where(n.status.in_(OPEN_NOTIFICATION_STATUSES))
    )
    query = (
        select(a.id)
        .where(a.check_id == check_id)
        .where(a.created_at < history)
        .where(a.id < _nth_newest(t.alerts, a.id, check_id))
        .where(~open_notifications)
        .limit(batch)
    )
    if check["episode_key"]:
        query = query.where(a.key != check["episode_key"])
    pruned.alerts += await _delete_alerts(conn, query)


async def _delete_alerts(conn: AsyncConnection, ids_query: Any) -> int:
    """Delete alerts with their notifications and attempts (explicitly: no reliance on cascades)."""
    ids = list((await conn.execute(ids_query)).scalars().all())
    if not ids:
        return 0
    n = t.notifications.c
    notification_ids = select(n.id).where(n.alert_id.in_(ids))
    await conn.execute(
        delete(t.notification_attempts).where(t.notification_attempts.c.notification_id.in_(notification_ids))
    )
    await conn.execute(delete(t.notifications).where(n.alert_id.in_(ids)))
    await conn.execute(delete(t.alerts).where(t.alerts.c.id.in_(ids)))
    return len(ids)


async def _clear_bodies(
    conn: AsyncConnection, after_id: int, now: datetime, settings: Settings
) -> tuple[int, int]:
    """Clear bodies older than the body retention among the oldest pings after ``after_id``.

    Ping ids grow with arrival, so the walk stops at the first ping younger than the cutoff.

    Returns:
        (bodies cleared, the id to continue after next time).
    """
    p = t.pings.c
    cutoff = now - timedelta(seconds=settings.ping_body_retention)
    rows = (
        await conn.execute(
            select(p.id, p.received_at, p.body.is_not(None).label("has_body"))
            .where(p.id > after_id)
            .order_by(p.id)
            .limit(settings.retention_batch)
        )
    ).all()
    old = [row for row in rows if row.received_at < cutoff]
    if not old:
        return 0, after_id
    ids = [row.id for row in old if row.has_body]
    if ids:
        await conn.execute(update(t.pings).where(p.id.in_(ids)).values(body=None))
    return len(ids), int(old[-1].id)


class Retention:
    """One pruning walk's position, kept between passes (restarts begin from the start)."""

    def __init__(self, engine: AsyncEngine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings
        self.check_cursor = 0
        self.body_cursor = 0

    async def step(self, now: datetime) -> Pruned:
        """One short transaction: the next :data:`CHECKS_PER_TRANSACTION` checks, and one batch
        of bodies. Returns what it removed; the walk wraps around after the last check."""
        pruned = Pruned()
        settings = self.settings
        c = t.checks.c
        history = now - timedelta(seconds=settings.history_retention)
        async with self.engine.begin() as conn:
            checks = (
                (
                    await conn.execute(
                        select(
                            c.id,
                            c.kind,
                            c.timeout,
                            c.n_pings,
                            c.judged_until,
                            c.watch_from,
                            c.last_run_ping_at,
                            c.created_at,
                            c.episode_key,
                        )
                        .where(c.id > self.check_cursor)
                        .where((c.n_pings > settings.ping_retention) | (c.created_at < history))
                        .order_by(c.id)
                        .limit(CHECKS_PER_TRANSACTION)
                    )
                )
                .mappings()
                .all()
            )
            for check in checks:
                await _prune_check(conn, check, now, settings, pruned)
            self.check_cursor = int(checks[-1]["id"]) if len(checks) == CHECKS_PER_TRANSACTION else 0
            pruned.bodies, self.body_cursor = await _clear_bodies(conn, self.body_cursor, now, settings)
        return pruned

    async def pass_(self, now: datetime) -> Pruned:
        """Steps until one whole walk over the checks is done and nothing more is old (tests, CLI)."""
        total = Pruned()
        while True:
            step = await self.step(now)
            for name in ("pings", "bodies", "runs", "ticks", "flips", "alerts"):
                setattr(total, name, getattr(total, name) + getattr(step, name))
            if self.check_cursor == 0 and step.total() == 0:
                return total


async def run_retention(engine: AsyncEngine, settings: Settings, clock: Clock) -> None:
    """The background task: a pruning step, a short pause, again; after a quiet walk, sleep
    ``MONITOR_RETENTION_INTERVAL`` seconds. Failures are logged and retried next round."""
    retention = Retention(engine, settings)
    failures = FailureLog(logger, "retention", action="retention_failed")
    while True:
        try:
            step = await retention.step(clock.now())
        except asyncio.CancelledError:
            raise
        except Exception as error:
            failures.failed(error)
            await asyncio.sleep(settings.retention_interval)
            continue
        failures.succeeded()
        if step.total():
            logger.info(
                "retention pruned %d rows",
                step.total(),
                extra={"action": "retention_pruned", "pings": step.pings, "bodies": step.bodies},
            )
        if retention.check_cursor == 0 and step.total() == 0:
            await asyncio.sleep(settings.retention_interval)
        else:
            await asyncio.sleep(PAUSE_BETWEEN_TRANSACTIONS)
