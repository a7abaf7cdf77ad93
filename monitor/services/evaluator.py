"""Due work: judge what time has decided for checks whose ``next_due`` has passed (DESIGN §6).

A sweep costs O(due checks): it selects ``next_due < now`` through ``ix_checks_next_due`` (or
``ix_checks_shard_next_due`` for one shard) in batches, locks those rows (PostgreSQL
``FOR UPDATE``, in id order, like the ingest), runs the pure
:func:`monitor.domain.detection.evaluate` and writes the effects in the same transaction.
Under a lease, every transaction first runs the caller's fence (the lease's fencing check), so
a writer whose lease was taken over writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from monitor.domain import detection
from monitor.domain.runs import needed_since
from monitor.services.effects import CheckIdentity, PendingWrites, record_alerts
from monitor.services.ingest import lock_checks
from monitor.services.outages import load_guard
from monitor.settings import Settings
from monitor.storage import repositories
from monitor.storage import tables as t

logger = logging.getLogger(__name__)

MAX_ROUNDS = 100
"""Batches per sweep; a sweep that still has work leaves it for the next one."""


async def evaluate_due(
    engine: AsyncEngine,
    now: datetime,
    *,
    settings: Settings,
    batch: int = 200,
    token: int | None = None,
    shard: tuple[int, int] | None = None,
    fence: Callable[[AsyncConnection], Awaitable[None]] | None = None,
) -> int:
    """Evaluate every check with ``next_due < now``.

    Args:
        engine: the database.
        now: the instant to judge at (aware UTC; injected, never read here).
        settings: for ``base_url`` in alert messages.
        batch: checks per transaction.
        token: fencing token recorded on the flips and alerts written.
        shard: ``(index, count)``: only checks of shard ``index`` (stored ``checks.shard``,
            ``uuid.int % count``, DESIGN §6).
        fence: awaited first in every transaction (even one that finds nothing due); raises
            to abort it, e.g. :func:`monitor.storage.leases.check_fence` raising
            :class:`~monitor.domain.errors.StaleLease`.

    Returns:
        How many checks were evaluated.

    Raises:
        StaleLease: from ``fence``; the transaction in progress was rolled back.
    """
    total = 0
    for _ in range(MAX_ROUNDS):
        async with engine.begin() as conn:
            if fence is not None:
                await fence(conn)
            query = select(t.checks.c.id).where(t.checks.c.next_due < now)
            if shard is not None:
                query = query.where(t.checks.c.shard == shard[0])
            ids = (await conn.execute(query.order_by(t.checks.c.next_due).limit(batch))).scalars().all()
            if not ids:
                return total
            rows = {
                cid: row for cid, row in (await lock_checks(conn, ids)).items() if row["next_due"] is not None
            }
            rows = {cid: row for cid, row in rows.items() if row["next_due"] < now}
            guard = await load_guard(conn, now, timedelta(seconds=settings.lease_ttl))
            specs = {cid: repositories.spec_of(row) for cid, row in rows.items()}
            states = {cid: repositories.state_of(row) for cid, row in rows.items()}
            cutoffs = {cid: needed_since(specs[cid], s) for cid, s in states.items()}
            books = await repositories.load_books(conn, cutoffs)
            pending = PendingWrites.empty()
            updates = []
            for cid, row in rows.items():
                state = states[cid]
                fx = detection.evaluate(specs[cid], state, books[cid], now, guard=guard)
                pending.add(cid, fx, token=token)
                if fx.alerts:
                    await record_alerts(
                        conn,
                        CheckIdentity.of(row),
                        fx.alerts,
                        now=now,
                        status=detection.status(state, now),
                        base_url=settings.base_url,
                        token=token,
                    )
                values = repositories.state_values(state)
                values["b_id"] = cid
                updates.append(values)
            await pending.write(conn)
            await repositories.save_state(conn, updates)
        total += len(rows)
        if len(ids) < batch:
            return total
    return total
