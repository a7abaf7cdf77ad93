"""Alembic migrations produce exactly ``monitor.storage.tables.metadata`` (DESIGN §10).

On SQLite and PostgreSQL: upgrade to head leaves no autogenerate diff, downgrade to base
removes every table and upgrading again round-trips, and migrating twice is a no-op.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from monitor.storage import tables as t
from monitor.storage.engine import downgrade, make_engine, migrate
from monitor.storage.tables import metadata


def _diff(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(
        connection, opts={"compare_type": True, "compare_server_default": False, "render_as_batch": True}
    )
    return list(compare_metadata(context, metadata))


def _tables(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names())


def _schema(connection: Connection) -> dict[str, Any]:
    inspector = inspect(connection)
    out: dict[str, Any] = {}
    for table in sorted(inspector.get_table_names()):
        out[table] = {
            "columns": [(c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns(table)],
            "indexes": sorted(
                (i["name"] or "", tuple(i["column_names"])) for i in inspector.get_indexes(table)
            ),
            "uniques": sorted(
                (u["name"] or "", tuple(u["column_names"])) for u in inspector.get_unique_constraints(table)
            ),
            "fks": sorted(
                (f["name"] or "", tuple(f["constrained_columns"])) for f in inspector.get_foreign_keys(table)
            ),
            "pk": tuple(inspector.get_pk_constraint(table)["constrained_columns"]),
        }
    return out


async def _version(engine: AsyncEngine) -> str | None:
    async with engine.connect() as conn:
        return (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar_one_or_none()


async def test_head_matches_metadata_and_round_trips(empty_database_url: str) -> None:
    engine = make_engine(empty_database_url)
    try:
        await migrate(engine)
        async with engine.connect() as conn:
            assert await conn.run_sync(_diff) == []
            tables = await conn.run_sync(_tables)
            before = await conn.run_sync(_schema)
        assert set(metadata.tables) <= tables
        head = await _version(engine)
        assert head is not None

        # Migrating again changes nothing.
        await migrate(engine)
        assert await _version(engine) == head
        async with engine.connect() as conn:
            assert await conn.run_sync(_schema) == before

        # Down to base: no table of ours is left.
        await downgrade(engine, "base")
        async with engine.connect() as conn:
            left = await conn.run_sync(_tables)
        assert left & set(metadata.tables) == set()
        assert await _version(engine) is None

        # And up again: the same schema, still no diff.
        await migrate(engine)
        assert await _version(engine) == head
        async with engine.connect() as conn:
            assert await conn.run_sync(_diff) == []
            assert await conn.run_sync(_schema) == before
    finally:
        await engine.dispose()


async def test_concurrent_migrations_apply_once(empty_database_url: str) -> None:
    """Replicas starting together migrate once (PostgreSQL: advisory lock; SQLite: one writer)."""
    engines = [make_engine(empty_database_url) for _ in range(3)]
    try:
        await asyncio.gather(*(migrate(e) for e in engines))
        async with engines[0].connect() as conn:
            assert await conn.run_sync(_diff) == []
            count = (await conn.execute(text("SELECT count(*) FROM alembic_version"))).scalar_one()
        assert count == 1
    finally:
        for engine in engines:
            await engine.dispose()


async def test_instants_keep_their_value_when_they_become_timestamptz_and_back(
    empty_database_url: str,
) -> None:
    """Revision 0020 turns PostgreSQL's naive UTC ``timestamp`` columns into ``timestamptz``:
    a stored instant is read as UTC whatever the migrating session's ``TimeZone`` (here Berlin),
    and the downgrade gives back the same naive UTC value. SQLite stores the same text before
    and after."""
    engine = make_engine(empty_database_url)
    berlin = (
        create_async_engine(
            empty_database_url, connect_args={"server_settings": {"TimeZone": "Europe/Berlin"}}
        )
        if empty_database_url.startswith("postgresql")
        else engine
    )
    try:
        await migrate(engine)
        await downgrade(engine, "0019")
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO leases (name, token, holder, expires_at)"
                    " VALUES ('l', 1, 'h', '2026-03-29 01:00:00.000000')"
                )
            )
        await migrate(berlin)
        async with engine.connect() as conn:
            at = (await conn.execute(select(t.leases.c.expires_at))).scalar_one()
        assert at == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
        assert at.utcoffset() == timedelta(0)

        await downgrade(berlin, "0019")
        async with engine.connect() as conn:
            raw = (await conn.execute(text("SELECT expires_at FROM leases"))).scalar_one()
        naive = datetime(2026, 3, 29, 1, 0)
        assert raw == (naive if empty_database_url.startswith("postgresql") else "2026-03-29 01:00:00.000000")
    finally:
        await engine.dispose()
        await berlin.dispose()
