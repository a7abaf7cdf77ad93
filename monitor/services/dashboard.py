"""Read models of the dashboard: the checks list with its tick strips, a check's
timeline over a window, the badge states. Everything a user sees is limited to their projects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from monitor.domain import detection
from monitor.domain.checks import Outcome, SimpleSchedule
from monitor.domain.errors import NotFound
from monitor.domain.runs import RunBook, TickMark, tick_outcome
from monitor.notify.base import ChannelUrls
from monitor.services import channels as channel_service
from monitor.services import checks as check_service
from monitor.services import hints as hint_service
from monitor.services import history
from monitor.services import sentry as sentry_service
from monitor.settings import Settings
from monitor.storage import repositories
from monitor.storage.ports import TRIAGE_ORDER
from monitor.storage.unit_of_work import Connection, Engine, UnitOfWork

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


async def project_names(conn: Connection, project_ids: Sequence[int]) -> dict[int, str]:
    """``{project id: name}`` of these projects."""
    return await UnitOfWork.joining(conn).dashboard.project_names(project_ids)


async def _recent_books(conn: Connection, check_ids: Sequence[int]) -> dict[int, RunBook]:
    """Each check's runs and marks of its newest :data:`STRIP_TICKS` recorded ticks, in three
    queries whatever the number of checks (a window function ranks each check's ticks)."""
    books = {cid: RunBook() for cid in check_ids}
    if not check_ids:
        return books
    runs, marks = await UnitOfWork.joining(conn).dashboard.recent_ticks(check_ids, STRIP_TICKS)
    for row in runs:
        books[row["check_id"]].add(repositories.run_of(row))
    for check_id, scheduled, outcome in marks:
        books[check_id].marks[scheduled] = TickMark(scheduled=scheduled, outcome=Outcome(outcome))
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


SEVERITY = TRIAGE_ORDER
"""Statuses in triage order: what needs a person first (ordered in SQL by the storage port)."""
PAGE_SIZE = 50
"""Checks per page of the list."""
OUTPUT_TAIL = 4000
"""Characters of a failing ping's body kept for the page (its last lines)."""


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


LONGEST_NAME = 100
"""The longest check name or slug (:mod:`monitor.services.checks` refuses longer ones): a longer
search text is a substring of none."""
LONGEST_TAGS = 500
"""The longest tag list of a check: a longer tag filter matches none."""


async def list_page(
    conn: Connection,
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
    check's tags, ``status`` one of :data:`SEVERITY`; a ``q`` or ``tag`` holding NUL matches none.

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
    reads = UnitOfWork.joining(conn).dashboard
    counts = await reads.status_counts(ids, now)
    # no name, slug or tag holds a NUL (refused when saved), and PostgreSQL cannot compare one;
    # none is longer than its column either, and SQLite refuses a LIKE pattern of ~50 000
    # characters ("pattern too complex"): such a search matches nothing, without a query
    matched, rows = 0, list[dict[str, Any]]()
    if "\x00" not in q + tag and len(q.strip()) <= LONGEST_NAME and len(tag.strip()) <= LONGEST_TAGS:
        matched, rows = await reads.check_page(
            ids, now, needle=q.strip().lower(), tag=tag.strip(), status=status, offset=offset, limit=limit
        )
    checks = await decorate(conn, rows, now, settings)
    return CheckPage(
        checks=checks, matched=matched, total=sum(counts.values()), counts=counts, offset=offset, limit=limit
    )


async def decorate(
    conn: Connection, rows: list[dict[str, Any]], now: datetime, settings: Settings
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


async def open_episodes(conn: Connection, rows: Sequence[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The alert that opened each down check's episode: ``{check id: {"kind", "count",
    "first_tick", "created"}}`` (one query for all the rows)."""
    keys = {r["id"]: r["episode_key"] for r in rows if r.get("episode_key")}
    if not keys:
        return {}
    found = await UnitOfWork.joining(conn).dashboard.episode_alerts(keys)
    out: dict[int, dict[str, Any]] = {}
    for check_id, key, kind, count, scheduled, created in found:
        if keys.get(check_id) == key:
            out[check_id] = {"kind": kind, "count": count, "first_tick": scheduled, "created": created}
    return out


def _last_line(body: bytes | None) -> str:
    text = (body or b"").decode("utf-8", errors="replace").rstrip()
    return text.splitlines()[-1][:300] if text else ""


async def last_outputs(
    conn: Connection, rows: Sequence[dict[str, Any]], troubled: set[int]
) -> dict[int, dict[str, Any]]:
    """Per check, the last line of the body of its newest ping with a body — of its newest
    failing ping (``fail`` or a non-zero exit status) for the ``troubled`` ids (down or in grace):
    ``{check id: {"line", "bad", "exit_status"}}``. One indexed lookup per check
    (``uq_pings_check_n``, newest first)."""
    out: dict[int, dict[str, Any]] = {}
    reads = UnitOfWork.joining(conn).dashboard
    for row in rows:
        found = await reads.last_body(row["id"], failing=row["id"] in troubled)
        if found is None:
            continue
        body, kind, exit_status = found
        out[row["id"]] = {
            "line": _last_line(body),
            "bad": kind == "fail" or (exit_status is not None and exit_status != 0),
            "exit_status": exit_status,
        }
    return out


async def last_failure(conn: Connection, check_id: int) -> dict[str, Any] | None:
    """The check's newest failing ping: ``{"n", "received_at", "kind", "exit_status", "tail"}``
    (``tail``: the body's last :data:`OUTPUT_TAIL` characters), or ``None``."""
    found = await UnitOfWork.joining(conn).dashboard.last_failure(check_id)
    if found is None:
        return None
    n, received, kind, exit_status, body = found
    text = (body or b"").decode("utf-8", errors="replace").rstrip()
    return {
        "n": n,
        "received_at": received,
        "kind": kind,
        "exit_status": exit_status,
        "tail": text[-OUTPUT_TAIL:],
    }


async def last_good_run(conn: Connection, check_id: int) -> dict[str, Any] | None:
    """The check's newest run that finished successfully (``on_time`` or ``late``, duplicates
    and overlaps included; never an ``early`` run, which counts for no tick, DESIGN §5 rule 4c):
    ``{"scheduled", "finished_at"}``, or ``None``."""
    found = await UnitOfWork.joining(conn).dashboard.last_good_run(check_id)
    return {"scheduled": found[0], "finished_at": found[1]} if found is not None else None


async def status_since(conn: Connection, check_id: int) -> datetime | None:
    """When the check's status last flipped (its newest flip), or ``None``."""
    return await UnitOfWork.joining(conn).dashboard.status_since(check_id)


async def get_check(conn: Connection, project_ids: Sequence[int], uuid: str) -> dict[str, Any]:
    """The check row if it belongs to one of ``project_ids``; else NotFound (existence hidden)."""
    row = await UnitOfWork.joining(conn).dashboard.check_in(project_ids, uuid)
    if row is None:
        raise NotFound("uuid: no check with this uuid in your projects")
    return row


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
    conn: Connection, row: dict[str, Any], since: datetime, until: datetime, now: datetime
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
    reads = UnitOfWork.joining(conn).dashboard
    run_rows = await reads.window_runs(check_id, since, until, MAX_WINDOW_RUNS)
    mark_rows = await reads.window_marks(check_id, since, until, MAX_WINDOW_TICKS)
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


async def check_badge(conn: Connection, badge_uuid: str, now: datetime) -> dict[str, Any] | None:
    """``{"name", "status"}`` of the check with this badge uuid (status: up, late, down)."""
    row = await UnitOfWork.joining(conn).dashboard.check_by_badge(badge_uuid)
    if row is None:
        return None
    status = check_status(row, now)
    return {"name": row["name"] or row["slug"] or "check", "status": badge_status([status])}


async def tag_badge(conn: Connection, badge_key: str, tag: str, now: datetime) -> dict[str, Any] | None:
    """``{"status", "total", "grace", "down"}`` over a project's checks with ``tag`` (``*``: all);
    ``None`` when no project has this badge key."""
    reads = UnitOfWork.joining(conn).dashboard
    project_id = await reads.project_by_badge_key(badge_key)
    if project_id is None:
        return None
    rows = await reads.project_checks(project_id)
    statuses = [check_status(r, now) for r in rows if tag == "*" or tag in r["tags"].split()]
    return {
        "status": badge_status(statuses),
        "total": len(statuses),
        "grace": statuses.count("grace"),
        "down": statuses.count("down"),
    }


async def project_tags(conn: Connection, project_id: int) -> list[str]:
    """The distinct tags of a project's checks, sorted."""
    return await UnitOfWork.joining(conn).dashboard.project_tags(project_id)


async def project_badge_key(conn: Connection, project_id: int) -> str:
    """The project's badge key."""
    return await UnitOfWork.joining(conn).dashboard.badge_key(project_id)


async def first_run_tick(conn: Connection, check_id: int) -> datetime | None:
    """The tick of the check's oldest run (through ``ix_runs_check_scheduled``)."""
    return await UnitOfWork.joining(conn).dashboard.first_run_tick(check_id)


# -- the pages' use cases: one unit of work each ------------------------------------------------

PINGS_SHOWN = 50
"""Newest pings a check's page lists."""
PING_BODY_SHOWN = 10_000
"""Bytes of a ping's body a check's page shows (the rest is cut, and said to be)."""
HISTORY_SHOWN = 50
"""Newest alerts and flips a check's page lists."""


async def checks_overview(
    engine: Engine,
    project_ids: Sequence[int],
    now: datetime,
    settings: Settings,
    *,
    q: str = "",
    tag: str = "",
    status: str = "",
    offset: int = 0,
    limit: int = PAGE_SIZE,
    with_tags: bool = True,
) -> tuple[CheckPage, list[str]]:
    """One page of the user's checks (:func:`list_page`, same filters) and, with ``with_tags``,
    the sorted distinct tags of every check of ``project_ids`` (the filter's menu; else ``[]``)."""
    async with UnitOfWork.read(engine) as uow:
        listed = await list_page(
            uow.connection,
            project_ids,
            now,
            settings,
            q=q,
            tag=tag,
            status=status,
            offset=offset,
            limit=limit,
        )
        tags: set[str] = set()
        for project_id in project_ids if with_tags else ():
            tags.update(await uow.dashboard.project_tags(project_id))
    return listed, sorted(tags)


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckHeader:
    """A check page's header: the check ``row``, ``check`` (as :func:`decorate` shows it),
    ``status_since`` (its newest flip), ``last_good`` (:func:`last_good_run`) and ``failure``
    (:func:`last_failure`)."""

    row: dict[str, Any]
    check: dict[str, Any]
    status_since: datetime | None
    last_good: dict[str, Any] | None
    failure: dict[str, Any] | None


async def _header(
    conn: Connection, project_ids: Sequence[int], uuid: str, now: datetime, settings: Settings
) -> CheckHeader:
    row = await get_check(conn, project_ids, uuid)
    return CheckHeader(
        row=row,
        check=(await decorate(conn, [row], now, settings))[0],
        status_since=await status_since(conn, row["id"]),
        last_good=await last_good_run(conn, row["id"]),
        failure=await last_failure(conn, row["id"]),
    )


async def check_header(
    engine: Engine, project_ids: Sequence[int], uuid: str, now: datetime, settings: Settings
) -> CheckHeader:
    """The header of the check ``uuid`` (lower case) of one of ``project_ids``.

    Raises:
        NotFound: no such check in these projects (:func:`get_check`).
    """
    async with UnitOfWork.read(engine) as uow:
        return await _header(uow.connection, project_ids, uuid, now, settings)


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckDetails:
    """Everything a check's page shows below its header: ``hints``, ``timeline`` and the
    window's ``requested_since`` (before a cap moved it), the newest ``pings`` (see
    :func:`recent_pings`), ``alerts`` and ``flips`` (history's dicts, newest first),
    ``channel_names`` (id → name, or the id's first 8 characters), the ``project``'s name and
    its Sentry DSN (``sentry_dsn``, or ``None``)."""

    header: CheckHeader
    hints: list[str]
    timeline: Timeline
    requested_since: datetime
    pings: list[dict[str, Any]]
    alerts: list[dict[str, Any]]
    flips: list[dict[str, Any]]
    channel_names: dict[str, str]
    project: str
    sentry_dsn: str | None


def recentred(since: datetime, until: datetime, centre: datetime) -> tuple[datetime, datetime]:
    """The window ``[since, until]`` moved to centre on ``centre`` (same length)."""
    half = (until - since) / 2
    return centre - half, centre + half


async def _window(
    conn: Connection, row: dict[str, Any], window: str, centre: datetime | None, now: datetime
) -> tuple[Timeline, datetime]:
    """The check's timeline over the chosen window (centred on ``centre`` when given) and the
    window's start as requested."""
    first_run = await first_run_tick(conn, row["id"])
    since, until = window_bounds(row, window, now, first_run if window == "auto" else None)
    if centre is not None:
        since, until = recentred(since, until, centre)
    else:
        # never draw ticks from before the check existed (nor before its first run)
        born = min(row["created_at"], first_run or row["created_at"])
        since = max(since, born - (until - since) / 40)
    line = await timeline(conn, row, since, until, now)
    if centre is not None and line.truncated and line.views and line.since > centre:
        # the window's newest ticks all come after the wanted one: show those around it
        shown_half = (line.views[-1].scheduled - line.since) / 2
        line = await timeline(conn, row, since, min(until, centre + shown_half), now)
    return line, since


async def recent_pings(conn: Connection, check_id: int) -> list[dict[str, Any]]:
    """The check's newest :data:`PINGS_SHOWN` pings, newest first: ``n, kind, received_at,
    scheduled, rid, exit_status, duration, method, remote_addr, ua, body_size``, ``body`` (its
    first :data:`PING_BODY_SHOWN` bytes as text, undecodable bytes replaced) and ``body_cut``
    (the body was longer)."""
    out = []
    keys = ("n", "kind", "received_at", "scheduled", "rid", "exit_status", "duration", "method")
    for r in await UnitOfWork.joining(conn).dashboard.recent_pings(check_id, PINGS_SHOWN):
        body = r["body"] or b""
        out.append(
            {
                **{key: r[key] for key in keys},
                "remote_addr": r["remote_addr"],
                "ua": r["ua"],
                "body": body[:PING_BODY_SHOWN].decode("utf-8", errors="replace"),
                "body_cut": len(body) > PING_BODY_SHOWN,
                "body_size": r["body_size"],
            }
        )
    return out


async def check_details(
    engine: Engine,
    project_ids: Sequence[int],
    uuid: str,
    now: datetime,
    settings: Settings,
    urls: ChannelUrls,
    *,
    window: str = "auto",
    centre: datetime | None = None,
) -> CheckDetails:
    """A check's page in one read: its header, and its timeline over ``window`` (a key of
    :data:`WINDOWS`) — centred on ``centre`` when given, else starting no earlier than a little
    before the check was created — with the rest of :class:`CheckDetails`.

    Raises:
        NotFound: no check ``uuid`` (lower case) in ``project_ids``.
    """
    async with UnitOfWork.read(engine) as uow:
        conn = uow.connection
        header = await _header(conn, project_ids, uuid, now, settings)
        row = header.row
        line, since = await _window(conn, row, window, centre, now)
        channels = await channel_service.list_channels(conn, row["project_id"], urls)
        return CheckDetails(
            header=header,
            hints=(await hint_service.hints_of(conn, [row]))[row["id"]],
            timeline=line,
            requested_since=since,
            pings=await recent_pings(conn, row["id"]),
            alerts=await history.list_alerts(conn, row["id"], HISTORY_SHOWN),
            flips=await history.list_flips(conn, row["id"], HISTORY_SHOWN),
            channel_names={c["id"]: c["name"] or c["id"][:8] for c in channels},
            project=(await project_names(conn, [row["project_id"]])).get(row["project_id"], ""),
            sentry_dsn=await sentry_service.project_dsn(conn, row["project_id"], settings.base_url),
        )


async def form_choices(
    engine: Engine, project_ids: Sequence[int], urls: ChannelUrls, *, only: int | None = None
) -> tuple[dict[int, str], list[dict[str, Any]]]:
    """What the check form offers: ``{project id: name}`` of ``project_ids``, and the channels
    of those projects (only of project ``only`` when given), each as
    :func:`monitor.services.channels.list_channels` gives it plus ``project_id`` and
    ``project`` (its name), project by project."""
    async with UnitOfWork.read(engine) as uow:
        names = await project_names(uow.connection, project_ids)
        channels = []
        for pid in project_ids:
            if only is None or pid == only:
                for channel in await channel_service.list_channels(uow.connection, pid, urls):
                    channels.append({**channel, "project_id": pid, "project": names.get(pid, "")})
    return names, channels


async def find_check(engine: Engine, project_ids: Sequence[int], uuid: str) -> dict[str, Any]:
    """The row of the check ``uuid`` of one of ``project_ids`` (:func:`get_check`).

    Raises:
        NotFound: no such check in these projects.
    """
    async with UnitOfWork.read(engine) as uow:
        return await get_check(uow.connection, project_ids, uuid)


async def check_and_channels(
    engine: Engine, project_ids: Sequence[int], uuid: str
) -> tuple[dict[str, Any], list[str]]:
    """``(row, channel ids)`` of the check ``uuid`` of one of ``project_ids``.

    Raises:
        NotFound: no such check in these projects.
    """
    async with UnitOfWork.read(engine) as uow:
        row = await get_check(uow.connection, project_ids, uuid)
        return row, (await check_service.channels_of(uow.connection, [row["id"]]))[row["id"]]


async def names_of_projects(engine: Engine, project_ids: Sequence[int]) -> dict[int, str]:
    """``{project id: name}`` of these projects, in a read of its own."""
    async with UnitOfWork.read(engine) as uow:
        return await project_names(uow.connection, project_ids)


async def badge_of_check(engine: Engine, badge_uuid: str, now: datetime) -> dict[str, Any] | None:
    """:func:`check_badge` in a read of its own."""
    async with UnitOfWork.read(engine) as uow:
        return await check_badge(uow.connection, badge_uuid, now)


async def badge_of_tag(engine: Engine, badge_key: str, tag: str, now: datetime) -> dict[str, Any] | None:
    """:func:`tag_badge` in a read of its own."""
    async with UnitOfWork.read(engine) as uow:
        return await tag_badge(uow.connection, badge_key, tag, now)


async def badge_listing(engine: Engine, project_id: int) -> tuple[str, list[str]]:
    """``(badge key, sorted distinct tags)`` of the project, for its badge URLs."""
    async with UnitOfWork.read(engine) as uow:
        return await project_badge_key(uow.connection, project_id), await project_tags(
            uow.connection, project_id
        )
