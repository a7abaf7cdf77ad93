"""Throwaway databases for the benchmark scripts (loopback PostgreSQL or a SQLite file)."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PG_ADMIN_URL = os.environ.get(
    "MONITOR_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)


async def _pg_admin(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN_URL.replace("postgresql+asyncpg://", "postgresql://"), timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@contextmanager
def database(backend: str, directory: Path, prefix: str = "monitor_bench") -> Iterator[str]:
    """A database URL: a SQLite file in ``directory``, or a new PostgreSQL database dropped after."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{directory / 'monitor.db'}"
        return
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    asyncio.run(_pg_admin(f'CREATE DATABASE "{name}"'))
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@contextmanager
def scratch_database(backend: str, prefix: str) -> Iterator[str]:
    """:func:`database` in a temporary directory of its own, removed afterwards."""
    work = Path(tempfile.mkdtemp(prefix=prefix.replace("_", "-") + "-"))
    try:
        with database(backend, work, prefix=prefix) as url:
            yield url
    finally:
        shutil.rmtree(work, ignore_errors=True)
