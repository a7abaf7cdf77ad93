"""Dashboard pages (issue 9, DESIGN §9): checks, a check's timeline, cron explain, channels.

Handlers are thin: they resolve the session (anonymous → ``/login``), call the services
(``monitor.services.dashboard``, ``checks``, ``channels``, ``history``; ``monitor.domain.explain``)
and render a template. Forms post back with the session's CSRF token; every write answers
with a redirect (303), so reloading a page never repeats it.
"""

from __future__ import annotations

import contextlib
import secrets
import zoneinfo
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import anyio.to_thread
from litestar import Controller, HttpMethod, MediaType, Request, Response, get, post, route
from litestar.response import Redirect, Template
from sqlalchemy import select

from monitor.domain.errors import MonitorError, NotFound, ScheduleError, ValidationError, ZoneError
from monitor.domain.explain import MAX_COUNT, explain
from monitor.domain.schedules import Dialect
from monitor.edge import UUID_RE, services_of
from monitor.services import channels as channel_service
from monitor.services import checks as check_service
from monitor.services import dashboard, history, users
from monitor.storage import tables as t
from monitor.web import svg
from monitor.web.auth import EXCEPTION_HANDLERS, SECURITY_HEADERS, check_csrf, require_session
from monitor.web.colors import OUTCOME_COLORS, OUTCOME_LABELS, STATUS_COLORS, STATUS_LABELS

Req = Request[Any, Any, Any]
STATUSES = ("up", "grace", "down", "new", "paused")
PING_BODY_SHOWN = 10_000
PINGS_SHOWN = 50
TEST_RESULTS_KEPT = 1000
AROUND_YEARS = (1970, 9998)


@cache
def zones() -> list[str]:
    return sorted(zoneinfo.available_timezones())


def _page(name: str, session: users.Session, status_code: int = 200, **context: Any) -> Template:
    context.update(session=session, csrf_token=session.csrf_token)
    return Template(template_name=name, context=context, status_code=status_code)


def not_found(request: Req, error: NotFound) -> Response[Any]:
    return Template(
        template_name="error.html",
        context={"title": "Not found", "message": str(error), "session": None},
        status_code=404,
    )


def filter_checks(checks: list[dict[str, Any]], q: str, tag: str, status: str) -> list[dict[str, Any]]:
    """Checks whose name or slug contains ``q`` (any case), carrying ``tag``, with ``status``."""
    needle = q.strip().lower()
    out = []
    for check in checks:
        if needle and needle not in check["name"].lower() and needle not in check["slug"].lower():
            continue
        if tag and tag not in check["tag_list"]:
            continue
        if status and check["status"] != status:
            continue
        out.append(check)
    return out


async def _checks_context(
    request: Req, session: users.Session, q: str, tag: str, status: str
) -> dict[str, Any]:
    services = services_of(request.app.state)
    now = services.clock.now()
    async with services.engine.connect() as conn:
        every = await dashboard.list_checks(conn, session.user.project_ids, now, services.settings)
    tags = sorted({tg for c in every for tg in c["tag_list"]})
    return {
        "checks": filter_checks(every, q, tag, status),
        "total": len(every),
        "tags": tags,
        "statuses": STATUSES,
        "q": q,
        "tag": tag,
        "status": status,
        "now": now,
    }


def _test_results(request: Req) -> dict[str, dict[str, Any]]:
    """Results of test notifications awaiting their redirect, by one-time token (in memory)."""
    state = request.app.state
    found = state.get("channel_test_results")
    if not isinstance(found, dict):
        found = {}
        state["channel_test_results"] = found
    return found


def _uuid(value: str) -> str:
    if not UUID_RE.match(value):
        raise NotFound("uuid: no such check")
    return value.lower()


async def _recent_pings(conn: Any, check_id: int) -> list[dict[str, Any]]:
    rows = (
        await conn.execute(
            select(t.pings)
            .where(t.pings.c.check_id == check_id)
            .order_by(t.pings.c.n.desc())
            .limit(PINGS_SHOWN)
        )
    ).mappings()
    out = []
    for r in rows:
        body = bytes(r["body"]) if r["body"] is not None else b""
        out.append(
            {
                "n": r["n"],
                "kind": r["kind"],
                "received_at": r["received_at"],
                "scheduled": r["scheduled"],
                "rid": r["rid"],
                "exit_status": r["exit_status"],
                "duration": r["duration"],
                "method": r["method"],
                "remote_addr": r["remote_addr"],
                "ua": r["ua"],
                "body": body[:PING_BODY_SHOWN].decode("utf-8", errors="replace"),
                "body_cut": len(body) > PING_BODY_SHOWN,
                "body_size": r["body_size"],
            }
        )
    return out


