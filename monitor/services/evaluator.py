"""Due work: judge what time has decided for checks whose ``next_due`` has passed (DESIGN §6).

A sweep costs O(due checks): it selects ``next_due < now`` through ``ix_checks_next_due`` in
batches, locks those rows (PostgreSQL ``FOR UPDATE``, in id order, like the ingest), runs the
pure :func:`monitor.domain.detection.evaluate` and writes the effects in the same transaction.
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.domain import detection
from monitor.domain.runs import needed_since
from monitor.services.effects import CheckIdentity, PendingWrites, record_alerts
from monitor.services.ingest import lock_checks
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
) -> int:
    """Evaluate every check with ``next_due < now``.

    Args:
        engine: the database.
        now: the instant to judge at (aware UTC; injected, never read here).
        settings: for ``base_url`` in alert messages.
        batch: checks per transaction.
        token: fencing token recorded on the flips and alerts written.
        shard: ``(index, count)``: only checks with ``check id % count == index`` (reserved
            for sharded evaluation).

    Returns:
        How many checks were evaluated.
    """
    total = 0
    for _ in range(MAX_ROUNDS):
        async with engine.begin() as conn:
            query = select(t.checks.c.id).where(t.checks.c.next_due < now)
            if shard is not None:
                query = query.where(t.checks.c.id % shard[1] == shard[0])
            ids = (await conn.execute(query.order_by(t.checks.c.next_due).limit(batch))).scalars().all()
            if not ids:
                return total
            rows = {
                cid: row for cid, row in (await lock_checks(conn, ids)).items() if row["next_due"] is not None
            }
            rows = {cid: row for cid, row in rows.items() if row["next_due"] < now}
            specs = {cid: repositories.spec_of(row) for cid, row in rows.items()}
            states = {cid: repositories.state_of(row) for cid, row in rows.items()}
            cutoffs = {cid: needed_since(specs[cid], s) for cid, s in states.items()}
            books = await repositories.load_books(conn, cutoffs)
            pending = PendingWrites.empty()
            updates = []
            for cid, row in rows.items():
                state = states[cid]
                fx = detection.evaluate(specs[cid], state, books[cid], now)
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
