"""Worker replicas announce themselves with heartbeats, so each can take a fair share of the
shards (DESIGN §6): ``ceil(shards / live replicas)``.

A replica is live while its row was renewed within one lease TTL and no survivor has found it
dead (:func:`forget`: a lease its row still names is free); rows of replicas dead for long are
pruned by the survivors.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from monitor.storage import repositories
from monitor.storage import tables as t

PRUNE_AFTER_TTLS = 10
"""A replica row older than this many TTLs is deleted (it cannot come back with that name)."""


async def announce(engine: AsyncEngine, name: str, role: str, now: datetime, ttl: timedelta) -> int:
    """Renew replica ``name``'s heartbeat and count the live replicas of ``role``.

    Args:
        engine: the database.
        name: the replica, ``<host>:<pid>``.
        role: ``"evaluator"``.
        now: the current instant (aware UTC).
        ttl: the lease TTL: a replica renewed within it is live.

    Returns:
        How many replicas of ``role`` are live, this one included (at least 1).
    """
    async with engine.begin() as conn:
        renewed = await conn.execute(
            update(t.replicas).where(t.replicas.c.name == name).values(role=role, renewed_at=now)
        )
        if renewed.rowcount == 0:
            await conn.execute(
                repositories.insert_ignoring_conflicts(conn, t.replicas).values(
                    name=name, role=role, renewed_at=now
                )
            )
        await conn.execute(delete(t.replicas).where(t.replicas.c.renewed_at < now - ttl * PRUNE_AFTER_TTLS))
        live = (
            await conn.execute(
                select(func.count())
                .select_from(t.replicas)
                .where(t.replicas.c.role == role)
                .where(t.replicas.c.renewed_at >= now - ttl)
                .where(t.replicas.c.name != name)
            )
        ).scalar_one()
    return int(live) + 1


async def retire(engine: AsyncEngine, name: str) -> None:
    """Remove replica ``name`` (clean shutdown), so the others' fair share grows at once.

    Waits at most :data:`monitor.storage.leases.SHUTDOWN_WAIT` for a locked SQLite file (raises
    then: the row goes stale within a TTL anyway)."""
    from monitor.storage.leases import brief_transaction

    async with brief_transaction(engine) as conn:
        await conn.execute(delete(t.replicas).where(t.replicas.c.name == name))


async def live(conn: AsyncConnection, role: str, now: datetime, ttl: timedelta) -> set[str]:
    """Names of the replicas of ``role`` renewed within ``ttl`` before ``now``."""
    rows = await conn.execute(
        select(t.replicas.c.name).where(t.replicas.c.role == role).where(t.replicas.c.renewed_at >= now - ttl)
    )
    return {name for (name,) in rows.all()}


async def forget(engine: AsyncEngine, names: Iterable[str]) -> list[str]:
    """Remove the rows of replicas found dead before their heartbeat aged one TTL.

    A replica whose lease (row still naming it) is no longer held — on PostgreSQL its session
    ended, on SQLite its expiry passed — holds nothing any more; counting it live until its
    heartbeat ages would keep the fair share too small for the survivors to take its shards.
    A replica that was only stalled announces itself again on its next round.

    Args:
        engine: the database.
        names: the replicas, ``<host>:<pid>``.

    Returns:
        The names whose rows were deleted (sorted).
    """
    wanted = sorted(set(names))
    if not wanted:
        return []
    async with engine.begin() as conn:
        present = (
            (await conn.execute(select(t.replicas.c.name).where(t.replicas.c.name.in_(wanted))))
            .scalars()
            .all()
        )
        if present:
            await conn.execute(delete(t.replicas).where(t.replicas.c.name.in_(list(present))))
    return sorted(present)
