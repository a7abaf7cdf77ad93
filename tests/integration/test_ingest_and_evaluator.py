"""Group-commit ingest and the due-work evaluator against real databases (DESIGN §6).

No HTTP here: pings go straight into :class:`IngestWriter` as the ping endpoint hands them
over, and the evaluator is driven with explicit instants.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid as uuid_module
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event, func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.domain.checks import PingKind
from monitor.domain.errors import Conflict
from monitor.services import checks as check_service
from monitor.services.evaluator import evaluate_due
from monitor.services.ingest import IngestWriter, PingRequest, ingest_pings, new_check_values
from monitor.services.projects import create_project
from monitor.settings import Settings
from monitor.storage import tables as t
from monitor.storage.cluster import record_shard_count
from monitor.storage.engine import make_engine
from monitor.storage.unit_of_work import UnitOfWork
from tests.conftest import Api

T0 = datetime(2026, 7, 18, 2, 0, tzinfo=UTC)


@pytest.fixture
async def project_id(engine: AsyncEngine) -> int:
    async with engine.begin() as conn:
        project = await create_project(conn, "p", T0)
    return int(project["id"])  # type: ignore[call-overload]


@pytest.fixture
async def writer(
    engine: AsyncEngine, settings_factory: Callable[..., Settings]
) -> AsyncIterator[IngestWriter]:
    ingest = IngestWriter(engine, settings_factory())
    await ingest.start()
    yield ingest
    await ingest.stop()


async def make_check(engine: AsyncEngine, project_id: int, **fields: Any) -> tuple[int, str]:
    async with engine.begin() as conn:
        check_id, created = await check_service.create_or_upsert(conn, project_id, fields, T0, shards=16)
        uuid = (await conn.execute(select(t.checks.c.uuid).where(t.checks.c.id == check_id))).scalar_one()
    assert created
    return check_id, uuid


async def attach_channels(engine: AsyncEngine, project_id: int, check_id: int, n: int) -> list[str]:
    ids = [str(uuid_module.uuid4()) for _ in range(n)]
    async with engine.begin() as conn:
        await conn.execute(
            t.channels.insert(),
            [
                {
                    "id": c,
                    "project_id": project_id,
                    "name": f"c{i}",
                    "url": "json://127.0.0.1:9/x",
                    "kinds": "",
                    "created_at": T0,
                }
                for i, c in enumerate(ids)
            ],
        )
        await conn.execute(t.check_channels.insert(), [{"check_id": check_id, "channel_id": c} for c in ids])
    return ids


def ping(uuid: str, at: datetime, kind: PingKind = PingKind.SUCCESS, **kwargs: Any) -> PingRequest:
    return PingRequest(kind=kind, received=at, uuid=uuid, **kwargs)


async def starts_and_ends(
    engine: AsyncEngine, check_id: int
) -> list[tuple[datetime | None, datetime | None]]:
    """Each run's (started, finished) of ``check_id``, in the order the runs' first pings arrived."""
    r = t.runs.c
    query = select(r.started_at, r.finished_at).where(r.check_id == check_id).order_by(r.first_ping_at)
    async with engine.connect() as conn:
        return [(started, finished) for started, finished in (await conn.execute(query)).all()]


async def scalar(engine: AsyncEngine, query: Any) -> Any:
    async with engine.connect() as conn:
        return (await conn.execute(query)).scalar_one()


class CommitCounter:
    """Counts committed transactions on an engine (a real event listener, not a mock)."""

    def __init__(self, engine: AsyncEngine) -> None:
        from monitor.storage import sqlite_batch

        self.count = 0
        # on a SQLite file the ingest commits on its worker thread's own engine
        self._targets = [engine.sync_engine]
        if sqlite_batch.runs_in_thread(engine):
            self._targets.append(sqlite_batch._sync_engine(engine))
        for target in self._targets:
            event.listen(target, "commit", self._on_commit)

    def _on_commit(self, _conn: Any) -> None:
        self.count += 1

    def close(self) -> None:
        for target in self._targets:
            event.remove(target, "commit", self._on_commit)


# --------------------------------------------------------------------------- ingest


async def test_group_commit_batches_and_counts_every_ping(
    engine: AsyncEngine, project_id: int, writer: IngestWriter
) -> None:
    checks = [await make_check(engine, project_id, name=f"c{i}", timeout=60) for i in range(20)]
    counter = CommitCounter(engine)
    try:
        requests = [ping(checks[i % 20][1], T0 + timedelta(milliseconds=i)) for i in range(200)]
        answers = await asyncio.gather(*(writer.submit(r) for r in requests))
    finally:
        counter.close()
    assert {(a.status, a.text) for a in answers} == {(200, "OK")}
    assert counter.count <= 20, f"{counter.count} commits for 200 pings: not batched"
    assert await scalar(engine, select(func.sum(t.checks.c.n_pings))) == 200
    assert await scalar(engine, select(func.count()).select_from(t.pings)) == 200
    # Per check, n runs 1..10 with no gap or repeat.
    async with engine.connect() as conn:
        rows = (await conn.execute(select(t.pings.c.check_id, t.pings.c.n))).all()
    by_check: dict[int, list[int]] = {}
    for cid, n in rows:
        by_check.setdefault(cid, []).append(n)
    assert all(sorted(ns) == list(range(1, 11)) for ns in by_check.values())


async def test_bad_pings_in_a_batch_do_not_sink_the_others(
    engine: AsyncEngine, project_id: int, writer: IngestWriter
) -> None:
    _, good = await make_check(engine, project_id, name="good", timeout=60)
    _, cron = await make_check(engine, project_id, name="cron", schedule="*/5 * * * *")
    at = T0 + timedelta(seconds=5)
    requests = [
        ping(good, at),
        ping(cron, at, scheduled=at + timedelta(hours=1)),  # 400: later than received + tolerance
        ping(str(uuid_module.uuid4()), at),  # 404
        ping(good, at + timedelta(milliseconds=1), PingKind.START),
        # A poison ping: the batch's transaction fails, so the writer retries ping by ping.
        ping(good, at.replace(tzinfo=None)),
        ping(cron, at + timedelta(milliseconds=2)),
    ]
    answers = await asyncio.gather(*(writer.submit(r) for r in requests))
    assert [a.status for a in answers] == [200, 400, 404, 200, 503, 200]
    assert answers[1].text.startswith("scheduled: ")
    assert answers[2].text == "not found"
    async with engine.connect() as conn:
        counts = dict((await conn.execute(select(t.checks.c.uuid, t.checks.c.n_pings))).all())
    assert counts == {good: 2, cron: 1}
    # The writer is still alive.
    assert (await writer.submit(ping(good, at + timedelta(seconds=1)))).status == 200


async def test_three_replicas_same_tick_raise_one_duplicate(
    engine: AsyncEngine, project_id: int, writer: IngestWriter
) -> None:
    check_id, uuid = await make_check(engine, project_id, name="billing", schedule="*/5 * * * *")
    channels = await attach_channels(engine, project_id, check_id, 2)
    tick = T0
    at = T0 + timedelta(seconds=1)
    requests = [
        ping(
            uuid, at + timedelta(milliseconds=i), PingKind.START, scheduled=tick, rid=str(uuid_module.uuid4())
        )
        for i in range(3)
    ]
    answers = await asyncio.gather(*(writer.submit(r) for r in requests))
    assert [a.status for a in answers] == [200, 200, 200]
    await assert_one_duplicate(engine, check_id, tick, count=3, channels=len(channels))


@pytest.mark.parametrize("lag_ms", [1, 14, 60])
@pytest.mark.parametrize(
    "fields", [{"timeout": 60, "grace": 60}, {"schedule": "* * * * *", "grace": 60}], ids=["simple", "cron"]
)
async def test_a_start_committed_after_the_finish_that_arrived_after_it_starts_that_run(
    engine: AsyncEngine,
    project_id: int,
    settings_factory: Callable[..., Settings],
    fields: dict[str, Any],
    lag_ms: int,
) -> None:
    # two processes (or replicas) ingest a client's start and its finish, sent 5 ms apart on two
    # connections; each commits its own batches, so the finish may be committed first
    check_id, uuid = await make_check(engine, project_id, name="reordered", max_runtime=5, **fields)
    settings = settings_factory()
    at = T0 + timedelta(seconds=1)
    await ingest_pings(engine, [ping(uuid, at)], settings=settings)
    for n in range(1, 4):
        started = at + timedelta(seconds=60 * n)
        await ingest_pings(engine, [ping(uuid, started + timedelta(milliseconds=5))], settings=settings)
        await ingest_pings(engine, [ping(uuid, started, PingKind.START)], settings=settings)
    # the start stamped after its finish (another process read it later: up to 14 ms on a
    # loaded 2-core host), and applied after
    finished = at + timedelta(seconds=240)
    await ingest_pings(engine, [ping(uuid, finished)], settings=settings)
    await ingest_pings(
        engine, [ping(uuid, finished + timedelta(milliseconds=lag_ms), PingKind.START)], settings=settings
    )
    runs = await starts_and_ends(engine, check_id)
    assert runs[1:] == [
        *(
            (at + timedelta(seconds=60 * n), at + timedelta(seconds=60 * n, milliseconds=5))
            for n in range(1, 4)
        ),
        (finished, finished),
    ]
    # nothing was left open to time out or to overlap the next run
    await evaluate_due(engine, at + timedelta(seconds=290), settings=settings)
    assert (
        await scalar(
            engine, select(func.count()).select_from(t.alerts).where(t.alerts.c.check_id == check_id)
        )
        == 0
    )


async def test_a_start_after_a_finish_the_same_writer_applied_opens_a_run(
    engine: AsyncEngine, project_id: int, writer: IngestWriter
) -> None:
    # a script's `curl` of a success, then of a start, about 20 ms apart: one process stamped
    # and applied both, in that order, so the start is the next run's
    check_id, uuid = await make_check(engine, project_id, name="scripted", timeout=60, grace=60)
    at = T0 + timedelta(seconds=1)
    assert (await writer.submit(ping(uuid, at))).status == 200
    assert (await writer.submit(ping(uuid, at + timedelta(milliseconds=20), PingKind.START))).status == 200
    runs = await starts_and_ends(engine, check_id)
    assert runs == [(None, at), (at + timedelta(milliseconds=20), None)]


async def test_a_start_the_writer_stamped_after_another_processs_finish_starts_that_run(
    engine: AsyncEngine, project_id: int, settings_factory: Callable[..., Settings], writer: IngestWriter
) -> None:
    check_id, uuid = await make_check(engine, project_id, name="two processes", timeout=60, grace=60)
    at = T0 + timedelta(seconds=1)
    assert (await writer.submit(ping(uuid, at - timedelta(seconds=30)))).status == 200
    # the finish through another process (its own ingest, not this writer)
    await ingest_pings(engine, [ping(uuid, at)], settings=settings_factory())
    assert (await writer.submit(ping(uuid, at + timedelta(milliseconds=14), PingKind.START))).status == 200
    runs = await starts_and_ends(engine, check_id)
    assert runs[1:] == [(at, at)]


async def assert_one_duplicate(
    engine: AsyncEngine, check_id: int, tick: datetime, *, count: int, channels: int
) -> None:
    async with engine.connect() as conn:
        alerts = (
            await conn.execute(
                select(t.alerts.c.id, t.alerts.c.kind, t.alerts.c.count, t.alerts.c.scheduled).where(
                    t.alerts.c.check_id == check_id
                )
            )
        ).all()
        runs = (
            await conn.execute(select(func.count()).select_from(t.runs).where(t.runs.c.check_id == check_id))
        ).scalar_one()
        notifications = (
            await conn.execute(
                select(func.count())
                .select_from(t.notifications)
                .where(t.notifications.c.alert_id.in_([a[0] for a in alerts]))
            )
        ).scalar_one()
    assert [(kind, n, scheduled) for _, kind, n, scheduled in alerts] == [("duplicate", count, tick)]
    assert runs == count
    assert notifications == channels


async def test_two_writers_on_two_engines_serialise_per_check(
    database_url: str, engine: AsyncEngine, project_id: int, settings_factory: Callable[..., Settings]
) -> None:
    """Two replicas (two engines, two writers) ingest pings for one tick at once.

    PostgreSQL serialises them with the check's row lock; SQLite with its one write lock.
    """
    check_id, uuid = await make_check(engine, project_id, name="billing", schedule="*/5 * * * *")
    await attach_channels(engine, project_id, check_id, 1)
    engines = [make_engine(database_url) for _ in range(2)]
    writers = [IngestWriter(e, settings_factory()) for e in engines]
    for w in writers:
        await w.start()
    try:
        # Hold the check's row lock so that both writers' batches queue behind it and then race.
        async with engines[0].begin() as blocker:
            if blocker.dialect.name == "postgresql":
                await blocker.execute(
                    text("SELECT id FROM checks WHERE id = :id FOR UPDATE"), {"id": check_id}
                )
            else:  # BEGIN IMMEDIATE already holds SQLite's write lock
                await blocker.execute(text("SELECT 1"))
            pending = [
                asyncio.create_task(
                    writers[i % 2].submit(
                        ping(
                            uuid,
                            T0 + timedelta(seconds=1, milliseconds=i),
                            PingKind.START,
                            scheduled=T0,
                            rid=str(uuid_module.uuid4()),
                        )
                    )
                )
                for i in range(3)
            ]
            await asyncio.sleep(0.3)
            assert not any(task.done() for task in pending)
        answers = await asyncio.gather(*pending)
        assert [a.status for a in answers] == [200, 200, 200]
    finally:
        for w in writers:
            await w.stop()
        for e in engines:
            await e.dispose()
    await assert_one_duplicate(engine, check_id, T0, count=3, channels=1)


async def test_idempotency_across_batches(engine: AsyncEngine, project_id: int, writer: IngestWriter) -> None:
    _, uuid = await make_check(engine, project_id, name="job", timeout=60)
    first = await writer.submit(ping(uuid, T0, idempotency_key="k"))
    again = await asyncio.gather(
        *(writer.submit(ping(uuid, T0 + timedelta(seconds=i), idempotency_key="k")) for i in range(5))
    )
    assert first.status == 200 and {a.status for a in again} == {200}
    assert await scalar(engine, select(t.checks.c.n_pings)) == 1


# --------------------------------------------------------------------------- evaluator


async def test_missed_after_grace_raises_one_alert_and_one_notification_per_channel(
    engine: AsyncEngine, project_id: int, writer: IngestWriter, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory()
    check_id, uuid = await make_check(engine, project_id, name="hourly", schedule="0 * * * *", grace=300)
    channels = await attach_channels(engine, project_id, check_id, 3)
    assert (await writer.submit(ping(uuid, T0 + timedelta(seconds=5)))).status == 200

    async def alerts() -> list[tuple[str, int]]:
        async with engine.connect() as conn:
            return [
                tuple(r)
                for r in (
                    await conn.execute(
                        select(t.alerts.c.kind, t.alerts.c.count).where(t.alerts.c.check_id == check_id)
                    )
                ).all()
            ]  # type: ignore[misc]

    async def notifications() -> list[str]:
        async with engine.connect() as conn:
            return sorted((await conn.execute(select(t.notifications.c.channel_id))).scalars().all())

    next_tick = T0 + timedelta(hours=1)
    # Not before tick + grace: not at the tick, not within grace, not at its very end.
    for at in (next_tick, next_tick + timedelta(seconds=299), next_tick + timedelta(seconds=300)):
        await evaluate_due(engine, at, settings=settings)
        assert await alerts() == []
    status = await scalar(engine, select(t.checks.c.episode_key).where(t.checks.c.id == check_id))
    assert status is None
    await evaluate_due(engine, next_tick + timedelta(seconds=301), settings=settings)
    assert await alerts() == [("missed", 1)]
    assert await notifications() == sorted(channels)
    # Later sweeps add nothing while the episode is open; the count grows per missed tick.
    await evaluate_due(engine, next_tick + timedelta(seconds=400), settings=settings)
    assert await alerts() == [("missed", 1)]
    await evaluate_due(engine, next_tick + timedelta(hours=2, seconds=301), settings=settings)
    assert await alerts() == [("missed", 3)]
    assert await notifications() == sorted(channels)
    flips = await scalar(
        engine, select(func.count()).select_from(t.flips).where(t.flips.c.reason == "missed")
    )
    assert flips == 1


async def test_no_detection_before_the_first_run_ping(
    engine: AsyncEngine, project_id: int, settings_factory: Callable[..., Settings]
) -> None:
    check_id, _ = await make_check(engine, project_id, name="never", schedule="* * * * *", grace=1)
    assert await scalar(engine, select(t.checks.c.next_due).where(t.checks.c.id == check_id)) is None
    assert await evaluate_due(engine, T0 + timedelta(days=3), settings=settings_factory()) == 0
    assert await scalar(engine, select(func.count()).select_from(t.alerts)) == 0


async def test_sweep_touches_only_due_checks(
    engine: AsyncEngine, project_id: int, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory()
    rows = []
    for i in range(503):
        values = new_check_values(project_id=project_id, now=T0, shards=16)
        values.update(name=f"c{i}", timeout=60 if i < 3 else 86_400, grace=60)
        rows.append(values)
    async with engine.begin() as conn:
        await conn.execute(t.checks.insert(), rows)
    uuids = [r["uuid"] for r in rows]
    writer = IngestWriter(engine, settings.replace(ingest_batch=1000))
    await writer.start()
    try:
        answers = await asyncio.gather(*(writer.submit(ping(u, T0)) for u in uuids))
    finally:
        await writer.stop()
    assert {a.status for a in answers} == {200}
    assert (
        await scalar(
            engine, select(func.count()).select_from(t.checks).where(t.checks.c.next_due.is_not(None))
        )
        == 503
    )
    # Due: the three 60 s checks (due + grace = T0 + 120 s). The 500 others are a day away.
    assert await evaluate_due(engine, T0 + timedelta(seconds=100), settings=settings) == 0
    assert await evaluate_due(engine, T0 + timedelta(seconds=121), settings=settings, batch=2) == 3
    assert await scalar(engine, select(func.count()).select_from(t.alerts)) == 3
    # Judged: not due again until their next period ends.
    assert await evaluate_due(engine, T0 + timedelta(seconds=122), settings=settings) == 0
    if engine.dialect.name == "sqlite":
        async with engine.connect() as conn:
            plan = " ".join(
                str(r[-1])
                for r in await conn.execute(
                    text("EXPLAIN QUERY PLAN SELECT id FROM checks WHERE next_due < :now ORDER BY next_due"),
                    {"now": T0.replace(tzinfo=None)},
                )
            )
        assert "ix_checks_next_due" in plan, plan


async def test_paused_checks_are_not_due(
    engine: AsyncEngine, project_id: int, writer: IngestWriter, settings_factory: Callable[..., Settings]
) -> None:
    check_id, uuid = await make_check(engine, project_id, name="job", timeout=60, grace=1)
    await writer.submit(ping(uuid, T0))
    async with engine.begin() as conn:
        await check_service.pause_check(conn, project_id, uuid, T0 + timedelta(seconds=1))
    assert await scalar(engine, select(t.checks.c.next_due).where(t.checks.c.id == check_id)) is None
    assert await evaluate_due(engine, T0 + timedelta(hours=1), settings=settings_factory()) == 0


async def test_a_duplicate_alert_names_every_run_of_the_tick(api: Api) -> None:
    """QA: the alert said "ran twice" when three runs had reported the tick."""
    r = await api.client.post(
        "/api/v3/checks/", json={"name": "billing", "schedule": "0 3 * * *"}, headers=api.headers
    )
    uuid = r.json()["uuid"]
    api.clock.set(datetime(2026, 7, 19, 3, 0, 5, tzinfo=UTC))
    for _ in range(3):
        assert (
            await api.client.get(f"/ping/{uuid}", params={"scheduled": "2026-07-19T03:00:00Z"})
        ).status_code == 200
    alerts = (await api.client.get(f"/api/v3/checks/{uuid}/alerts/", headers=api.headers)).json()["alerts"]
    [duplicate] = [a for a in alerts if a["kind"] == "duplicate"]
    assert duplicate["count"] == 3
    assert "3 times" in duplicate["title"] + duplicate["message"]
    assert "twice" not in duplicate["title"]


async def test_a_batch_whose_checks_changed_different_state_writes_it_in_one_statement(
    engine: AsyncEngine, project_id: int, settings_factory: Callable[..., Settings]
) -> None:
    """A start on one check and a success on another move different state columns; the batch
    still writes its checks' state in one UPDATE (the union of the columns either changed),
    and each check reads back as its own pings left it."""
    from monitor.storage import sqlite_batch

    started_id, started = await make_check(engine, project_id, name="started", timeout=60, grace=60)
    done_id, done = await make_check(engine, project_id, name="done", timeout=60, grace=60)
    target = sqlite_batch._sync_engine(engine) if sqlite_batch.runs_in_thread(engine) else engine.sync_engine
    updates: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        # on PostgreSQL the update is one of the batch's writes in one statement (WITH … AS (UPDATE …))
        updates.extend([statement] * statement.count("UPDATE checks "))

    event.listen(target, "before_cursor_execute", count)
    writer = IngestWriter(engine, settings_factory(ingest_wait=0.2))
    await writer.start()
    try:
        answers = await asyncio.gather(
            writer.submit(PingRequest(kind=PingKind.START, received=T0, uuid=started)),
            writer.submit(PingRequest(kind=PingKind.SUCCESS, received=T0, uuid=done)),
        )
    finally:
        await writer.stop()
        event.remove(target, "before_cursor_execute", count)
    assert [a.status for a in answers] == [200, 200]
    assert len(updates) == 1, updates
    async with engine.connect() as conn:
        rows = {
            r.id: r
            for r in (
                await conn.execute(
                    select(
                        t.checks.c.id, t.checks.c.n_pings, t.checks.c.next_due, t.checks.c.last_run_ping_at
                    )
                )
            ).all()
        }
    assert rows[started_id].n_pings == 1 and rows[done_id].n_pings == 1
    assert rows[done_id].next_due == T0 + timedelta(seconds=120)  # period + grace after the success
    assert rows[started_id].next_due is not None


async def test_a_failure_of_a_tick_older_than_a_success_does_not_flip_the_check_down(
    engine: AsyncEngine, project_id: int, writer: IngestWriter
) -> None:
    # DESIGN §5, supersession: the 01:55 run failing after the 02:00 run succeeded changes no
    # status. The ingest loads runs from the check's cursor (02:05) on; the 02:00 success is
    # older, and the book still has to hold it to tell.
    check_id, uuid = await make_check(engine, project_id, name="nightly", schedule="*/5 * * * *")
    for request in (
        ping(uuid, T0 + timedelta(seconds=1), PingKind.SUCCESS),
        ping(uuid, T0 + timedelta(minutes=5, seconds=1), PingKind.START),
        ping(uuid, T0 + timedelta(minutes=5, seconds=2), PingKind.FAIL, scheduled=T0 - timedelta(minutes=5)),
    ):
        assert (await writer.submit(request)).status == 200
    async with engine.connect() as conn:
        downs = (
            await conn.execute(
                select(func.count())
                .select_from(t.flips)
                .where(t.flips.c.check_id == check_id, t.flips.c.up == 0)
            )
        ).scalar_one()
        runs = (await conn.execute(select(t.runs.c.scheduled).where(t.runs.c.check_id == check_id))).scalars()
        assert sorted(runs) == [T0 - timedelta(minutes=5), T0, T0 + timedelta(minutes=5)]
    assert downs == 0


# ----------------------------------------------------------- PostgreSQL: two batches in flight


@pytest.fixture
async def pg_engine(pg_shared: str) -> AsyncIterator[AsyncEngine]:
    from tests.conftest import _truncate

    await _truncate(pg_shared)
    engine = make_engine(pg_shared)
    yield engine
    await engine.dispose()


@contextlib.asynccontextmanager
async def _holding(engine: AsyncEngine, statement: str, **params: Any) -> AsyncIterator[Any]:
    """An open transaction that ran ``statement`` (a lock) and holds it until the block ends
    or the caller rolls the yielded connection back."""
    conn = await engine.connect()
    try:
        await conn.begin()
        await conn.execute(text(statement), params)
        yield conn
    finally:
        await conn.rollback()
        await conn.close()


def _stall_ping_inserts(engine: AsyncEngine) -> contextlib.AbstractAsyncContextManager[Any]:
    """``pings`` held in SHARE mode: every ingest transaction blocks at its ping insert, after
    it locked its checks. Roll it back to let them through."""
    return _holding(engine, "LOCK TABLE pings IN SHARE MODE")


@pytest.fixture
async def pg_project(pg_engine: AsyncEngine) -> dict[str, Any]:
    async with pg_engine.begin() as conn:
        return dict(await create_project(conn, "p", T0))


@pytest.fixture
async def pg_writer(pg_engine: AsyncEngine) -> AsyncIterator[IngestWriter]:
    writer = IngestWriter(pg_engine, Settings(database_url=str(pg_engine.url)))
    await writer.start()
    yield writer
    await writer.stop()


async def _kinds_in_order(engine: AsyncEngine, check_id: int) -> list[str]:
    """The kinds of a check's stored pings, by their number ``n``."""
    async with engine.connect() as conn:
        query = select(t.pings.c.kind).where(t.pings.c.check_id == check_id).order_by(t.pings.c.n)
        return list((await conn.execute(query)).scalars().all())


