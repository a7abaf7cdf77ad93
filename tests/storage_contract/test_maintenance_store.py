"""MaintenanceStore (monitor.storage.ports) on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid as uuid_module
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.storage import tables as t
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import NOW, add_channel, add_check, add_project

HOUR = timedelta(hours=1)


async def _window(uow: UnitOfWork, project: int, **values: Any) -> str:
    window_id = str(uuid_module.uuid4())
    await uow.maintenance.insert(
        {"id": window_id, "project_id": project, "created_at": NOW, "name": "w", "tz": "UTC", **values}
    )
    return window_id


async def test_check_id_is_the_projects_check_with_that_uuid(uow: UnitOfWork) -> None:
    project, other = await add_project(uow, "a"), await add_project(uow, "b")
    check = await add_check(uow, project)
    uuid = (await uow.checks.by_ids([check]))[check]["uuid"]
    assert await uow.maintenance.check_id(project, uuid) == check
    assert await uow.maintenance.check_id(other, uuid) is None
    assert await uow.maintenance.check_id(project, str(uuid_module.uuid4())) is None


async def test_check_id_holds_the_check_until_the_transaction_ends(engine: AsyncEngine) -> None:
    """The window about to reference the check must not race the check's delete (a foreign key)."""
    async with UnitOfWork.begin(engine) as setup:
        project = await add_project(setup)
        uuid = str(uuid_module.uuid4())
        check = await add_check(setup, project, uuid=uuid)
    row = select(t.checks.c.id).where(t.checks.c.id == check).with_for_update(nowait=True)
    async with UnitOfWork.begin(engine) as holder:
        assert await holder.maintenance.check_id(project, uuid) == check
        if engine.dialect.name != "postgresql":
            return  # SQLite: BEGIN IMMEDIATE already holds the file's write lock
        async with engine.connect() as other:
            with pytest.raises(DBAPIError):
                await other.execute(row)  # what a DELETE needs: refused while the reader holds it
            await other.rollback()
            # a key-share lock only: FOR SHARE (another reader, a rename) is not held up
            shared = select(t.checks.c.id).where(t.checks.c.id == check)
            await other.execute(shared.with_for_update(read=True, nowait=True))
            await other.rollback()
    async with engine.connect() as other:
        await other.execute(row)


async def test_windows_oldest_first_with_their_checks_uuid(uow: UnitOfWork, engine: AsyncEngine) -> None:
    project, other = await add_project(uow, "a"), await add_project(uow, "b")
    check = await add_check(uow, project)
    later = await _window(
        uow, project, created_at=NOW + HOUR, check_id=check, starts_at=NOW, ends_at=NOW + HOUR
    )
    first = await _window(uow, project, schedule="0 2 * * *", dialect="unix", duration=60)
    await _window(uow, other)
    rows = await uow.maintenance.windows(project)
    assert [r["id"] for r in rows] == [first, later]
    assert rows[0]["check_uuid"] is None and rows[0]["duration"] == 60
    assert rows[1]["check_uuid"] == (await uow.checks.by_ids([check]))[check]["uuid"]
    assert rows[1]["starts_at"] == NOW and rows[1]["ends_at"] == NOW + HOUR
    assert [r["id"] for r in await uow.maintenance.windows(project, later)] == [later]
    assert await uow.maintenance.windows(other, later) == []
    await uow.maintenance.delete(later)
    await uow.maintenance.delete("no-such-window")
    assert [r["id"] for r in await uow.maintenance.windows(project)] == [first]


async def _alert(uow: UnitOfWork, project: int, check: int | None, channel: str, **values: Any) -> int:
    alert = {"project_id": project, "check_id": check, "key": str(uuid_module.uuid4()), "kind": "down"}
    alert_id = (
        await uow.connection.execute(
            t.alerts.insert().values({**alert, "created_at": NOW, **values}).returning(t.alerts.c.id)
        )
    ).scalar_one()
    return int(alert_id)


async def _notification(uow: UnitOfWork, alert_id: int, channel: str, **values: Any) -> int:
    found = await uow.connection.execute(
        t.notifications.insert()
        .values(
            {"alert_id": alert_id, "channel_id": channel, "next_attempt_at": NOW, "created_at": NOW, **values}
        )
        .returning(t.notifications.c.id)
    )
    return int(found.scalar_one())


async def _statuses(uow: UnitOfWork) -> dict[int, tuple[str, str | None]]:
    n = t.notifications.c
    rows = await uow.connection.execute(select(n.id, n.status, n.last_error))
    return {r[0]: (r[1], r[2]) for r in rows}


async def test_suppress_held_back_marks_the_open_unclaimed_notifications_in_scope(uow: UnitOfWork) -> None:
    project, other = await add_project(uow, "a"), await add_project(uow, "b")
    check, sibling = await add_check(uow, project), await add_check(uow, project)
    channel = await add_channel(uow, project)
    held = await _notification(uow, await _alert(uow, project, check, channel), channel)
    sibling_held = await _notification(uow, await _alert(uow, project, sibling, channel), channel)
    claimed = await _notification(
        uow, await _alert(uow, project, check, channel), channel, claimed_until=NOW + HOUR
    )
    stale_claim = await _notification(
        uow, await _alert(uow, project, check, channel), channel, claimed_until=NOW - HOUR
    )
    sent = await _notification(uow, await _alert(uow, project, check, channel), channel, status="sent")
    summary = await _notification(
        uow, await _alert(uow, project, check, channel, kind="maintenance"), channel
    )
    outside = await _notification(
        uow, await _alert(uow, project, check, channel, created_at=NOW + HOUR), channel
    )
    elsewhere = await _notification(uow, await _alert(uow, other, None, channel), channel)
    changed = await uow.maintenance.suppress_held_back(project, check, NOW - HOUR, NOW + HOUR, NOW, "held")
    statuses = await _statuses(uow)
    assert changed == 2
    assert statuses[held] == statuses[stale_claim] == ("suppressed", "held")
    for untouched in (sibling_held, claimed, summary, outside, elsewhere):
        assert statuses[untouched][0] == "pending"
    assert statuses[sent][0] == "sent"
    # a project window covers every check of the project
    assert await uow.maintenance.suppress_held_back(project, None, NOW - HOUR, NOW + HOUR, NOW, "all") == 1
    assert (await _statuses(uow))[sibling_held] == ("suppressed", "all")
