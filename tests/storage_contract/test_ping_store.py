"""PingStore (monitor.storage.ports) on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.storage import tables as t
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import NOW, add_check, add_project


def ping_row(check_id: int, n: int, **overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "check_id": check_id,
        "n": n,
        "kind": "success",
        "received_at": NOW,
        "method": "POST",
        "body": b"ok",
        "body_size": 2,
        "exit_status": None,
        "idempotency_key": None,
        "response_status": 200,
    }
    row.update(overrides)
    return row


async def uuid_of(uow: UnitOfWork, check_id: int) -> str:
    return str((await uow.checks.by_ids([check_id]))[check_id]["uuid"])


async def test_lock_by_uuid_gives_whole_rows_keyed_by_uuid(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    first, second = await add_check(uow, project, name="a"), await add_check(uow, project, name="b")
    uuids = [await uuid_of(uow, first), await uuid_of(uow, second)]
    rows = await uow.pings.lock_by_uuid([*uuids, uuids[0], "00000000-0000-4000-8000-000000000000"])
    assert set(rows) == set(uuids)
    assert (rows[uuids[0]]["id"], rows[uuids[0]]["name"]) == (first, "a")
    assert (rows[uuids[1]]["id"], rows[uuids[1]]["n_pings"]) == (second, 0)
    assert await uow.pings.lock_by_uuid([]) == {}


async def test_lock_by_ids_skips_unknown_ids(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project, name="a")
    rows = await uow.pings.lock([check, check, check + 1000])
    assert list(rows) == [check]
    assert rows[check]["name"] == "a"
    assert await uow.pings.lock([]) == {}


async def test_locked_rows_stay_locked_until_the_transaction_ends(engine: AsyncEngine) -> None:
    async with UnitOfWork.begin(engine) as setup:
        check = await add_check(setup, await add_project(setup))
    async with UnitOfWork.begin(engine) as holder:
        await holder.pings.lock([check])
        if engine.dialect.name != "postgresql":
            return  # SQLite: BEGIN IMMEDIATE already holds the file's write lock
        async with engine.connect() as other:
            with pytest.raises(DBAPIError):
                await other.execute(
                    select(t.checks.c.id).where(t.checks.c.id == check).with_for_update(nowait=True)
                )
            await other.rollback()
    async with engine.connect() as other:
        await other.execute(select(t.checks.c.id).where(t.checks.c.id == check).with_for_update(nowait=True))


async def test_ids_by_uuid_and_by_slug(uow: UnitOfWork) -> None:
    project, other = await add_project(uow, "a"), await add_project(uow, "b")
    check = await add_check(uow, project, slug="backup")
    theirs = await add_check(uow, other, slug="backup")
    key = await uow.connection.execute(text("SELECT ping_key FROM projects WHERE id = :i"), {"i": project})
    ping_key = str(key.scalar_one())
    check_uuid = await uuid_of(uow, check)
    assert await uow.pings.ids_by_uuid([check_uuid, "nope"]) == {check_uuid: check}
    assert await uow.pings.ids_by_uuid([]) == {}
    found = await uow.pings.ids_by_slug([(ping_key, "backup"), (ping_key, "other"), ("no-key", "backup")])
    assert found == {(ping_key, "backup"): check}
    assert theirs not in found.values()
    assert await uow.pings.ids_by_slug([]) == {}


async def test_project_by_ping_key(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    key = await uow.connection.execute(text("SELECT ping_key FROM projects WHERE id = :i"), {"i": project})
    assert await uow.pings.project_by_ping_key(str(key.scalar_one())) == project
    assert await uow.pings.project_by_ping_key("no-such-key") is None


async def test_insert_stores_every_column(uow: UnitOfWork) -> None:
    check = await add_check(uow, await add_project(uow))
    await uow.pings.insert(
        [ping_row(check, 1), ping_row(check, 2, kind="fail", exit_status=3, body=None, body_size=0)]
    )
    await uow.pings.insert([])
    rows = (
        (
            await uow.connection.execute(
                select(t.pings).where(t.pings.c.check_id == check).order_by(t.pings.c.n)
            )
        )
        .mappings()
        .all()
    )
    assert [(r["n"], r["kind"], r["exit_status"], r["body"], r["received_at"]) for r in rows] == [
        (1, "success", None, b"ok", NOW),
        (2, "fail", 3, None, NOW),
    ]


async def test_remembered_finds_keyed_pings_of_the_window(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check, other = await add_check(uow, project), await add_check(uow, project)
    await uow.pings.insert(
        [
            ping_row(check, 1, idempotency_key="k1", response_status=201),
            ping_row(check, 2, idempotency_key="k2", kind="start"),
            ping_row(check, 3, idempotency_key="old", received_at=NOW - timedelta(days=8)),
            ping_row(other, 1, idempotency_key="k1"),
        ]
    )
    found = await uow.pings.remembered([check], ["k1", "k2", "old", "absent"], NOW - timedelta(days=7))
    assert sorted(found) == [(check, "start", "k2", 200), (check, "success", "k1", 201)]
    assert await uow.pings.remembered([], ["k1"], NOW) == []
    assert await uow.pings.remembered([check], [], NOW) == []


async def test_insert_gives_left_out_columns_their_defaults(uow: UnitOfWork) -> None:
    check = await add_check(uow, await add_project(uow))
    bare = {"check_id": check, "n": 1, "kind": "success", "received_at": NOW}
    await uow.pings.insert([bare])
    row = (await uow.connection.execute(select(t.pings).where(t.pings.c.check_id == check))).mappings().one()
    assert {k: row[k] for k in ("method", "remote_addr", "ua", "scheme", "body", "body_size")} == {
        "method": "",
        "remote_addr": "",
        "ua": "",
        "scheme": "http",
        "body": None,
        "body_size": 0,
    }
    assert (row["response_status"], row["received_at"], row["scheduled"]) == (200, NOW, None)


async def test_arrived_names_the_stored_pings_by_check_and_arrival_to_the_microsecond(
    uow: UnitOfWork,
) -> None:
    project = await add_project(uow)
    first, second = await add_check(uow, project, name="a"), await add_check(uow, project, name="b")
    at = NOW + timedelta(microseconds=123_457)
    await uow.pings.insert([ping_row(first, 1, received_at=at), ping_row(second, 1, received_at=NOW)])
    asked = {
        (first, at),
        (first, at + timedelta(microseconds=1)),  # a microsecond later: another ping
        (second, at),  # another check's arrival
        (second, NOW),
        (first + second + 1000, NOW),  # no such check
    }
    assert await uow.pings.arrived(asked) == {(first, at), (second, NOW)}
    assert await uow.pings.arrived([]) == set()
