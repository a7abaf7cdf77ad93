"""ReminderStore (monitor.storage.ports) on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid as uuid_module
from datetime import timedelta

from sqlalchemy import select

from monitor.storage import tables as t
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import NOW, add_check, add_project


async def add_alert(uow: UnitOfWork, project_id: int, check_id: int, key: str, kind: str = "missed") -> None:
    await uow.connection.execute(
        t.alerts.insert().values(
            project_id=project_id,
            check_id=check_id,
            key=key,
            kind=kind,
            scheduled=NOW - timedelta(hours=1),
            created_at=NOW - timedelta(minutes=30),
        )
    )


async def add_window(uow: UnitOfWork, project_id: int, **overrides: object) -> str:
    window_id = str(uuid_module.uuid4())
    values = {
        "id": window_id,
        "project_id": project_id,
        "name": "deploy",
        "starts_at": NOW - timedelta(hours=1),
        "ends_at": NOW,
        "created_at": NOW - timedelta(hours=2),
        **overrides,
    }
    await uow.connection.execute(t.maintenance_windows.insert().values(values))
    return window_id


async def test_open_episodes_are_unpaused_down_checks_with_a_repeat_joined_to_their_alert(
    uow: UnitOfWork,
) -> None:
    project = await add_project(uow)
    nagging = await add_check(
        uow, project, name="backup", slug="backup", episode_key="missed:1", nag_interval=600
    )
    escalating = await add_check(
        uow, project, episode_key="missed:2", escalate_after=3600, escalate_to="c1,c2"
    )
    await add_check(uow, project, episode_key="missed:3", nag_interval=600, paused=True)
    await add_check(uow, project, episode_key="missed:4")  # no nag, no escalation
    await add_check(uow, project, nag_interval=600)  # up
    for check_id, key in [(nagging, "missed:1"), (escalating, "missed:2")]:
        await add_alert(uow, project, check_id, key)
    await add_alert(uow, project, nagging, "late:old", kind="late")  # not the episode's alert
    rows = sorted(await uow.reminders.open_episodes(), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == [nagging, escalating]
    first = rows[0]
    assert {k: first[k] for k in ("project_id", "name", "slug", "check_kind", "episode_key")} == {
        "project_id": project,
        "name": "backup",
        "slug": "backup",
        "check_kind": "simple",
        "episode_key": "missed:1",
    }
    assert (first["nag_interval"], first["escalate_after"]) == (600, None)
    assert (first["episode_kind"], first["scheduled"], first["opened_at"]) == (
        "missed",
        NOW - timedelta(hours=1),
        NOW - timedelta(minutes=30),
    )
    assert set(first) >= {"uuid", "tz", "escalate_to"}
    assert (rows[1]["escalate_after"], rows[1]["escalate_to"]) == (3600, "c1,c2")


async def test_windows_are_every_maintenance_window(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    first = await add_window(uow, project)
    second = await add_window(uow, project, check_id=check, name="")
    rows = {r["id"]: r for r in await uow.reminders.windows()}
    assert set(rows) == {first, second}
    assert rows[second]["check_id"] == check and rows[first]["check_id"] is None
    assert rows[first]["summarized_until"] is None and rows[first]["ends_at"] == NOW


async def test_claim_summary_wins_once_per_later_occurrence(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    window = await add_window(uow, project)
    assert await uow.reminders.claim_summary(window, NOW)
    assert not await uow.reminders.claim_summary(window, NOW)
    assert not await uow.reminders.claim_summary(window, NOW - timedelta(hours=1))
    assert await uow.reminders.claim_summary(window, NOW + timedelta(days=1))
    stored = await uow.connection.execute(select(t.maintenance_windows.c.summarized_until))
    assert stored.scalar_one() == NOW + timedelta(days=1)
    assert not await uow.reminders.claim_summary(str(uuid_module.uuid4()), NOW)


async def test_down_checks_are_the_projects_unpaused_checks_in_an_episode_by_name(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    other = await add_project(uow, "other")
    b = await add_check(uow, project, name="b", episode_key="k")
    a = await add_check(uow, project, name="a", episode_key="k")
    await add_check(uow, project, name="c", episode_key="k", paused=True)
    await add_check(uow, project, name="d")
    await add_check(uow, other, name="e", episode_key="k")
    found = await uow.checks.by_ids([a, b])
    assert await uow.reminders.down_checks(project) == [("a", found[a]["uuid"]), ("b", found[b]["uuid"])]
