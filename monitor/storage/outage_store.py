"""The :class:`~monitor.storage.ports.OutageStore` port on SQLite and PostgreSQL.

Liveness rows and recorded monitor outages (DESIGN §6 self-outage guard). Dialect-neutral Core;
the only dialect difference is ``INSERT … ON CONFLICT DO NOTHING``
(:func:`monitor.storage.repositories.insert_ignoring_conflicts`), which makes a concurrent
insert of the same liveness name, or of the same outage ``started_at``, a no-op.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from monitor.storage import repositories
from monitor.storage import tables as t

# read by every ingest batch (the outage guard): built once, not per call
_LAST_RENEWAL = select(func.max(t.liveness.c.renewed_at))
_SPANS_SINCE = select(t.outages.c.started_at, t.outages.c.ended_at).where(
    t.outages.c.ended_at >= bindparam("since")
)

_RENEWAL = select(func.max(t.liveness.c.renewed_at).label("renewed")).subquery("renewal")
_GUARD_READS = (
    select(_RENEWAL.c.renewed, t.outages.c.started_at, t.outages.c.ended_at)
    .select_from(
        _RENEWAL.outerjoin(
            t.outages, and_(_RENEWAL.c.renewed.is_not(None), t.outages.c.ended_at >= bindparam("since"))
        )
    )
    .order_by(t.outages.c.started_at)
)
""":meth:`SqlOutageStore.guard_reads`: the one row of the latest renewal, joined with each
outage that ended since (a ``NULL`` outage when none did, or when there is no renewal)."""


class SqlOutageStore:
    """:class:`~monitor.storage.ports.OutageStore` over one unit of work's connection."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def last_renewal(self) -> datetime | None:
        found = await self.conn.execute(_LAST_RENEWAL)
        value: datetime | None = found.scalar_one_or_none()
        return value

    async def renew(self, name: str, roles: str, now: datetime) -> None:
        result = await self.conn.execute(
            update(t.liveness).where(t.liveness.c.name == name).values(renewed_at=now, roles=roles)
        )
        if result.rowcount == 0:
            await self.conn.execute(
                repositories.insert_ignoring_conflicts(self.conn, t.liveness).values(
                    name=name, roles=roles, renewed_at=now
                )
            )

    async def spans_since(self, since: datetime) -> list[tuple[datetime, datetime]]:
        rows = await self.conn.execute(_SPANS_SINCE, {"since": since})
        return [(started, ended) for started, ended in rows]

    async def guard_reads(self, since: datetime) -> tuple[datetime | None, list[tuple[datetime, datetime]]]:
        rows = (await self.conn.execute(_GUARD_READS, {"since": since})).all()
        spans = [(started, ended) for _, started, ended in rows if started is not None]
        return rows[0][0], spans

    async def mergeable(self, started: datetime, ended_since: datetime) -> tuple[int, datetime] | None:
        o = t.outages.c
        row = (
            await self.conn.execute(
                select(o.id, o.started_at)
                .where(o.ended_at >= ended_since)
                .where(o.started_at < started)
                .order_by(o.ended_at.desc())
                .limit(1)
            )
        ).first()
        return None if row is None else (int(row[0]), row[1])

    async def extend(self, outage_id: int, ended: datetime) -> None:
        o = t.outages.c
        await self.conn.execute(
            update(t.outages).where(o.id == outage_id).where(o.ended_at < ended).values(ended_at=ended)
        )

    async def insert(self, started: datetime, ended: datetime) -> int | None:
        inserted = (
            await self.conn.execute(
                repositories.insert_ignoring_conflicts(self.conn, t.outages)
                .values(started_at=started, ended_at=ended)
                .returning(t.outages.c.id)
            )
        ).scalar_one_or_none()
        return None if inserted is None else int(inserted)

    async def project_ids(self) -> list[int]:
        rows = await self.conn.execute(select(t.projects.c.id).order_by(t.projects.c.id))
        return [int(r) for r in rows.scalars()]
