"""DetectionStore (monitor.storage.ports) on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid as uuid_module
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import event, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.storage import outbox, repositories
from monitor.storage import tables as t
from monitor.storage.outbox import NewAlert
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import NOW, add_check, add_project

COLUMNS = ("id", "uuid", "shard", *repositories.STATE_COLUMNS)


def run_row(check_id: int, scheduled: datetime, **overrides: Any) -> dict[str, Any]:
    """Every ``runs`` column, as a sweep writes a new run."""
    row: dict[str, Any] = {
        "id": str(uuid_module.uuid4()),
        "check_id": check_id,
        "rid": None,
        "scheduled": scheduled,
        "first_ping_at": scheduled,
        "started_at": None,
        "finished_at": None,
        "finish_kind": None,
        "exit_status": None,
        "late": False,
        "duplicate": False,
        "overlap": False,
        "timed_out": False,
        "early": False,
        "outcome": None,
    }
    row.update(overrides)
    return row


async def runs_of(uow: UnitOfWork, check_id: int) -> list[dict[str, Any]]:
    query = select(t.runs).where(t.runs.c.check_id == check_id).order_by(t.runs.c.scheduled)
    return [dict(r) for r in (await uow.connection.execute(query)).mappings()]


async def marks_of(uow: UnitOfWork, check_id: int) -> list[tuple[datetime, str]]:
    m = t.tick_marks.c
    query = select(m.scheduled, m.outcome).where(m.check_id == check_id).order_by(m.scheduled)
    return [(s, o) for s, o in (await uow.connection.execute(query))]


async def flips_of(uow: UnitOfWork, check_id: int) -> list[tuple[datetime, int | None, str, int | None]]:
    f = t.flips.c
    query = select(f.created_at, f.up, f.reason, f.token).where(f.check_id == check_id).order_by(f.id)
    return [tuple(r) for r in (await uow.connection.execute(query))]


async def test_lock_due_takes_the_earliest_deadlines_first_and_returns_them_by_id(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    later = await add_check(uow, project, next_due=NOW - timedelta(seconds=10))
    earliest = await add_check(uow, project, next_due=NOW - timedelta(seconds=30))
    middle = await add_check(uow, project, next_due=NOW - timedelta(seconds=20))
    await add_check(uow, project, next_due=NOW + timedelta(seconds=1))  # not due
    await add_check(uow, project)  # no deadline
    rows, fetched = await uow.detection.lock_due(NOW, None, 2, COLUMNS)
    assert fetched == 2
    assert [r["id"] for r in rows] == sorted([earliest, middle])
    assert set(rows[0]) == set(COLUMNS)
    rows, fetched = await uow.detection.lock_due(NOW, None, 10, COLUMNS)
    assert fetched == 3
    assert [r["id"] for r in rows] == sorted([earliest, middle, later])


async def test_lock_due_keeps_to_the_shards_given(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    due = NOW - timedelta(seconds=1)
    zero = await add_check(uow, project, shard=0, next_due=due)
    one = await add_check(uow, project, shard=1, next_due=due)
    two = await add_check(uow, project, shard=2, next_due=due)
    assert [r["id"] for r in (await uow.detection.lock_due(NOW, [1], 10, COLUMNS))[0]] == [one]
    assert [r["id"] for r in (await uow.detection.lock_due(NOW, [0, 2], 10, COLUMNS))[0]] == [zero, two]
    assert (await uow.detection.lock_due(NOW, [3], 10, COLUMNS)) == ([], 0)


async def test_books_hold_the_open_runs_and_the_runs_and_marks_since_the_cutoff(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    empty = await add_check(uow, project)
    old_open = run_row(check, NOW - timedelta(days=2))
    old_closed = run_row(check, NOW - timedelta(days=2, hours=1), outcome="on_time")
    recent = run_row(check, NOW - timedelta(minutes=5), outcome="on_time")
    await uow.connection.execute(t.runs.insert(), [old_open, old_closed, recent])
    await uow.connection.execute(
        t.tick_marks.insert(),
        [
            {"check_id": check, "scheduled": NOW - timedelta(days=2), "outcome": "missed"},
            {"check_id": check, "scheduled": NOW - timedelta(minutes=5), "outcome": "on_time"},
        ],
    )
    books = await uow.detection.books({check: NOW - timedelta(hours=1), empty: None})
    assert set(books[check].runs) == {old_open["id"], recent["id"]}
    assert list(books[check].marks) == [NOW - timedelta(minutes=5)]
    assert books[empty].runs == {} and books[empty].marks == {}
    assert await uow.detection.books({}) == {}


async def test_books_replanned_are_the_same_books_and_the_plan_setting_is_restored(
    uow: UnitOfWork, engine: AsyncEngine
) -> None:
    """``replan``: on PostgreSQL the reads run under ``plan_cache_mode = force_custom_plan``
    (a plan for the tables as they are now, not one cached while they were empty), and the
    rest of the transaction is back at the server's setting; SQLite has no plan cache."""
    project = await add_project(uow)
    check = await add_check(uow, project)
    await uow.connection.execute(
        t.runs.insert(),
        [
            run_row(check, NOW - timedelta(minutes=5), outcome="on_time"),
            run_row(check, NOW - timedelta(days=2)),
        ],
    )
    await uow.connection.execute(
        t.tick_marks.insert(),
        [{"check_id": check, "scheduled": NOW - timedelta(minutes=5), "outcome": "on_time"}],
    )
    cutoffs = {check: NOW - timedelta(hours=1)}
    plain = await uow.detection.books(cutoffs)
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(" ".join(statement.split()))

    event.listen(engine.sync_engine, "before_cursor_execute", seen)
    try:
        replanned = await uow.detection.books(cutoffs, replan=True)
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", seen)

    assert set(replanned[check].runs) == set(plain[check].runs) and len(plain[check].runs) == 2
    assert replanned[check].marks == plain[check].marks and len(plain[check].marks) == 1
    if engine.dialect.name != "postgresql":
        assert not [s for s in statements if "plan_cache_mode" in s]
        return
    assert statements[0] == "SET LOCAL plan_cache_mode = force_custom_plan"
    assert statements[-1] == "SET LOCAL plan_cache_mode TO DEFAULT"
    assert len(statements) > 2  # the reads ran between them
    setting = (await uow.connection.execute(text("SHOW plan_cache_mode"))).scalar_one()
    assert setting == "auto"


