"""ProjectStore (monitor.storage.ports) on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from monitor.storage.ports import DuplicateKey
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import NOW, add_project


async def test_insert_and_count(uow: UnitOfWork) -> None:
    assert await uow.projects.count() == 0
    first, second = await add_project(uow, "a"), await add_project(uow, "b")
    assert second > first
    assert await uow.projects.count() == 2


async def test_keys_resolve_to_their_project_and_access(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    await uow.projects.insert_keys(
        [
            {
                "project_id": project,
                "key_hash": "a" * 64,
                "read_only": False,
                "name": "rw",
                "created_at": NOW,
            },
            {"project_id": project, "key_hash": "b" * 64, "read_only": True, "name": "ro", "created_at": NOW},
        ]
    )
    await uow.projects.insert_keys([])
    assert await uow.projects.key("a" * 64) == (project, False)
    assert await uow.projects.key("b" * 64) == (project, True)
    assert await uow.projects.key("c" * 64) is None


async def test_ids_named_and_names(uow: UnitOfWork) -> None:
    one, other, two = (
        await add_project(uow, "ops"),
        await add_project(uow, "dev"),
        await add_project(uow, "ops"),
    )
    assert await uow.projects.ids_named("ops") == [one, two]
    assert await uow.projects.ids_named("none") == []
    assert await uow.projects.names([two, other]) == ["dev", "ops"]
    assert await uow.projects.names([]) == []


async def test_lock_holds_the_project_row_in_the_transaction(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    await uow.projects.lock(project)  # PostgreSQL: FOR UPDATE; SQLite: BEGIN IMMEDIATE already
    assert await uow.projects.ids_named("p") == [project]


async def test_a_key_hash_another_project_has_is_a_duplicate_key_and_the_transaction_stays_usable(
    uow: UnitOfWork,
) -> None:
    mine, theirs = await add_project(uow, "a"), await add_project(uow, "b")
    key = {"key_hash": "d" * 64, "read_only": False, "name": "rw", "created_at": NOW}
    await uow.projects.insert_keys([{**key, "project_id": theirs}])
    with pytest.raises(DuplicateKey):
        await uow.projects.insert_keys(
            [{**key, "project_id": mine}, {**key, "key_hash": "e" * 64, "project_id": mine}]
        )
    assert await uow.projects.key("d" * 64) == (theirs, False)
    assert await uow.projects.key("e" * 64) is None  # the batch went whole or not at all
    await uow.projects.insert_keys([{**key, "key_hash": "e" * 64, "project_id": mine}])
    assert await uow.projects.key("e" * 64) == (mine, False)
