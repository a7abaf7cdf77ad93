"""Bounded storage: prune old pings, bodies and history in small batches (Healthchecks-like).

What is kept (settings in :mod:`monitor.settings`):

* pings: the newest ``MONITOR_PING_RETENTION`` (1000) per check, as Healthchecks keeps the last
  N; an older ping stays while it is still needed — it belongs to a run in progress, or it is
  a run ping bound to a tick a decision may still look at (:func:`_needed_since`). A pruned
  ping's ``Idempotency-Key`` younger than the 7 days a repeat is recognised (DESIGN §5) stays
  behind in ``ping_keys`` (a client that sends a fresh key with every ping kept 7 days of
  pings before) and is forgotten after those 7 days;
* ping bodies: ``MONITOR_PING_BODY_RETENTION`` (30 days); the ping row stays, its body goes;
* history: finished runs, judged ticks, flips and alerts (with their notifications and attempts)
  older than ``MONITOR_HISTORY_RETENTION`` (90 days) — but always the newest
  :data:`KEEP_LAST` of each kind per check (a yearly job's last run is older than 90 days and
  still decides how its next run is judged), an alert whose notifications are still open, and
  the alert that opened a check's current down episode.

Pruning walks the checks in id order, :data:`CHECKS_PER_TRANSACTION` at a time, each delete
capped at ``MONITOR_RETENTION_BATCH`` rows, every statement driven by a per-check index; so each
transaction is short and the SQLite writer is free for ingest between them. The statements are
the :class:`~monitor.storage.ports.RetentionStore` port's (``uow.retention``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from monitor.domain.clock import Clock
from monitor.domain.pings import IDEMPOTENCY_WINDOW
from monitor.failures import FailureLog
from monitor.settings import Settings
from monitor.storage.ports import RetentionStore
from monitor.storage.unit_of_work import Engine, UnitOfWork

logger = logging.getLogger(__name__)

KEEP_LAST = 10
"""Runs, judged ticks, flips and alerts kept per check whatever their age."""

CHECKS_PER_TRANSACTION = 50
"""Checks pruned in one transaction."""

PAUSE_BETWEEN_TRANSACTIONS = 0.02
"""Seconds the background task yields between transactions (ingest's writer goes first)."""

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
    keys: int = 0

    def total(self) -> int:
        return self.pings + self.bodies + self.runs + self.ticks + self.flips + self.alerts + self.keys


def _needed_since(check: Mapping[str, Any]) -> datetime | None:
    """The earliest tick a decision about the check may still look at (as
    :func:`monitor.domain.runs.needed_since`): its cursor ``max(watch_from, judged_until)``, and
    for a ``simple`` check its due instant (last run ping + timeout). ``None`` for a new check."""
    marks = [x for x in (check["judged_until"], check["watch_from"]) if x is not None]
    if check["kind"] == "simple" and check["last_run_ping_at"] is not None:
        marks.append(check["last_run_ping_at"] + timedelta(seconds=check["timeout"]))
    return max(marks) if marks else None


async def _prune_check(
    store: RetentionStore, check: Mapping[str, Any], now: datetime, settings: Settings, pruned: Pruned
) -> None:
    check_id = int(check["id"])
    batch = settings.retention_batch
    cutoff_n = int(check["n_pings"]) - settings.ping_retention
    if cutoff_n > 0:
        pruned.pings += await store.prune_pings(
            check_id,
            up_to_n=cutoff_n,
            ticks_from=_needed_since(check),
            run_kinds=RUN_PING_KINDS,
            keys_since=now - IDEMPOTENCY_WINDOW,
            limit=batch,
        )
    history = now - timedelta(seconds=settings.history_retention)
    if check["created_at"] >= history:
        return  # nothing of it is old enough yet
    pruned.runs += await store.prune_runs(check_id, before=history, keep_last=KEEP_LAST, limit=batch)
    pruned.ticks += await store.prune_ticks(check_id, before=history, keep_last=KEEP_LAST, limit=batch)
    pruned.flips += await store.prune_flips(check_id, before=history, keep_last=KEEP_LAST, limit=batch)
    # never the alert that opened the check's current down episode
    pruned.alerts += await store.prune_alerts(
        check_id, before=history, keep_last=KEEP_LAST, limit=batch, keep_key=check["episode_key"]
    )


class Retention:
    """One pruning walk's position, kept between passes (restarts begin from the start)."""

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings
        self.check_cursor = 0
        self.body_cursor = 0

    async def step(self, now: datetime) -> Pruned:
        """One short transaction: the next :data:`CHECKS_PER_TRANSACTION` checks, and one batch
        of bodies. Returns what it removed; the walk wraps around after the last check."""
        pruned = Pruned()
        settings = self.settings
        history = now - timedelta(seconds=settings.history_retention)
        async with UnitOfWork.begin(self.engine) as uow:
            store = uow.retention
            checks = await store.candidates(
                self.check_cursor,
                ping_retention=settings.ping_retention,
                created_before=history,
                limit=CHECKS_PER_TRANSACTION,
            )
            for check in checks:
                await _prune_check(store, check, now, settings, pruned)
            self.check_cursor = int(checks[-1]["id"]) if len(checks) == CHECKS_PER_TRANSACTION else 0
            pruned.keys = await store.prune_keys(
                received_before=now - IDEMPOTENCY_WINDOW, limit=settings.retention_batch
            )
            pruned.bodies, self.body_cursor = await store.clear_bodies(
                self.body_cursor,
                received_before=now - timedelta(seconds=settings.ping_body_retention),
                limit=settings.retention_batch,
            )
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


async def run_retention(engine: Engine, settings: Settings, clock: Clock) -> None:
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
