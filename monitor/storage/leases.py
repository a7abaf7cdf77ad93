"""Leases with fencing tokens, by conditional update (works on SQLite and PostgreSQL).

A lease row names a piece of exclusive work; taking it over from another holder (or an
expired one) increments ``token``, so the token only ever grows and a stale holder's writes
can be refused. (Issue 5 adds PostgreSQL advisory locks and shards on top of this.)
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.storage import repositories
from monitor.storage import tables as t


async def acquire(engine: AsyncEngine, name: str, holder: str, ttl: timedelta, now: datetime) -> int | None:
    """Take or renew lease ``name`` for ``holder`` until ``now + ttl``.

    Returns:
        The fencing token while ``holder`` holds the lease, else ``None``.
    """
    async with engine.begin() as conn:
        await conn.execute(
            repositories.insert_ignoring_conflicts(conn, t.leases).values(
                name=name, holder=None, token=0, expires_at=None
            )
        )
        renewed = await conn.execute(
            update(t.leases)
            .where(t.leases.c.name == name)
            .where(t.leases.c.holder == holder)
            .where(t.leases.c.expires_at >= now)
            .values(expires_at=now + ttl)
        )
        if renewed.rowcount != 1:
            taken = await conn.execute(
                update(t.leases)
                .where(t.leases.c.name == name)
                .where(
                    or_(
                        t.leases.c.holder.is_(None),
                        t.leases.c.expires_at.is_(None),
                        t.leases.c.expires_at < now,
                    )
                )
                .values(holder=holder, token=t.leases.c.token + 1, expires_at=now + ttl)
            )
            if taken.rowcount != 1:
                return None
        token = (await conn.execute(select(t.leases.c.token).where(t.leases.c.name == name))).scalar_one()
        return int(token)


async def release(engine: AsyncEngine, name: str, holder: str) -> None:
    """Give the lease up at once (clean shutdown), if ``holder`` still holds it."""
    async with engine.begin() as conn:
        await conn.execute(
            update(t.leases)
            .where(t.leases.c.name == name)
            .where(t.leases.c.holder == holder)
            .values(expires_at=None, holder=None)
        )


async def list_leases(engine: AsyncEngine) -> list[dict[str, object]]:
    async with engine.connect() as conn:
        rows = (await conn.execute(select(t.leases).order_by(t.leases.c.name))).mappings().all()
    return [
        {
            "name": r["name"],
            "holder": r["holder"],
            "token": r["token"],
            "expires_at": r["expires_at"].strftime("%Y-%m-%dT%H:%M:%SZ") if r["expires_at"] else None,
        }
        for r in rows
    ]
