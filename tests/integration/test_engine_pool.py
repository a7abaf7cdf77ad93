"""The PostgreSQL pool pings a connection only when it sat idle (``monitor.storage.engine``).

A connection handed back moments ago goes out again without a ping (SQLAlchemy's
``pool_pre_ping`` cost three round trips before every transaction); one idle for
``PING_IDLE_AFTER`` or longer is pinged, and replaced if its session is gone, so the
transaction that gets it never sees the dead one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_connection
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.storage.engine import PING_IDLE_AFTER, make_engine

pytestmark = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(database_url, pool_size=1)
    yield engine
    await engine.dispose()


@pytest.fixture
def pings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the pings the pool sends (the driver adapter's real ``ping`` still runs)."""
    sent: list[int] = []
    real = AsyncAdapt_asyncpg_connection.ping

    def counted(self: AsyncAdapt_asyncpg_connection) -> None:
        sent.append(1)
        real(self)

    monkeypatch.setattr(AsyncAdapt_asyncpg_connection, "ping", counted)
    return sent


async def _backend_pid(engine: AsyncEngine) -> int:
    async with engine.begin() as conn:
        return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def test_a_connection_handed_back_moments_ago_is_not_pinged(
    pool: AsyncEngine, pings: list[int]
) -> None:
    first = await _backend_pid(pool)  # a new connection: not pinged either
    again = [await _backend_pid(pool) for _ in range(5)]
    assert again == [first] * 5
    assert pings == []


async def test_a_connection_idle_for_a_while_is_pinged(pool: AsyncEngine, pings: list[int]) -> None:
    first = await _backend_pid(pool)
    await asyncio.sleep(PING_IDLE_AFTER * 1.5)
    assert await _backend_pid(pool) == first
    assert pings == [1]


async def test_an_idle_connection_whose_session_ended_is_replaced_before_use(
    pool: AsyncEngine, pings: list[int]
) -> None:
    first = await _backend_pid(pool)
    admin = make_engine(str(pool.url.render_as_string(hide_password=False)), pool_size=1)
    try:
        async with admin.begin() as conn:
            ended = await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
            assert ended.scalar_one() is True
    finally:
        await admin.dispose()
    await asyncio.sleep(PING_IDLE_AFTER * 1.5)

    second = await _backend_pid(pool)  # no error: the ping found the session gone

    assert second != first
    assert pings == [1]
