"""The maintenance windows (:class:`~monitor.storage.ports.MaintenanceStore`) on SQLite and
PostgreSQL: dialect-neutral Core statements."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from monitor.domain import messages
from monitor.storage import tables as t
from monitor.storage.outbox import OPEN_STATUSES, OutboxStatus


class SqlMaintenanceStore:
    """:class:`~monitor.storage.ports.MaintenanceStore` over one open connection."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def check_id(self, project_id: int, uuid: str) -> int | None:
        found: int | None = (
            await self.conn.execute(
                select(t.checks.c.id)
                .where(t.checks.c.project_id == project_id)
                .where(t.checks.c.uuid == uuid)
                # a window about to reference the check: a concurrent delete waits (PostgreSQL)
                .with_for_update(read=True, key_share=True)
            )
        ).scalar_one_or_none()
        return found

    async def insert(self, values: Mapping[str, Any]) -> None:
        await self.conn.execute(t.maintenance_windows.insert().values(dict(values)))

    async def windows(self, project_id: int, window_id: str | None = None) -> list[dict[str, Any]]:
        w = t.maintenance_windows.c
        query = (
            select(t.maintenance_windows, t.checks.c.uuid.label("check_uuid"))
            .outerjoin(t.checks, t.checks.c.id == w.check_id)
            .where(w.project_id == project_id)
            .order_by(w.created_at, w.id)
        )
        if window_id is not None:
            query = query.where(w.id == window_id)
        return [dict(r) for r in (await self.conn.execute(query)).mappings().all()]

    async def suppress_held_back(
        self,
        project_id: int,
        check_id: int | None,
        since: datetime,
        until: datetime,
        now: datetime,
        reason: str,
    ) -> int:
        a, n = t.alerts.c, t.notifications.c
        in_scope = (
            select(a.id)
            .where(a.project_id == project_id)
            .where(a.created_at >= since)
            .where(a.created_at < until)
            .where(a.kind != messages.MAINTENANCE)
        )
        if check_id is not None:
            in_scope = in_scope.where(a.check_id == check_id)
        result = await self.conn.execute(
            update(t.notifications)
            .where(n.alert_id.in_(in_scope))
            .where(n.status.in_(OPEN_STATUSES))
            .where(or_(n.claimed_until.is_(None), n.claimed_until < now))
            .values(status=OutboxStatus.SUPPRESSED, last_error=reason)
        )
        return int(result.rowcount or 0)

    async def delete(self, window_id: str) -> None:
        await self.conn.execute(delete(t.maintenance_windows).where(t.maintenance_windows.c.id == window_id))
