"""hold_migration_lock (monitor.storage.engine) on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.storage.engine import MIGRATION_LOCK_KEY, hold_migration_lock


async def test_the_migration_lock_is_held_until_the_transaction_ends(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await hold_migration_lock(conn)  # SQLite: nothing to take (BEGIN IMMEDIATE already)
        if engine.dialect.name == "postgresql":
            async with engine.connect() as other:
                taken = await other.execute(
                    text("SELECT pg_try_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
                )
                assert taken.scalar_one() is False
    async with engine.begin() as again:  # released with the transaction: taken again at once
        await asyncio.wait_for(hold_migration_lock(again), timeout=30)
