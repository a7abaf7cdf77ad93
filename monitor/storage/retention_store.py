"""SQLAlchemy Core implementation of :class:`~monitor.storage.ports.RetentionStore`.

Dialect-neutral statements on SQLite and PostgreSQL. Each delete first selects at most
``limit`` ids through a per-check index (``uq_pings_check_n``, ``ix_runs_check_scheduled``, the
``check_id`` indexes of tick marks, flips and alerts), then deletes those ids: a batch stays
small whatever the table's size, and the transaction short.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from monitor.storage import history_totals
from monitor.storage import tables as t
from monitor.storage.outbox import OPEN_STATUSES


def _nth_newest(table: Any, order: Any, check_id: int, keep_last: int) -> Any:
    """The ``keep_last``-th newest value of ``order`` for the check (NULL when it has fewer rows)."""
    return (
        select(order)
        .where(table.c.check_id == check_id)
        .order_by(order.desc())
        .limit(1)
        .offset(keep_last - 1)
        .scalar_subquery()
    )


class SqlRetentionStore:
    """:class:`~monitor.storage.ports.RetentionStore` over one unit of work's connection."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def _delete_ids(self, table: Any, ids_query: Any) -> int:
        ids = list((await self.conn.execute(ids_query)).scalars().all())
        if not ids:
            return 0
        await self.conn.execute(delete(table).where(table.c.id.in_(ids)))
        return len(ids)

    async def candidates(
        self, after_id: int, *, ping_retention: int, created_before: datetime, limit: int
    ) -> list[dict[str, Any]]:
        c = t.checks.c
        query = (
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
            .where(c.id > after_id)
            .where((c.n_pings > ping_retention) | (c.created_at < created_before))
            .order_by(c.id)
            .limit(limit)
        )
        return [dict(r) for r in (await self.conn.execute(query)).mappings()]

    async def prune_pings(
        self,
        check_id: int,
        *,
        up_to_n: int,
        ticks_from: datetime | None,
        run_kinds: Sequence[str],
        keys_since: datetime,
        limit: int,
    ) -> int:
        p, r = t.pings.c, t.runs.c
        needed = or_(
            # a run in progress
            exists(select(r.id).where(r.id == p.run_id).where(r.outcome.is_(None))),
            # a run ping bound to a tick not judged yet (log and ign pings never satisfy a tick)
            p.kind.in_(list(run_kinds))
            & (p.scheduled >= ticks_from if ticks_from is not None else p.scheduled.is_not(None)),
        )
        query = (
            select(p.id, p.kind)
            .where(p.check_id == check_id)
            .where(p.n <= up_to_n)
            .where(~needed)
            .limit(limit)
        )
        found = (await self.conn.execute(query)).all()
        if not found:
            return 0
        ids = [ping_id for ping_id, _ in found]
        await history_totals.add_labels(self.conn, history_totals.PINGS, (str(kind) for _, kind in found))
        # a repeat of a pruned ping must still be recognised: its key stays in ping_keys
        await self.conn.execute(
            insert(t.ping_keys).from_select(
                ["check_id", "kind", "key", "response_status", "received_at"],
                select(p.check_id, p.kind, p.idempotency_key, p.response_status, p.received_at)
                .where(p.id.in_(ids))
                .where(p.idempotency_key.is_not(None))
                .where(p.received_at > keys_since),
            )
        )
        await self.conn.execute(delete(t.pings).where(p.id.in_(ids)))
        return len(ids)

    async def prune_keys(self, *, received_before: datetime, limit: int) -> int:
        k = t.ping_keys.c
        return await self._delete_ids(
            t.ping_keys, select(k.id).where(k.received_at <= received_before).order_by(k.id).limit(limit)
        )

    async def prune_runs(self, check_id: int, *, before: datetime, keep_last: int, limit: int) -> int:
        r = t.runs.c
        return await self._delete_ids(
            t.runs,
            select(r.id)
            .where(r.check_id == check_id)
            .where(r.outcome.is_not(None))
            .where(r.scheduled < before)
            .where(r.scheduled < _nth_newest(t.runs, r.scheduled, check_id, keep_last))
            .limit(limit),
        )

    async def prune_ticks(self, check_id: int, *, before: datetime, keep_last: int, limit: int) -> int:
        m = t.tick_marks.c
        return await self._delete_ids(
            t.tick_marks,
            select(m.id)
            .where(m.check_id == check_id)
            .where(m.scheduled < before)
            .where(m.scheduled < _nth_newest(t.tick_marks, m.scheduled, check_id, keep_last))
            .limit(limit),
        )

    async def prune_flips(self, check_id: int, *, before: datetime, keep_last: int, limit: int) -> int:
        f = t.flips.c
        return await self._delete_ids(
            t.flips,
            select(f.id)
            .where(f.check_id == check_id)
            .where(f.created_at < before)
            .where(f.id < _nth_newest(t.flips, f.id, check_id, keep_last))
            .limit(limit),
        )

    async def prune_alerts(
        self, check_id: int, *, before: datetime, keep_last: int, limit: int, keep_key: str | None = None
    ) -> int:
        a, n = t.alerts.c, t.notifications.c
        open_notifications = exists(select(n.id).where(n.alert_id == a.id).where(n.status.in_(OPEN_STATUSES)))
        query = (
            select(a.id)
            .where(a.check_id == check_id)
            .where(a.created_at < before)
            .where(a.id < _nth_newest(t.alerts, a.id, check_id, keep_last))
            .where(~open_notifications)
            .limit(limit)
        )
        if keep_key:
            query = query.where(a.key != keep_key)
        found = (await self.conn.execute(query.add_columns(a.kind))).all()
        if not found:
            return 0
        ids = [alert_id for alert_id, _ in found]
        notification_ids = select(n.id).where(n.alert_id.in_(ids))
        attempts = t.notification_attempts.c
        results = await self.conn.execute(
            select(attempts.ok, func.count())
            .where(attempts.notification_id.in_(notification_ids))
            .group_by(attempts.ok)
        )
        await history_totals.add(
            self.conn, history_totals.ATTEMPTS, {history_totals.result_label(ok): int(c) for ok, c in results}
        )
        await history_totals.add_labels(self.conn, history_totals.ALERTS, (str(kind) for _, kind in found))
        await self.conn.execute(
            delete(t.notification_attempts).where(
                t.notification_attempts.c.notification_id.in_(notification_ids)
            )
        )
        await self.conn.execute(delete(t.notifications).where(n.alert_id.in_(ids)))
        await self.conn.execute(delete(t.alerts).where(a.id.in_(ids)))
        return len(ids)

    async def clear_bodies(self, after_id: int, *, received_before: datetime, limit: int) -> tuple[int, int]:
        p = t.pings.c
        rows = (
            await self.conn.execute(
                select(p.id, p.received_at, p.body.is_not(None).label("has_body"))
                .where(p.id > after_id)
                .order_by(p.id)
                .limit(limit)
            )
        ).all()
        old = [row for row in rows if row.received_at < received_before]
        if not old:
            return 0, after_id
        ids = [row.id for row in old if row.has_body]
        if ids:
            await self.conn.execute(update(t.pings).where(p.id.in_(ids)).values(body=None))
        return len(ids), int(old[-1].id)
