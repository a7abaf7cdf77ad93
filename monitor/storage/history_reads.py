"""SQLAlchemy Core implementation of :class:`~monitor.storage.ports.HistoryReads`.

Dialect-neutral statements (SQLite and PostgreSQL alike), each driven by a per-check index:
``uq_pings_check_n``, ``ix_runs_check_scheduled``, the ``check_id`` indexes of flips, alerts
and tick marks.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from monitor.storage import tables as t

_PING_COLUMNS = [c for c in t.pings.c if c.name != "body"]


class SqlHistoryReads:
    """:class:`~monitor.storage.ports.HistoryReads` over one unit of work's connection."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def pings(self, check_id: int, limit: int, *, before: int | None = None) -> list[dict[str, Any]]:
        p = t.pings.c
        has_body = (func.coalesce(func.length(p.body), 0) > 0).label("has_body")
        query = select(*_PING_COLUMNS, has_body).where(p.check_id == check_id)
        if before is not None:
            query = query.where(p.n < before)
        rows = (await self.conn.execute(query.order_by(p.n.desc()).limit(limit))).mappings().all()
        return [{**r, "has_body": bool(r["has_body"])} for r in rows]

    async def ping_body(self, check_id: int, n: int) -> bytes | None:
        p = t.pings.c
        body = (
            await self.conn.execute(select(p.body).where(p.check_id == check_id).where(p.n == n))
        ).scalar_one_or_none()
        return None if body is None else bytes(body)

    async def flips(
        self,
        check_id: int,
        limit: int,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        before: int | None = None,
    ) -> list[dict[str, Any]]:
        f = t.flips.c
        query = select(t.flips).where(f.check_id == check_id)
        if since is not None:
            query = query.where(f.created_at >= since)
        if until is not None:
            query = query.where(f.created_at < until)
        if before is not None:
            query = query.where(f.id < before)
        rows = (await self.conn.execute(query.order_by(f.id.desc()).limit(limit))).mappings().all()
        return [dict(r) for r in rows]

    async def runs(
        self,
        check_id: int,
        limit: int,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        after: tuple[datetime, datetime, str] | None = None,
    ) -> list[dict[str, Any]]:
        r_ = t.runs.c
        query = select(t.runs).where(r_.check_id == check_id)
        if since is not None:
            query = query.where(r_.scheduled >= since)
        if until is not None:
            query = query.where(r_.scheduled <= until)
        if after is not None:
            scheduled, first, run_id = after
            query = query.where(
                or_(
                    r_.scheduled < scheduled,
                    and_(r_.scheduled == scheduled, r_.first_ping_at < first),
                    and_(r_.scheduled == scheduled, r_.first_ping_at == first, r_.id < run_id),
                )
            )
        order = (r_.scheduled.desc(), r_.first_ping_at.desc(), r_.id.desc())
        rows = (await self.conn.execute(query.order_by(*order).limit(limit))).mappings().all()
        return [dict(r) for r in rows]

    async def alerts(self, check_id: int, limit: int, *, before: int | None = None) -> list[dict[str, Any]]:
        a = t.alerts.c
        query = select(t.alerts).where(a.check_id == check_id)
        if before is not None:
            query = query.where(a.id < before)
        rows = (await self.conn.execute(query.order_by(a.id.desc()).limit(limit))).mappings().all()
        return [dict(r) for r in rows]

    async def notifications(self, alert_ids: Sequence[int]) -> list[tuple[int, str, str, int, str | None]]:
        if not alert_ids:
            return []
        n = t.notifications.c
        found = await self.conn.execute(
            select(n.alert_id, n.channel_id, n.status, n.attempts, n.last_error)
            .where(n.alert_id.in_(list(alert_ids)))
            .order_by(n.id)
        )
        return [(int(a), str(c), str(s), int(k), e) for a, c, s, k, e in found]

    async def all_runs(self, check_id: int) -> list[dict[str, Any]]:
        rows = (await self.conn.execute(select(t.runs).where(t.runs.c.check_id == check_id))).mappings()
        return [dict(r) for r in rows]

    async def tick_marks(self, check_id: int) -> list[dict[str, Any]]:
        m = t.tick_marks
        rows = (await self.conn.execute(select(m).where(m.c.check_id == check_id))).mappings()
        return [dict(r) for r in rows]

    async def alert_ticks(self, check_id: int) -> list[tuple[str, datetime | None]]:
        a = t.alerts.c
        found = await self.conn.execute(
            select(a.kind, a.scheduled).where(a.check_id == check_id).order_by(a.id)
        )
        return [(str(kind), scheduled) for kind, scheduled in found]
