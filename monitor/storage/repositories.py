"""Rows ⇄ domain values, and the queries the services share.

Repositories hand frozen or plain domain values upward, never rows that could lazy-load.
All functions take an open ``AsyncConnection`` inside the caller's transaction.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Table, and_, bindparam, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from monitor.domain import schedules
from monitor.domain.checks import CheckSpec, CheckState, Outcome, PingKind, SimpleSchedule
from monitor.domain.runs import Run, RunBook, TickMark
from monitor.storage import tables as t

STATE_COLUMNS = (
    "paused",
    "watch_from",
    "judged_until",
    "last_run_ping_at",
    "bad_streak",
    "good_streak",
    "episode_key",
    "episode_count",
    "late_in_episode",
    "last_missed_tick",
    "pending_tick",
    "next_due",
)


def hash_key(key: str) -> str:
    """SHA-256 hex of an API key: keys are stored hashed, never in clear."""
    return hashlib.sha256(key.encode()).hexdigest()


def spec_of(row: Mapping[str, Any]) -> CheckSpec:
    """A check row's :class:`CheckSpec` (the schedule is parsed through the cache)."""
    schedule: SimpleSchedule | schedules.CronSchedule
    if row["kind"] == "cron":
        schedule = schedules.parse_cron(row["schedule"], row["dialect"], row["tz"])
    else:
        schedule = SimpleSchedule(period=timedelta(seconds=row["timeout"]))
    return CheckSpec(
        schedule=schedule,
        grace=timedelta(seconds=row["grace"]),
        max_runtime=timedelta(seconds=row["max_runtime"]),
        failure_threshold=row["failure_threshold"],
        recovery_threshold=row["recovery_threshold"],
        early_tolerance=timedelta(seconds=row["early_tolerance"]),
        manual_resume=bool(row["manual_resume"]),
        post_only=row["methods"] == "POST",
        name=row["name"],
        tz=row["tz"],
    )


def state_of(row: Mapping[str, Any]) -> CheckState:
    values = {name: row[name] for name in STATE_COLUMNS}
    values["paused"] = bool(values["paused"])
    values["late_in_episode"] = bool(values["late_in_episode"])
    return CheckState(**values)


def state_values(state: CheckState) -> dict[str, Any]:
    return {name: getattr(state, name) for name in STATE_COLUMNS}


def run_of(row: Mapping[str, Any] | Any) -> Run:
    return Run(
        id=row["id"],
        rid=row["rid"],
        scheduled=row["scheduled"],
        first_ping_at=row["first_ping_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        finish_kind=PingKind(row["finish_kind"]) if row["finish_kind"] else None,
        exit_status=row["exit_status"],
        late=bool(row["late"]),
        duplicate=bool(row["duplicate"]),
        overlap=bool(row["overlap"]),
        timed_out=bool(row["timed_out"]),
        outcome=Outcome(row["outcome"]) if row["outcome"] else None,
    )


def run_values(run: Run, check_id: int) -> dict[str, Any]:
    return {
        "id": run.id,
        "check_id": check_id,
        "rid": run.rid,
        "scheduled": run.scheduled,
        "first_ping_at": run.first_ping_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "finish_kind": run.finish_kind.value if run.finish_kind else None,
        "exit_status": run.exit_status,
        "late": run.late,
        "duplicate": run.duplicate,
        "overlap": run.overlap,
        "timed_out": run.timed_out,
        "outcome": run.outcome.value if run.outcome else None,
    }


def insert_ignoring_conflicts(conn: AsyncConnection, table: Table) -> Any:
    """``INSERT … ON CONFLICT DO NOTHING`` for the connection's dialect."""
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    return sqlite.insert(table).on_conflict_do_nothing()


async def load_books(
    conn: AsyncConnection,
    cutoffs: Mapping[int, datetime | None],
    *,
    rids: Mapping[int, Iterable[str]] | None = None,
    ticks: Mapping[int, Iterable[datetime]] | None = None,
) -> dict[int, RunBook]:
    """Load, per check id, the runs and marks a decision needs (see :class:`RunBook`).

    For each check: every open run; every run and mark bound to a tick ``>= cutoff`` (all of
    them when the cutoff is ``None``… only for checks without any cursor, which have few);
    runs carrying one of ``rids``; runs and marks on one of ``ticks``.
    """
    books: dict[int, RunBook] = {cid: RunBook() for cid in cutoffs}
    if not cutoffs:
        return books
    rids = rids or {}
    ticks = ticks or {}
    run_terms = []
    mark_terms = []
    for cid, cutoff in cutoffs.items():
        per_check: list[ColumnElement[bool]] = [t.runs.c.outcome.is_(None)]
        marks_per_check: list[ColumnElement[bool]] = []
        if cutoff is not None:
            per_check.append(t.runs.c.scheduled >= cutoff)
            marks_per_check.append(t.tick_marks.c.scheduled >= cutoff)
        check_rids = list(rids.get(cid, ()))
        if check_rids:
            per_check.append(t.runs.c.rid.in_(check_rids))
        check_ticks = list(ticks.get(cid, ()))
        if check_ticks:
            per_check.append(t.runs.c.scheduled.in_(check_ticks))
            marks_per_check.append(t.tick_marks.c.scheduled.in_(check_ticks))
        run_terms.append(and_(t.runs.c.check_id == cid, or_(*per_check)))
        if marks_per_check:
            mark_terms.append(and_(t.tick_marks.c.check_id == cid, or_(*marks_per_check)))
    for chunk in _chunks(run_terms, 200):
        rows = (await conn.execute(select(t.runs).where(or_(*chunk)))).mappings().all()
        for row in rows:
            books[row["check_id"]].add(run_of(row))
    for chunk in _chunks(mark_terms, 200):
        rows = (await conn.execute(select(t.tick_marks).where(or_(*chunk)))).mappings().all()
        for row in rows:
            books[row["check_id"]].marks[row["scheduled"]] = TickMark(
                scheduled=row["scheduled"], outcome=Outcome(row["outcome"])
            )
    return books


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def channel_ids_for(
    conn: AsyncConnection, check_ids: Iterable[int]
) -> dict[int, list[tuple[str, str]]]:
    """Per check id, its channels as ``(channel_id, kinds)``."""
    ids = list(check_ids)
    result: dict[int, list[tuple[str, str]]] = defaultdict(list)
    if not ids:
        return result
    rows = await conn.execute(
        select(t.check_channels.c.check_id, t.channels.c.id, t.channels.c.kinds)
        .join(t.channels, t.channels.c.id == t.check_channels.c.channel_id)
        .where(t.check_channels.c.check_id.in_(ids))
    )
    for check_id, channel_id, kinds in rows:
        result[check_id].append((channel_id, kinds))
    return result


async def save_state(conn: AsyncConnection, updates: Sequence[dict[str, Any]]) -> None:
    """Write check state columns; each dict holds ``b_id`` plus the columns to set."""
    if not updates:
        return
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for values in updates:
        groups[tuple(sorted(values))].append(values)
    for columns, rows in groups.items():
        stmt = (
            update(t.checks)
            .where(t.checks.c.id == bindparam("b_id"))
            .values({c: bindparam(c) for c in columns if c != "b_id"})
        )
        await conn.execute(stmt, rows)
