"""ShardStore (monitor.storage.ports) on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid as uuid_module

import pytest
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.domain.shards import shard_of
from monitor.storage import cluster
from monitor.storage import tables as t
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import NOW, add_check, add_project


async def lease_names(uow: UnitOfWork) -> list[str]:
    rows = await uow.connection.execute(select(t.leases.c.name).order_by(t.leases.c.name))
    return [str(name) for name in rows.scalars()]


async def test_store_count_records_a_first_count_and_says_there_was_none(uow: UnitOfWork) -> None:
    assert await uow.shards.store_count(4, NOW) is None
    assert await cluster.stored_shard_count(uow.connection) == 4


async def test_store_count_replaces_the_stored_count_and_returns_it(uow: UnitOfWork) -> None:
    await cluster.record_shard_count(uow.connection, 8, NOW)
    assert await uow.shards.store_count(2, NOW) == 8
    assert await uow.shards.store_count(2, NOW) == 2
    assert await cluster.stored_shard_count(uow.connection) == 2


async def test_rewrite_checks_moves_each_check_to_its_uuids_shard(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    uuids = [str(uuid_module.uuid4()) for _ in range(6)]
    for uuid in uuids:
        await add_check(uow, project, uuid=uuid, shard=shard_of(uuid, 1))
    expected = sum(1 for uuid in uuids if shard_of(uuid, 3) != shard_of(uuid, 1))
    assert await uow.shards.rewrite_checks(3) == expected
    rows = (await uow.connection.execute(select(t.checks.c.uuid, t.checks.c.shard))).all()
    assert {str(uuid): shard for uuid, shard in rows} == {uuid: shard_of(uuid, 3) for uuid in uuids}
    assert await uow.shards.rewrite_checks(3) == 0


async def test_prune_leases_deletes_shards_beyond_the_count_and_the_legacy_lease(uow: UnitOfWork) -> None:
    await uow.connection.execute(
        t.leases.insert(),
        [
            {"name": name, "holder": holder, "token": 1, "expires_at": NOW}
            for name, holder in [
                ("shard-0", "a:1"),
                ("shard-1", None),
                ("shard-2", "a:1"),
                ("evaluator", None),
                ("job-backup", "s:1"),
            ]
        ],
    )
    assert await uow.shards.prune_leases(1) == ["evaluator", "shard-1", "shard-2"]
    assert await lease_names(uow) == ["job-backup", "shard-0"]


async def test_lock_evaluator_leases_holds_them_until_the_commit(engine: AsyncEngine) -> None:
    async with UnitOfWork.begin(engine) as uow:
        await uow.connection.execute(
            t.leases.insert(),
            [
                {"name": "shard-0", "holder": None, "token": 1, "expires_at": None},
                {"name": "job-backup", "holder": None, "token": 1, "expires_at": None},
            ],
        )
    async with UnitOfWork.begin(engine) as uow:
        await uow.shards.lock_evaluator_leases()
        if uow.dialect != "postgresql":
            return  # SQLite: BEGIN IMMEDIATE already holds every other writer back
        async with engine.connect() as other:
            locked = select(t.leases.c.name).where(t.leases.c.name == "shard-0").with_for_update(nowait=True)
            with pytest.raises(DBAPIError):
                await other.execute(locked)
            await other.rollback()
            free = select(t.leases.c.name).where(t.leases.c.name == "job-backup").with_for_update(nowait=True)
            assert (await other.execute(free)).scalar_one() == "job-backup"
