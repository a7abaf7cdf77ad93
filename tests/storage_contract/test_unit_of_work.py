"""UnitOfWork: one transaction per use case, committed on success, rolled back on error."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import add_project


class Boom(Exception):
    pass


async def test_begin_commits_when_the_block_ends(engine: AsyncEngine) -> None:
    async with UnitOfWork.begin(engine) as uow:
        await add_project(uow)
    async with UnitOfWork.read(engine) as uow:
        assert await uow.projects.count() == 1


async def test_begin_rolls_back_when_the_block_raises(engine: AsyncEngine) -> None:
    with pytest.raises(Boom):
        async with UnitOfWork.begin(engine) as uow:
            await add_project(uow)
            raise Boom
    async with UnitOfWork.read(engine) as uow:
        assert await uow.projects.count() == 0


async def test_read_discards_what_it_wrote(engine: AsyncEngine) -> None:
    async with UnitOfWork.read(engine) as uow:
        await add_project(uow)
        assert await uow.projects.count() == 1
    async with UnitOfWork.read(engine) as uow:
        assert await uow.projects.count() == 0


async def test_joining_uses_the_callers_transaction(engine: AsyncEngine) -> None:
    with pytest.raises(Boom):
        async with engine.begin() as conn:
            await add_project(UnitOfWork.joining(conn))
            raise Boom
    async with engine.begin() as conn:
        joined = UnitOfWork.joining(conn)
        await add_project(joined)
        assert joined.dialect in ("sqlite", "postgresql")
    async with UnitOfWork.read(engine) as uow:
        assert await uow.projects.count() == 1
