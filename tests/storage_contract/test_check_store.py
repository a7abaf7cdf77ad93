"""CheckStore (monitor.storage.ports) on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.storage import tables as t
from monitor.storage.ports import DuplicateKey
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import (
    NOW,
    add_alert_with_notification,
    add_channel,
    add_check,
    add_project,
    add_run,
    check_values,
    count,
)


async def test_insert_returns_the_id_and_get_reads_the_row_back(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    values = check_values(project, name="backup", tags="prod db")
    check_id = await uow.checks.insert(values)
    row = await uow.checks.get(project, values["uuid"])
    assert row is not None
    assert row["id"] == check_id
    assert (row["name"], row["tags"], row["timeout"], row["grace"]) == ("backup", "prod db", 86400, 3600)
    assert row["created_at"] == NOW


async def test_get_hides_another_projects_check_and_locks_on_request(uow: UnitOfWork) -> None:
    mine, theirs = await add_project(uow, "a"), await add_project(uow, "b")
    values = check_values(theirs)
    await uow.checks.insert(values)
    assert await uow.checks.get(mine, values["uuid"]) is None
    locked = await uow.checks.get(theirs, values["uuid"], lock=True)
    assert locked is not None and locked["uuid"] == values["uuid"]


async def test_a_taken_slug_raises_duplicate_key_and_the_transaction_goes_on(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    await add_check(uow, project, slug="nightly")
    with pytest.raises(DuplicateKey):
        await add_check(uow, project, slug="nightly")
    other = await add_project(uow, "other")
    await add_check(uow, other, slug="nightly")  # slugs are unique per project only
    assert await count(uow, t.checks) == 2


async def test_insert_many_keeps_the_order_and_fills_missing_columns(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    rows = [check_values(project, name="one", grace=60), check_values(project, name="two")]
    ids = await uow.checks.insert_many(rows)
    assert len(ids) == 2
    by_id = await uow.checks.by_ids(ids)
    assert [by_id[i]["name"] for i in ids] == ["one", "two"]
    assert [by_id[i]["grace"] for i in ids] == [60, 3600]
    assert await uow.checks.insert_many([]) == []


async def test_insert_many_is_one_statement_for_a_full_list(engine: AsyncEngine, uow: UnitOfWork) -> None:
    # 1000 rows (the API's most) with every optional column a check body can set: one INSERT
    # (SQLAlchemy pages it only past the driver's parameter limit), not one per row.
    project = await add_project(uow)
    wide = {
        "name": "n", "tags": "a b", "desc": "d", "schedule": "* * * * *", "kind": "cron",
        "tz": "Europe/Berlin", "grace": 60, "max_runtime": 60, "min_runtime": 1,
        "early_tolerance": 5, "expected_runs": 2, "failure_threshold": 2, "recovery_threshold": 2,
        "methods": "POST", "manual_resume": True, "start_kw": "s", "success_kw": "ok",
        "failure_kw": "fail", "filter_subject": True, "filter_body": True, "filter_http_body": True,
        "filter_default_fail": True, "nag_interval": 60, "escalate_after": 60,
    }  # fmt: skip
    rows = [
        check_values(project, **wide, slug=f"s{i}") if i % 3 else check_values(project) for i in range(1000)
    ]
    inserts: list[int] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO CHECKS"):
            inserts.append(1)

    event.listen(engine.sync_engine, "before_cursor_execute", seen)
    try:
        ids = await uow.checks.insert_many(rows)
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", seen)
    assert len(inserts) <= 2, len(inserts)
    by_id = await uow.checks.by_ids(ids)
    assert [by_id[i]["uuid"] for i in ids] == [r["uuid"] for r in rows]
    assert [by_id[i]["slug"] for i in ids[:4]] == [None, "s1", "s2", None]


async def test_insert_many_with_a_taken_slug_inserts_none(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    await add_check(uow, project, slug="x")
    with pytest.raises(DuplicateKey):
        await uow.checks.insert_many([check_values(project, slug="y"), check_values(project, slug="x")])
    assert await count(uow, t.checks) == 1


async def test_update_sets_columns_and_reports_a_taken_slug(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    first = check_values(project, slug="a")
    first_id = await uow.checks.insert(first)
    await add_check(uow, project, slug="b")
    await uow.checks.update(first_id, {"name": "renamed", "next_due": NOW})
    row = await uow.checks.get(project, first["uuid"])
    assert row is not None and (row["name"], row["next_due"]) == ("renamed", NOW)
    with pytest.raises(DuplicateKey):
        await uow.checks.update(first_id, {"slug": "b"})
    row = await uow.checks.get(project, first["uuid"])
    assert row is not None and row["slug"] == "a"


async def test_delete_removes_the_check_and_its_history(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    gone, kept = await add_check(uow, project), await add_check(uow, project)
    channel = await add_channel(uow, project)
    await uow.channels.assign(gone, [channel], replace=False)
    await add_run(uow, gone, started=NOW)
    await add_alert_with_notification(uow, project, gone, channel)
    await add_run(uow, kept, started=NOW)
    await uow.checks.delete(gone)
    assert set(await uow.checks.by_ids([gone, kept])) == {kept}
    for table in (t.alerts, t.notifications, t.notification_attempts, t.check_channels):
        assert await count(uow, table) == 0
    assert await count(uow, t.runs) == 1


async def test_by_ids_and_uuids(uow: UnitOfWork) -> None:
    project, other = await add_project(uow, "a"), await add_project(uow, "b")
    first, second = check_values(project), check_values(project)
    ids = [await uow.checks.insert(first), await uow.checks.insert(second)]
    await add_check(uow, other)
    assert await uow.checks.uuids(project) == [first["uuid"], second["uuid"]]
    assert set(await uow.checks.by_ids([*ids, 10_000])) == set(ids)
    assert await uow.checks.by_ids([]) == {}


async def test_query_filters_tags_as_whole_words_in_sql(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    a = await add_check(uow, project, tags="prod db")
    b = await add_check(uow, project, tags="prod")
    await add_check(uow, project, tags="production dbx")
    await add_check(uow, project, tags="a%b x_y")

    async def ids(*tags: str) -> list[int]:
        return [r["id"] for r in await uow.checks.query(project, tags=tags)]

    assert await ids("prod") == [a, b]
    assert await ids("prod", "db") == [a]
    assert await ids("db") == [a]
    assert await ids("prod%") == []  # LIKE wildcards are matched literally
    assert await ids("x%y") == []
    assert len(await ids("x_y")) == 1


async def test_query_by_slug_after_an_id_and_with_a_limit(uow: UnitOfWork) -> None:
    project, other = await add_project(uow, "a"), await add_project(uow, "b")
    ids = [await add_check(uow, project, slug=f"s{i}") for i in range(4)]
    await add_check(uow, other, slug="s1")
    assert [r["id"] for r in await uow.checks.query(project)] == ids
    assert [r["id"] for r in await uow.checks.query(project, slug="s1")] == [ids[1]]
    assert [r["id"] for r in await uow.checks.query(project, after_id=ids[1], limit=1)] == [ids[2]]


async def test_first_match_is_the_lowest_id_with_equal_columns(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    await add_check(uow, project, name="x", grace=60)
    second = await add_check(uow, project, name="y", grace=60)
    third = await add_check(uow, project, name="y", grace=60)
    assert await uow.checks.first_match(project, {"name": "y", "grace": 60}) == second
    assert third > second
    assert await uow.checks.first_match(project, {"name": "z"}) is None


async def test_slug_taken_and_first_taken_slug(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    owner = await add_check(uow, project, slug="nightly")
    assert await uow.checks.slug_taken(project, "nightly")
    assert not await uow.checks.slug_taken(project, "nightly", except_id=owner)
    assert not await uow.checks.slug_taken(project, "other")
    assert await uow.checks.first_taken_slug(project, ["free", "nightly"]) == "nightly"
    assert await uow.checks.first_taken_slug(project, ["free"]) is None
    assert await uow.checks.first_taken_slug(project, []) is None


async def test_started_runs_are_the_open_runs_with_a_start(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    await add_run(uow, check, started=NOW - timedelta(seconds=30))
    await add_run(uow, check, started=None)  # open, never started
    await add_run(uow, check, started=NOW - timedelta(hours=1), outcome="ok")  # finished
    assert await uow.checks.started_runs([check]) == [(check, NOW - timedelta(seconds=30))]
    assert await uow.checks.started_runs([]) == []


async def test_last_pauses_gives_the_latest_pause_and_resume_per_check(uow: UnitOfWork) -> None:
    project = await add_project(uow)
    check = await add_check(uow, project)
    for minutes, reason in ((30, "paused"), (20, "resumed"), (10, "paused"), (5, "fail")):
        await uow.connection.execute(
            t.flips.insert().values(
                check_id=check, created_at=NOW - timedelta(minutes=minutes), reason=reason
            )
        )
    found = sorted(await uow.checks.last_pauses([check]))
    assert found == [
        (check, "paused", NOW - timedelta(minutes=10)),
        (check, "resumed", NOW - timedelta(minutes=20)),
    ]
    assert await uow.checks.last_pauses([]) == []


async def test_oldest_due_spans_every_project(uow: UnitOfWork) -> None:
    assert await uow.checks.oldest_due() is None
    a, b = await add_project(uow, "a"), await add_project(uow, "b")
    await add_check(uow, a, next_due=NOW)
    await add_check(uow, b, next_due=NOW - timedelta(minutes=1))
    await add_check(uow, b)  # never due
    assert await uow.checks.oldest_due() == NOW - timedelta(minutes=1)


async def test_escalating_to_finds_the_projects_checks_naming_the_channel(uow: UnitOfWork) -> None:
    project, other = await add_project(uow, "a"), await add_project(uow, "b")
    channel = await add_channel(uow, project)
    values = check_values(project, name="db", escalate_to=f"x,{channel}")
    await uow.checks.insert(values)
    await add_check(uow, project, escalate_to="")
    await add_check(uow, other, escalate_to=channel)
    assert await uow.checks.escalating_to(project, channel) == [(values["uuid"], "db", f"x,{channel}")]


async def test_a_written_check_is_seen_by_the_next_unit_of_work(engine: AsyncEngine) -> None:
    async with UnitOfWork.begin(engine) as uow:
        project = await add_project(uow)
        values = check_values(project)
        await uow.checks.insert(values)
    async with UnitOfWork.read(engine) as uow:
        assert await uow.checks.get(project, values["uuid"]) is not None