async def test_save_sweep_writes_states_marks_flips_and_runs(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project, next_due=NOW - timedelta(seconds=1))
    other = await add_check(uow, project, next_due=NOW - timedelta(seconds=1))
    existing = run_row(check, NOW - timedelta(hours=1))
    await uow.connection.execute(t.runs.insert(), [existing])
    await uow.connection.execute(
        t.tick_marks.insert().values(check_id=check, scheduled=NOW - timedelta(hours=2), outcome="missed")
    )
    rows, _ = await uow.detection.lock_due(NOW, None, 10, COLUMNS)
    states = []
    for row in rows:
        state = repositories.state_values(repositories.state_of(row))
        state.update(id=row["id"], episode_key=f"missed:{row['id']}", episode_count=1, bad_streak=1)
        states.append(state)
    new_run = run_row(check, NOW - timedelta(minutes=1))
    await uow.detection.save_sweep(
        states,
        marks=[
            {"check_id": check, "scheduled": NOW - timedelta(hours=2), "outcome": "on_time"},  # kept
            {"check_id": check, "scheduled": NOW - timedelta(minutes=1), "outcome": "missed"},
        ],
        flips=[{"check_id": check, "created_at": NOW, "up": 0, "reason": "missed", "token": 7}],
        new_runs=[new_run],
        changed_runs=[{**existing, "outcome": "missed", "timed_out": True}],
    )
    found = await uow.checks.by_ids([check, other])
    assert (
        found[check]["episode_key"] == f"missed:{check}" and found[other]["episode_key"] == f"missed:{other}"
    )
    assert found[check]["bad_streak"] == 1 and found[check]["episode_count"] == 1
    assert await marks_of(uow, check) == [
        (NOW - timedelta(hours=2), "missed"),
        (NOW - timedelta(minutes=1), "missed"),
    ]
    assert await flips_of(uow, check) == [(NOW, 0, "missed", 7)]
    runs = await runs_of(uow, check)
    assert [(r["id"], r["outcome"], r["timed_out"]) for r in runs] == [
        (existing["id"], "missed", True),
        (new_run["id"], None, False),
    ]


