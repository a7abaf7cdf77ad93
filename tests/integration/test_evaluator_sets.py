"""The evaluator's set-at-a-time path against real databases (DESIGN §6).

A sweep over several shards records each check's own shard token, a fence over several leases
refuses the sweep when any of them is stale, the bulk writes store instants exactly as Core
statements do (SQLite compares them as text), and a sweep that raises an alert and counts more
ticks in it (DESIGN §5: an episode's ``count``, a superseded group's) stores the whole count.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from monitor.domain.checks import PingKind
from monitor.domain.errors import StaleLease
from monitor.services import checks as check_service
from monitor.services.evaluator import evaluate_due
from monitor.services.ingest import IngestWriter, PingRequest
from monitor.services.projects import create_project
from monitor.settings import Settings
from monitor.storage import bulk
from monitor.storage import leases as lease_store
from monitor.storage import tables as t

T0 = datetime(2026, 7, 18, 2, 0, tzinfo=UTC)
SHARDS = 4
HOLDER = "test:1"


async def _checks_pinged(engine: AsyncEngine, settings: Settings, count: int) -> list[int]:
    async with engine.begin() as conn:
        project = await create_project(conn, "p", T0)
        ids = [
            (
                await check_service.create_or_upsert(
                    conn, int(project["id"]), {"name": f"c{i}", "timeout": 60, "grace": 60}, T0, shards=SHARDS
                )
            )[0]
            for i in range(count)
        ]
        uuids = (await conn.execute(select(t.checks.c.uuid).order_by(t.checks.c.id))).scalars().all()
    writer = IngestWriter(engine, settings)
    await writer.start()
    try:
        answers = await asyncio.gather(
            *(writer.submit(PingRequest(kind=PingKind.SUCCESS, received=T0, uuid=u)) for u in uuids)
        )
    finally:
        await writer.stop()
    assert {a.status for a in answers} == {200}
    return ids


async def test_sweep_over_several_shards_records_each_checks_shard_token(
    engine: AsyncEngine, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory(shards=SHARDS)
    ids = await _checks_pinged(engine, settings, 12)
    tokens = {shard: 100 + shard for shard in range(SHARDS)}
    at = T0 + timedelta(seconds=121)

    assert await evaluate_due(engine, at, settings=settings, held=tokens, batch=5) == 12

    async with engine.connect() as conn:
        shard_of = dict((await conn.execute(select(t.checks.c.id, t.checks.c.shard))).all())
        alerts = (await conn.execute(select(t.alerts.c.check_id, t.alerts.c.token, t.alerts.c.kind))).all()
        flips = (
            await conn.execute(
                select(t.flips.c.check_id, t.flips.c.token).where(t.flips.c.reason == "missed")
            )
        ).all()
        marks = (await conn.execute(select(func.count()).select_from(t.tick_marks))).scalar_one()
        due_again = (
            await conn.execute(select(func.count()).select_from(t.checks).where(t.checks.c.next_due < at))
        ).scalar_one()
    assert sorted(a.check_id for a in alerts) == sorted(ids)
    assert {a.kind for a in alerts} == {"missed"}
    assert all(a.token == tokens[shard_of[a.check_id]] for a in alerts)
    assert sorted(f.check_id for f in flips) == sorted(ids)
    assert all(f.token == tokens[shard_of[f.check_id]] for f in flips)
    assert marks == 12
    assert due_again == 0
    # judged: a second sweep at the same instant finds nothing
    assert await evaluate_due(engine, at, settings=settings, held=tokens) == 0


async def test_sweep_of_only_some_shards_leaves_the_others_due(
    engine: AsyncEngine, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory(shards=SHARDS)
    await _checks_pinged(engine, settings, 12)
    at = T0 + timedelta(seconds=121)
    async with engine.connect() as conn:
        per_shard = dict(
            (await conn.execute(select(t.checks.c.shard, func.count()).group_by(t.checks.c.shard))).all()
        )
    mine = {0: 7, 2: 9}

    assert await evaluate_due(engine, at, settings=settings, held=mine) == sum(
        per_shard.get(s, 0) for s in mine
    )

    async with engine.connect() as conn:
        still_due = (
            (await conn.execute(select(t.checks.c.shard).where(t.checks.c.next_due < at).distinct()))
            .scalars()
            .all()
        )
    assert set(still_due) == {s for s in per_shard if s not in mine}


async def test_fence_over_several_leases_refuses_the_sweep_when_one_is_stale(
    engine: AsyncEngine, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory(shards=SHARDS)
    await _checks_pinged(engine, settings, 8)
    at = T0 + timedelta(seconds=121)
    async with engine.begin() as conn:
        for shard in range(SHARDS):
            # shard-2 was taken over meanwhile: its token moved on to 2
            await conn.execute(
                t.leases.insert().values(
                    name=f"shard-{shard}",
                    holder=HOLDER,
                    token=2 if shard == 2 else 1,
                    expires_at=at + timedelta(hours=1),
                )
            )
    believed = {f"shard-{shard}": 1 for shard in range(SHARDS)}

    async def fence(conn: AsyncConnection) -> None:
        await lease_store.check_fences(conn, believed, HOLDER, at)

    with pytest.raises(StaleLease) as raised:
        await evaluate_due(engine, at, settings=settings, held=dict.fromkeys(range(SHARDS), 1), fence=fence)
    assert raised.value.lease == "shard-2"
    assert raised.value.current == 2
    async with engine.connect() as conn:
        assert (await conn.execute(select(func.count()).select_from(t.alerts))).scalar_one() == 0
        assert (
            await conn.execute(select(func.count()).select_from(t.flips).where(t.flips.c.reason == "missed"))
        ).scalar_one() == 0


async def test_bulk_writes_store_instants_as_core_statements_do(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        project = await create_project(conn, "p", T0)
        check_id, _ = await check_service.create_or_upsert(
            conn, int(project["id"]), {"name": "c", "timeout": 60}, T0, shards=SHARDS
        )
    whole = T0 + timedelta(minutes=5)  # no microseconds: SQLite's text must still sort with the others
    fraction = T0 + timedelta(minutes=5, microseconds=1)
    async with engine.begin() as conn:
        await conn.execute(
            t.flips.insert().values(check_id=check_id, created_at=whole, up=1, reason="core", token=None)
        )
        await bulk.insert_rows(
            conn,
            t.flips,
            [
                {"check_id": check_id, "created_at": whole, "up": 0, "reason": "bulk", "token": 7},
                {"check_id": check_id, "created_at": fraction, "up": None, "reason": "later", "token": None},
            ],
            ["check_id", "created_at", "up", "reason", "token"],
        )
        await bulk.update_rows(
            conn,
            t.checks,
            "id",
            [{"id": check_id, "next_due": whole, "paused": True}],
            ["next_due", "paused"],
        )
    async with engine.connect() as conn:
        same_instant = (
            (
                await conn.execute(
                    select(t.flips.c.reason).where(t.flips.c.created_at == whole).order_by(t.flips.c.reason)
                )
            )
            .scalars()
            .all()
        )
        after = (
            (await conn.execute(select(t.flips.c.reason).where(t.flips.c.created_at > whole))).scalars().all()
        )
        row = (
            await conn.execute(
                select(t.checks.c.next_due, t.checks.c.paused).where(t.checks.c.id == check_id)
            )
        ).one()
        due = (
            await conn.execute(
                select(func.count()).select_from(t.checks).where(t.checks.c.next_due < fraction)
            )
        ).scalar_one()
    assert same_instant == ["bulk", "core"]
    assert after == ["later"]
    assert row.next_due == whole and row.paused is True
    assert due == 1


@pytest.mark.parametrize("pipelines", [1, 2, 3])
async def test_concurrent_batches_judge_every_due_check_once(
    engine: AsyncEngine, settings_factory: Callable[..., Settings], pipelines: int
) -> None:
    """PostgreSQL judges several batches at once, each locking what the others do not hold;
    every due check is still judged exactly once (SQLite, one writer, judges them in turn)."""
    settings = settings_factory(shards=SHARDS)
    ids = await _checks_pinged(engine, settings, 13)
    at = T0 + timedelta(seconds=121)

    judged = await evaluate_due(
        engine, at, settings=settings, held=dict.fromkeys(range(SHARDS), 1), batch=2, pipelines=pipelines
    )

    assert judged == 13
    async with engine.connect() as conn:
        alerts = (await conn.execute(select(t.alerts.c.check_id, t.alerts.c.kind))).all()
        marks = (await conn.execute(select(t.tick_marks.c.check_id))).scalars().all()
        flips = (
            (await conn.execute(select(t.flips.c.check_id).where(t.flips.c.reason == "missed")))
            .scalars()
            .all()
        )
    assert sorted(a.check_id for a in alerts) == sorted(ids)
    assert sorted(marks) == sorted(ids)
    assert sorted(flips) == sorted(ids)
    assert await evaluate_due(engine, at, settings=settings, held=dict.fromkeys(range(SHARDS), 1)) == 0


@pytest.mark.parametrize(("batch", "replanned"), [(2, 7), (20, 0)])
async def test_the_batches_of_a_large_sweep_replan_their_run_book_reads(
    engine: AsyncEngine, settings_factory: Callable[..., Settings], batch: int, replanned: int
) -> None:
    """The batches a sweep commits grow ``tick_marks`` and ``runs``: every batch of a sweep
    larger than one batch reads its run books with plans for the tables as they are
    (PostgreSQL), not with a plan the server cached while they were nearly empty. A sweep that
    fits in one batch keeps the cached plan. 13 due checks: seven batches of 2, or one of 20."""
    settings = settings_factory(shards=SHARDS)
    await _checks_pinged(engine, settings, 13)
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        if "plan_cache_mode = force_custom_plan" in statement:
            statements.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", seen)
    try:
        judged = await evaluate_due(
            engine,
            T0 + timedelta(seconds=121),
            settings=settings,
            held=dict.fromkeys(range(SHARDS), 1),
            batch=batch,
            pipelines=1,
        )
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", seen)

    assert judged == 13
    assert len(statements) == (replanned if engine.dialect.name == "postgresql" else 0)


async def test_a_fence_refused_in_one_of_concurrent_batches_stops_the_sweep_and_loses_nothing(
    engine: AsyncEngine, settings_factory: Callable[..., Settings]
) -> None:
    """The lease is taken over while a sweep runs: the first transaction's fence passes, a
    later one's is refused. The sweep raises, and whatever it committed before stays; every due
    check is then judged exactly once, by that sweep or by the next."""
    settings = settings_factory(shards=SHARDS)
    ids = await _checks_pinged(engine, settings, 13)
    at = T0 + timedelta(seconds=121)
    fences = 0

    async def fence(conn: AsyncConnection) -> None:
        nonlocal fences
        fences += 1
        if fences > 1:
            raise StaleLease("shard-0", 1, 2, "taken over")

    with pytest.raises(StaleLease):
        await evaluate_due(
            engine,
            at,
            settings=settings,
            held=dict.fromkeys(range(SHARDS), 1),
            batch=2,
            pipelines=3,
            fence=fence,
        )
    await evaluate_due(
        engine, at, settings=settings, held=dict.fromkeys(range(SHARDS), 1), batch=2, pipelines=3
    )

    async with engine.connect() as conn:
        alerts = (await conn.execute(select(t.alerts.c.check_id))).scalars().all()
        marks = (await conn.execute(select(t.tick_marks.c.check_id))).scalars().all()
    assert sorted(alerts) == sorted(ids)
    assert sorted(marks) == sorted(ids)


async def test_a_check_another_transaction_holds_is_left_for_the_next_sweep(
    engine: AsyncEngine, settings_factory: Callable[..., Settings]
) -> None:
    """PostgreSQL: a sweep does not wait on a check row that another transaction locked (a
    ping's batch being ingested): it judges the others and the next sweep judges that one.
    SQLite has one writer: the sweep simply runs before or after the other transaction."""
    settings = settings_factory(shards=SHARDS)
    ids = await _checks_pinged(engine, settings, 4)
    at = T0 + timedelta(seconds=121)
    held = dict.fromkeys(range(SHARDS), 1)
    if engine.dialect.name != "postgresql":
        assert await evaluate_due(engine, at, settings=settings, held=held) == 4
        return
    async with engine.begin() as ingest:
        await ingest.execute(select(t.checks.c.id).where(t.checks.c.id == ids[1]).with_for_update())
        judged = await asyncio.wait_for(evaluate_due(engine, at, settings=settings, held=held), 10)
        assert judged == 3
    async with engine.connect() as conn:
        alerted = (await conn.execute(select(t.alerts.c.check_id))).scalars().all()
    assert sorted(alerted) == sorted(ids[:1] + ids[2:])
    assert await evaluate_due(engine, at, settings=settings, held=held) == 1


async def _cron_check_pinged(engine: AsyncEngine, settings: Settings, *scheduled: datetime) -> None:
    """A check ticking every minute (grace 10 s), with a successful run of each ``scheduled``."""
    async with engine.begin() as conn:
        project = await create_project(conn, "p", T0)
        await check_service.create_or_upsert(
            conn, int(project["id"]), {"name": "c", "schedule": "* * * * *", "grace": 10}, T0, shards=SHARDS
        )
        uuid = (await conn.execute(select(t.checks.c.uuid))).scalar_one()
    writer = IngestWriter(engine, settings)
    await writer.start()
    try:
        answers = [
            await writer.submit(
                PingRequest(
                    kind=PingKind.SUCCESS, received=tick + timedelta(seconds=1), uuid=uuid, scheduled=tick
                )
            )
            for tick in scheduled
        ]
    finally:
        await writer.stop()
    assert {a.status for a in answers} == {200}


async def _missed_alerts(engine: AsyncEngine) -> list[tuple[datetime, int, str | None]]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(t.alerts.c.scheduled, t.alerts.c.count, t.alerts.c.facts)
            .where(t.alerts.c.kind == "missed")
            .order_by(t.alerts.c.id)
        )
        return [(scheduled, count, facts) for scheduled, count, facts in rows.all()]


async def test_sweep_that_opens_an_episode_and_counts_more_ticks_in_it_stores_the_whole_count(
    engine: AsyncEngine, settings_factory: Callable[..., Settings]
) -> None:
    # an evaluator taking over after a failover judges three missed ticks in one sweep: the first
    # opens the episode (a new alert), the next two raise its count in the same decision
    settings = settings_factory(shards=SHARDS)
    await _cron_check_pinged(engine, settings, T0)

    assert await evaluate_due(engine, T0 + timedelta(minutes=3, seconds=11), settings=settings) == 1

    [(scheduled, count, _)] = await _missed_alerts(engine)
    assert scheduled == T0 + timedelta(minutes=1)
    assert count == 3
    async with engine.connect() as conn:
        state = (await conn.execute(select(t.checks.c.episode_count))).scalar_one()
        marks = (await conn.execute(select(func.count()).select_from(t.tick_marks))).scalar_one()
    assert state == marks == 3


async def test_sweep_that_raises_a_superseded_group_and_extends_it_stores_the_whole_count(
    engine: AsyncEngine, settings_factory: Callable[..., Settings]
) -> None:
    # the runs of 02:01 and 02:02 never reported, 02:03's succeeded; one sweep judges both old
    # ticks: one superseded missed alert (the check stays up) that counts them both
    settings = settings_factory(shards=SHARDS)
    await _cron_check_pinged(engine, settings, T0, T0 + timedelta(minutes=3))

    await evaluate_due(engine, T0 + timedelta(minutes=3, seconds=5), settings=settings)

    [(scheduled, count, facts)] = await _missed_alerts(engine)
    assert scheduled == T0 + timedelta(minutes=1)
    assert count == 2
    assert facts is not None
    assert json.loads(facts)["count"] == 2  # its text says "and the run after it"
    assert json.loads(facts)["superseded"] is True
