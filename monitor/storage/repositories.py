"""Rows ⇄ domain values, and the queries the services share.

Repositories hand frozen or plain domain values upward, never rows that could lazy-load.
All functions take an open ``AsyncConnection`` inside the caller's transaction.
"""

from __future__ import annotations

import functools
import hashlib
import operator
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Executable, Table, and_, not_, or_, select, true, union
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from monitor.domain import keywords
from monitor.domain.checks import CheckSpec, CheckState, Outcome, PingKind, SimpleSchedule
from monitor.domain.cron import schedules
from monitor.domain.runs import Run, RunBook, TickMark, holds_older
from monitor.storage import bulk
from monitor.storage import tables as t

STATE_COLUMNS = (
    "paused",
    "watch_from",
    "judged_until",
    "last_run_ping_at",
    "bad_streak",
    "good_streak",
    "good_before_miss",
    "episode_key",
    "episode_count",
    "late_in_episode",
    "last_missed_tick",
    "pending_tick",
    "next_due",
    "episode_from",
    "closed_key",
    "closed_from",
    "closed_to",
    "closed_count",
    "superseded_key",
    "superseded_through",
    "superseded_count",
)


def hash_key(key: str) -> str:
    """SHA-256 hex of an API key: keys are stored hashed, never in clear."""
    return hashlib.sha256(key.encode()).hexdigest()


SPEC_COLUMNS = (
    # what spec_of reads: the columns of a check row that make its CheckSpec
    "kind",
    "schedule",
    "dialect",
    "tz",
    "timeout",
    "grace",
    "max_runtime",
    "failure_threshold",
    "recovery_threshold",
    "early_tolerance",
    "expected_runs",
    "min_runtime",
    "manual_resume",
    "methods",
    "name",
)
_spec_values = operator.itemgetter(*SPEC_COLUMNS)


def spec_of(row: Mapping[str, Any]) -> CheckSpec:
    """A check row's :class:`CheckSpec`.

    The spec is a frozen value of the row's spec columns, so rows holding the same values share
    one (:data:`SPEC_CACHE` of them are kept, least recently used dropped): a sweep or an ingest
    batch builds one per check it touches, and building it (a dozen ``timedelta`` and a frozen
    dataclass of twelve fields) cost more than judging a plain miss.
    """
    return _spec(_spec_values(row))


SPEC_CACHE = 65_536
"""Distinct check specs :func:`spec_of` keeps (a few hundred bytes each)."""


@functools.lru_cache(maxsize=SPEC_CACHE)
def _spec(values: tuple[Any, ...]) -> CheckSpec:
    (
        kind,
        schedule_text,
        dialect,
        tz,
        timeout,
        grace,
        max_runtime,
        failure_threshold,
        recovery_threshold,
        early_tolerance,
        expected_runs,
        min_runtime,
        manual_resume,
        methods,
        name,
    ) = values
    schedule: SimpleSchedule | schedules.CronSchedule
    if kind == "cron":
        schedule = schedules.parse_cron(schedule_text, dialect, tz)
    else:
        schedule = SimpleSchedule(period=timedelta(seconds=timeout))
    return CheckSpec(
        schedule=schedule,
        grace=timedelta(seconds=grace),
        max_runtime=timedelta(seconds=max_runtime),
        failure_threshold=failure_threshold,
        recovery_threshold=recovery_threshold,
        early_tolerance=timedelta(seconds=early_tolerance) if early_tolerance is not None else None,
        expected_runs=expected_runs,
        min_runtime=timedelta(seconds=min_runtime) if min_runtime is not None else None,
        manual_resume=bool(manual_resume),
        post_only=methods == "POST",
        name=name,
        tz=tz,
    )


def keyword_filter_of(row: Mapping[str, Any]) -> keywords.KeywordFilter:
    """A check row's keyword settings (:mod:`monitor.domain.keywords`)."""
    return keywords.KeywordFilter(
        filter_subject=bool(row["filter_subject"]),
        filter_body=bool(row["filter_body"]),
        filter_http_body=bool(row["filter_http_body"]),
        filter_default_fail=bool(row["filter_default_fail"]),
        start_kw=row["start_kw"] or "",
        success_kw=row["success_kw"] or "",
        failure_kw=row["failure_kw"] or "",
    )


def state_of(row: Mapping[str, Any]) -> CheckState:
    values = {name: row[name] for name in STATE_COLUMNS}
    values["paused"] = bool(values["paused"])
    values["late_in_episode"] = bool(values["late_in_episode"])
    return CheckState(**values)


def state_values(state: CheckState) -> dict[str, Any]:
    return {name: getattr(state, name) for name in STATE_COLUMNS}


