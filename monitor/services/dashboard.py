"""Read models of the dashboard: the checks list with its tick strips, a check's
timeline over a window, the badge states. Everything a user sees is limited to their projects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, func, literal, or_, select, union
from sqlalchemy.ext.asyncio import AsyncConnection

from monitor.domain import detection
from monitor.domain.checks import Outcome, SimpleSchedule
from monitor.domain.errors import NotFound
from monitor.domain.runs import RunBook, TickMark, tick_outcome
from monitor.services import checks as check_service
from monitor.settings import Settings
from monitor.storage import repositories
from monitor.storage import tables as t

STRIP_TICKS = 30
MAX_WINDOW_TICKS = 500
MAX_WINDOW_RUNS = 2 * MAX_WINDOW_TICKS
"""Caps of a timeline: ticks shown, and runs read (duplicates can give a tick several runs)."""
UPCOMING_TICKS = 3
"""Upcoming ticks a timeline shows at most (its window ends a little after ``now``)."""
WINDOWS: dict[str, timedelta | None] = {
    "auto": None,
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
}
"""Timeline windows a user can pick; ``auto`` covers the last 30 ticks of the schedule."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TickView:
    """A tick and what happened: ``outcome`` is a DESIGN §2 outcome, ``pending`` (a run is in
    progress or the tick is not judged yet), ``no_run`` (not watched, no run) or ``upcoming``."""

    scheduled: datetime
    outcome: str
    runs: tuple[Any, ...] = ()


async def project_names(conn: AsyncConnection, project_ids: Sequence[int]) -> dict[int, str]:
    rows = await conn.execute(
        select(t.projects.c.id, t.projects.c.name).where(t.projects.c.id.in_(list(project_ids)))
    )
    return {r[0]: r[1] for r in rows}


async def _recent_books(conn: AsyncConnection, check_ids: Sequence[int]) -> dict[int, RunBook]:
    """Each check's runs and marks of its newest :data:`STRIP_TICKS` recorded ticks, in three
    queries whatever the number of checks (a window function ranks each check's ticks)."""
    books = {cid: RunBook() for cid in check_ids}
    if not check_ids:
        return books
    ids = list(check_ids)
    ticks = union(
        select(t.runs.c.check_id, t.runs.c.scheduled).where(t.runs.c.check_id.in_(ids)),
        select(t.tick_marks.c.check_id, t.tick_marks.c.scheduled).where(t.tick_marks.c.check_id.in_(ids)),
    ).subquery()
    ranked = select(
        ticks.c.check_id,
        ticks.c.scheduled,
        func.row_number()
        .over(partition_by=ticks.c.check_id, order_by=ticks.c.scheduled.desc())
        .label("rank"),
    ).subquery()
    since = (
        select(ranked.c.check_id, func.min(ranked.c.scheduled).label("since"))
        .where(ranked.c.rank <= STRIP_TICKS)
        .group_by(ranked.c.check_id)
        .subquery()
    )
    runs = select(t.runs).join(
        since, and_(since.c.check_id == t.runs.c.check_id, t.runs.c.scheduled >= since.c.since)
    )
    marks = select(t.tick_marks).join(
        since, and_(since.c.check_id == t.tick_marks.c.check_id, t.tick_marks.c.scheduled >= since.c.since)
    )
    for row in (await conn.execute(runs)).mappings():
        books[row["check_id"]].add(repositories.run_of(row))
    for row in (await conn.execute(marks)).mappings():
        books[row["check_id"]].marks[row["scheduled"]] = TickMark(
            scheduled=row["scheduled"], outcome=Outcome(row["outcome"])
        )
    return books


def _view(book: RunBook, tick: datetime, now: datetime, max_runtime: timedelta) -> TickView:
    outcome = tick_outcome(book, tick)
    runs = tuple(book.runs_of(tick))
    if outcome is not None:
        return TickView(scheduled=tick, outcome=outcome.value, runs=runs)
    if runs:
        return TickView(scheduled=tick, outcome="pending", runs=runs)
    return TickView(scheduled=tick, outcome="upcoming" if tick > now else "no_run", runs=runs)


