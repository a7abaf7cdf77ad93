"""ChannelStore (monitor.storage.ports) on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.storage import tables as t
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import (
    NOW,
    add_alert_with_notification,
    add_channel,
    add_check,
    add_project,
    count,
)


async def test_insert_get_and_another_projects_channel(uow: UnitOfWork) -> None:
    project, other = await add_project(uow, "a"), await add_project(uow, "b")
    channel = await add_channel(uow, project, "ops", kinds="down,up", is_default=True)
    row = await uow.channels.get(project, channel)
    assert row is not None
    assert (row["name"], row["kinds"], bool(row["is_default"]), row["created_at"]) == (
        "ops",
        "down,up",
        True,
        NOW,
    )
    assert await uow.channels.get(other, channel) is None
    assert await uow.channels.get(project, "no-such-id") is None


async def test_of_project_lists_oldest_first(uow: UnitOfWork) -> None:
    project, other = await add_project(uow, "a"), await add_project(uow, "b")
    late = await add_channel(uow, project, "late", created_at=NOW + timedelta(minutes=1))
    early = await add_channel(uow, project, "early")
    await add_channel(uow, other, "theirs")
    assert [r["id"] for r in await uow.channels.of_project(project)] == [early, late]


async def test_names_and_default_ids(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    plain = await add_channel(uow, project, "plain")
    default = await add_channel(uow, project, "default", is_default=True)
    assert sorted(await uow.channels.names(project)) == sorted([(plain, "plain"), (default, "default")])
    assert await uow.channels.default_ids(project) == [default]


@pytest.mark.parametrize("read", ["names", "default_ids"])
async def test_locked_channels_cannot_be_deleted_until_the_transaction_ends(
    engine: AsyncEngine, read: str
) -> None:
    """A check about to link the channels it read must not race their delete (a foreign key)."""
    async with UnitOfWork.begin(engine) as setup:
        project = await add_project(setup)
        channel = await add_channel(setup, project, "ops", is_default=True)
    row = select(t.channels.c.id).where(t.channels.c.id == channel).with_for_update(nowait=True)
    async with UnitOfWork.begin(engine) as holder:
        found = await getattr(holder.channels, read)(project, lock=True)
        assert channel in (found if read == "default_ids" else [c for c, _ in found])
        if engine.dialect.name != "postgresql":
            return  # SQLite: BEGIN IMMEDIATE already holds the file's write lock
        async with engine.connect() as other:
            with pytest.raises(DBAPIError):
                await other.execute(row)  # what a DELETE needs: refused while the reader holds it
            await other.rollback()
            # a key-share lock only: FOR SHARE (another reader, a rename) is not held up
            shared = select(t.channels.c.id).where(t.channels.c.id == channel)
            await other.execute(shared.with_for_update(read=True, nowait=True))
            await other.rollback()
    async with engine.connect() as other:
        await other.execute(row)


async def test_update_sets_columns_and_ignores_an_empty_change(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    channel = await add_channel(uow, project, "ops")
    await uow.channels.update(channel, {})
    await uow.channels.update(channel, {"name": "pager", "kinds": "down"})
    row = await uow.channels.get(project, channel)
    assert row is not None and (row["name"], row["kinds"]) == ("pager", "down")


async def test_assign_replaces_or_adds_links_without_duplicates(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check, other_check = await add_check(uow, project), await add_check(uow, project)
    a = await add_channel(uow, project, "a")
    b = await add_channel(uow, project, "b")
    c = await add_channel(uow, project, "c")
    await uow.channels.assign(check, [a, b, a], replace=False)
    await uow.channels.assign(other_check, [c], replace=False)
    links = await uow.channels.of_checks([check, other_check, 10_000])
    assert sorted(links[check]) == sorted([a, b])
    assert links[other_check] == [c] and links[10_000] == []
    await uow.channels.assign(check, [c])
    assert (await uow.channels.of_checks([check]))[check] == [c]
    await uow.channels.assign(check, [])
    assert (await uow.channels.of_checks([check]))[check] == []
    assert await uow.channels.of_checks([]) == {}


async def test_assign_many_links_several_checks_at_once(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    one, two = await add_check(uow, project), await add_check(uow, project)
    channel = await add_channel(uow, project)
    await uow.channels.assign_many([(one, channel), (two, channel)])
    await uow.channels.assign_many([])
    assert await uow.channels.of_checks([one, two]) == {one: [channel], two: [channel]}


async def test_delete_removes_links_notifications_and_attempts(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    gone, kept = await add_channel(uow, project, "gone"), await add_channel(uow, project, "kept")
    await uow.channels.assign(check, [gone, kept], replace=False)
    await add_alert_with_notification(uow, project, check, gone)
    await uow.channels.delete(gone)
    assert await uow.channels.get(project, gone) is None
    assert (await uow.channels.of_checks([check]))[check] == [kept]
    assert await count(uow, t.notifications) == 0
    assert await count(uow, t.notification_attempts) == 0
    assert await count(uow, t.alerts) == 1  # the alert belongs to the check
