"""RunStore (monitor.storage.ports) on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid as uuid_module
from datetime import datetime, timedelta

from monitor.domain.checks import Outcome
from monitor.storage import tables as t
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import NOW, add_check, add_project


async def add_run(
    uow: UnitOfWork, check_id: int, scheduled: datetime, *, outcome: str | None, rid: str | None = None
) -> str:
    run_id = str(uuid_module.uuid4())
    await uow.connection.execute(
        t.runs.insert().values(
            id=run_id,
            check_id=check_id,
            scheduled=scheduled,
            first_ping_at=scheduled,
            outcome=outcome,
            rid=rid,
        )
    )
    return run_id


async def add_mark(uow: UnitOfWork, check_id: int, scheduled: datetime, outcome: str = "on_time") -> None:
    await uow.connection.execute(
        t.tick_marks.insert().values(check_id=check_id, scheduled=scheduled, outcome=outcome)
    )


async def test_books_hold_open_runs_and_what_the_cutoff_reaches(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check, other = await add_check(uow, project), await add_check(uow, project)
    hour = timedelta(hours=1)
    open_old = await add_run(uow, check, NOW - 10 * hour, outcome=None)
    closed_old = await add_run(uow, check, NOW - 10 * hour + timedelta(minutes=1), outcome="on_time")
    closed_new = await add_run(uow, check, NOW - hour, outcome="on_time")
    await add_mark(uow, check, NOW - 10 * hour)
    await add_mark(uow, check, NOW - hour, "missed")
    theirs = await add_run(uow, other, NOW - hour, outcome="on_time")
    books = await uow.runs.books({check: NOW - 2 * hour, other: None})
    assert set(books) == {check, other}
    assert {r.id for r in books[check].runs.values()} == {open_old, closed_new}
    assert closed_old not in {r.id for r in books[check].runs.values()}
    assert books[check].marks[NOW - hour].outcome is Outcome.MISSED
    assert NOW - 10 * hour not in books[check].marks
    assert theirs not in {r.id for r in books[other].runs.values()}
    assert await uow.runs.books({}) == {}


async def test_books_hold_runs_named_by_rid_and_tick(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    tick = NOW - timedelta(days=3)
    by_rid = await add_run(uow, check, NOW - timedelta(days=5), outcome="on_time", rid="r-1")
    by_tick = await add_run(uow, check, tick, outcome="on_time")
    await add_run(uow, check, NOW - timedelta(days=4), outcome="on_time", rid="r-2")
    await add_mark(uow, check, tick, "late")
    books = await uow.runs.books({check: None}, rids={check: ["r-1"]}, ticks={check: [tick]})
    assert {r.id for r in books[check].runs.values()} == {by_rid, by_tick}
    assert books[check].marks[tick].outcome is Outcome.LATE


async def test_books_hold_the_newest_run_of_the_checks_asked(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check, other = await add_check(uow, project), await add_check(uow, project)
    await add_run(uow, check, NOW - timedelta(days=2), outcome="on_time")
    newest = await add_run(uow, check, NOW - timedelta(minutes=5), outcome="failed")
    theirs = await add_run(uow, other, NOW - timedelta(minutes=5), outcome="on_time")
    books = await uow.runs.books({check: None, other: None}, newest=[check])
    assert {r.id for r in books[check].runs.values()} == {newest}
    assert theirs not in {r.id for r in books[other].runs.values()}


async def test_books_with_cutoff_rids_and_ticks_together_keep_each_checks_own(uow: UnitOfWork) -> None:
    # every arm at once (open runs, cutoff, rids, ticks), over checks that each name only some:
    # the query is built once per combination of arms, and each check still gets its own
    project = await add_project(uow)
    check, other = await add_check(uow, project), await add_check(uow, project)
    hour = timedelta(hours=1)
    tick = NOW - 30 * hour
    recent = await add_run(uow, check, NOW - hour, outcome="on_time")
    by_tick = await add_run(uow, check, tick, outcome="on_time")
    by_rid = await add_run(uow, other, NOW - 40 * hour, outcome="on_time", rid="r-9")
    open_other = await add_run(uow, other, NOW - 50 * hour, outcome=None)
    their_recent = await add_run(uow, other, NOW - hour, outcome="on_time")  # other has no cutoff
    await add_mark(uow, check, NOW - hour, "missed")
    await add_mark(uow, check, tick, "late")
    await add_mark(uow, other, tick, "on_time")  # the tick is check's, not other's
    books = await uow.runs.books(
        {check: NOW - 2 * hour, other: None}, rids={other: ["r-9"]}, ticks={check: [tick]}
    )
    assert {r.id for r in books[check].runs.values()} == {recent, by_tick}
    assert {r.id for r in books[other].runs.values()} == {by_rid, open_other}
    assert their_recent not in {r.id for r in books[other].runs.values()}
    assert {s: m.outcome for s, m in books[check].marks.items()} == {
        NOW - hour: Outcome.MISSED,
        tick: Outcome.LATE,
    }
    assert books[other].marks == {}


async def test_books_holding_an_older_tick_get_the_newest_succeeded_run(uow: UnitOfWork) -> None:
    # supersession compares a tick before the cutoff with the newest succeeded run, which may
    # be before the cutoff too; a book that holds no such tick does not need it
    project = await add_project(uow)
    running, named, recent_only = [await add_check(uow, project) for _ in range(3)]
    hour = timedelta(hours=1)

    async def succeeded(check: int, scheduled: datetime, **flags: object) -> str:
        run_id = await add_run(uow, check, scheduled, outcome=str(flags.pop("outcome", "on_time")))
        values = {"finish_kind": "success", **flags}
        await uow.connection.execute(t.runs.update().where(t.runs.c.id == run_id).values(values))
        return run_id

    for check in (running, named, recent_only):
        await succeeded(check, NOW - 9 * hour)
    open_old = await add_run(uow, running, NOW - 8 * hour, outcome=None)
    newest = await succeeded(running, NOW - 6 * hour)
    await succeeded(running, NOW - 5 * hour, timed_out=True)  # none of these succeeded
    await succeeded(running, NOW - 4 * hour, early=True)
    await succeeded(running, NOW - 3 * hour, outcome="too_fast")
    failed = await add_run(uow, running, NOW - 3 * hour + timedelta(minutes=1), outcome="failed")
    newest_named = await succeeded(named, NOW - 5 * hour)
    recent = await succeeded(recent_only, NOW - hour)
    books = await uow.runs.books(
        {running: NOW - 2 * hour, named: NOW - 2 * hour, recent_only: NOW - 2 * hour},
        ticks={named: [NOW - 7 * hour]},
    )
    assert {r.id for r in books[running].runs.values()} == {open_old, newest}
    assert failed not in {r.id for r in books[running].runs.values()}
    assert {r.id for r in books[named].runs.values()} == {newest_named}
    assert {r.id for r in books[recent_only].runs.values()} == {recent}
    assert books[running].latest_success_tick() == NOW - 6 * hour


async def test_books_read_each_checks_runs_from_its_own_cutoff(uow: UnitOfWork) -> None:
    # a weekly check (cutoff a week back) batched with one run every minute: the query reads
    # the latter's runs from its own cutoff on, not a week of them
    from monitor.storage import bulk
    from monitor.storage.repositories import _book_selects

    project = await add_project(uow)
    weekly, minutely = await add_check(uow, project), await add_check(uow, project)
    week_ago = NOW - timedelta(days=7)
    await add_run(uow, weekly, week_ago, outcome="on_time")
    await add_mark(uow, weekly, week_ago)
    for minutes in range(1, 31):
        at = NOW - timedelta(minutes=minutes)
        await add_run(uow, minutely, at, outcome="on_time")
        await add_mark(uow, minutely, at)
    cutoffs = {weekly: week_ago, minutely: NOW - timedelta(minutes=2)}
    postgres = uow.connection.dialect.name == "postgresql"
    runs_query, marks_query = _book_selects(True, False, False, postgres)
    params = {
        "ids": [weekly, minutely],
        **bulk.own_bounds("cutoffs", cutoffs, t.runs.c.scheduled, uow.connection.dialect),
    }
    read = [(row.check_id, row.scheduled) for row in (await uow.connection.execute(runs_query, params)).all()]
    assert marks_query is not None
    marks = [tuple(row) for row in (await uow.connection.execute(marks_query, params)).all()]
    expected = {
        (weekly, week_ago),
        (minutely, NOW - timedelta(minutes=1)),
        (minutely, NOW - timedelta(minutes=2)),
    }
    assert set(read) == expected and len(read) == 3
    assert {(cid, at) for cid, at, _ in marks} == expected and len(marks) == 3
    books = await uow.runs.books(cutoffs)
    assert len(books[minutely].runs) == 2 and len(books[minutely].marks) == 2
