"""SentryReads (monitor.storage.ports) on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import update

from monitor.storage import tables as t
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import add_check, add_project


async def _sentry_key(uow: UnitOfWork, project_id: int) -> str | None:
    found = await uow.sentry.project(project_id)
    assert found is not None
    return found[1]


async def test_project_of_key_finds_the_dsn_keys_project_only(uow: UnitOfWork) -> None:
    mine, theirs = await add_project(uow, "a"), await add_project(uow, "b")
    key = await _sentry_key(uow, mine)
    assert key is not None
    assert await uow.sentry.project_of_key(key) == mine
    assert await uow.sentry.project_of_key(str(await _sentry_key(uow, theirs))) == theirs
    assert await uow.sentry.project_of_key("0" * 32) is None


async def test_project_is_its_name_and_key_or_none(uow: UnitOfWork) -> None:
    project = await add_project(uow, "backups")
    name, key = (await uow.sentry.project(project)) or ("", None)
    assert name == "backups" and key is not None and len(key) == 32
    await uow.connection.execute(update(t.projects).where(t.projects.c.id == project).values(sentry_key=None))
    assert await uow.sentry.project(project) == ("backups", None)
    assert await uow.sentry.project(project + 1000) is None


async def test_check_by_slug_is_the_projects_check_row(uow: UnitOfWork) -> None:
    mine, theirs = await add_project(uow, "a"), await add_project(uow, "b")
    check = await add_check(uow, mine, slug="nightly", name="Nightly")
    await add_check(uow, theirs, slug="weekly")
    row = await uow.sentry.check_by_slug(mine, "nightly")
    assert row is not None and (row["id"], row["name"], row["project_id"]) == (check, "Nightly", mine)
    assert await uow.sentry.check_by_slug(mine, "weekly") is None
    assert await uow.sentry.check_by_slug(theirs, "nightly") is None
