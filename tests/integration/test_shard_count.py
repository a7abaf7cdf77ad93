"""The shard count is the database's, not each process's ``MONITOR_SHARDS`` (DESIGN §6).

On SQLite and PostgreSQL: the first process records its count and others adopt it with a
``shard_count_mismatch`` warning; check creation (API and ``create=1`` ingest) takes the shard
from the stored count; ``reshard`` rewrites every check and removes the lease rows of shards
that no longer exist (keeping other leases); running evaluators follow a reshard; a database
upgraded from revision 0004 loses its pre-sharding ``evaluator`` lease row and ``/ready`` and
``/metrics`` report the stored count with no stale lease listed.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from alembic import command
from litestar.testing import AsyncTestClient
from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor import cli
from monitor.app import create_app
from monitor.domain.checks import PingKind
from monitor.domain.clock import FrozenClock
from monitor.domain.errors import StaleLease, ValidationError
from monitor.domain.shards import shard_of
from monitor.services import checks as check_service
from monitor.services import projects
from monitor.services.ingest import IngestWriter, PingRequest
from monitor.services.shards import reshard
from monitor.settings import Settings
from monitor.storage import cluster
from monitor.storage import tables as t
from monitor.storage.engine import _alembic_config, make_engine, migrate
from monitor.storage.leases import check_fence
from monitor.workers.evaluator import ShardedEvaluator

T0 = datetime(2026, 7, 18, 2, 0, tzinfo=UTC)


async def _project(engine: AsyncEngine) -> dict[str, Any]:
    async with engine.begin() as conn:
        return await projects.create_project(conn, "p", T0, api_key="shard-count-key-0123456789")


async def _create(engine: AsyncEngine, project_id: int, count: int, *, shards: int) -> None:
    async with engine.begin() as conn:
        for i in range(count):
            await check_service.create_or_upsert(conn, project_id, {"name": f"c{i}"}, T0, shards=shards)


async def _shards(engine: AsyncEngine) -> dict[str, int]:
    async with engine.connect() as conn:
        return {u: s for u, s in (await conn.execute(select(t.checks.c.uuid, t.checks.c.shard)))}


async def _lease_names(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        return sorted((await conn.execute(select(t.leases.c.name))).scalars().all())


async def _add_leases(engine: AsyncEngine, *names: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            insert(t.leases), [{"name": n, "holder": None, "token": 3, "expires_at": None} for n in names]
        )


async def test_first_process_records_its_count_and_others_adopt_it_with_a_warning(
    engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="monitor.storage.cluster")
    assert await cluster.adopt_shard_count(engine, 5, T0, process="evaluator") == 5
    assert [getattr(r, "action", None) for r in caplog.records] == ["shard_count_recorded"]
    caplog.clear()

    assert await cluster.adopt_shard_count(engine, 5, T0, process="evaluator") == 5
    assert caplog.records == []  # agreeing replicas are quiet
    assert await cluster.adopt_shard_count(engine, 9, T0, process="http") == 5
    (warning,) = caplog.records
    assert warning.levelno == logging.WARNING
    fields = tuple(getattr(warning, k, None) for k in ("action", "configured", "stored"))
    assert fields == ("shard_count_mismatch", 9, 5)
    assert "MONITOR_SHARDS=9" in warning.getMessage() and "5 shards" in warning.getMessage()


async def test_first_record_reshards_existing_checks(engine: AsyncEngine) -> None:
    """A database whose checks were stored with another count (upgraded from 0004) is made
    consistent by the first process that records its count."""
    project = await _project(engine)
    await _create(engine, project["id"], 12, shards=16)
    async with engine.begin() as conn:
        await conn.execute(delete(t.cluster_settings))  # as before revision 0005
        await conn.execute(t.checks.update().values(shard=15))
    assert await cluster.adopt_shard_count(engine, 3, T0, process="evaluator") == 3
    assert all(shard == shard_of(u, 3) for u, shard in (await _shards(engine)).items())


async def test_check_creation_takes_the_shard_from_the_stored_count(engine: AsyncEngine) -> None:
    await cluster.adopt_shard_count(engine, 3, T0, process="http")
    project = await _project(engine)
    await _create(engine, project["id"], 20, shards=16)  # this process says 16: the database says 3
    writer = IngestWriter(engine, Settings(database_url=str(engine.url), shards=16))
    await writer.start()
    try:
        for i in range(5):
            answer = await writer.submit(
                PingRequest(
                    kind=PingKind.SUCCESS,
                    received=T0,
                    ping_key=str(project["ping_key"]),
                    slug=f"auto-{i}",
                    create=True,
                )
            )
            assert answer.status == 201, answer
    finally:
        await writer.stop()
    stored = await _shards(engine)
    assert len(stored) == 25
    assert all(shard == shard_of(u, 3) for u, shard in stored.items())


async def test_reshard_round_trip_rewrites_checks_and_removes_only_stale_shard_leases(
    engine: AsyncEngine,
) -> None:
    await cluster.adopt_shard_count(engine, 8, T0, process="migrate")
    project = await _project(engine)
    await _create(engine, project["id"], 40, shards=8)
    await _add_leases(engine, *(f"shard-{i}" for i in range(8)), "evaluator", "job-backup", "shard-x")

    down = await reshard(engine, 3, T0 + timedelta(minutes=1))
    assert down["shards_before"] == 8 and down["shards"] == 3
    assert down["leases_removed"] == ["evaluator", "shard-3", "shard-4", "shard-5", "shard-6", "shard-7"]
    assert 0 < down["checks_moved"] <= 40
    assert all(shard == shard_of(u, 3) for u, shard in (await _shards(engine)).items())
    assert await _lease_names(engine) == ["job-backup", "shard-0", "shard-1", "shard-2", "shard-x"]
    async with engine.connect() as conn:
        assert await cluster.stored_shard_count(conn) == 3

    up = await reshard(engine, 8, T0 + timedelta(minutes=2))
    assert (up["shards_before"], up["shards"], up["leases_removed"]) == (3, 8, [])
    assert up["checks_moved"] == down["checks_moved"]  # back where they were
    assert all(shard == shard_of(u, 8) for u, shard in (await _shards(engine)).items())

    same = await reshard(engine, 8, T0 + timedelta(minutes=3))
    assert same["checks_moved"] == 0
    with pytest.raises(ValidationError, match="shards: must be between 1 and 4096"):
        await reshard(engine, 0, T0)


async def test_running_evaluator_follows_a_reshard(engine: AsyncEngine, database_url: str) -> None:
    clock = FrozenClock(datetime.now(UTC))  # real-time leases: PostgreSQL's expiry is the server's
    settings = Settings(database_url=database_url, shards=6, lease_ttl=30)
    evaluator = ShardedEvaluator(engine, settings, clock, holder="host:1")
    try:
        await cluster.adopt_shard_count(engine, 6, clock.now(), process="evaluator")
        await evaluator.rebalance()
        assert sorted(evaluator.leases.held) == [f"shard-{i}" for i in range(6)]

        await reshard(engine, 2, clock.now())
        await evaluator.rebalance()
        assert (evaluator.shards, sorted(evaluator.leases.held)) == (2, ["shard-0", "shard-1"])
        assert await _lease_names(engine) == ["shard-0", "shard-1"]

        await reshard(engine, 4, clock.now())
        await evaluator.rebalance()
        assert sorted(evaluator.leases.held) == [f"shard-{i}" for i in range(4)]
        assert await _lease_names(engine) == [f"shard-{i}" for i in range(4)]
    finally:
        await evaluator.close()


async def test_evaluator_with_another_count_adopts_the_stored_one(
    engine: AsyncEngine, database_url: str
) -> None:
    clock = FrozenClock(datetime.now(UTC))
    await cluster.adopt_shard_count(engine, 3, clock.now(), process="http")
    evaluator = ShardedEvaluator(
        engine, Settings(database_url=database_url, shards=10, lease_ttl=30), clock, holder="host:2"
    )
    try:
        await evaluator.rebalance()
        assert sorted(evaluator.leases.held) == ["shard-0", "shard-1", "shard-2"]
        assert await _lease_names(engine) == ["shard-0", "shard-1", "shard-2"]
    finally:
        await evaluator.close()


async def test_fence_refuses_a_recreated_row_with_the_same_token_and_another_holder(
    engine: AsyncEngine,
) -> None:
    """Deleting a lease row (reshard to fewer shards) restarts its token: the holder decides."""
    now = datetime.now(UTC)
    async with engine.begin() as conn:
        await conn.execute(
            insert(t.leases).values(
                name="shard-5", holder="new:2", token=1, expires_at=now + timedelta(minutes=1)
            )
        )
    with pytest.raises(StaleLease, match="held by new:2"):
        async with engine.begin() as conn:
            await check_fence(conn, "shard-5", 1, "stalled:1", now)
    async with engine.begin() as conn:
        await check_fence(conn, "shard-5", 1, "new:2", now)


# ---------------------------------------------------------------- upgrade from 0004 and /ready


def _to(connection: Connection, revision: str) -> None:
    command.downgrade(_alembic_config(connection), revision)


async def test_upgrade_from_0004_leaves_no_stale_lease_in_ready_and_metrics(empty_database_url: str) -> None:
    engine = make_engine(empty_database_url)
    try:
        await migrate(engine)
        project = await _project(engine)
        await _create(engine, project["id"], 6, shards=16)
        # Back to a pre-0005 database: checks sharded by some other count, the pre-sharding
        # global lease, a shard beyond today's count, a live shard and a scheduler job lease.
        async with engine.begin() as conn:
            await conn.run_sync(_to, "0004")
            await conn.execute(t.checks.update().values(shard=13))
        await _add_leases(engine, "evaluator", "shard-1", "shard-13", "job-backup")

        await migrate(engine)
        assert await _lease_names(engine) == ["job-backup", "shard-1", "shard-13"]  # 0005 drops `evaluator`

        clock = FrozenClock(T0)
        settings = Settings(database_url=empty_database_url, shards=4)
        app = create_app(settings, clock=clock, evaluator=False, notify=False, liveness=False)
        async with AsyncTestClient(app) as client:  # the first process records 4 and reshards
            ready = (await client.get("/ready")).json()
            assert ready["shards"] == 4
            assert [lease["name"] for lease in ready["leases"]] == ["job-backup", "shard-1"]
            assert "monitor_shards 4.0" in (await client.get("/metrics")).text
            assert all(shard == shard_of(u, 4) for u, shard in (await _shards(engine)).items())

            await reshard(engine, 1, clock.now())  # shrinking: shard-1 goes too
            ready = (await client.get("/ready")).json()
            assert ready["shards"] == 1
            assert [lease["name"] for lease in ready["leases"]] == ["job-backup"]
            assert "monitor_shards 1.0" in (await client.get("/metrics")).text
        assert all(shard == 0 for shard in (await _shards(engine)).values())
    finally:
        await engine.dispose()


def test_reshard_command_shows_changes_and_refuses_a_bad_count(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(*args: str) -> tuple[int, str, str]:
        code = cli.main(["reshard", "--database-url", database_url, *args])
        out, err = capsys.readouterr()
        return code, out, err

    assert run() == (0, '{"shards": null}\n', "")  # nothing recorded yet
    code, out, _ = run("5")
    assert code == 0 and json.loads(out) == {
        "shards_before": None,
        "shards": 5,
        "checks_moved": 0,
        "leases_removed": [],
    }
    assert run() == (0, '{"shards": 5}\n', "")
    code, out, err = run("0")
    assert (code, out) == (2, "") and "shards: must be between 1 and 4096, got 0" in err
    assert run() == (0, '{"shards": 5}\n', "")
