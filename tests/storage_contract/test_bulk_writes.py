"""Set-at-a-time writes (``monitor.storage.bulk``) store what row-by-row Core statements store.

On PostgreSQL a column whose value is the same in every row of the batch is bound once, as a
scalar, and the others as arrays: each mix of alike and varying columns (none, some, all but
the first; ``None``, instants, booleans, text alike) must store the same rows.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select

from monitor.storage import bulk
from monitor.storage import tables as t
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import NOW, add_check, add_project

FLIP_COLUMNS = ["check_id", "created_at", "up", "reason", "token"]


def _flips(check_ids: list[int], shape: str) -> list[dict[str, Any]]:
    rows = []
    for index, check_id in enumerate(check_ids):
        varying = shape == "varying"
        rows.append(
            {
                "check_id": check_id,
                "created_at": NOW + timedelta(seconds=index) if varying else NOW,
                "up": index % 2 if varying else None,
                "reason": f"r{index}" if varying else "missed",
                "token": index if varying or shape == "mixed" else 7,
            }
        )
    return rows


async def _stored_flips(uow: UnitOfWork) -> list[tuple[Any, ...]]:
    f = t.flips.c
    query = select(f.check_id, f.created_at, f.up, f.reason, f.token).order_by(f.check_id, f.id)
    return [tuple(row) for row in await uow.connection.execute(query)]


@pytest.mark.parametrize("shape", ["varying", "mixed", "alike", "one row"])
async def test_inserted_rows_are_those_core_inserts_store(uow: UnitOfWork, shape: str) -> None:
    project = await add_project(uow)
    checks = [await add_check(uow, project) for _ in range(1 if shape == "one row" else 4)]
    rows = _flips(checks, "alike" if shape == "one row" else shape)

    await bulk.insert_rows(uow.connection, t.flips, rows, FLIP_COLUMNS)
    through_bulk = await _stored_flips(uow)
    await uow.connection.execute(t.flips.delete())
    await uow.connection.execute(t.flips.insert(), rows)
    through_core = await _stored_flips(uow)

    assert through_bulk == through_core
    assert len(through_bulk) == len(rows)


@pytest.mark.parametrize("shape", ["varying", "mixed", "alike"])
async def test_inserted_and_returned_rows_skip_conflicts_in_any_shape(uow: UnitOfWork, shape: str) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    keys = ["a", "b", "a-again"] if shape == "varying" else ["a", "b", "c"]
    rows = [
        {
            "project_id": project,
            "check_id": check,
            "key": key,
            "kind": "missed" if shape != "varying" else f"k{index}",
            "scheduled": NOW if shape == "alike" else NOW + timedelta(minutes=index),
            "count": 1,
            "created_at": NOW,
            "title": "",
            "message": "",
        }
        for index, key in enumerate(keys)
    ]
    columns = list(rows[0])
    first = await bulk.insert_returning(
        uow.connection, t.alerts, rows, columns, ("key",), ignore_conflicts=True
    )
    again = await bulk.insert_returning(
        uow.connection, t.alerts, rows, columns, ("key",), ignore_conflicts=True
    )

    assert sorted(key for (key,) in first) == sorted(keys)
    assert again == []  # every row conflicts with its first insert
    stored = (await uow.connection.execute(select(t.alerts.c.key, t.alerts.c.scheduled))).all()
    assert sorted(stored) == sorted((r["key"], r["scheduled"]) for r in rows)


@pytest.mark.parametrize("shape", ["varying", "mixed", "alike"])
async def test_updated_rows_are_those_core_updates_store(uow: UnitOfWork, shape: str) -> None:
    project = await add_project(uow)
    checks = [await add_check(uow, project) for _ in range(3)]
    rows = [
        {
            "id": check_id,
            "next_due": NOW + timedelta(minutes=index) if shape == "varying" else NOW,
            "paused": bool(index % 2) if shape == "varying" else True,
            "episode_key": None if shape != "mixed" else f"e{index}",
            "bad_streak": index if shape == "varying" else 2,
        }
        for index, check_id in enumerate(checks)
    ]
    columns = ["next_due", "paused", "episode_key", "bad_streak"]

    await bulk.update_rows(uow.connection, t.checks, "id", rows, columns)

    c = t.checks.c
    stored = (
        await uow.connection.execute(
            select(c.id, c.next_due, c.paused, c.episode_key, c.bad_streak)
            .where(c.id.in_(checks))
            .order_by(c.id)
        )
    ).all()
    assert [tuple(row) for row in stored] == [tuple(r[k] for k in ("id", *columns)) for r in rows]


async def test_writes_together_store_what_each_stores_alone_and_return_the_last_ones_rows(
    uow: UnitOfWork,
) -> None:
    project = await add_project(uow)
    checks = [await add_check(uow, project) for _ in range(3)]
    states = [{"id": check_id, "bad_streak": index + 1} for index, check_id in enumerate(checks)]
    flips = _flips(checks, "mixed")
    alerts = [
        {
            "project_id": project,
            "check_id": check_id,
            "key": f"missed:{check_id}",
            "kind": "missed",
            "scheduled": NOW,
            "count": 1,
            "created_at": NOW,
            "title": "",
            "message": "",
        }
        for check_id in checks
    ]
    alert_columns = list(alerts[0])
    returning = ("check_id", "key")
    await bulk.insert_rows(uow.connection, t.alerts, alerts[:1], alert_columns)  # the first exists

    returned = await bulk.write_together(
        uow.connection,
        [
            bulk.RowsWrite(table=t.checks, key="id", rows=states, columns=["bad_streak"]),
            bulk.RowsWrite(table=t.flips, rows=[], columns=FLIP_COLUMNS),  # nothing: left out
            bulk.RowsWrite(table=t.flips, rows=flips, columns=FLIP_COLUMNS),
            bulk.RowsWrite(
                table=t.alerts, rows=alerts, columns=alert_columns, ignore_conflicts=True, returning=returning
            ),
        ],
    )

    assert sorted(returned) == [(c, f"missed:{c}") for c in checks[1:]]
    c = t.checks.c
    streaks = await uow.connection.execute(select(c.id, c.bad_streak).where(c.id.in_(checks)).order_by(c.id))
    assert [tuple(row) for row in streaks] == [(s["id"], s["bad_streak"]) for s in states]
    assert await _stored_flips(uow) == [tuple(f[k] for k in FLIP_COLUMNS) for f in flips]


async def test_writes_together_return_nothing_when_the_last_returns_nothing(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    checks = [await add_check(uow, project) for _ in range(2)]
    rows = _flips(checks, "varying")
    assert (
        await bulk.write_together(
            uow.connection,
            [
                bulk.RowsWrite(table=t.flips, rows=rows[:1], columns=FLIP_COLUMNS),
                bulk.RowsWrite(table=t.flips, rows=rows[1:], columns=FLIP_COLUMNS),
            ],
        )
        == []
    )
    assert await bulk.write_together(uow.connection, []) == []
    assert await _stored_flips(uow) == [tuple(f[k] for k in FLIP_COLUMNS) for f in rows]


@pytest.mark.parametrize("misuse", ["returning before the last", "update returning", "update ignoring"])
async def test_writes_together_refuse_what_one_statement_cannot_run(uow: UnitOfWork, misuse: str) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    flip = bulk.RowsWrite(table=t.flips, rows=_flips([check], "alike"), columns=FLIP_COLUMNS)
    state = {"id": check, "bad_streak": 1}
    odd = {
        "returning before the last": [
            bulk.RowsWrite(table=t.flips, rows=flip.rows, columns=FLIP_COLUMNS, returning=("id",)),
            flip,
        ],
        "update returning": [
            bulk.RowsWrite(table=t.checks, key="id", rows=[state], columns=["bad_streak"], returning=("id",))
        ],
        "update ignoring": [
            bulk.RowsWrite(
                table=t.checks, key="id", rows=[state], columns=["bad_streak"], ignore_conflicts=True
            )
        ],
    }[misuse]
    with pytest.raises(ValueError, match=r"returning|ignore_conflicts"):
        await bulk.write_together(uow.connection, odd)
    assert await _stored_flips(uow) == []
