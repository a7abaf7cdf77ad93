"""The storage contract: every port of :mod:`monitor.storage.ports` against both databases.

As APScheduler 4 tests its data stores, one parametrized fixture gives each test a database:
the root ``engine`` fixture, over a fresh SQLite file and over PostgreSQL (a database created
for the test session, dropped at its end, emptied before each test). A test gets a
:class:`UnitOfWork` in a write transaction (``uow``), committed when the test passes, and the
engine itself to open others (``engine``) to see what was committed.

The outbox port's tests use their own fixtures (``outbox_engine``), named per port so several
ports' fixtures live side by side.
"""

from __future__ import annotations

import asyncio
import secrets
import uuid as uuid_module
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.storage import tables as t
from monitor.storage.engine import make_engine, migrate
from monitor.storage.unit_of_work import UnitOfWork
from tests.conftest import _truncate

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def uow(engine: AsyncEngine) -> AsyncIterator[UnitOfWork]:
    async with UnitOfWork.begin(engine) as work:
        yield work


async def add_project(uow: UnitOfWork, name: str = "p") -> int:
    return await uow.projects.insert(
        {
            "name": name,
            "ping_key": secrets.token_urlsafe(12),
            "badge_key": secrets.token_urlsafe(12),
            "sentry_key": secrets.token_hex(16),
            "created_at": NOW,
        }
    )


def check_values(project_id: int, **overrides: Any) -> dict[str, Any]:
    """A check row with the columns every check needs (a simple check, 1 day timeout)."""
    values: dict[str, Any] = {
        "uuid": str(uuid_module.uuid4()),
        "badge_uuid": str(uuid_module.uuid4()),
        "project_id": project_id,
        "kind": "simple",
        "shard": 0,
        "created_at": NOW,
    }
    values.update(overrides)
    return values


async def add_check(uow: UnitOfWork, project_id: int, **overrides: Any) -> int:
    return await uow.checks.insert(check_values(project_id, **overrides))


async def add_channel(uow: UnitOfWork, project_id: int, name: str = "ops", **overrides: Any) -> str:
    channel_id = str(uuid_module.uuid4())
    await uow.channels.insert(
        {
            "id": channel_id,
            "project_id": project_id,
            "name": name,
            "url": "json://hooks.example.com/x",
            "kinds": "",
            "is_default": False,
            "created_at": NOW,
            **overrides,
        }
    )
    return channel_id


async def add_run(
    uow: UnitOfWork, check_id: int, *, started: datetime | None, outcome: str | None = None
) -> None:
    await uow.connection.execute(
        t.runs.insert().values(
            id=str(uuid_module.uuid4()),
            check_id=check_id,
            scheduled=NOW - timedelta(minutes=5),
            first_ping_at=started or NOW,
            started_at=started,
            outcome=outcome,
        )
    )


async def add_alert_with_notification(
    uow: UnitOfWork, project_id: int, check_id: int, channel_id: str
) -> None:
    alert_id = (
        await uow.connection.execute(
            t.alerts.insert()
            .values(
                project_id=project_id, check_id=check_id, key=f"k-{check_id}", kind="down", created_at=NOW
            )
            .returning(t.alerts.c.id)
        )
    ).scalar_one()
    notification_id = (
        await uow.connection.execute(
            t.notifications.insert()
            .values(alert_id=alert_id, channel_id=channel_id, next_attempt_at=NOW, created_at=NOW)
            .returning(t.notifications.c.id)
        )
    ).scalar_one()
    await uow.connection.execute(
        t.notification_attempts.insert().values(notification_id=notification_id, at=NOW, ok=True)
    )


async def count(uow: UnitOfWork, table: Any) -> int:
    from sqlalchemy import func, select

    return int((await uow.connection.execute(select(func.count()).select_from(table))).scalar_one())


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
