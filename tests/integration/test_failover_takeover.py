"""A new shard holder judges the due checks of the shards it takes in the round that takes them
(DESIGN §6), on SQLite and PostgreSQL, with the evaluation clock driven.

Two evaluators (``host:a``, ``host:b``) share four shards. ``host:a`` stops renewing just after
a heartbeat, so its heartbeat is still fresh when its leases are gone (SQLite: expiry on the
driven clock; PostgreSQL: the server ends its lease session after one real TTL of silence).
``host:b``'s first round after that takes every shard of ``host:a`` — the dead holder is not
counted live for another TTL, which would keep the fair share at two — and its sweep of the
taken shards leaves nothing due. ``/ready``'s ``evaluator_lag_s`` shows the lag and its end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.domain.clock import FrozenClock
from monitor.settings import Settings
from monitor.storage import tables as t
from monitor.workers.evaluator import ShardedEvaluator
from tests.conftest import Api
from tests.support.app import create_check, open_api

SHARDS = 4
TTL_S = 1.0
T0 = datetime(2026, 7, 18, 2, 0, tzinfo=UTC)
SCHEDULE = {"schedule": "* * * * *", "grace": 10}
"""Every minute, 10 s grace: pinged at 02:00:05, the 02:01 tick is due at 02:01:10."""


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def lag(api: Api) -> float:
    ready = (await api.client.get("/ready")).json()
    value: float = ready["evaluator_lag_s"]
    return value


async def due_in(engine: AsyncEngine, shards: set[int], now: datetime) -> list[str]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(t.checks.c.uuid).where(t.checks.c.shard.in_(shards)).where(t.checks.c.next_due < now)
        )
        return sorted(rows.scalars().all())


async def missed_of(engine: AsyncEngine) -> dict[int, set[str]]:
    """Shard → uuids of the checks that have a ``missed`` alert."""
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(t.checks.c.shard, t.checks.c.uuid)
            .join(t.alerts, t.alerts.c.check_id == t.checks.c.id)
            .where(t.alerts.c.kind == "missed")
        )
        found: dict[int, set[str]] = {}
        for shard, uuid in rows:
            found.setdefault(int(shard), set()).add(uuid)
        return found


def indexes(names: Any) -> set[int]:
    return {int(str(n).removeprefix("shard-")) for n in names}


async def checks_in_every_shard(api: Api) -> dict[int, set[str]]:
    by_shard: dict[int, set[str]] = {}
    n = 0
    while len(by_shard) < SHARDS or min(len(v) for v in by_shard.values()) < 2:
        check = await create_check(api, name=f"job-{n}", **SCHEDULE)
        n += 1
        async with api.engine.connect() as conn:
            shard = (
                await conn.execute(select(t.checks.c.shard).where(t.checks.c.uuid == check["uuid"]))
            ).scalar_one()
        by_shard.setdefault(int(shard), set()).add(check["uuid"])
    return by_shard


async def walk(clock: FrozenClock, until: datetime, *holders: ShardedEvaluator) -> None:
    """Advance the driven clock to ``until`` in quarter-TTL steps, each holder renewing at each."""
    step = timedelta(seconds=TTL_S / 4)
    while clock.now() < until:
        clock.set(min(clock.now() + step, until))
        for holder in holders:
            assert await holder.leases.renew(clock.now()) == []


async def stop_renewing(api: Api, survivor: ShardedEvaluator, until: datetime) -> None:
    """Let the other holder's leases lapse while ``survivor`` keeps renewing its own.

    SQLite: the driven clock passes the lapsed holder's expiry. PostgreSQL: one real TTL and a
    half of silence on the lapsed holder's session, after which the server has ended it.
    """
    if api.engine.dialect.name == "postgresql":
        for _ in range(6):
            await asyncio.sleep(TTL_S / 4)
            assert await survivor.leases.renew(api.clock.now()) == []
    await walk(api.clock, until, survivor)


async def test_new_holder_takes_every_shard_of_a_silent_holder_and_judges_them_in_that_round(
    engine: AsyncEngine, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory(shards=SHARDS, lease_ttl=TTL_S, evaluate_interval=0.25)
    clock = FrozenClock(T0)
    async with open_api(engine, clock, settings) as api:
        by_shard = await checks_in_every_shard(api)
        clock.set(at(5))
        for uuids in by_shard.values():
            for uuid in uuids:
                assert (await api.client.get(f"/ping/{uuid}")).text == "OK"
        a = ShardedEvaluator(engine, settings, clock, holder="host:a", shards=SHARDS)
        b = ShardedEvaluator(engine, settings, clock, holder="host:b", shards=SHARDS)
        try:
            clock.set(at(60))
            assert len(await a.rebalance()) == SHARDS  # alone: every shard
            assert await b.rebalance() == {}  # nothing vacant yet
            assert await a.rebalance() == {}  # over the fair share of 2: hands two back
            handed = await b.rebalance()
            assert len(handed) == 2 and len(a.leases.held) == 2
            assert await b.sweep(handed) == 0  # nothing due yet

            await walk(clock, at(69), a, b)
            clock.set(at(69.5))
            assert await a.rebalance() == {} and await b.rebalance() == {}  # heartbeats
            silent = dict(a.leases.held)  # host:a renews nothing from here on
            await stop_renewing(api, b, until=at(70.4))  # host:a's heartbeat (69.5) is still fresh
            assert await lag(api) == 0.4  # every check's 02:01 deadline passed 0.4 s ago

            taken = await b.rebalance()
            assert taken.keys() == silent.keys()
            assert all(taken[name] > silent[name] for name in silent)
            assert await b.sweep(taken) > 0
            assert await due_in(engine, indexes(taken), clock.now()) == []  # judged in that round
            missed = await missed_of(engine)
            judged = indexes(taken)
            assert {s: missed.get(s, set()) for s in judged} == {s: by_shard[s] for s in judged}
            await b.sweep(dict(b.leases.held))  # its own plan, as after its sleep
            assert await lag(api) == 0

            # host:a wakes up with its stale plan: fenced, nothing written, it steps down
            assert await a.sweep(silent) == 0
            assert a.leases.held == {}
            assert sum(map(len, (await missed_of(engine)).values())) == sum(map(len, by_shard.values()))

            # ... and gets its fair share back: released right after host:b's sweep, swept when taken
            clock.set(at(71))
            assert await a.rebalance() == {}  # announces itself; nothing vacant
            assert await b.rebalance() == {}  # over the share of 2 now: releases two
            back = await a.rebalance()
            assert len(back) == 2 and len(b.leases.held) == 2
            await a.sweep(back)
            assert await lag(api) == 0
        finally:
            await a.close()
            await b.close()


async def test_shards_released_for_a_replica_that_died_holding_nothing_are_taken_within_a_ttl(
    engine: AsyncEngine, settings_factory: Callable[..., Settings]
) -> None:
    """A replica that announced itself and died before taking any shard names no lease, so it
    counts as live until its heartbeat is one TTL old; the shards handed back for it are then
    taken by the survivors' larger share, in their next round."""
    ttl, shards = 30.0, 6
    settings = settings_factory(shards=shards, lease_ttl=ttl, evaluate_interval=0.25)
    clock = FrozenClock(T0)
    a = ShardedEvaluator(engine, settings, clock, holder="host:a", shards=shards)
    b = ShardedEvaluator(engine, settings, clock, holder="host:b", shards=shards)
    ghost = ShardedEvaluator(engine, settings, clock, holder="host:ghost", shards=shards)
    try:
        assert len(await a.rebalance()) == shards
        assert await b.rebalance() == {}  # share 3 of 2 live; nothing vacant
        assert await ghost.rebalance() == {}  # share 2 of 3 live; announced, then dead
        assert await a.rebalance() == {}  # releases 4 to get down to 2
        assert len(await b.rebalance()) == 2
        assert len(a.leases.held) + len(b.leases.held) == 4  # two wait for the ghost
        step = timedelta(seconds=ttl / 4)
        for _ in range(4):  # the ghost's heartbeat ages one TTL; a and b keep theirs fresh
            clock.set(clock.now() + step)
            for holder in (a, b):
                assert await holder.leases.renew(clock.now()) == []
                assert await holder.rebalance() == {}
        clock.set(clock.now() + timedelta(seconds=1))
        assert len(await a.rebalance()) == 1  # share 3 of 2 live
        assert len(await b.rebalance()) == 1
        assert len(a.leases.held) == len(b.leases.held) == 3
    finally:
        for evaluator in (a, b, ghost):
            await evaluator.close()