def state_changes(row: Mapping[str, Any], state: CheckState) -> dict[str, Any]:
    """The state columns whose value in ``state`` differs from ``row`` (the check's row as
    read, e.g. by :meth:`~monitor.storage.ports.DetectionStore.lock_due`): what writing
    ``state`` back has to set. Stored booleans read as 0/1 compare equal to ``False``/``True``."""
    changed = {}
    for name in STATE_COLUMNS:
        value = getattr(state, name)
        if value != row[name]:
            changed[name] = value
    return changed


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
        early=bool(row["early"]),
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
        "early": run.early,
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
    newest: Iterable[int] = (),
) -> dict[int, RunBook]:
    """Load, per check id, the runs and marks a decision needs (see :class:`RunBook`).

    For each check: every open run; every run and mark bound to a tick ``>= cutoff`` (with a
    ``None`` cutoff only open runs and the named ones); runs carrying one of ``rids``; runs and
    marks on one of ``ticks``; the newest run of each check in ``newest`` (latest tick, then
    latest arrival); and the newest succeeded run where :func:`_add_newest_successes` says.

    One query per table for the whole batch (each check's own cutoff joined as a pair); the
    named runs found for the batch are then kept only for the checks that named them.
    """
    books: dict[int, RunBook] = {cid: RunBook() for cid in cutoffs}
    if not cutoffs:
        return books
    rid_sets = {cid: set(values) for cid, values in (rids or {}).items()}
    tick_sets = {cid: set(values) for cid, values in (ticks or {}).items()}
    all_rids = set().union(*rid_sets.values()) if rid_sets else set()
    all_ticks = set().union(*tick_sets.values()) if tick_sets else set()

    def wanted(cid: int, scheduled: datetime, rid: str | None = None, open_run: bool = False) -> bool:
        cutoff = cutoffs[cid]
        return (
            open_run
            or (cutoff is not None and scheduled >= cutoff)
            or (rid is not None and rid in rid_sets.get(cid, ()))
            or scheduled in tick_sets.get(cid, ())
        )

    postgres = conn.dialect.name == "postgresql"
    params: dict[str, Any] = {"rids": list(all_rids)} if all_rids else {}
    params.update({"ticks": list(all_ticks)} if all_ticks else {})
    for chunk in _chunks(list(cutoffs), 500):
        own = {cid: cutoffs[cid] for cid in chunk if cutoffs[cid] is not None}
        runs_query, marks_query = _book_selects(bool(own), bool(all_rids), bool(all_ticks), postgres)
        chunk_params = {**params, "ids": list(chunk)}
        if own:
            chunk_params.update(bulk.own_bounds("cutoffs", own, t.runs.c.scheduled, conn.dialect))
        for row in await _run_rows(conn, runs_query, chunk_params):
            if wanted(row["check_id"], row["scheduled"], row["rid"], row["outcome"] is None):
                books[row["check_id"]].add(run_of(row))
        if marks_query is None:
            continue
        for cid, scheduled, outcome in (await conn.execute(marks_query, chunk_params)).all():
            if wanted(cid, scheduled):
                books[cid].marks[scheduled] = TickMark(scheduled=scheduled, outcome=Outcome(outcome))
    for chunk in _chunks(sorted(set(newest) & books.keys()), 500):
        for row in await _run_rows(conn, _newest_select(postgres, succeeded=False), {"ids": chunk}):
            books[row["check_id"]].add(run_of(row))
    await _add_newest_successes(conn, books, cutoffs, tick_sets, postgres)
    return books


