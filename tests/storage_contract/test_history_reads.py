"""HistoryReads (monitor.storage.ports) on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid as uuid_module
from datetime import datetime, timedelta
from typing import Any

from monitor.storage import tables as t
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import NOW, add_channel, add_check, add_project


async def _checks(uow: UnitOfWork) -> tuple[int, int, int]:
    project = await add_project(uow)
    return project, await add_check(uow, project), await add_check(uow, project)


async def _add_ping(uow: UnitOfWork, check_id: int, n: int, body: bytes | None = None, **extra: Any) -> None:
    await uow.connection.execute(
        t.pings.insert().values(
            check_id=check_id,
            n=n,
            kind="success",
            received_at=NOW + timedelta(seconds=n),
            body=body,
            body_size=len(body or b""),
            **extra,
        )
    )


async def _add_run(uow: UnitOfWork, check_id: int, scheduled: datetime, first: datetime, run_id: str) -> None:
    await uow.connection.execute(
        t.runs.insert().values(id=run_id, check_id=check_id, scheduled=scheduled, first_ping_at=first)
    )


async def _add_alert(uow: UnitOfWork, project: int, check_id: int, key: str, **extra: Any) -> int:
    found = await uow.connection.execute(
        t.alerts.insert()
        .values(
            {
                "project_id": project,
                "check_id": check_id,
                "key": key,
                "kind": "down",
                "created_at": NOW,
                **extra,
            }
        )
        .returning(t.alerts.c.id)
    )
    return int(found.scalar_one())


async def test_pings_newest_first_below_a_number_without_their_bodies(uow: UnitOfWork) -> None:
    _, check, other = await _checks(uow)
    await _add_ping(uow, check, 1, b"hello", remote_addr="10.0.0.1")
    await _add_ping(uow, check, 2, b"")
    await _add_ping(uow, check, 3)
    await _add_ping(uow, other, 1, b"theirs")
    rows = await uow.history.pings(check, 10)
    assert [r["n"] for r in rows] == [3, 2, 1]
    assert [r["has_body"] for r in rows] == [False, False, True]
    assert "body" not in rows[0]
    assert (rows[2]["remote_addr"], rows[2]["body_size"], rows[2]["received_at"]) == (
        "10.0.0.1",
        5,
        NOW + timedelta(seconds=1),
    )
    assert [r["n"] for r in await uow.history.pings(check, 1, before=3)] == [2]
    assert await uow.history.pings(check, 10, before=1) == []


async def test_ping_body_is_the_stored_bytes_or_none(uow: UnitOfWork) -> None:
    _, check, other = await _checks(uow)
    await _add_ping(uow, check, 1, b"hello")
    await _add_ping(uow, check, 2)
    await _add_ping(uow, check, 3, b"")
    assert await uow.history.ping_body(check, 1) == b"hello"
    assert await uow.history.ping_body(check, 2) is None
    assert await uow.history.ping_body(check, 3) == b""
    assert await uow.history.ping_body(check, 4) is None
    assert await uow.history.ping_body(other, 1) is None


async def test_flips_newest_first_inside_a_window_and_below_an_id(uow: UnitOfWork) -> None:
    _, check, other = await _checks(uow)
    for minutes, up in ((0, 1), (10, 0), (20, 1)):
        await uow.connection.execute(
            t.flips.insert().values(
                check_id=check, created_at=NOW + timedelta(minutes=minutes), up=up, reason="ping"
            )
        )
    await uow.connection.execute(t.flips.insert().values(check_id=other, created_at=NOW, up=0, reason="x"))
    rows = await uow.history.flips(check, 10)
    assert [(r["up"], r["created_at"]) for r in rows] == [
        (1, NOW + timedelta(minutes=20)),
        (0, NOW + timedelta(minutes=10)),
        (1, NOW),
    ]
    ids = [r["id"] for r in rows]
    assert ids == sorted(ids, reverse=True)
    window = await uow.history.flips(
        check, 10, since=NOW + timedelta(minutes=10), until=NOW + timedelta(minutes=20)
    )
    assert [r["id"] for r in window] == [ids[1]]
    assert [r["id"] for r in await uow.history.flips(check, 1, before=ids[0])] == [ids[1]]


async def test_runs_newest_first_by_tick_then_first_ping_then_id_after_a_key(uow: UnitOfWork) -> None:
    _, check, other = await _checks(uow)
    tick, later = NOW, NOW + timedelta(hours=1)
    await _add_run(uow, check, tick, tick, "a")
    await _add_run(uow, check, tick, tick, "b")
    await _add_run(uow, check, tick, tick + timedelta(seconds=5), "c")
    await _add_run(uow, check, later, later, "d")
    await _add_run(uow, other, later, later, "e")
    rows = await uow.history.runs(check, 10)
    assert [r["id"] for r in rows] == ["d", "c", "b", "a"]
    assert rows[0]["scheduled"] == later and rows[0]["outcome"] is None
    keys = [(r["scheduled"], r["first_ping_at"], r["id"]) for r in rows]
    assert [r["id"] for r in await uow.history.runs(check, 2, after=keys[0])] == ["c", "b"]
    assert [r["id"] for r in await uow.history.runs(check, 10, after=keys[2])] == ["a"]
    assert [r["id"] for r in await uow.history.runs(check, 10, since=later)] == ["d"]
    assert [r["id"] for r in await uow.history.runs(check, 10, until=tick)] == ["c", "b", "a"]


async def test_alerts_newest_first_and_their_notifications_in_order(uow: UnitOfWork) -> None:
    project, check, other = await _checks(uow)
    first = await _add_alert(uow, project, check, "k1", title="down")
    second = await _add_alert(uow, project, check, "k2")
    await _add_alert(uow, project, other, "k3")
    assert [r["id"] for r in await uow.history.alerts(check, 10)] == [second, first]
    assert [r["id"] for r in await uow.history.alerts(check, 10, before=second)] == [first]
    [row] = await uow.history.alerts(check, 1, before=second)
    assert (row["title"], row["count"], row["created_at"]) == ("down", 1, NOW)
    ops, mail = await add_channel(uow, project, "ops"), await add_channel(uow, project, "mail")
    for alert, channel, status in ((first, ops, "sent"), (second, mail, "pending"), (first, mail, "failed")):
        await uow.connection.execute(
            t.notifications.insert().values(
                alert_id=alert, channel_id=channel, status=status, next_attempt_at=NOW, created_at=NOW
            )
        )
    assert await uow.history.notifications([first]) == [
        (first, ops, "sent", 0, None),
        (first, mail, "failed", 0, None),
    ]
    assert [n[0] for n in await uow.history.notifications([first, second])] == [first, second, first]
    assert await uow.history.notifications([]) == []


async def test_all_runs_tick_marks_and_alert_ticks_of_one_check(uow: UnitOfWork) -> None:
    project, check, other = await _checks(uow)
    run_id = str(uuid_module.uuid4())
    await _add_run(uow, check, NOW, NOW, run_id)
    await _add_run(uow, other, NOW, NOW, str(uuid_module.uuid4()))
    await uow.connection.execute(
        t.tick_marks.insert().values(check_id=check, scheduled=NOW, outcome="missed")
    )
    await _add_alert(uow, project, check, "k2", scheduled=NOW)
    await _add_alert(uow, project, check, "k1", kind="failed")
    await _add_alert(uow, project, other, "k3")
    assert [r["id"] for r in await uow.history.all_runs(check)] == [run_id]
    assert [(m["scheduled"], m["outcome"]) for m in await uow.history.tick_marks(check)] == [(NOW, "missed")]
    assert await uow.history.alert_ticks(check) == [("down", NOW), ("failed", None)]
