"""Shared fixtures: real databases (SQLite file and PostgreSQL), an injected clock, the app.

PostgreSQL is required (DESIGN §11): an unreachable server fails the suite, it never skips.
Each test that asks for ``database_url`` runs once per backend; PostgreSQL tests share one
migrated database, emptied before each test.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.app import create_app
from monitor.domain.clock import FrozenClock
from monitor.services import projects
from monitor.settings import Settings
from monitor.storage.engine import make_engine, migrate

PG_ADMIN_URL = os.environ.get(
    "MONITOR_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)
RUN_ID = uuid.uuid4().hex[:8]


def _dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


def _with_database(url: str, name: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + name


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(_dsn(PG_ADMIN_URL), timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def pg_shared() -> Iterator[str]:
    """One migrated PostgreSQL database for this test session; dropped at the end."""
    name = f"monitor_test_{RUN_ID}"

    async def setup() -> None:
        try:
            await _admin(f'CREATE DATABASE "{name}"')
        except (OSError, asyncpg.PostgresError) as error:
            raise RuntimeError(f"PostgreSQL at {PG_ADMIN_URL} is required for the tests: {error}") from error
        engine = make_engine(_with_database(PG_ADMIN_URL, name))
        try:
            await migrate(engine)
        finally:
            await engine.dispose()

    asyncio.run(setup())
    yield _with_database(PG_ADMIN_URL, name)
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


_EMPTYING: dict[str, str] = {}
"""Per database URL: the SQL that empties it (:func:`_truncate`), found once per session."""


def _children_first(tables: list[str], parents: dict[str, set[str]]) -> list[str]:
    """``tables`` ordered so that every table comes before the tables its foreign keys refer to
    (``parents``: table → the tables it refers to)."""
    ordered: list[str] = []
    seen: set[str] = set()

    def visit(table: str) -> None:
        if table in seen:
            return
        seen.add(table)
        for child in sorted(c for c in tables if table in parents.get(c, set()) and c != table):
            visit(child)
        ordered.append(table)

    for table in sorted(tables):
        visit(table)
    return ordered  # post-order: each table after every table that refers to it


async def _emptying_sql(conn: asyncpg.Connection) -> str:
    tables = [
        row["tablename"]
        for row in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        if row["tablename"] != "alembic_version"
    ]
    parents: dict[str, set[str]] = {}
    for row in await conn.fetch(
        "SELECT conrelid::regclass::text AS child, confrelid::regclass::text AS parent"
        " FROM pg_constraint WHERE contype = 'f' AND connamespace = 'public'::regnamespace"
    ):
        parents.setdefault(row["child"], set()).add(row["parent"])
    sequences = [
        row["sequencename"]
        for row in await conn.fetch("SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'")
    ]
    ordered = _children_first(tables, parents)
    if set(ordered) != set(tables) or len(ordered) != len(tables):
        raise AssertionError(f"cannot order the tables for deleting: {tables} {parents}")
    return "; ".join(
        [f"DELETE FROM {table}" for table in ordered]
        + [f"ALTER SEQUENCE {name} RESTART" for name in sequences]
    )


async def _truncate(url: str) -> None:
    """Empty the database at ``url`` and restart its sequences, as ``TRUNCATE … RESTART IDENTITY``
    would: DELETE, children before parents, in one round trip. TRUNCATE of every table cost
    ~70 ms a test (each table gets new files), DELETE of the few rows a test leaves ~2 ms."""
    conn = await asyncpg.connect(_dsn(url), timeout=10)
    try:
        if url not in _EMPTYING:
            _EMPTYING[url] = await _emptying_sql(conn)
        if _EMPTYING[url]:
            await conn.execute(_EMPTYING[url])
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once for this test session (worker): each test's file is a copy
    of it, a fraction of a millisecond instead of running every migration again (~0.3 s)."""
    path = tmp_path_factory.mktemp("template") / "monitor.db"

    async def setup() -> None:
        engine = make_engine(f"sqlite+aiosqlite:///{path}")
        try:
            await migrate(engine)
        finally:
            await engine.dispose()  # the last connection's close checkpoints the WAL into the file

    asyncio.run(setup())
    return path


def fresh_sqlite_url(template: Path, directory: Path) -> str:
    """The URL of a new migrated, empty SQLite file in ``directory``, copied from ``template``."""
    path = directory / "monitor.db"
    shutil.copyfile(template, path)
    return f"sqlite+aiosqlite:///{path}"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated database with no rows: a fresh SQLite file (a copy of the session's migrated
    template), or the session's PostgreSQL database emptied (DELETE, see _truncate) before the test — much
    cheaper than a database per test."""
    if request.param == "sqlite":
        yield fresh_sqlite_url(request.getfixturevalue("sqlite_template"), tmp_path)
        return
    url = request.getfixturevalue("pg_shared")
    asyncio.run(_truncate(url))
    yield url


@pytest.fixture(params=["sqlite", "postgres"])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no schema at all (migration tests): a new SQLite file or PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"
        return
    name = f"monitor_empty_{RUN_ID}_{uuid.uuid4().hex[:10]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    yield _with_database(PG_ADMIN_URL, name)
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on ``database_url`` (already migrated)."""
    engine = make_engine(database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(datetime(2026, 7, 18, 2, 0, tzinfo=UTC))


@pytest.fixture
def settings_factory(database_url: str) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        base = Settings(
            database_url=database_url, allow_private_targets=True, notify_backoff=0.0, notify_timeout=5.0
        )
        return base.replace(**overrides)

    return make


pytest_plugins = ["tests.support.fixtures"]

API_KEY = "test-api-key-0123456789"


@dataclass
class Api:
    """An in-process client of the real app plus what tests need around it."""

    client: AsyncTestClient[Any]
    clock: FrozenClock
    engine: AsyncEngine
    settings: Settings
    project: dict[str, Any]

    @property
    def headers(self) -> dict[str, str]:
        return {"X-Api-Key": API_KEY}

    @property
    def ro_headers(self) -> dict[str, str]:
        return {"X-Api-Key": str(self.project["api_key_readonly"])}


@pytest.fixture
async def api(
    engine: AsyncEngine, clock: FrozenClock, settings_factory: Callable[..., Settings]
) -> AsyncIterator[Api]:
    """The app over HTTP (in process), with the clock injected and no background loops."""
    settings = settings_factory()
    async with engine.begin() as conn:
        project = await projects.create_project(conn, "test", clock.now(), api_key=API_KEY)
    # the database is migrated already (a copy of the migrated template, or the shared PostgreSQL
    # one): the app's startup skips checking that again (~13 ms a test)
    app = create_app(
        settings, clock=clock, evaluator=False, notify=False, liveness=False, migrate_on_start=False
    )
    async with AsyncTestClient(app) as client:
        yield Api(client=client, clock=clock, engine=engine, settings=settings, project=project)


MakeApi = Callable[..., Awaitable[Api]]
