"""StatusStore (monitor.storage.ports) on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from monitor.domain.checks import Status
from monitor.storage import cluster, history_totals
from monitor.storage import tables as t
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import (
    NOW,
    add_alert_with_notification,
    add_channel,
    add_check,
    add_project,
    add_run,
)


async def test_ping_answers(uow: UnitOfWork) -> None:
    await uow.status.ping()


async def test_stored_shard_count_is_the_recorded_one(uow: UnitOfWork) -> None:
    assert await uow.status.stored_shard_count() is None
    await cluster.record_shard_count(uow.connection, 8, NOW)
    assert await uow.status.stored_shard_count() == 8


async def test_leases_by_name(uow: UnitOfWork) -> None:
    await uow.connection.execute(
        t.leases.insert(),
        [
            {"name": "shard-1", "holder": "b", "token": 3, "expires_at": NOW},
            {"name": "notifier", "holder": None, "token": 0, "expires_at": None},
        ],
    )
    assert await uow.status.leases() == [("notifier", None, 0, None), ("shard-1", "b", 3, NOW)]


async def test_checks_due_all_checks_and_started_count(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    due = await add_check(uow, project, next_due=NOW - timedelta(seconds=1))
    later = await add_check(uow, project, next_due=NOW + timedelta(seconds=1), max_runtime=60)
    await add_check(uow, project)
    assert await uow.status.checks_due(NOW) == 1
    assert {r["id"] for r in await uow.status.all_checks()} >= {due, later}
    await add_run(uow, due, started=NOW - timedelta(seconds=10))  # within its 1800 s
    await add_run(uow, later, started=NOW - timedelta(seconds=120))  # past its 60 s
    assert await uow.status.started_count(NOW) == 1


async def test_checks_by_status_decides_as_the_domain(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    await add_check(uow, project)  # never pinged: new
    await add_check(uow, project, paused=True)
    await add_check(uow, project, watch_from=NOW)  # up
    await add_check(uow, project, watch_from=NOW, pending_tick=NOW - timedelta(seconds=1))  # grace
    await add_check(uow, project, watch_from=NOW, episode_key="k")  # down
    counts = await uow.status.checks_by_status(NOW)
    assert {s.value: counts.get(s.value, 0) for s in Status} == {
        Status.NEW.value: 1,
        Status.PAUSED.value: 1,
        Status.UP.value: 1,
        Status.GRACE.value: 1,
        Status.DOWN.value: 1,
    }


async def test_replicas_liveness_and_outages(uow: UnitOfWork) -> None:
    await uow.connection.execute(
        t.replicas.insert(),
        [
            {"name": "a", "role": "evaluator", "renewed_at": NOW},
            {"name": "b", "role": "evaluator", "renewed_at": NOW - timedelta(minutes=5)},
            {"name": "c", "role": "notifier", "renewed_at": NOW},
        ],
    )
    await uow.connection.execute(
        t.liveness.insert(),
        [{"name": "x", "renewed_at": NOW}, {"name": "y", "renewed_at": NOW - timedelta(hours=1)}],
    )
    assert await uow.status.renewed_replicas("evaluator", NOW - timedelta(seconds=30)) == 1
    assert await uow.status.live_processes(NOW - timedelta(seconds=30)) == 1
    assert await uow.status.last_liveness() == NOW
    assert await uow.status.outages() == 0
    await uow.connection.execute(t.outages.insert().values(started_at=NOW - timedelta(hours=2), ended_at=NOW))
    assert await uow.status.outages() == 1


async def test_counts_by_group_in_the_database(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    channel = await add_channel(uow, project)
    await add_alert_with_notification(uow, project, check, channel)
    for n, kind in enumerate(("success", "success", "fail"), start=1):
        await uow.connection.execute(
            t.pings.insert().values(check_id=check, n=n, kind=kind, received_at=NOW, method="GET")
        )
    assert await uow.status.counts_by("pings.kind") == [("fail", 1), ("success", 2)]
    assert await uow.status.counts_by("alerts.kind") == [("down", 1)]
    assert await uow.status.counts_by("notifications.status") == [("pending", 1)]
    assert await uow.status.counts_by("notification_attempts.ok") == [("ok", 1)]
    # rows deleted since (retention, a deleted check) still count: the metrics' counters
    await history_totals.add(uow.connection, history_totals.PINGS, {"fail": 2, "log": 5})
    await history_totals.add(uow.connection, history_totals.PINGS, {"log": 1})
    await history_totals.add(uow.connection, history_totals.ATTEMPTS, {"error": 3})
    assert await uow.status.counts_by("pings.kind") == [("fail", 3), ("log", 6), ("success", 2)]
    assert await uow.status.counts_by("notification_attempts.ok") == [("error", 3), ("ok", 1)]
    assert await uow.status.counts_by("notifications.status") == [("pending", 1)]