async def _run_rows(
    conn: AsyncConnection, query: Executable, params: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The rows of a ``runs`` query as plain dicts (column → value)."""
    result = await conn.execute(query, params)
    keys = list(result.keys())
    return [dict(zip(keys, values, strict=True)) for values in result.all()]


async def _add_newest_successes(
    conn: AsyncConnection,
    books: dict[int, RunBook],
    cutoffs: Mapping[int, datetime | None],
    tick_sets: Mapping[int, set[datetime]],
    postgres: bool,
) -> None:
    """A decision about a tick before the cutoff compares it with the newest succeeded run
    (supersession), which may be older than the cutoff too: the books that may decide such a
    tick (:func:`monitor.domain.runs.holds_older`) get that run, one query for all of them."""
    older = [cid for cid, book in books.items() if holds_older(book, cutoffs[cid], tick_sets.get(cid, ()))]
    for chunk in _chunks(older, 500):
        for row in await _run_rows(conn, _newest_select(postgres, succeeded=True), {"ids": list(chunk)}):
            books[row["check_id"]].add(run_of(row))


@functools.cache
def _newest_select(postgres: bool, *, succeeded: bool) -> Executable:
    """The newest run of each check in ``ids``, if it has one (latest tick, then latest
    arrival); with ``succeeded``, the newest succeeded one (:attr:`monitor.domain.runs.Run.succeeded`:
    finished with success, not timed out, not early, not too fast). One probe of
    ``ix_runs_check_scheduled`` per check, newest tick first."""
    r = t.runs.alias("newest")
    wanted = and_(
        r.c.finish_kind == PingKind.SUCCESS.value,
        not_(r.c.timed_out),
        not_(r.c.early),
        or_(r.c.outcome.is_(None), r.c.outcome != Outcome.TOO_FAST.value),
    )
    newest = (
        select(r.c.id)
        .where(r.c.check_id == t.checks.c.id)
        .where(wanted if succeeded else true())
        .order_by(r.c.scheduled.desc(), r.c.first_ping_at.desc())
        .limit(1)
        .scalar_subquery()
    )
    of_checks = select(newest).where(bulk.member_of(t.checks.c.id, "ids", postgres=postgres))
    return select(t.runs).where(t.runs.c.id.in_(of_checks))


@functools.cache
def _book_selects(
    cutoffs: bool, rids: bool, ticks: bool, postgres: bool
) -> tuple[Executable, Executable | None]:
    """The SELECTs of :func:`load_books` (runs, tick marks or ``None``) for the conditions a
    batch has: ``cutoffs`` (checks with a cutoff), named ``rids``, named ``ticks``. Their
    parameters are ``ids`` (a chunk of check ids), ``cutoffs`` (each check's own, as
    :func:`monitor.storage.bulk.own_bounds` binds them), ``rids`` and ``ticks`` (lists, bound
    as :func:`monitor.storage.bulk.member_of` binds them on each dialect). Built once per
    combination and dialect: the ingest loads books in every batch.

    One SELECT per condition, UNIONed: each arm uses its own index (the open-runs partial
    index, or a range on (check_id, scheduled)); an OR of them would scan every run of the
    checks, which grows with their history.
    """
    r, m = t.runs.c, t.tick_marks.c
    in_chunk = bulk.member_of(r.check_id, "ids", postgres=postgres)
    marks_in_chunk = bulk.member_of(m.check_id, "ids", postgres=postgres)
    arms = [select(t.runs).where(in_chunk).where(r.outcome.is_(None))]
    mark_arms = []
    if cutoffs:
        arms.append(bulk.at_or_after_own_bound(t.runs, "check_id", "scheduled", "cutoffs", postgres=postgres))
        mark_arms.append(
            bulk.at_or_after_own_bound(
                t.tick_marks,
                "check_id",
                "scheduled",
                "cutoffs",
                postgres=postgres,
                columns=("check_id", "scheduled", "outcome"),
            )
        )
    if rids:
        arms.append(select(t.runs).where(in_chunk).where(bulk.member_of(r.rid, "rids", postgres=postgres)))
    if ticks:
        on_ticks = bulk.member_of(r.scheduled, "ticks", postgres=postgres)
        arms.append(select(t.runs).where(in_chunk).where(on_ticks))
        mark_arms.append(
            select(m.check_id, m.scheduled, m.outcome)
            .where(marks_in_chunk)
            .where(bulk.member_of(m.scheduled, "ticks", postgres=postgres))
        )
    runs = union(*arms) if len(arms) > 1 else arms[0]
    marks = (union(*mark_arms) if len(mark_arms) > 1 else mark_arms[0]) if mark_arms else None
    return runs, marks


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


async def save_state(conn: AsyncConnection, updates: Sequence[Mapping[str, Any]]) -> None:
    """Write check state columns; each dict holds ``b_id`` (the check id) plus the columns to set.

    One statement per set of columns (:func:`state_writes`), not SQLAlchemy's per-row
    executemany processing.
    """
    await bulk.write_together(conn, state_writes(updates))


def state_writes(updates: Sequence[Mapping[str, Any]], *, key: str = "b_id") -> list[bulk.RowsWrite]:
    """:func:`save_state`'s writes, for :func:`monitor.storage.bulk.write_together`: one update
    of ``checks`` per set of columns. Each mapping names its check by ``key`` (``b_id`` in the
    ingest's updates, ``id`` in a sweep's) and holds the columns to set."""
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = defaultdict(list)
    for values in updates:
        columns = tuple(c for c in values if c not in (key, "id"))
        if columns:
            groups[columns].append(values if key == "id" else {**values, "id": values[key]})
    return [
        bulk.RowsWrite(table=t.checks, key="id", rows=rows, columns=list(columns))
        for columns, rows in groups.items()
    ]
