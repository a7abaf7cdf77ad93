"""RetentionStore (monitor.storage.ports) on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select

from monitor.storage import tables as t
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import NOW, add_channel, add_check, add_project, count

OLD = NOW - timedelta(days=100)


async def _ping(uow: UnitOfWork, check_id: int, n: int, **values: Any) -> None:
    row = {"check_id": check_id, "n": n, "kind": "log", "received_at": OLD, **values}
    await uow.connection.execute(t.pings.insert().values(row))


async def _numbers(uow: UnitOfWork, check_id: int) -> list[int]:
    found = await uow.connection.execute(select(t.pings.c.n).where(t.pings.c.check_id == check_id))
    return sorted(int(n) for (n,) in found)


async def test_candidates_have_many_pings_or_are_old_by_id_after_a_cursor(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    busy = await add_check(uow, project, n_pings=20)
    old = await add_check(uow, project, created_at=OLD)
    await add_check(uow, project, n_pings=5)  # young and small: nothing to prune
    later = await add_check(uow, project, n_pings=30)
    found = await uow.retention.candidates(
        0, ping_retention=10, created_before=NOW - timedelta(days=90), limit=5
    )
    assert [c["id"] for c in found] == [busy, old, later]
    assert set(found[0]) == {
        "id",
        "kind",
        "timeout",
        "n_pings",
        "judged_until",
        "watch_from",
        "last_run_ping_at",
        "created_at",
        "episode_key",
    }
    after = await uow.retention.candidates(busy, ping_retention=10, created_before=OLD, limit=1)
    assert [c["id"] for c in after] == [later]


async def test_prune_pings_keeps_those_still_needed_and_stops_at_the_limit(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    await uow.connection.execute(
        t.runs.insert().values(id="open", check_id=check, scheduled=OLD, first_ping_at=OLD)
    )
    await _ping(uow, check, 1)  # old log ping: goes
    await _ping(uow, check, 2, kind="start", run_id="open")  # of a run in progress
    await _ping(uow, check, 3, kind="success", scheduled=NOW)  # bound to a tick not judged yet
    await _ping(uow, check, 4, kind="success", scheduled=OLD)  # bound to a judged tick: goes
    yesterday = NOW - timedelta(days=1)
    await _ping(
        uow, check, 5, idempotency_key="k", received_at=yesterday, response_status=201
    )  # goes, key kept
    await _ping(uow, check, 6, idempotency_key="k6")  # its key forgotten: goes, key too
    await _ping(uow, check, 7)  # above the cutoff
    prune = {"ticks_from": NOW, "run_kinds": ["success"], "keys_since": NOW - timedelta(days=7)}
    assert await uow.retention.prune_pings(check, up_to_n=6, limit=2, **prune) == 2
    assert await uow.retention.prune_pings(check, up_to_n=6, limit=2, **prune) == 2
    assert await uow.retention.prune_pings(check, up_to_n=6, limit=2, **prune) == 0
    assert await _numbers(uow, check) == [2, 3, 7]
    # the young key stays behind, and a repeat of it is still recognised
    assert await uow.pings.remembered([check], ["k", "k6"], NOW - timedelta(days=7)) == [
        (check, "log", "k", 201)
    ]
    # with no cursor yet every run ping bound to a tick is needed
    assert await uow.retention.prune_pings(check, up_to_n=7, limit=9, **{**prune, "ticks_from": None}) == 1
    assert await _numbers(uow, check) == [2, 3]


async def test_prune_keys_forgets_keys_past_their_window_in_batches(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    for i, days in enumerate((9, 8, 8, 1)):
        await uow.connection.execute(
            t.ping_keys.insert().values(
                check_id=check,
                kind="log",
                key=f"k{i}",
                response_status=200,
                received_at=NOW - timedelta(days=days),
            )
        )
    week_ago = NOW - timedelta(days=7)
    assert await uow.retention.prune_keys(received_before=week_ago, limit=2) == 2
    assert await uow.retention.prune_keys(received_before=week_ago, limit=2) == 1
    assert await uow.retention.prune_keys(received_before=week_ago, limit=2) == 0
    assert await uow.pings.remembered([check], ["k0", "k1", "k2", "k3"], week_ago) == [
        (check, "log", "k3", 200)
    ]


async def test_prune_runs_ticks_and_flips_keep_the_newest_and_the_young(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check, other = await add_check(uow, project), await add_check(uow, project)
    for day in range(5):  # ticks 100..96 days ago, then one yesterday
        at = OLD + timedelta(days=day)
        await uow.connection.execute(
            t.runs.insert().values(id=f"r{day}", check_id=check, scheduled=at, first_ping_at=at, outcome="ok")
        )
        await uow.connection.execute(t.tick_marks.insert().values(check_id=check, scheduled=at, outcome="ok"))
        await uow.connection.execute(t.flips.insert().values(check_id=check, created_at=at, up=1, reason="x"))
    await uow.connection.execute(
        t.runs.insert().values(id="open", check_id=check, scheduled=OLD, first_ping_at=OLD)  # unfinished
    )
    yesterday = NOW - timedelta(days=1)
    await uow.connection.execute(
        t.runs.insert().values(
            id="new", check_id=check, scheduled=yesterday, first_ping_at=yesterday, outcome="ok"
        )
    )
    await uow.connection.execute(t.flips.insert().values(check_id=other, created_at=OLD, up=1, reason="x"))
    before = NOW - timedelta(days=90)
    # keep the 2 newest: of the runs, "new" and r4; r0-r3 go, 2 per batch; the open run stays
    assert await uow.retention.prune_runs(check, before=before, keep_last=2, limit=2) == 2
    assert await uow.retention.prune_runs(check, before=before, keep_last=2, limit=2) == 2
    assert await uow.retention.prune_runs(check, before=before, keep_last=2, limit=2) == 0
    runs = await uow.connection.execute(select(t.runs.c.id).where(t.runs.c.check_id == check))
    assert sorted(r for (r,) in runs) == ["new", "open", "r4"]
    assert await uow.retention.prune_ticks(check, before=before, keep_last=2, limit=10) == 3
    assert await uow.retention.prune_flips(check, before=before, keep_last=2, limit=10) == 3
    assert await count(uow, t.tick_marks) == 2
    assert await count(uow, t.flips) == 3  # two of the check's and the other check's
    # fewer rows than keep_last: nothing goes
    assert await uow.retention.prune_flips(other, before=before, keep_last=2, limit=10) == 0


async def test_prune_alerts_spares_open_deliveries_and_the_episode_and_takes_their_rows(
    uow: UnitOfWork,
) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    channel = await add_channel(uow, project)
    ids = []
    for key in ("a", "b", "episode", "open", "new"):
        found = await uow.connection.execute(
            t.alerts.insert()
            .values(project_id=project, check_id=check, key=key, kind="down", created_at=OLD)
            .returning(t.alerts.c.id)
        )
        ids.append(int(found.scalar_one()))
    for alert, status in ((ids[0], "sent"), (ids[3], "pending")):
        found = await uow.connection.execute(
            t.notifications.insert()
            .values(alert_id=alert, channel_id=channel, status=status, next_attempt_at=NOW, created_at=NOW)
            .returning(t.notifications.c.id)
        )
        notification = found.scalar_one()
        await uow.connection.execute(
            t.notification_attempts.insert().values(notification_id=notification, at=NOW, ok=True)
        )
    before = NOW - timedelta(days=90)
    # the newest ("new") is kept, "open" has an open delivery, "episode" opened the current episode
    assert (
        await uow.retention.prune_alerts(check, before=before, keep_last=1, limit=10, keep_key="episode") == 2
    )
    left = await uow.connection.execute(select(t.alerts.c.key).where(t.alerts.c.check_id == check))
    assert sorted(k for (k,) in left) == ["episode", "new", "open"]
    assert await count(uow, t.notifications) == 1
    assert await count(uow, t.notification_attempts) == 1
    assert await uow.retention.prune_alerts(check, before=before, keep_last=1, limit=10) == 1  # now "episode"


async def test_clear_bodies_clears_old_bodies_and_stops_at_the_first_young_ping(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    await _ping(uow, check, 1, body=b"old")
    await _ping(uow, check, 2)
    await _ping(uow, check, 3, body=b"old too")
    await _ping(uow, check, 4, body=b"young", received_at=NOW)
    ids = [i for (i,) in await uow.connection.execute(select(t.pings.c.id).order_by(t.pings.c.id))]
    cutoff = NOW - timedelta(days=30)
    assert await uow.retention.clear_bodies(0, received_before=cutoff, limit=2) == (1, ids[1])
    assert await uow.retention.clear_bodies(ids[1], received_before=cutoff, limit=2) == (1, ids[2])
    assert await uow.retention.clear_bodies(ids[2], received_before=cutoff, limit=2) == (0, ids[2])
    bodies = await uow.connection.execute(select(t.pings.c.n, t.pings.c.body).order_by(t.pings.c.n))
    assert [(n, b) for n, b in bodies] == [(1, None), (2, None), (3, None), (4, b"young")]
    assert await count(uow, t.pings) == 4
