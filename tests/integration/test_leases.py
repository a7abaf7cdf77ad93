"""Contract tests of the lease interface (DESIGN §6), run against both implementations.

PostgreSQL: advisory locks on a dedicated session (:class:`PostgresLeases`); SQLite: a
conditional update of the lease row (:class:`SqliteLeases`). Real time and a 1 s TTL: expiry on
PostgreSQL is the server ending a session that stopped renewing, which no injected clock fakes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.domain.errors import StaleLease
from monitor.storage import leases as lease_store
from monitor.storage import tables as t
from monitor.storage.leases import Leases, PostgresLeases, SqliteLeases, check_fence, lock_key, open_leases

TTL = timedelta(seconds=1)
NAME = "shard-0"


def now() -> datetime:
    return datetime.now(UTC)


@pytest.fixture
async def make_leases(engine: AsyncEngine) -> AsyncIterator[Callable[[str], Leases]]:
    made: list[Leases] = []

    def make(holder: str) -> Leases:
        leases = open_leases(engine, holder, TTL)
        made.append(leases)
        return leases

    yield make
    for leases in made:
        await leases.close()


async def fenced(engine: AsyncEngine, leases: Leases, token: int) -> None:
    async with engine.begin() as conn:
        await check_fence(conn, NAME, token, leases.holder, now())


async def stall_past_ttl() -> None:
    """A holder that renews nothing for longer than the TTL (the server ends its session)."""
    await asyncio.sleep(TTL.total_seconds() * 1.6)


def test_lock_keys_are_stable_64_bit() -> None:
    assert lock_key("shard-0") == lock_key("shard-0") != lock_key("shard-1")
    assert -(2**63) <= lock_key("job-backup") < 2**63
    assert lock_key("shard-0") == 4_036_771_349_294_675_022  # same in every process, every run


async def test_implementation_follows_the_database(engine: AsyncEngine) -> None:
    leases = open_leases(engine, "h:1", TTL)
    expected = PostgresLeases if engine.dialect.name == "postgresql" else SqliteLeases
    assert isinstance(leases, expected)
    await leases.close()


async def test_two_holders_racing_one_wins(make_leases: Callable[[str], Leases]) -> None:
    for round_ in range(5):
        a, b = make_leases(f"h:a{round_}"), make_leases(f"h:b{round_}")
        name = f"race-{round_}"
        tokens = await asyncio.gather(a.acquire(name, now()), b.acquire(name, now()))
        winners = [tok for tok in tokens if tok is not None]
        assert len(winners) == 1, tokens
        assert (name in a.held) != (name in b.held)
        # the loser keeps losing while the winner renews
        loser = b if name in a.held else a
        winner = a if loser is b else b
        assert await winner.renew(now()) == []
        assert await loser.acquire(name, now()) is None


async def test_release_lets_another_take_over_with_a_greater_token(
    engine: AsyncEngine, make_leases: Callable[[str], Leases]
) -> None:
    a, b = make_leases("h:1"), make_leases("h:2")
    first = await a.acquire(NAME, now())
    assert first is not None
    assert await a.acquire(NAME, now()) == first  # holding is idempotent
    assert await b.acquire(NAME, now()) is None
    await a.release(NAME)
    assert NAME not in a.held
    second = await b.acquire(NAME, now())
    assert second is not None and second > first
    await b.release(NAME)
    third = await a.acquire(NAME, now())
    assert third is not None and third > second
    async with engine.connect() as conn:
        row = (await conn.execute(select(t.leases).where(t.leases.c.name == NAME))).mappings().one()
    assert (row["holder"], row["token"]) == ("h:1", third)
    assert row["expires_at"] > now()


async def test_a_holder_that_stops_renewing_is_taken_over_within_one_ttl(
    engine: AsyncEngine, make_leases: Callable[[str], Leases]
) -> None:
    a, b = make_leases("h:stalled"), make_leases("h:2")
    first = await a.acquire(NAME, now())
    assert first is not None
    assert await b.acquire(NAME, now()) is None
    started = time.monotonic()
    await stall_past_ttl()
    second = await b.acquire(NAME, now())
    assert second is not None and second == first + 1
    assert time.monotonic() - started < 2 * TTL.total_seconds()
    # the stalled holder learns it lost the lease when it next renews
    assert await a.renew(now()) == [NAME]
    assert a.held == {}
    assert await a.acquire(NAME, now()) is None


async def test_renewal_keeps_the_lease_past_its_ttl(make_leases: Callable[[str], Leases]) -> None:
    a, b = make_leases("h:1"), make_leases("h:2")
    token = await a.acquire(NAME, now())
    for _ in range(6):  # 2 TTLs
        await asyncio.sleep(TTL.total_seconds() / 3)
        assert await a.renew(now()) == []
        assert await b.acquire(NAME, now()) is None
    assert a.held == {NAME: token}


async def test_a_stale_token_is_rejected_by_the_fence(
    engine: AsyncEngine, make_leases: Callable[[str], Leases]
) -> None:
    a, b = make_leases("h:stalled"), make_leases("h:2")
    old = await a.acquire(NAME, now())
    assert old is not None
    await fenced(engine, a, old)  # the holder's own token passes
    await stall_past_ttl()
    new = await b.acquire(NAME, now())
    assert new is not None and new > old
    with pytest.raises(StaleLease) as caught:
        await fenced(engine, a, old)  # a's local view still says it holds the lease
    assert (caught.value.lease, caught.value.token, caught.value.current) == (NAME, old, new)
    await fenced(engine, b, new)
    with pytest.raises(StaleLease):
        await fenced(engine, b, new + 1)  # a token nobody was given


async def test_step_down_forgets_the_lease(make_leases: Callable[[str], Leases]) -> None:
    a = make_leases("h:1")
    await a.acquire(NAME, now())
    await a.step_down(NAME)
    assert a.held == {}


async def test_close_releases_everything(engine: AsyncEngine, make_leases: Callable[[str], Leases]) -> None:
    a, b = make_leases("h:1"), make_leases("h:2")
    for name in ("shard-0", "shard-1"):
        assert await a.acquire(name, now()) is not None
    await a.close()
    assert a.held == {}
    assert await b.acquire("shard-0", now()) is not None
    assert await b.acquire("shard-1", now()) is not None
    rows = await lease_store.list_leases(engine)
    assert {r["name"]: r["holder"] for r in rows} == {"shard-0": "h:2", "shard-1": "h:2"}


# ---- PostgreSQL specifics: the session is the holder


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_postgres_dropped_session_loses_every_lease_at_once(
    engine: AsyncEngine, make_leases: Callable[[str], Leases]
) -> None:
    a, b = make_leases("h:1"), make_leases("h:2")
    for name in ("shard-0", "shard-1", "shard-2"):
        assert await a.acquire(name, now()) is not None
    async with engine.begin() as conn:
        killed = await conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = :app AND datname = current_database()"
            ),
            {"app": "monitor leases h:1"},
        )
        assert killed.scalars().all() == [True]
    await asyncio.sleep(0.1)
    assert sorted(await a.renew(now())) == ["shard-0", "shard-1", "shard-2"]
    assert a.held == {}
    for name in ("shard-0", "shard-1", "shard-2"):
        assert await b.acquire(name, now()) is not None  # freed with the session, no TTL wait


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_postgres_session_times_out_within_the_ttl(make_leases: Callable[[str], Leases]) -> None:
    a = make_leases("h:1")
    await a.acquire(NAME, now())
    assert isinstance(a, PostgresLeases)
    session = a._conn
    assert session is not None
    assert await session.fetchval("SHOW idle_session_timeout") == "1s"
    assert await session.fetchval("SHOW idle_in_transaction_session_timeout") == "1s"
    assert await session.fetchval("SHOW lock_timeout") == "100ms"


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_postgres_contender_never_blocks_on_a_fenced_transaction(
    engine: AsyncEngine, make_leases: Callable[[str], Leases]
) -> None:
    """A takes the lease and opens a fenced transaction (row read FOR SHARE); A's session dies.
    B gets the advisory lock but cannot raise the token while the transaction lives: it gives
    up at once (lock_timeout), and succeeds after the transaction ends."""
    a, b = make_leases("h:1"), make_leases("h:2")
    old = await a.acquire(NAME, now())
    assert old is not None
    async with engine.connect() as fenced_conn:
        await fenced_conn.begin()
        await check_fence(fenced_conn, NAME, old, "h:1", now())
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = :app AND datname = current_database()"
                ),
                {"app": "monitor leases h:1"},
            )
        await asyncio.sleep(0.1)
        started = time.monotonic()
        assert await b.acquire(NAME, now()) is None
        assert time.monotonic() - started < 0.5
        await fenced_conn.commit()
    new = await b.acquire(NAME, now())
    assert new is not None and new > old