def strip_of(book: RunBook, now: datetime, max_runtime: timedelta) -> list[TickView]:
    """The newest :data:`STRIP_TICKS` recorded ticks of a check, oldest first."""
    ticks = sorted({r.scheduled for r in book.runs.values()} | set(book.marks))[-STRIP_TICKS:]
    return [_view(book, tick, now, max_runtime) for tick in ticks]


SEVERITY = ("down", "grace", "up", "new", "paused")
"""Statuses in triage order: what needs a person first."""
PAGE_SIZE = 50
"""Checks per page of the list."""
OUTPUT_TAIL = 4000
"""Characters of a failing ping's body kept for the page (its last lines)."""


def _severity(now: datetime) -> Any:
    """SQL rank of a check's status in :data:`SEVERITY` order; the same first-match rule as
    :func:`monitor.domain.detection.status` (paused, new, down, grace, up)."""
    c = t.checks.c
    return case(
        (c.paused, 4),
        (c.watch_from.is_(None), 3),
        (c.episode_key.is_not(None), 0),
        (and_(c.pending_tick.is_not(None), c.pending_tick <= now), 1),
        else_=2,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckPage:
    """One page of the checks list: ``checks`` (dicts, see :func:`list_page`), ``matched``
    (checks the filters keep), ``total`` (all the user's checks), ``counts`` (all the user's
    checks by status), ``offset`` and ``limit``."""

    checks: list[dict[str, Any]]
    matched: int
    total: int
    counts: dict[str, int]
    offset: int
    limit: int


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


async def list_page(
    conn: AsyncConnection,
    project_ids: Sequence[int],
    now: datetime,
    settings: Settings,
    *,
    q: str = "",
    tag: str = "",
    status: str = "",
    offset: int = 0,
    limit: int = PAGE_SIZE,
) -> CheckPage:
    """A page of the user's checks in triage order (:data:`SEVERITY`, then project, name, id),
    filtered in SQL: ``q`` a substring of the name or slug (any case), ``tag`` one of the
    check's tags, ``status`` one of :data:`SEVERITY`.

    Each check is its v3 JSON plus ``id``, ``project``, ``tag_list``, ``strip`` (list of
    :class:`TickView`), ``episode`` (the open down episode's alert: ``kind, count, first_tick,
    created``; or ``None``), ``pending_tick``, ``last_output`` (the newest ping body's last
    line) and ``last_output_bad`` (that ping failed). Reads a bounded number of rows whatever
    the number of checks: the page's rows, one grouped count, and per-page queries.
    """
    ids = list(project_ids)
    if not ids:
        return CheckPage(
            checks=[], matched=0, total=0, counts=dict.fromkeys(SEVERITY, 0), offset=0, limit=limit
        )
    rank = _severity(now)
    c = t.checks.c
    counts = dict.fromkeys(SEVERITY, 0)
    for value, count in await conn.execute(
        select(rank, func.count()).where(c.project_id.in_(ids)).group_by(rank)
    ):
        counts[SEVERITY[int(value)]] = int(count)
    query = select(t.checks).where(c.project_id.in_(ids))
    needle = q.strip().lower()
    if needle:
        pattern = f"%{_escape_like(needle)}%"
        query = query.where(
            or_(
                func.lower(c.name).like(pattern, escape="\\"),
                func.lower(func.coalesce(c.slug, "")).like(pattern, escape="\\"),
            )
        )
    if tag.strip():
        spaced = literal(" ") + c.tags + literal(" ")
        query = query.where(spaced.like(f"% {_escape_like(tag.strip())} %", escape="\\"))
    if status in SEVERITY:
        query = query.where(rank == SEVERITY.index(status))
    matched = int((await conn.execute(select(func.count()).select_from(query.subquery()))).scalar_one())
    rows = [
        dict(r)
        for r in (
            await conn.execute(
                query.order_by(rank, c.project_id, c.name, c.id).offset(max(0, offset)).limit(limit)
            )
        )
        .mappings()
        .all()
    ]
    checks = await decorate(conn, rows, now, settings)
    return CheckPage(
        checks=checks, matched=matched, total=sum(counts.values()), counts=counts, offset=offset, limit=limit
    )


async def decorate(
    conn: AsyncConnection, rows: list[dict[str, Any]], now: datetime, settings: Settings
) -> list[dict[str, Any]]:
    """Check rows as the list and the check page show them (see :func:`list_page`)."""
    names = await project_names(conn, sorted({r["project_id"] for r in rows}))
    started = await check_service.started_checks(conn, rows, now)
    channels = await check_service.channels_of(conn, [r["id"] for r in rows])
    books = await _recent_books(conn, [r["id"] for r in rows])
    episodes = await open_episodes(conn, rows)
    troubled = {r["id"] for r in rows if check_status(r, now) in ("down", "grace")}
    outputs = await last_outputs(conn, rows, troubled)
    out = []
    for row in rows:
        data = check_service.check_to_dict(
            row, now=now, settings=settings, started=row["id"] in started, channels=channels[row["id"]]
        )
        data["id"] = row["id"]
        data["project"] = names.get(row["project_id"], "")
        data["tag_list"] = row["tags"].split()
        data["strip"] = strip_of(books[row["id"]], now, timedelta(seconds=row["max_runtime"]))
        data["episode"] = episodes.get(row["id"])
        data["pending_tick"] = row["pending_tick"]
        data["last_missed_tick"] = row["last_missed_tick"]
        data["created_at"] = row["created_at"]
        found = outputs.get(row["id"])
        data["last_output"] = found["line"] if found else ""
        data["last_output_bad"] = bool(found and found["bad"])
        data["last_exit_status"] = found["exit_status"] if found else None
        data["latest_run"] = latest_run(books[row["id"]])
        out.append(data)
    return out


def latest_run(book: RunBook) -> dict[str, Any] | None:
    """The newest run of ``book`` (by its first ping) as ``{"scheduled", "started_at",
    "finished_at", "finish_kind", "exit_status", "early"}`` (aware UTC datetimes or ``None``;
    ``finish_kind`` ``"success"``/``"fail"``/``None`` while it runs), or ``None`` with no run.

    The list and the check header describe it: an ``early`` run (DESIGN §5 rule 4c) counts for
    no tick and is never the last good run; a run with a start and no finish yet is why a
    check whose ``last_ping`` is still null (a start is not a run ping) has been heard from."""
    if not book.runs:
        return None
    run = max(book.runs.values(), key=lambda r: (r.first_ping_at, r.scheduled))
    return {
        "scheduled": run.scheduled,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "finish_kind": run.finish_kind.value if run.finish_kind is not None else None,
        "exit_status": run.exit_status,
        "early": run.early,
    }


async def open_episodes(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The alert that opened each down check's episode: ``{check id: {"kind", "count",
    "first_tick", "created"}}`` (one query for all the rows)."""
    keys = {r["id"]: r["episode_key"] for r in rows if r.get("episode_key")}
    if not keys:
        return {}
    found = await conn.execute(
        select(
            t.alerts.c.check_id,
            t.alerts.c.key,
            t.alerts.c.kind,
            t.alerts.c.count,
            t.alerts.c.scheduled,
            t.alerts.c.created_at,
        )
        .where(t.alerts.c.check_id.in_(list(keys)))
        .where(t.alerts.c.key.in_(list(set(keys.values()))))
    )
    out: dict[int, dict[str, Any]] = {}
    for check_id, key, kind, count, scheduled, created in found:
        if keys.get(check_id) == key:
            out[check_id] = {"kind": kind, "count": count, "first_tick": scheduled, "created": created}
    return out


def _bad_ping() -> Any:
    p = t.pings.c
    return or_(p.kind == "fail", and_(p.exit_status.is_not(None), p.exit_status != 0))


def _last_line(body: bytes | None) -> str:
    text = (body or b"").decode("utf-8", errors="replace").rstrip()
    return text.splitlines()[-1][:300] if text else ""


async def last_outputs(
    conn: AsyncConnection, rows: Sequence[dict[str, Any]], troubled: set[int]
) -> dict[int, dict[str, Any]]:
    """Per check, the last line of the body of its newest ping with a body — of its newest
    failing ping (``fail`` or a non-zero exit status) for the ``troubled`` ids (down or in grace):
    ``{check id: {"line", "bad", "exit_status"}}``. One indexed lookup per check
    (``uq_pings_check_n``, newest first)."""
    out: dict[int, dict[str, Any]] = {}
    p = t.pings.c
    for row in rows:
        query = (
            select(p.body, p.kind, p.exit_status).where(p.check_id == row["id"]).where(p.body.is_not(None))
        )
        if row["id"] in troubled:
            query = query.where(_bad_ping())
        found = (await conn.execute(query.order_by(p.n.desc()).limit(1))).first()
        if found is None:
            continue
        body, kind, exit_status = found
        out[row["id"]] = {
            "line": _last_line(bytes(body) if body is not None else None),
            "bad": kind == "fail" or (exit_status is not None and exit_status != 0),
            "exit_status": exit_status,
        }
    return out


async def last_failure(conn: AsyncConnection, check_id: int) -> dict[str, Any] | None:
    """The check's newest failing ping: ``{"n", "received_at", "kind", "exit_status", "tail"}``
    (``tail``: the body's last :data:`OUTPUT_TAIL` characters), or ``None``."""
    p = t.pings.c
    found = (
        await conn.execute(
            select(p.n, p.received_at, p.kind, p.exit_status, p.body)
            .where(p.check_id == check_id)
            .where(_bad_ping())
            .order_by(p.n.desc())
            .limit(1)
        )
    ).first()
    if found is None:
        return None
    n, received, kind, exit_status, body = found
    text = (bytes(body) if body is not None else b"").decode("utf-8", errors="replace").rstrip()
    return {
        "n": n,
        "received_at": received,
        "kind": kind,
        "exit_status": exit_status,
        "tail": text[-OUTPUT_TAIL:],
    }


async def last_good_run(conn: AsyncConnection, check_id: int) -> dict[str, Any] | None:
    """The check's newest run that finished successfully (``on_time`` or ``late``, duplicates
    and overlaps included; never an ``early`` run, which counts for no tick, DESIGN §5 rule 4c):
    ``{"scheduled", "finished_at"}``, or ``None``."""
    r = t.runs.c
    found = (
        await conn.execute(
            select(r.scheduled, r.finished_at)
            .where(r.check_id == check_id)
            .where(r.finish_kind == "success")
            .where(r.early.is_(False))
            .order_by(r.scheduled.desc())
            .limit(1)
        )
    ).first()
    return {"scheduled": found[0], "finished_at": found[1]} if found is not None else None


async def status_since(conn: AsyncConnection, check_id: int) -> datetime | None:
    """When the check's status last flipped (its newest flip), or ``None``."""
    found: datetime | None = (
        await conn.execute(
            select(t.flips.c.created_at)
            .where(t.flips.c.check_id == check_id)
            .order_by(t.flips.c.id.desc())
            .limit(1)
        )
    ).scalar_one_or_none()
    return found


async def get_check(conn: AsyncConnection, project_ids: Sequence[int], uuid: str) -> dict[str, Any]:
    """The check row if it belongs to one of ``project_ids``; else NotFound (existence hidden)."""
    row = (
        (
            await conn.execute(
                select(t.checks)
                .where(t.checks.c.uuid == uuid)
                .where(t.checks.c.project_id.in_(list(project_ids)))
            )
        )
        .mappings()
        .first()
    )
    if row is None:
        raise NotFound("uuid: no check with this uuid in your projects")
    return dict(row)


def window_bounds(
    row: dict[str, Any], choice: str, now: datetime, first_run: datetime | None = None
) -> tuple[datetime, datetime]:
    """``(since, until)`` of the timeline: a fixed span ending a little after ``now``, or for
    ``auto`` the span of the schedule's last 30 ticks (a simple check: 30 periods), starting no
    earlier than two ticks before ``first_run`` (the tick of the check's first run)."""
    spec = repositories.spec_of(row)
    span = WINDOWS.get(choice)
    if span is None:
        schedule = spec.schedule
        if isinstance(schedule, SimpleSchedule):
            span = schedule.period * STRIP_TICKS
        else:
            cursor: datetime | None = now
            first = now
            for _ in range(STRIP_TICKS):
                if cursor is None:
                    break
                found = schedule.tick_at_or_before(cursor - timedelta(microseconds=1))
                if found is None:
                    break
                first, cursor = found, found
            span = max(now - first, timedelta(minutes=1))
        if first_run is not None and first_run > now - span:
            before = first_run
            for _ in range(2):
                earlier = (
                    None
                    if isinstance(schedule, SimpleSchedule)
                    else schedule.tick_at_or_before(before - timedelta(microseconds=1))
                )
                before = earlier or before
            span = max(now - before, timedelta(minutes=1))
    margin = span / 20
    return now - span - margin, now + margin


@dataclass(frozen=True, kw_only=True, slots=True)
class Timeline:
    """A check's ticks over a window, oldest first.

    ``since`` is where the shown ticks start: the window's start, or later when the window held
    more than :data:`MAX_WINDOW_TICKS` ticks (or :data:`MAX_WINDOW_RUNS` runs) and only the
    newest are shown; ``truncated`` says so, and the page tells the user to narrow the window.
    """

    views: list[TickView]
    since: datetime
    until: datetime
    truncated: bool


def _view_of(tick: datetime, runs: list[Any], mark: TickMark | None, now: datetime) -> TickView:
    book = RunBook.of(runs, [mark] if mark is not None else [])
    return _view(book, tick, now, timedelta(0))


async def timeline(
    conn: AsyncConnection, row: dict[str, Any], since: datetime, until: datetime, now: datetime
) -> Timeline:
    """Ticks in ``[since, until]``: the schedule's and every tick with a run or a mark, each with
    its runs and outcome, oldest first, bounded whatever the window.

    At most the newest :data:`MAX_WINDOW_TICKS` ticks are shown, from at most the newest
    :data:`MAX_WINDOW_RUNS` runs and :data:`MAX_WINDOW_TICKS` marks, read newest first through
    ``ix_runs_check_scheduled`` / ``uq_tick_marks_check_scheduled`` bounded on both sides by the
    window, so a dense check (a run every second) over a wide window costs as much as 500 ticks.
    When a cap cuts the window, the result starts at the oldest tick it shows completely.
    """
    spec = repositories.spec_of(row)
    check_id = row["id"]
    run_rows = (
        (
            await conn.execute(
                select(t.runs)
                .where(t.runs.c.check_id == check_id)
                .where(t.runs.c.scheduled >= since)
                .where(t.runs.c.scheduled <= until)
                .order_by(t.runs.c.scheduled.desc())
                .limit(MAX_WINDOW_RUNS)
            )
        )
        .mappings()
        .all()
    )
    mark_rows = (
        await conn.execute(
            select(t.tick_marks.c.scheduled, t.tick_marks.c.outcome)
            .where(t.tick_marks.c.check_id == check_id)
            .where(t.tick_marks.c.scheduled >= since)
            .where(t.tick_marks.c.scheduled <= until)
            .order_by(t.tick_marks.c.scheduled.desc())
            .limit(MAX_WINDOW_TICKS)
        )
    ).all()
    # the oldest instant whose ticks are known completely (a cap may cut a tick's runs)
    floor = since
    truncated = False
    if len(run_rows) >= MAX_WINDOW_RUNS:
        floor, truncated = max(floor, run_rows[-1]["scheduled"] + timedelta(microseconds=1)), True
    if len(mark_rows) >= MAX_WINDOW_TICKS:
        floor, truncated = max(floor, mark_rows[-1][0]), True
    by_tick: dict[datetime, list[Any]] = {}
    for r in run_rows:
        if r["scheduled"] >= floor:
            by_tick.setdefault(r["scheduled"], []).append(repositories.run_of(r))
    marks = {m[0]: TickMark(scheduled=m[0], outcome=Outcome(m[1])) for m in mark_rows if m[0] >= floor}
    ticks = set(by_tick) | set(marks)
    schedule = spec.schedule
    if not isinstance(schedule, SimpleSchedule):
        # the next few upcoming ticks, then newest first from now: a dense schedule over a wide
        # window shows its latest past ticks, not a window's margin of upcoming ones
        ticks.update(tick for tick in schedule.next_ticks(now, UPCOMING_TICKS) if floor <= tick <= until)
        cursor = schedule.tick_at_or_before(min(until, now))
        for _ in range(MAX_WINDOW_TICKS + 1):
            if cursor is None or cursor < floor:
                break
            ticks.add(cursor)
            cursor = schedule.tick_at_or_before(cursor - timedelta(microseconds=1))
        else:
            truncated = True
    shown = sorted(ticks)
    if len(shown) > MAX_WINDOW_TICKS:
        shown, truncated = shown[-MAX_WINDOW_TICKS:], True
    if truncated and shown:
        floor = max(floor, shown[0])
    views = [_view_of(tick, by_tick.get(tick, []), marks.get(tick), now) for tick in shown]
    return Timeline(views=views, since=floor, until=until, truncated=truncated)


def check_status(row: dict[str, Any], now: datetime) -> str:
    """A check row's status (``new``, ``up``, ``grace``, ``down``, ``paused``)."""
    return detection.status(repositories.state_of(row), now).value


def badge_status(statuses: Sequence[str]) -> str:
    """The badge state of a set of check statuses: ``down`` if any is down, else ``late`` if
    any is in grace, else ``up`` if any is up; a set of only new and paused checks says
    ``new`` (some new) or ``paused``, and no checks at all ``up`` (as Healthchecks). Unlike
    Healthchecks, a check that has never run or is paused is never shown as ``up``."""
    if "down" in statuses:
        return "down"
    if "grace" in statuses:
        return "late"
    if "up" in statuses or not statuses:
        return "up"
    return "new" if "new" in statuses else "paused"


async def check_badge(conn: AsyncConnection, badge_uuid: str, now: datetime) -> dict[str, Any] | None:
    """``{"name", "status"}`` of the check with this badge uuid (status: up, late, down)."""
    row = (await conn.execute(select(t.checks).where(t.checks.c.badge_uuid == badge_uuid))).mappings().first()
    if row is None:
        return None
    status = check_status(dict(row), now)
    return {"name": row["name"] or row["slug"] or "check", "status": badge_status([status])}


async def tag_badge(conn: AsyncConnection, badge_key: str, tag: str, now: datetime) -> dict[str, Any] | None:
    """``{"status", "total", "grace", "down"}`` over a project's checks with ``tag`` (``*``: all);
    ``None`` when no project has this badge key."""
    project_id = (
        await conn.execute(select(t.projects.c.id).where(t.projects.c.badge_key == badge_key))
    ).scalar_one_or_none()
    if project_id is None:
        return None
    rows = (await conn.execute(select(t.checks).where(t.checks.c.project_id == project_id))).mappings().all()
    statuses = [check_status(dict(r), now) for r in rows if tag == "*" or tag in r["tags"].split()]
    return {
        "status": badge_status(statuses),
        "total": len(statuses),
        "grace": statuses.count("grace"),
        "down": statuses.count("down"),
    }


async def project_tags(conn: AsyncConnection, project_id: int) -> list[str]:
    """The distinct tags of a project's checks, sorted."""
    tags: set[str] = set()
    for (text,) in await conn.execute(select(t.checks.c.tags).where(t.checks.c.project_id == project_id)):
        tags.update(text.split())
    return sorted(tags)


async def project_badge_key(conn: AsyncConnection, project_id: int) -> str:
    key: str = (
        await conn.execute(select(t.projects.c.badge_key).where(t.projects.c.id == project_id))
    ).scalar_one()
    return key


async def first_run_tick(conn: AsyncConnection, check_id: int) -> datetime | None:
    """The tick of the check's oldest run (through ``ix_runs_check_scheduled``)."""
    found: datetime | None = (
        await conn.execute(
            select(t.runs.c.scheduled)
            .where(t.runs.c.check_id == check_id)
            .order_by(t.runs.c.scheduled)
            .limit(1)
        )
    ).scalar_one_or_none()
    return found
