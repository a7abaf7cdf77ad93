"""While the database cannot be used, the management API answers 503, not 500.

The app in process, pointed at a PostgreSQL port where nothing listens (a server restarting
looks the same to a new connection: the socket is refused). Every request that reaches the
database fails; the management API says so with ``503`` and ``Retry-After`` (retry later,
nothing was stored), as the ping endpoints and ``/api/v3/status/`` already did, and the client
never sees a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import asyncpg
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from monitor.app import create_app
from monitor.domain.clock import FrozenClock
from monitor.settings import Settings
from monitor.storage.cluster import record_shard_count
from tests.conftest import API_KEY, Api
from tests.support.receivers import free_port


async def test_the_management_api_answers_503_with_retry_after_while_the_database_refuses(
    clock: FrozenClock,
) -> None:
    settings = Settings(database_url=f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/none")
    app = create_app(
        settings, clock=clock, evaluator=False, notify=False, liveness=False, migrate_on_start=False
    )
    async with AsyncTestClient(app) as client:
        answers: list[Any] = [
            await client.get("/api/v3/checks/", headers={"X-Api-Key": API_KEY}),
            await client.post("/api/v3/checks/", headers={"X-Api-Key": API_KEY}, json={"name": "x"}),
        ]
        ping = await client.get("/ping/2f8a3c1e-0000-4000-8000-000000000000")

    for answer in answers:
        assert answer.status_code == 503, answer.text
        assert answer.headers["retry-after"] == "1"
        assert answer.json() == {"error": "database unavailable; retry"}
    assert ping.status_code == 503


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_a_request_postgresql_picks_as_a_deadlocks_victim_answers_503(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    """A real deadlock between an upsert (the project row, then the shard-count row) and
    another transaction taking them in the opposite order: the request PostgreSQL rolls back
    answers ``503`` with ``Retry-After`` (a retry may succeed; nothing was stored), not ``500``.

    The other transaction runs in a thread of its own: the in-process client blocks this loop
    while the app answers."""
    # its own level: a test run before it in the same worker may have left the logger's higher
    caplog.set_level(logging.WARNING, logger="monitor.http.errors")
    async with api.engine.begin() as conn:  # as every process's start records it
        await record_shard_count(conn, 16, api.clock.now())
    holding = threading.Event()
    other = threading.Thread(
        target=asyncio.run, args=(_opposite_order(api.settings.database_url, api.project["id"], holding),)
    )
    other.start()
    assert await asyncio.to_thread(holding.wait, 10)
    body = {"name": "x", "slug": "x", "unique": ["slug"]}
    answer = await api.client.post("/api/v3/checks/", headers=api.headers, json=body)
    await asyncio.to_thread(other.join, 30)
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"] == "1"
    assert answer.json() == {"error": "a concurrent request conflicted with this one; retry"}
    assert "concurrency_failure" in [getattr(r, "action", None) for r in caplog.records]
    async with api.engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM checks"))).scalar_one() == 0


async def _opposite_order(url: str, project_id: int, holding: threading.Event) -> None:
    """Lock the shard-count row, wait until another transaction waits for it, then ask for the
    project row (which that one holds); PostgreSQL's deadlock check runs in the other backend
    first (its 1 s against this one's 30 s), so the other transaction is the victim."""
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        async with conn.transaction():
            await conn.execute("SET LOCAL deadlock_timeout = '30s'")
            await conn.execute("SELECT shards FROM cluster_settings FOR UPDATE")
            holding.set()
            query = (
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock'"
            )
            for _ in range(200):
                if await conn.fetchval(query) >= 1:
                    break
                await asyncio.sleep(0.05)
            await conn.execute("SELECT id FROM projects WHERE id = $1 FOR NO KEY UPDATE", project_id)
            raise _RollBack
    except _RollBack:
        pass
    finally:
        await conn.close()


class _RollBack(Exception):
    """Ends the other transaction without committing."""
