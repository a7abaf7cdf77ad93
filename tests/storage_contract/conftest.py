"""Storage ports' contract tests: each port's behaviour, run against SQLite and PostgreSQL.

Fixtures are named per port (``outbox_engine`` …) so several ports' fixtures live side by side.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.storage.engine import make_engine, migrate
from tests.conftest import _truncate


@pytest.fixture(params=["sqlite", "postgres"])
def outbox_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A new SQLite file, or the session's throwaway PostgreSQL database (``pg_shared``) emptied."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'outbox.db'}"
        return
    url = request.getfixturevalue("pg_shared")
    asyncio.run(_truncate(url))
    yield url


@pytest.fixture
async def outbox_engine(outbox_database_url: str) -> AsyncIterator[AsyncEngine]:
    """A migrated, empty database for the outbox port's contract, on each backend."""
    engine = make_engine(outbox_database_url)
    await migrate(engine)
    try:
        yield engine
    finally:
        await engine.dispose()
