"""UnitOfWork.run: one write transaction for a function of the unit of work, on both databases
(on a SQLite file it runs whole in a worker thread)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.storage import tables as t
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import add_project


async def project_names(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        return [str(n) for n in (await conn.execute(select(t.projects.c.name))).scalars()]


async def test_run_commits_and_returns_the_result(engine: AsyncEngine) -> None:
    async def work(uow: UnitOfWork) -> int:
        project = await add_project(uow, "kept")
        assert await uow.projects.count() == 1
        return project

    project = await UnitOfWork.run(engine, work)
    assert isinstance(project, int)
    assert await project_names(engine) == ["kept"]


async def test_run_rolls_back_when_the_work_raises(engine: AsyncEngine) -> None:
    async def work(uow: UnitOfWork) -> None:
        await add_project(uow, "dropped")
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await UnitOfWork.run(engine, work)
    assert await project_names(engine) == []


async def test_run_keeps_a_savepoint_rollback_inside_the_transaction(engine: AsyncEngine) -> None:
    from monitor.storage.ports import DuplicateKey
    from tests.storage_contract.conftest import add_check, check_values

    async def work(uow: UnitOfWork) -> int:
        project = await add_project(uow, "p")
        first = await add_check(uow, project, slug="same")
        with pytest.raises(DuplicateKey):
            await uow.checks.insert(
                check_values(project, uuid=(await uow.checks.by_ids([first]))[first]["uuid"])
            )
        return await add_check(uow, project, slug="other")

    check = await UnitOfWork.run(engine, work)
    async with UnitOfWork.read(engine) as uow:
        assert check in await uow.checks.by_ids([check])


async def test_run_on_a_sqlite_file_refuses_work_that_awaits_other_things(engine: AsyncEngine) -> None:
    async def work(uow: UnitOfWork) -> None:
        await add_project(uow, "dropped")
        await asyncio.sleep(0)  # yields to the event loop

    if engine.dialect.name == "postgresql":
        await UnitOfWork.run(engine, work)  # the async path awaits anything
        assert await project_names(engine) == ["dropped"]
        return
    with pytest.raises(RuntimeError, match="awaited something other than a statement"):
        await UnitOfWork.run(engine, work)
    assert await project_names(engine) == []


async def test_run_waits_for_another_writer_then_commits(engine: AsyncEngine) -> None:
    """SQLite: the threaded transaction's BEGIN IMMEDIATE waits out a writer holding the file."""
    order: list[str] = []

    async def work(uow: UnitOfWork) -> None:
        await add_project(uow, "second")
        order.append("run")

    async with UnitOfWork.begin(engine) as holder:
        await add_project(holder, "first")
        running = asyncio.create_task(UnitOfWork.run(engine, work))
        await asyncio.sleep(0.3)
        order.append("holder")
    await asyncio.wait_for(running, 10)
    assert sorted(await project_names(engine)) == ["first", "second"]
    if engine.dialect.name == "sqlite":
        assert order == ["holder", "run"]