async def _transactions_waiting_for_a_lock(engine: AsyncEngine, count: int, *, at: str = "%") -> None:
    """Wait (up to 15 s) until exactly ``count`` sessions wait for a lock in a statement
    matching the ``LIKE`` pattern ``at``."""
    query = text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND query LIKE :at"
    )
    for _ in range(300):
        async with engine.connect() as conn:
            if (await conn.execute(query, {"at": at})).scalar_one() == count:
                return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never saw {count} transactions waiting for a lock at {at!r}")


async def _ingests_blocked_on_pings(engine: AsyncEngine, count: int) -> None:
    # the batch's writes are one statement, its ping insert the first of them (WITH w0 AS (INSERT …))
    await _transactions_waiting_for_a_lock(engine, count, at="WITH w0 AS (INSERT INTO pings%")


async def test_on_postgresql_the_next_batch_runs_while_one_waits_for_the_database(
    pg_engine: AsyncEngine, pg_project: dict[str, Any], pg_writer: IngestWriter
) -> None:
    _, first = await make_check(pg_engine, pg_project["id"], name="first", timeout=60)
    _, second = await make_check(pg_engine, pg_project["id"], name="second", timeout=60)
    async with _stall_ping_inserts(pg_engine):
        one = asyncio.ensure_future(pg_writer.submit(ping(first, T0)))
        await _ingests_blocked_on_pings(pg_engine, 1)
        two = asyncio.ensure_future(pg_writer.submit(ping(second, T0)))
        # the second batch got as far as the first: both wait at their ping insert
        await _ingests_blocked_on_pings(pg_engine, 2)
    assert [(await one).status, (await two).status] == [200, 200]
    assert await scalar(pg_engine, select(func.sum(t.checks.c.n_pings))) == 2