def _bars(views: list[dashboard.TickView], max_runtime: timedelta) -> list[svg.TickMark]:
    marks = []
    for view in views:
        bars = []
        for run in view.runs:
            end = run.finished_at
            if end is None and run.timed_out and run.started_at is not None:
                end = run.started_at + max_runtime
            bars.append(
                svg.RunBar(
                    id=run.id,
                    rid=run.rid,
                    scheduled=run.scheduled,
                    start=run.started_at or run.first_ping_at,
                    end=end,
                    outcome=run.outcome.value if run.outcome is not None else None,
                    late=run.late,
                    duplicate=run.duplicate,
                    overlap=run.overlap,
                    timed_out=run.timed_out,
                )
            )
        marks.append(svg.TickMark(scheduled=view.scheduled, outcome=view.outcome, runs=tuple(bars)))
    return marks


def _instant(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return value.astimezone(UTC) if value.tzinfo is not None else None
    except (ValueError, OverflowError):  # 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        return None


def _centred(
    since: datetime, until: datetime, around: str | None
) -> tuple[datetime, datetime, datetime | None, str | None]:
    """``(since, until, centre, error)``: the window moved to centre on ``around`` (an ISO
    instant), or unchanged with an error text when ``around`` is not an instant or the moved
    window would leave the representable years (``?around=9999-12-31T23:59:59Z``)."""
    if not around:
        return since, until, None, None
    centre = _instant(around)
    if centre is None:
        return since, until, None, "around: not an ISO 8601 instant with a zone; showing the default window"
    half = (until - since) / 2
    # years 1970-9998 only: a window near datetime's limits overflows (also in a check's zone)
    if not AROUND_YEARS[0] <= centre.year <= AROUND_YEARS[1]:
        return since, until, None, "around: too far in the past or future; showing the default window"
    return centre - half, centre + half, centre, None


def _zone(name: str) -> zoneinfo.ZoneInfo | None:
    """The check's zone for local times on the page; ``None`` for UTC or an unknown name."""
    if name in ("UTC", "Etc/UTC", ""):
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None


def _explain_context(schedule: str, tz: str, dialect: str, count: str, now: datetime) -> dict[str, Any]:
    context: dict[str, Any] = {
        "schedule": schedule,
        "tz": tz or "UTC",
        "dialect": dialect or "unix",
        "count": count or "5",
        "result": None,
        "error": None,
        "dialects": [d.value for d in Dialect],
    }
    if not schedule.strip():
        return context
    try:
        try:
            chosen = Dialect(dialect or "unix")
        except ValueError:
            raise ValidationError(
                "dialect", f"unknown dialect {dialect!r}; use unix, seconds or quartz"
            ) from None
        try:
            n = int(count or "5")
        except ValueError:
            raise ValidationError("count", f"must be a whole number from 1 to {MAX_COUNT}") from None
        try:
            context["result"] = explain(schedule, dialect=chosen, tz=tz or "UTC", count=n, after=now)
        except ScheduleError as error:
            raise ValidationError("schedule", error.message) from None
        except ZoneError as error:
            raise ValidationError("tz", str(error)) from None
    except ValidationError as error:
        context["error"] = str(error)
    return context


class DashboardController(Controller):
    """The pages behind login."""

    path = "/"
    include_in_schema = False
    exception_handlers = {**EXCEPTION_HANDLERS, NotFound: not_found}  # noqa: RUF012
    response_headers = SECURITY_HEADERS

    @route("/", http_method=[HttpMethod.GET, HttpMethod.HEAD])
    async def checks_page(self, request: Req, q: str = "", tag: str = "", status: str = "") -> Template:
        session = await require_session(request)
        context = await _checks_context(request, session, q, tag, status)
        return _page("checks.html", session, **context)

    @get("/fragments/checks")
    async def checks_fragment(self, request: Req, q: str = "", tag: str = "", status: str = "") -> Template:
        """The checks table's rows (live refresh polls this)."""
        session = await require_session(request)
        context = await _checks_context(request, session, q, tag, status)
        return _page("_checks_rows.html", session, **context)

    @get("/checks/{uuid:str}")
    async def check_page(
        self, request: Req, uuid: str, window: str = "auto", around: str | None = None
    ) -> Response[Any]:
        """A check's page; ``around`` (an ISO tick, as in ``#tick-…`` links) centres the window
        on that tick, so a notification's link to an old tick finds it."""
        session = await require_session(request)
        services = services_of(request.app.state)
        now = services.clock.now()
        if window not in dashboard.WINDOWS:
            window = "auto"
        async with services.engine.connect() as conn:
            row = await dashboard.get_check(conn, session.user.project_ids, _uuid(uuid))
            started = await check_service.started_checks(conn, [row], now)
            channels = await check_service.channels_of(conn, [row["id"]])
            check = check_service.check_to_dict(
                row,
                now=now,
                settings=services.settings,
                started=row["id"] in started,
                channels=channels[row["id"]],
            )
            first_run = await dashboard.first_run_tick(conn, row["id"]) if window == "auto" else None
            since, until = dashboard.window_bounds(row, window, now, first_run)
            since, until, centre, around_error = _centred(since, until, around)
            line = await dashboard.timeline(conn, row, since, until, now)
            if centre is not None and line.truncated and line.views and line.since > centre:
                # the window's newest ticks all come after the wanted one: show those around it
                shown_half = (line.views[-1].scheduled - line.since) / 2
                line = await dashboard.timeline(conn, row, since, min(until, centre + shown_half), now)
            pings = await _recent_pings(conn, row["id"])
            alerts = await history.list_alerts(conn, row["id"], 50)
            flips = await history.list_flips(conn, row["id"], 50)
            channel_names = {
                c["id"]: c["name"] or c["id"][:8]
                for c in await channel_service.list_channels(conn, row["project_id"], services.channel_urls)
            }
            project = (await dashboard.project_names(conn, [row["project_id"]])).get(row["project_id"], "")
        context = {
            "check": check,
            "project": project,
            "window": window,
            "windows": list(dashboard.WINDOWS),
            "since": line.since,
            "until": line.until,
            "requested_since": since,
            "truncated": line.truncated,
            "max_ticks": dashboard.MAX_WINDOW_TICKS,
            "around_error": around_error,
            "zone": _zone(str(row.get("tz") or "UTC")),
            "now": now,
            "pings": pings,
            "alerts": alerts,
            "flips": flips,
            "channel_names": channel_names,
            "session": session,
            "csrf_token": session.csrf_token,
        }
        max_runtime = timedelta(seconds=row["max_runtime"])

        def render() -> str:
            # the SVGs and up to 500 tick rows are pure CPU work: off the event loop
            marks = _bars(line.views, max_runtime)
            context.update(
                ticks=list(reversed(marks)),
                timeline_svg=svg.timeline_svg(marks, line.since, line.until, now),
                duration_svg=svg.duration_chart_svg([b for m in marks for b in m.runs]),
            )
            engine = request.app.template_engine
            assert engine is not None
            return str(engine.get_template("check.html").render(**context))

        html = await anyio.to_thread.run_sync(render)
        return Response(content=html, media_type=MediaType.HTML)

    @post("/checks/{uuid:str}/pause", status_code=303)
    async def pause(self, request: Req, uuid: str) -> Response[Any]:
        return await self._pause_or_resume(request, uuid, resume=False)

    @post("/checks/{uuid:str}/resume", status_code=303)
    async def resume(self, request: Req, uuid: str) -> Response[Any]:
        return await self._pause_or_resume(request, uuid, resume=True)

    async def _pause_or_resume(self, request: Req, uuid: str, *, resume: bool) -> Response[Any]:
        session = await require_session(request)
        form = await request.form()
        check_csrf(form.get("csrf_token"), session.csrf_token)
        services = services_of(request.app.state)
        uuid = _uuid(uuid)
        async with services.engine.begin() as conn:
            row = await dashboard.get_check(conn, session.user.project_ids, uuid)
            action = check_service.resume_check if resume else check_service.pause_check
            # resuming a check that is not paused: nothing to do, the page shows its real state
            with contextlib.suppress(MonitorError):
                await action(conn, row["project_id"], uuid, services.clock.now())
        return Redirect(path=f"/checks/{uuid}", status_code=303)

    @get("/cron")
    async def cron_page(
        self, request: Req, schedule: str = "", tz: str = "UTC", dialect: str = "unix", count: str = "5"
    ) -> Template:
        session = await require_session(request)
        now = services_of(request.app.state).clock.now()
        context = _explain_context(schedule, tz, dialect, count, now)
        return _page("cron.html", session, zones=zones(), **context)

    @get("/fragments/cron")
    async def cron_fragment(
        self, request: Req, schedule: str = "", tz: str = "UTC", dialect: str = "unix", count: str = "5"
    ) -> Template:
        session = await require_session(request)
        now = services_of(request.app.state).clock.now()
        return _page("_cron_result.html", session, **_explain_context(schedule, tz, dialect, count, now))

    async def _channels_page(
        self, request: Req, session: users.Session, *, status: int = 200, **extra: Any
    ) -> Template:
        services = services_of(request.app.state)
        async with services.engine.connect() as conn:
            names = await dashboard.project_names(conn, session.user.project_ids)
            listed = []
            for project_id in session.user.project_ids:
                for channel in await channel_service.list_channels(conn, project_id, services.channel_urls):
                    listed.append({**channel, "project": names.get(project_id, "")})
        extra.setdefault("form", {})
        return _page(
            "channels.html",
            session,
            status_code=status,
            channels=listed,
            projects=[(pid, names.get(pid, "")) for pid in session.user.project_ids],
            kinds=sorted(channel_service.ALERT_KINDS),
            **extra,
        )

    @get("/channels")
    async def channels_page(self, request: Req, added: str = "", tested: str = "") -> Template:
        """``?added=1`` after adding a channel; ``?tested=<token>`` shows the stored result of a
        test notification this user sent (never text taken from the URL)."""
        session = await require_session(request)
        message, ok = "", False
        if added == "1":
            message, ok = "Channel added.", True
        elif tested:
            result = _test_results(request).pop(tested, None)
            if result is not None and result["user"] == session.user.id:
                ok = bool(result["ok"])
                message = f"Test notification to {result['name']}: " + (
                    "delivered" if ok else f"failed: {result['error']}"
                )
        return await self._channels_page(request, session, message=message, ok=ok)

    @post("/channels", status_code=303)
    async def add_channel(self, request: Req) -> Response[Any]:
        session = await require_session(request)
        form = await request.form()
        check_csrf(form.get("csrf_token"), session.csrf_token)
        services = services_of(request.app.state)
        values = {"name": str(form.get("name") or ""), "url": str(form.get("url") or "")}
        kinds = [str(k) for k in form.getall("kinds")] if "kinds" in form else []
        try:
            project_id = int(str(form.get("project") or "0"))
        except ValueError:
            project_id = 0
        try:
            if project_id not in session.user.project_ids:
                raise ValidationError("project", "pick one of your projects")
            body: dict[str, Any] = dict(values)
            if kinds:
                body["kinds"] = kinds
            clean = await channel_service.validate_channel(
                body,
                partial=False,
                allow_private=services.settings.allow_private_targets,
                urls=services.channel_urls,
            )
            async with services.engine.begin() as conn:
                await channel_service.create_channel(conn, project_id, clean, services.clock.now())
        except ValidationError as error:
            return await self._channels_page(
                request, session, status=400, error=str(error), form={**values, "kinds": kinds}
            )
        return Redirect(path="/channels", query_params={"added": "1"}, status_code=303)

    @post("/channels/{channel_id:str}/test", status_code=303)
    async def test_channel(self, request: Req, channel_id: str) -> Response[Any]:
        session = await require_session(request)
        form = await request.form()
        check_csrf(form.get("csrf_token"), session.csrf_token)
        services = services_of(request.app.state)
        row: dict[str, Any] | None = None
        async with services.engine.connect() as conn:
            for project_id in session.user.project_ids:
                try:
                    row = await channel_service.get_channel(conn, project_id, channel_id)
                    break
                except NotFound:
                    continue
        if row is None:
            raise NotFound("id: no channel with this id in your projects")
        result = await channel_service.test_channel(
            services.notifier, row, timeout=services.settings.notify_timeout
        )
        token = secrets.token_urlsafe(12)
        results = _test_results(request)
        results[token] = {
            "user": session.user.id,
            "name": row["name"] or row["id"][:8],
            "ok": result.ok,
            "error": result.error or "",
        }
        while len(results) > TEST_RESULTS_KEPT:
            results.pop(next(iter(results)))
        return Redirect(path="/channels", query_params={"tested": token}, status_code=303)


def template_globals() -> dict[str, Any]:
    """Values every template may use (colours, labels)."""
    return {
        "OUTCOME_COLORS": OUTCOME_COLORS,
        "OUTCOME_LABELS": OUTCOME_LABELS,
        "STATUS_COLORS": STATUS_COLORS,
        "STATUS_LABELS": STATUS_LABELS,
        "tick_id": svg.tick_id,
    }
