"""DashboardReads (monitor.storage.ports) on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid as uuid_module
from datetime import datetime, timedelta
from typing import Any

from monitor.storage import tables as t
from monitor.storage.ports import TRIAGE_ORDER
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import NOW, add_channel, add_check, add_project

MINUTE = timedelta(minutes=1)


async def _run(uow: UnitOfWork, check_id: int, scheduled: datetime, **values: Any) -> str:
    run_id = str(uuid_module.uuid4())
    await uow.connection.execute(
        t.runs.insert().values(
            id=run_id, check_id=check_id, scheduled=scheduled, first_ping_at=scheduled, **values
        )
    )
    return run_id


async def _mark(uow: UnitOfWork, check_id: int, scheduled: datetime, outcome: str = "missed") -> None:
    await uow.connection.execute(
        t.tick_marks.insert().values(check_id=check_id, scheduled=scheduled, outcome=outcome)
    )


async def _ping(uow: UnitOfWork, check_id: int, n: int, kind: str = "success", **values: Any) -> None:
    await uow.connection.execute(
        t.pings.insert().values(check_id=check_id, n=n, kind=kind, received_at=NOW + n * MINUTE, **values)
    )


async def _checks_of_every_status(uow: UnitOfWork, project: int) -> dict[str, int]:
    watched = NOW - timedelta(days=1)
    return {
        "up": await add_check(uow, project, name="b-up", watch_from=watched),
        "paused": await add_check(uow, project, name="a-paused", paused=True, watch_from=watched),
        "new": await add_check(uow, project, name="c-new"),
        "down": await add_check(uow, project, name="d-down", watch_from=watched, episode_key="k"),
        "grace": await add_check(uow, project, name="e-grace", watch_from=watched, pending_tick=NOW - MINUTE),
    }


async def test_project_names_of_the_ids_given(uow: UnitOfWork) -> None:
    a, b = await add_project(uow, "alpha"), await add_project(uow, "beta")
    assert await uow.dashboard.project_names([a, b, 999_999]) == {a: "alpha", b: "beta"}
    assert await uow.dashboard.project_names([]) == {}


async def test_status_counts_decide_each_status_in_sql(uow: UnitOfWork) -> None:
    project, other = await add_project(uow, "a"), await add_project(uow, "b")
    await _checks_of_every_status(uow, project)
    await add_check(uow, other)
    assert await uow.dashboard.status_counts([project], NOW) == dict.fromkeys(TRIAGE_ORDER, 1)
    # a pending tick not reached yet is not grace
    assert (await uow.dashboard.status_counts([project], NOW - timedelta(hours=1)))["grace"] == 0
    assert await uow.dashboard.status_counts([], NOW) == dict.fromkeys(TRIAGE_ORDER, 0)


async def test_check_page_orders_by_triage_and_pages(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    ids = await _checks_of_every_status(uow, project)
    matched, rows = await uow.dashboard.check_page([project], NOW)
    assert matched == 5
    assert [r["id"] for r in rows] == [ids[s] for s in TRIAGE_ORDER]
    matched, rows = await uow.dashboard.check_page([project], NOW, offset=1, limit=2)
    assert matched == 5 and [r["id"] for r in rows] == [ids["grace"], ids["up"]]
    matched, rows = await uow.dashboard.check_page([project], NOW, status="down")
    assert matched == 1 and [r["id"] for r in rows] == [ids["down"]]


async def test_check_page_filters_by_name_slug_and_whole_tag_with_wildcards_literal(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    backup = await add_check(uow, project, name="Nightly BACKUP", tags="db prod")
    slugged = await add_check(uow, project, name="x", slug="backup-slug", tags="dbx")
    percent = await add_check(uow, project, name="100% done", tags="db_1")
    await add_check(uow, project, name="1000 done", tags="dbz1")
    assert {r["id"] for r in (await uow.dashboard.check_page([project], NOW, needle="backup"))[1]} == {
        backup,
        slugged,
    }
    assert [r["id"] for r in (await uow.dashboard.check_page([project], NOW, needle="0%"))[1]] == [percent]
    assert [r["id"] for r in (await uow.dashboard.check_page([project], NOW, tag="db"))[1]] == [backup]
    assert [r["id"] for r in (await uow.dashboard.check_page([project], NOW, tag="db_1"))[1]] == [percent]
    assert (await uow.dashboard.check_page([project], NOW, needle="backup", tag="prod"))[0] == 1


async def test_recent_ticks_keep_each_checks_newest_ticks(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    first, second = await add_check(uow, project), await add_check(uow, project)
    old = await _run(uow, first, NOW - 3 * MINUTE)
    middle = await _run(uow, first, NOW - 2 * MINUTE)
    await _mark(uow, first, NOW - 4 * MINUTE)
    await _mark(uow, first, NOW - MINUTE, "missed")
    lone = await _run(uow, second, NOW - 10 * MINUTE)
    runs, marks = await uow.dashboard.recent_ticks([first, second], 2)
    assert {r["id"] for r in runs} == {middle, lone}
    assert marks == [(first, NOW - MINUTE, "missed")]
    runs, marks = await uow.dashboard.recent_ticks([first], 4)
    assert {r["id"] for r in runs} == {old, middle} and len(marks) == 2
    assert await uow.dashboard.recent_ticks([], 2) == ([], [])


async def test_episode_alerts_of_the_keys_given(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    await uow.connection.execute(
        t.alerts.insert(),
        [
            {
                "project_id": project,
                "check_id": check,
                "key": "e1",
                "kind": "down",
                "count": 2,
                "created_at": NOW,
            },
            {
                "project_id": project,
                "check_id": check,
                "key": "e0",
                "kind": "fail",
                "count": 1,
                "created_at": NOW,
            },
        ],
    )
    found = await uow.dashboard.episode_alerts({check: "e1"})
    assert found == [(check, "e1", "down", 2, None, NOW)]
    assert await uow.dashboard.episode_alerts({}) == []


async def test_last_body_last_failure_and_recent_pings(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    assert await uow.dashboard.last_body(check, failing=False) is None
    assert await uow.dashboard.last_failure(check) is None
    await _ping(uow, check, 1, "fail", body=b"boom")
    await _ping(uow, check, 2, "success", exit_status=3, body=b"exit 3")
    await _ping(uow, check, 3, "success", body=b"fine")
    await _ping(uow, check, 4, "success")
    assert await uow.dashboard.last_body(check, failing=False) == (b"fine", "success", None)
    assert await uow.dashboard.last_body(check, failing=True) == (b"exit 3", "success", 3)
    assert await uow.dashboard.last_failure(check) == (2, NOW + 2 * MINUTE, "success", 3, b"exit 3")
    pings = await uow.dashboard.recent_pings(check, 3)
    assert [(p["n"], p["body"]) for p in pings] == [(4, None), (3, b"fine"), (2, b"exit 3")]


async def test_run_lookups_first_tick_last_good_and_window(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    assert await uow.dashboard.first_run_tick(check) is None
    assert await uow.dashboard.last_good_run(check) is None
    await _run(uow, check, NOW - 3 * MINUTE, finish_kind="success", finished_at=NOW - 3 * MINUTE)
    await _run(uow, check, NOW - 2 * MINUTE, finish_kind="success", early=True)
    await _run(uow, check, NOW - MINUTE, finish_kind="fail")
    assert await uow.dashboard.first_run_tick(check) == NOW - 3 * MINUTE
    assert await uow.dashboard.last_good_run(check) == (NOW - 3 * MINUTE, NOW - 3 * MINUTE)
    window = await uow.dashboard.window_runs(check, NOW - 2 * MINUTE, NOW, 10)
    assert [r["scheduled"] for r in window] == [NOW - MINUTE, NOW - 2 * MINUTE]
    assert len(await uow.dashboard.window_runs(check, NOW - 5 * MINUTE, NOW, 1)) == 1
    await _mark(uow, check, NOW - 5 * MINUTE)
    await _mark(uow, check, NOW - 4 * MINUTE, "on_time")
    assert await uow.dashboard.window_marks(check, NOW - 5 * MINUTE, NOW - 4 * MINUTE, 10) == [
        (NOW - 4 * MINUTE, "on_time"),
        (NOW - 5 * MINUTE, "missed"),
    ]
    assert await uow.dashboard.window_marks(check, NOW - 5 * MINUTE, NOW, 1) == [
        (NOW - 4 * MINUTE, "on_time")
    ]


async def test_status_since_is_the_newest_flip(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    assert await uow.dashboard.status_since(check) is None
    await uow.connection.execute(
        t.flips.insert(),
        [
            {"check_id": check, "created_at": NOW, "up": 0, "reason": "missed"},
            {"check_id": check, "created_at": NOW - MINUTE, "up": 1, "reason": "ping"},
        ],
    )
    assert await uow.dashboard.status_since(check) == NOW - MINUTE


async def test_check_lookups_by_uuid_badge_and_project(uow: UnitOfWork) -> None:
    project, other = await add_project(uow, "a"), await add_project(uow, "b")
    check = await add_check(uow, project, tags="prod db")
    await add_check(uow, project, tags="db web")
    row = (await uow.checks.by_ids([check]))[check]
    found = await uow.dashboard.check_in([other, project], row["uuid"])
    assert found is not None and found["id"] == check
    assert await uow.dashboard.check_in([other], row["uuid"]) is None
    by_badge = await uow.dashboard.check_by_badge(row["badge_uuid"])
    assert by_badge is not None and by_badge["id"] == check
    assert await uow.dashboard.check_by_badge(str(uuid_module.uuid4())) is None
    key = await uow.dashboard.badge_key(project)
    assert await uow.dashboard.project_by_badge_key(key) == project
    assert await uow.dashboard.project_by_badge_key("no-such-key") is None
    assert len(await uow.dashboard.project_checks(project)) == 2
    assert await uow.dashboard.project_tags(project) == ["db", "prod", "web"]
    assert await uow.dashboard.project_tags(other) == []


async def test_check_names_and_channel_links(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    zed = await add_check(uow, project, name="zed")
    alpha = await add_check(uow, project, name="alpha", slug="a")
    channel, idle = await add_channel(uow, project, "ops"), await add_channel(uow, project, "idle")
    names = await uow.dashboard.check_names(project)
    assert [(n["id"], n["name"], n["slug"]) for n in names] == [(alpha, "alpha", "a"), (zed, "zed", None)]
    assert set(names[0]) == {"id", "uuid", "name", "slug"}
    await uow.channels.assign_many([(zed, channel), (alpha, channel)])
    assert await uow.dashboard.routed_checks(channel) == {zed, alpha}
    assert await uow.dashboard.routed_checks(idle) == set()
    assert await uow.dashboard.channel_check_counts([channel, idle]) == {channel: 2}
    assert await uow.dashboard.channel_check_counts([]) == {}