async def test_save_sweep_of_nothing_writes_nothing(uow: UnitOfWork) -> None:
    assert await uow.detection.save_sweep([], marks=[], flips=[], new_runs=[], changed_runs=[]) == []


async def test_save_sweep_inserts_alerts_with_its_writes_and_returns_their_ids(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    checks = [await add_check(uow, project) for _ in range(3)]

    def alert(check: int, key: str) -> NewAlert:
        return NewAlert(
            project_id=project, check_id=check, key=key, kind="missed", created_at=NOW, title="", message=""
        )

    (raised_before,) = await outbox.insert_alerts(uow.connection, [alert(checks[0], "missed:a")])
    flips = [{"check_id": c, "created_at": NOW, "up": 0, "reason": "missed", "token": 3} for c in checks]

    ids = await uow.detection.save_sweep(
        [{"id": c, "bad_streak": 1} for c in checks],
        marks=[],
        flips=flips,
        new_runs=[],
        changed_runs=[],
        alerts=[alert(checks[0], "missed:a"), alert(checks[1], "missed:b"), alert(checks[1], "missed:b")],
    )

    assert raised_before is not None and ids[0] is None and ids[2] is None  # raised already; repeated
    a = t.alerts.c
    stored = await uow.connection.execute(select(a.id, a.check_id, a.key).order_by(a.id))
    assert [tuple(r) for r in stored] == [
        (raised_before, checks[0], "missed:a"),
        (ids[1], checks[1], "missed:b"),
    ]
    assert all([await flips_of(uow, c) == [(NOW, 0, "missed", 3)] for c in checks])


async def test_save_sweep_writes_a_run_it_inserts_with_its_changes(uow: UnitOfWork) -> None:
    # on PostgreSQL the writes are one statement, whose update could not see the run inserted
    # beside it: the change must go into the insert
    project = await add_project(uow)
    check = await add_check(uow, project)
    existing = run_row(check, NOW - timedelta(hours=1))
    await uow.connection.execute(t.runs.insert(), [existing])
    new_run = run_row(check, NOW - timedelta(minutes=1))

    await uow.detection.save_sweep(
        [],
        marks=[],
        flips=[],
        new_runs=[new_run],
        changed_runs=[
            {**new_run, "outcome": "missed", "timed_out": True},
            {**existing, "outcome": "failed"},
        ],
    )

    runs = await runs_of(uow, check)
    assert [(r["id"], r["outcome"], r["timed_out"]) for r in runs] == [
        (existing["id"], "failed", False),
        (new_run["id"], "missed", True),
    ]


async def test_write_effects_inserts_runs_marks_flips_and_updates_changed_runs(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    existing = run_row(check, NOW - timedelta(hours=1))
    await uow.connection.execute(t.runs.insert(), [existing])
    await uow.connection.execute(
        t.tick_marks.insert().values(check_id=check, scheduled=NOW - timedelta(hours=2), outcome="missed")
    )
    new_run = run_row(check, NOW, started_at=NOW)
    changed = {"b_id": existing["id"], "check_id": check, "outcome": "on_time", "finished_at": NOW}
    await uow.detection.write_effects(
        new_runs=[new_run],
        changed_runs=[changed],
        marks=[
            {"check_id": check, "scheduled": NOW - timedelta(hours=2), "outcome": "on_time"},  # kept
            {"check_id": check, "scheduled": NOW - timedelta(hours=1), "outcome": "on_time"},
        ],
        flips=[{"check_id": check, "created_at": NOW, "up": 1, "reason": "success", "token": None}],
    )
    runs = await runs_of(uow, check)
    assert [(r["id"], r["outcome"], r["finished_at"], r["started_at"]) for r in runs] == [
        (existing["id"], "on_time", NOW, None),
        (new_run["id"], None, None, NOW),
    ]
    assert await marks_of(uow, check) == [
        (NOW - timedelta(hours=2), "missed"),
        (NOW - timedelta(hours=1), "on_time"),
    ]
    assert await flips_of(uow, check) == [(NOW, 1, "success", None)]
    await uow.detection.write_effects(new_runs=[], changed_runs=[], marks=[], flips=[])


async def test_latest_arrivals_are_each_checks_latest_runs_by_first_ping(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project, kind="cron", schedule="* * * * *")
    other = await add_check(uow, project, kind="cron", schedule="* * * * *")
    ticks = [NOW - timedelta(minutes=n) for n in (3, 2, 1)]
    await uow.connection.execute(
        t.runs.insert(),
        [
            run_row(check, ticks[0], first_ping_at=ticks[0] + timedelta(seconds=5)),
            # arrived last though its tick is older: first by arrival
            run_row(check, ticks[1], first_ping_at=ticks[2] + timedelta(seconds=30)),
            run_row(check, ticks[2], first_ping_at=ticks[2] + timedelta(seconds=5)),
            run_row(other, ticks[0], first_ping_at=ticks[0]),
        ],
    )
    found = sorted(await uow.detection.latest_arrivals([check, other], 2))
    assert found == sorted(
        [
            (check, ticks[1], ticks[2] + timedelta(seconds=30)),
            (check, ticks[2], ticks[2] + timedelta(seconds=5)),
            (other, ticks[0], ticks[0]),
        ]
    )
    assert await uow.detection.latest_arrivals([], 2) == []


async def test_checks_named_finds_by_uuid_or_by_slug_across_projects(uow: UnitOfWork) -> None:
    first = await add_project(uow, "a")
    second = await add_project(uow, "b")
    one = await add_check(uow, first, slug="backup", name="one")
    two = await add_check(uow, second, slug="backup")
    await add_check(uow, second, slug="backup-2")
    uuid = (await uow.checks.by_ids([one]))[one]["uuid"]
    (row,) = await uow.detection.checks_named(uuid=uuid)
    assert (row["id"], row["name"], row["slug"], row["project_id"]) == (one, "one", "backup", first)
    assert sorted(r["id"] for r in await uow.detection.checks_named(slug="backup")) == [one, two]
    assert len(await uow.detection.checks_named(slug="backup", limit=1)) == 1
    assert await uow.detection.checks_named(slug="nothing") == []
    assert await uow.detection.checks_named(uuid=str(uuid_module.uuid4())) == []


async def test_recipient_exists_by_uuid_or_by_ping_key_and_slug(uow: UnitOfWork) -> None:
    first = await add_project(uow, "a")
    second = await add_project(uow, "b")
    check = await add_check(uow, first, slug="backup")
    uuid = (await uow.checks.by_ids([check]))[check]["uuid"]
    rows = await uow.connection.execute(select(t.projects.c.id, t.projects.c.ping_key))
    keys = {int(project_id): str(key) for project_id, key in rows}
    assert await uow.detection.recipient_exists(uuid=uuid)
    assert not await uow.detection.recipient_exists(uuid=str(uuid_module.uuid4()))
    assert await uow.detection.recipient_exists(ping_key=keys[first], slug="backup")
    assert not await uow.detection.recipient_exists(ping_key=keys[second], slug="backup")
    assert not await uow.detection.recipient_exists(ping_key=keys[first], slug="other")


async def test_write_effects_updates_runs_whose_changes_name_different_columns(uow: UnitOfWork) -> None:
    check = await add_check(uow, await add_project(uow))
    first, second = run_row(check, NOW - timedelta(hours=2)), run_row(check, NOW - timedelta(hours=1))
    await uow.connection.execute(t.runs.insert(), [first, second])
    await uow.detection.write_effects(
        new_runs=[],
        changed_runs=[
            {"b_id": first["id"], "check_id": check, "outcome": "missed"},
            {"b_id": second["id"], "check_id": check, "finished_at": NOW, "late": True},
        ],
        marks=[],
        flips=[],
    )
    runs = await runs_of(uow, check)
    assert [(r["outcome"], r["finished_at"], bool(r["late"])) for r in runs] == [
        ("missed", None, False),
        (None, NOW, True),
    ]


async def test_write_effects_writes_a_batchs_pings_and_check_states_with_its_runs(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    one, two = await add_check(uow, project), await add_check(uow, project)
    started = run_row(one, NOW - timedelta(hours=1), started_at=NOW - timedelta(hours=1))
    await uow.connection.execute(t.runs.insert(), [started])
    new_run = run_row(two, NOW, started_at=NOW)

    await uow.detection.write_effects(
        new_runs=[new_run],
        changed_runs=[
            # a start and its finish in one batch: the run is inserted finished
            {"b_id": new_run["id"], "check_id": two, "finished_at": NOW, "outcome": "on_time"},
            # two changes of one run: applied in order, column by column
            {"b_id": started["id"], "check_id": one, "finished_at": NOW, "outcome": "failed"},
            {"b_id": started["id"], "check_id": one, "outcome": "on_time", "late": True},
        ],
        marks=[],
        flips=[{"check_id": one, "created_at": NOW, "up": 1, "reason": "success", "token": None}],
        pings=[
            {"check_id": one, "n": 1, "kind": "success", "received_at": NOW, "method": "POST"},
            {"check_id": two, "n": 1, "kind": "start", "received_at": NOW},
        ],
        states=[
            {"b_id": one, "n_pings": 1, "last_ping_at": NOW},
            {"b_id": two, "n_pings": 1, "good_streak": 4},
        ],
    )

    assert [(r["outcome"], r["finished_at"], bool(r["late"])) for r in await runs_of(uow, one)] == [
        ("on_time", NOW, True)
    ]
    assert [(r["id"], r["outcome"], r["finished_at"]) for r in await runs_of(uow, two)] == [
        (new_run["id"], "on_time", NOW)
    ]
    p, c = t.pings.c, t.checks.c
    pings = await uow.connection.execute(select(p.check_id, p.kind, p.method).order_by(p.check_id))
    assert [tuple(r) for r in pings] == [(one, "success", "POST"), (two, "start", "")]  # the default
    states = await uow.connection.execute(
        select(c.id, c.n_pings, c.last_ping_at, c.good_streak).where(c.id.in_([one, two])).order_by(c.id)
    )
    assert [tuple(r) for r in states] == [(one, 1, NOW, 0), (two, 1, None, 4)]
    assert await flips_of(uow, one) == [(NOW, 1, "success", None)]


async def test_save_state_writes_each_checks_own_columns(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    one, two = await add_check(uow, project), await add_check(uow, project)
    await repositories.save_state(
        uow.connection,
        [
            {"b_id": one, "n_pings": 3, "last_ping_at": NOW, "next_due": NOW + timedelta(hours=1)},
            {"b_id": two, "bad_streak": 2, "paused": True},
            {"b_id": one},  # nothing to set
        ],
    )
    await repositories.save_state(uow.connection, [])
    c = t.checks.c
    rows = await uow.connection.execute(
        select(c.id, c.n_pings, c.last_ping_at, c.next_due, c.bad_streak, c.paused)
        .where(c.id.in_([one, two]))
        .order_by(c.id)
    )
    assert [tuple(r) for r in rows] == [
        (one, 3, NOW, NOW + timedelta(hours=1), 0, False),
        (two, 0, None, None, 2, True),
    ]