async def test_on_postgresql_a_later_batch_waits_for_an_earlier_ping_of_the_same_check(
    pg_engine: AsyncEngine, pg_project: dict[str, Any], pg_writer: IngestWriter
) -> None:
    check_id, uuid = await make_check(pg_engine, pg_project["id"], name="job", timeout=60)
    async with _stall_ping_inserts(pg_engine):
        start = asyncio.ensure_future(pg_writer.submit(ping(uuid, T0, PingKind.START)))
        await _ingests_blocked_on_pings(pg_engine, 1)
        success = asyncio.ensure_future(pg_writer.submit(ping(uuid, T0 + timedelta(seconds=5))))
        await asyncio.sleep(0.3)  # the second batch is waiting for the check's row, not the table
        await _ingests_blocked_on_pings(pg_engine, 1)
    assert [(await start).status, (await success).status] == [200, 200]
    assert await _kinds_in_order(pg_engine, check_id) == ["start", "success"]
    async with pg_engine.connect() as conn:
        outcome = (await conn.execute(select(t.runs.c.outcome, t.runs.c.started_at))).one()
    assert outcome.outcome == "on_time" and outcome.started_at == T0  # one run, started then finished


async def test_on_postgresql_a_batch_still_waiting_for_its_rows_holds_back_the_next_one(
    pg_engine: AsyncEngine, pg_project: dict[str, Any], pg_writer: IngestWriter
) -> None:
    # B waits for X's row (held elsewhere) before it can lock Y; C pings Y later. When A, the
    # batch in flight before B, ends, C must still wait for B's rows: C locking Y first would
    # store Y's later ping before its earlier one (found by a breaker session: a batch's end
    # released the newest batch instead of its own follower)
    other_id, other = await make_check(pg_engine, pg_project["id"], name="a", timeout=60)
    x_id, x = await make_check(pg_engine, pg_project["id"], name="x", timeout=60)
    y_id, y = await make_check(pg_engine, pg_project["id"], name="y", timeout=60)
    assert other_id < x_id < y_id
    async with (
        _holding(pg_engine, "SELECT id FROM checks WHERE id = :id FOR UPDATE", id=x_id),
        _stall_ping_inserts(pg_engine) as stall,
    ):
        a = asyncio.ensure_future(pg_writer.submit(ping(other, T0)))
        await _ingests_blocked_on_pings(pg_engine, 1)
        b = [
            asyncio.ensure_future(pg_writer.submit(ping(x, T0))),
            asyncio.ensure_future(pg_writer.submit(ping(y, T0, PingKind.START))),
        ]
        await asyncio.sleep(0.3)  # B is waiting for X's row
        c = asyncio.ensure_future(pg_writer.submit(ping(y, T0 + timedelta(seconds=5))))
        await asyncio.sleep(0.1)
        await stall.rollback()  # A ends
        assert (await a).status == 200
        await asyncio.wait({c}, timeout=1.0)  # C must not get past B meanwhile
        assert not c.done()
    assert [(await f).status for f in (*b, c)] == [200, 200, 200]
    assert await _kinds_in_order(pg_engine, y_id) == ["start", "success"]


async def test_on_postgresql_two_batches_creating_one_slug_make_one_check_and_both_succeed(
    pg_engine: AsyncEngine,
    pg_project: dict[str, Any],
    pg_writer: IngestWriter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ping_key = str(pg_project["ping_key"])

    def auto(at: datetime) -> PingRequest:
        return PingRequest(kind=PingKind.SUCCESS, received=at, ping_key=ping_key, slug="nightly", create=True)

    async with _stall_ping_inserts(pg_engine):
        first = asyncio.ensure_future(pg_writer.submit(auto(T0)))
        await _ingests_blocked_on_pings(pg_engine, 1)  # A created the check, not yet committed
        second = asyncio.ensure_future(pg_writer.submit(auto(T0 + timedelta(seconds=1))))
        await asyncio.sleep(0.3)  # B's insert of the same slug waits for A
    assert [(await first).status, (await second).status] == [201, 200]
    assert await scalar(pg_engine, select(func.count()).select_from(t.checks)) == 1
    assert await scalar(pg_engine, select(func.sum(t.checks.c.n_pings))) == 2
    assert "ping ingest failed" not in caplog.text


async def _record_shard_count(engine: AsyncEngine) -> None:
    """Record the shard count as any process's start does: with none recorded, the first
    creating transaction inserts the row and a concurrent one waits for it, which would keep
    the two apart."""
    async with engine.begin() as conn:
        await record_shard_count(conn, 16, T0)


def _auto(ping_key: str, slug: str, at: datetime) -> PingRequest:
    return PingRequest(kind=PingKind.SUCCESS, received=at, ping_key=ping_key, slug=slug, create=True)


async def test_on_postgresql_batches_creating_slugs_in_opposite_orders_do_not_deadlock(
    pg_engine: AsyncEngine, pg_project: dict[str, Any]
) -> None:
    """Slug checks are created under the project's lock, taken before any of them: two batches
    creating ``a`` and ``b`` in opposite orders wait for each other once, not in a circle."""
    await _record_shard_count(pg_engine)
    key = str(pg_project["ping_key"])
    settings = Settings(database_url=str(pg_engine.url))
    hold = f"SELECT id FROM projects WHERE id = {int(pg_project['id'])} FOR UPDATE"
    async with _holding(pg_engine, hold):  # as an API upsert of the project does
        one = asyncio.ensure_future(
            ingest_pings(pg_engine, [_auto(key, "a", T0), _auto(key, "b", T0)], settings=settings)
        )
        two = asyncio.ensure_future(
            ingest_pings(pg_engine, [_auto(key, "b", T0), _auto(key, "a", T0)], settings=settings)
        )
        await _transactions_waiting_for_a_lock(pg_engine, 2)
    answers = [[a.status for a in await one], [a.status for a in await two]]
    assert sorted(answers) == [[200, 200], [201, 201]]
    assert await scalar(pg_engine, select(func.count()).select_from(t.checks)) == 2


async def test_on_postgresql_an_api_upsert_and_a_ping_creating_one_slug_both_succeed(
    pg_engine: AsyncEngine, pg_project: dict[str, Any]
) -> None:
    """The upsert locks the project and then inserts; the ping path takes the same lock before
    its insert (not after it, through the foreign key's check): the ping waits, then finds the
    check the upsert made."""
    await _record_shard_count(pg_engine)
    key = str(pg_project["ping_key"])
    settings = Settings(database_url=str(pg_engine.url))
    async with pg_engine.connect() as conn:
        await conn.begin()
        project = select(t.projects.c.id).where(t.projects.c.id == pg_project["id"])
        await conn.execute(project.with_for_update())
        ping = _auto(key, "nightly", T0)
        pinged = asyncio.ensure_future(ingest_pings(pg_engine, [ping], settings=settings))
        await _transactions_waiting_for_a_lock(pg_engine, 1)
        data = {"name": "nightly", "slug": "nightly", "unique": ["slug"]}
        check_id, created = await check_service.create_or_upsert(conn, pg_project["id"], data, T0, shards=16)
        await conn.commit()
    assert created
    assert [a.status for a in await pinged] == [200]
    assert await scalar(pg_engine, select(t.checks.c.n_pings).where(t.checks.c.id == check_id)) == 1


async def test_on_postgresql_a_list_create_and_a_ping_batch_creating_the_same_slugs_do_not_deadlock(
    pg_engine: AsyncEngine, pg_project: dict[str, Any]
) -> None:
    """A list body inserts its slugs in list order, a ping batch in sorted order: both take the
    project's lock first, so one waits for the other instead of each holding a slug the other
    wants. Whichever goes second finds the slugs taken (409 for the list, 200 for the pings)."""
    await _record_shard_count(pg_engine)
    key = str(pg_project["ping_key"])
    settings = Settings(database_url=str(pg_engine.url))

    async def create_list() -> str:
        try:
            async with pg_engine.begin() as conn:
                items = [{"name": s, "slug": s} for s in ("b", "a")]
                await check_service.create_many(conn, pg_project["id"], items, T0, shards=16)
        except Conflict:
            return "conflict"
        return "created"

    async with pg_engine.connect() as holder:
        await holder.begin()
        await UnitOfWork.joining(holder).projects.lock(pg_project["id"])
        listed = asyncio.ensure_future(create_list())
        pinged = asyncio.ensure_future(
            ingest_pings(pg_engine, [_auto(key, "a", T0), _auto(key, "b", T0)], settings=settings)
        )
        await _transactions_waiting_for_a_lock(pg_engine, 2)
        await holder.rollback()
    outcome = (await listed, [a.status for a in await pinged])
    assert outcome in [("created", [200, 200]), ("conflict", [201, 201])]
    assert await scalar(pg_engine, select(func.count()).select_from(t.checks)) == 2


async def test_on_postgresql_a_ping_raising_an_alert_does_not_wait_for_a_projects_creators(
    pg_engine: AsyncEngine, pg_project: dict[str, Any]
) -> None:
    """The lock creators of a project's checks take (an upsert, a slug's auto-creation) leaves
    the row's key alone: a batch inserting an alert, whose foreign key takes the project row
    ``FOR KEY SHARE``, goes on meanwhile. (One that blocked could close a circle: the creator
    waiting for a check that batch has locked.)"""
    _, check = await make_check(pg_engine, pg_project["id"], name="c", timeout=60)
    settings = Settings(database_url=str(pg_engine.url))
    async with pg_engine.connect() as conn:
        await conn.begin()
        await UnitOfWork.joining(conn).projects.lock(pg_project["id"])
        failed = ingest_pings(pg_engine, [ping(check, T0, PingKind.FAIL)], settings=settings)
        answers = await asyncio.wait_for(failed, timeout=10)
        await conn.rollback()
    assert [a.status for a in answers] == [200]
    assert await scalar(pg_engine, select(func.count()).select_from(t.alerts)) == 1


async def test_only_the_ping_that_created_a_slug_check_is_answered_created(
    engine: AsyncEngine, writer: IngestWriter
) -> None:
    async with engine.begin() as conn:
        project = await create_project(conn, "slugs", T0)
    requests = [
        PingRequest(
            kind=PingKind.SUCCESS,
            received=T0 + timedelta(seconds=i),
            ping_key=str(project["ping_key"]),
            slug="backup",
            create=True,
        )
        for i in range(3)
    ]
    answers = await asyncio.gather(*(writer.submit(r) for r in requests))  # one batch
    assert [a.status for a in answers] == [201, 200, 200]
