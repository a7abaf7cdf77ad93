"""Dashboard pages (DESIGN §9): checks, a check's timeline, cron explain, channels.

Handlers are thin: they resolve the session (anonymous → ``/login``), call the services
(``monitor.services.dashboard``, ``checks``, ``channels``, ``users``; ``monitor.domain.cron.explain``)
and render a template; each service call is one unit of work, and a handler never sees a
connection. Forms post back with the session's CSRF token; every write answers
with a redirect (303), so reloading a page never repeats it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import zoneinfo
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

import anyio.to_thread
from litestar import Controller, HttpMethod, MediaType, Request, Response, get, post, route
from litestar.response import Redirect, Template

from monitor.domain import sentry as sentry_domain
from monitor.domain.cron.explain import MAX_COUNT, explain
from monitor.domain.cron.schedules import Dialect
from monitor.domain.errors import Conflict, MonitorError, NotFound, ScheduleError, ValidationError, ZoneError
from monitor.edge import UUID_RE, services_of
from monitor.services import channels as channel_service
from monitor.services import checks as check_service
from monitor.services import dashboard, users, zone_names
from monitor.web import channel_forms, reasons, svg
from monitor.web.auth import EXCEPTION_HANDLERS, SECURITY_HEADERS, csrf_guard, page_session, require_session
from monitor.web.colors import (
    OUTCOME_COLORS,
    OUTCOME_GLYPHS,
    OUTCOME_LABELS,
    STATUS_COLORS,
    STATUS_GLYPHS,
    STATUS_LABELS,
)

Req = Request[Any, Any, Any]
STATUSES = dashboard.SEVERITY
TEST_RESULTS_KEPT = 1000
AROUND_YEARS = (1970, 9998)


def zones() -> tuple[str, ...]:
    """The zones the forms offer: exactly the names the API accepts, under their current names."""
    return zone_names.offered_zones()


def _page(template: str, session: users.Session, status_code: int = 200, **context: Any) -> Template:
    context.update(session=session, csrf_token=session.csrf_token)
    return Template(template_name=template, context=context, status_code=status_code)


def not_found(request: Req, error: NotFound) -> Response[Any]:
    session = page_session(request)
    return Template(
        template_name="error.html",
        context={
            "title": "Not found",
            "message": str(error),
            "session": session,
            "csrf_token": session.csrf_token if session else "",
            "status": 404,
        },
        status_code=404,
    )


def _page_number(text: str) -> int:
    return int(text) if text.isdigit() and 0 < int(text) < 1_000_000 else 1


def user_zone(session: users.Session) -> tzinfo:
    """The zone the user's pages show times in (UTC unless they picked one)."""
    return _zone(session.user.tz) or UTC


async def _checks_context(
    request: Req, session: users.Session, q: str, tag: str, status: str, page: str, *, with_tags: bool = True
) -> dict[str, Any]:
    """The checks page's context; ``with_tags`` reads every tag for the filter's menu (the full
    page only: the 5-second refresh of the rows does not need it)."""
    services = services_of(request.app.state)
    now = services.clock.now()
    number = _page_number(page)
    size = dashboard.PAGE_SIZE

    async def read(number: int) -> tuple[Any, Any]:
        return await dashboard.checks_overview(
            services.engine,
            session.user.project_ids,
            now,
            services.settings,
            q=q,
            tag=tag,
            status=status,
            offset=(number - 1) * size,
            limit=size,
            with_tags=with_tags,
        )

    listed, tags = await read(number)
    if number > 1 and not listed.checks and listed.matched:
        # past the last page (an old link, checks deleted since): show the last page instead
        number = -(-listed.matched // size)
        listed, tags = await read(number)
    zone = user_zone(session)
    for check in listed.checks:
        check["reason"] = reasons.reason(check, now, zone)
        check["started_words"] = reasons.started_words(check, now, zone)
    pages = max(1, -(-listed.matched // size))
    return {
        "checks": listed.checks,
        "total": listed.total,
        "matched": listed.matched,
        "counts": listed.counts,
        "first": listed.offset + 1 if listed.checks else 0,
        "last": listed.offset + len(listed.checks),
        "page": number,
        "pages": pages,
        "tags": tags,
        "statuses": STATUSES,
        "q": q,
        "tag": tag,
        "status": status,
        "now": now,
        "zone": zone,
        "nav": "checks",
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


def _around(around: str | None) -> tuple[datetime | None, str | None]:
    """``(centre, error)``: the instant ``around`` (ISO) to centre the window on, or ``None``
    with an error text when it is not an instant or a window around it would leave the
    representable years (``?around=9999-12-31T23:59:59Z``); ``(None, None)`` without one."""
    if not around:
        return None, None
    centre = _instant(around)
    if centre is None:
        return None, "around: not an ISO 8601 instant with a zone; showing the default window"
    # years 1970-9998 only: a window near datetime's limits overflows (also in a check's zone)
    if not AROUND_YEARS[0] <= centre.year <= AROUND_YEARS[1]:
        return None, "around: too far in the past or future; showing the default window"
    return centre, None


def _zone(name: str) -> zoneinfo.ZoneInfo | None:
    """The check's zone for local times on the page; ``None`` for UTC or an unknown name."""
    if name in ("UTC", "Etc/UTC", ""):
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a path
        return None


def _explain_context(schedule: str, tz: str, dialect: str, count: str, now: datetime) -> dict[str, Any]:
    schedule = schedule.replace("\r\n", "\n")  # a textarea's line breaks, as a browser sends them
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
                "dialect", f"unknown dialect {dialect!r}; use unix, seconds, quartz or oncalendar"
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


async def _form(request: Req) -> dict[str, str]:
    """The posted form as text values (a repeated key keeps its last value; see
    :func:`_form_list` for checkboxes)."""
    form = await request.form()
    return {k: str(v) for k, v in form.items() if isinstance(v, str)}


async def _form_list(request: Req, name: str) -> list[str]:
    form = await request.form()
    return [str(v) for v in form.getall(name)] if name in form else []


def _number(text: str) -> int | str:
    """A form's number as an int, or the text itself (the service then names the field).

    ASCII digits only, as the API's JSON numbers: ``str.isdigit`` alone would read ``"٣٠"``
    (Arabic-Indic digits) as 30."""
    stripped = text.strip()
    digits = stripped[1:] if stripped.startswith("-") else stripped
    # a negative whole number is a number too: the service then states its bound
    # ("must be between 1 and 1000, got -1"), not "must be an integer, got '-1'"
    return int(stripped) if digits.isascii() and digits.isdigit() else stripped


CHECK_NUMBERS = ("grace", "max_runtime", "failure_threshold", "recovery_threshold")
OPTIONAL_NUMBERS: dict[str, int | None] = {
    "early_tolerance": None,
    "expected_runs": 1,
    "min_runtime": None,
    "nag_interval": None,
    "escalate_after": None,
}
"""Whole-second (or count) fields of the check form that may be left empty, with the value an
empty field stands for (the API's default: ``null`` or 1), so clearing a field resets it."""


def check_form_data(
    form: dict[str, str], channels: list[str], escalate_to: list[str] | None = None
) -> dict[str, Any]:
    """A check form's fields as the API's JSON body (``monitor.services.checks`` validates it
    exactly as it validates ``POST /api/v3/checks/``): every setting the API takes for a check,
    ``channels`` and ``escalate_to`` as the ticked channel ids; an unticked keyword-filter box
    is ``false``."""
    data: dict[str, Any] = {key: form.get(key, "") for key in ("name", "slug", "tags", "desc")}
    if form.get("kind") == "cron":
        # a browser posts a textarea's line breaks as CRLF: the schedule keeps the LF it was typed with
        schedule = form.get("schedule", "").replace("\r\n", "\n")
        data.update(schedule=schedule, tz=form.get("tz", "") or "UTC")
        data["dialect"] = form.get("dialect", "") or "unix"
        if data["dialect"] == "oncalendar":
            # a blank line between OnCalendar entries is spacing in a textarea, not an entry
            data["schedule"] = "\n".join(line for line in schedule.split("\n") if line.strip())
    else:
        data["timeout"] = _number(form.get("timeout", ""))
    for key in CHECK_NUMBERS:
        data[key] = _number(form.get(key, ""))
    for key, default in OPTIONAL_NUMBERS.items():
        if form.get(key, "").strip():
            data[key] = _number(form[key])
        elif key in form:
            data[key] = default
    data["manual_resume"] = form.get("manual_resume") == "on"
    data["methods"] = "POST" if form.get("post_only") == "on" else ""
    for key in check_service.KEYWORD_LISTS:
        if key in form:
            data[key] = form[key]
    for key in check_service.KEYWORD_FLAGS:
        data[key] = form.get(key) == "on"
    data["channels"] = ",".join(channels)
    data["escalate_to"] = ",".join(escalate_to or [])
    return data


CHANGED_SINCE_OPENED = "this check was changed since you opened the form; review and save again"
"""The edit form's answer (409) when the stored settings differ from the ones it was loaded with."""


def _stored_form(row: dict[str, Any], chosen: list[str]) -> tuple[dict[str, str], list[str]]:
    """A stored check (``dashboard.get_check``'s row and its channel ids) as the edit form's
    values and ticked escalation channels; ``values["version"]`` is :func:`settings_version`
    of them."""
    values = {k: "" if v is None else str(v) for k, v in row.items()}
    values["post_only"] = "on" if row["methods"] == "POST" else ""
    values["manual_resume"] = "on" if row["manual_resume"] else ""
    for key in check_service.KEYWORD_FLAGS:
        values[key] = "on" if row[key] else ""
    values["project"] = str(row["project_id"])
    escalate_to = [c for c in (row["escalate_to"] or "").split(",") if c]
    values["version"] = settings_version(values, chosen, escalate_to)
    return values, escalate_to


def settings_version(form: dict[str, str], channels: list[str], escalate_to: list[str]) -> str:
    """The version of a check's editable settings: a SHA-256 (hex) of what
    :func:`check_form_data` makes of them, so it changes exactly when a setting the form edits
    changes (a ping, a flip or a re-plan of ``next_due`` leaves it alone)."""
    data = check_form_data(form, sorted(channels), sorted(escalate_to))
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _stored_version(row: dict[str, Any], chosen: list[str]) -> str:
    """:func:`settings_version` of a stored check (its row and channel ids)."""
    return _stored_form(row, chosen)[0]["version"]


def form_errors(error: MonitorError) -> dict[str, str]:
    """A service's error as ``{field: problem}`` (a :class:`Conflict` names its field first,
    ``"slug: 'x' is already used…"``)."""
    if isinstance(error, ValidationError):
        return {error.field: error.problem}
    field, _, problem = str(error).partition(": ")
    return {field: problem} if problem and field.isidentifier() else {"form": str(error)}


def snippets(check: dict[str, Any], base_url: str, sentry_dsn: str | None = None) -> dict[str, str]:
    """Ready-to-paste ways to report to a check: crontab line, monitor-run, Python client, curl,
    and with the project's Sentry DSN (``sentry_dsn``) a Sentry SDK ``monitor``."""
    url = check["ping_url"]
    schedule = check.get("schedule") if check.get("kind") == "cron" else None
    when = schedule if schedule and len(schedule.split()) == 5 else "0 3 * * *"
    out = {
        "ping URL": url,
        "crontab line": f'{when} /usr/local/bin/job.sh; curl -fsS -m 10 --retry 3 "{url}/$?" >/dev/null',
        "monitor-run": (
            f"MONITOR_BASE_URL={base_url} monitor-run --check {check['uuid']} -- /usr/local/bin/job.sh"
        ),
        "Python client": (
            "from monitor_client import Client\n\n"
            f'client = Client(base_url="{base_url}")\n'
            f'with client.run("{check["uuid"]}"):\n'
            "    do_the_work()\n"
        ),
        "curl": f"curl -fsS -m 10 --retry 3 {url}",
    }
    slug = str(check.get("slug") or "")
    monitor_slug = slug.partition(sentry_domain.ENVIRONMENT_SEPARATOR)[0]
    # a check-in finds its check by slug: a check without one (or with one Sentry would
    # spell otherwise) would get a new check from the SDK, not its check-ins
    if sentry_dsn and monitor_slug and sentry_domain.slugify(monitor_slug)[:50] == monitor_slug:
        out["Sentry SDK"] = sentry_snippet(check, sentry_dsn)
    return out


SENTRY_UNITS = (("week", 604_800), ("day", 86_400), ("hour", 3600), ("minute", 60))
"""Sentry interval units whole periods are spelled in, longest first (``monitor.domain.sentry``
also takes month and year, which are not a whole number of our seconds' periods)."""


def _sentry_config(check: dict[str, Any]) -> dict[str, Any] | None:
    """The ``monitor_config`` that states exactly the check's settings, so a check-in that
    sends it changes nothing (``monitor.domain.sentry.config_changes``); ``None`` when the
    schedule has no Sentry spelling (a seconds, quartz or OnCalendar schedule; a period that is
    not whole minutes): the check-ins then report to the check as it is."""
    if check.get("kind") == "cron":
        if check.get("dialect") != "unix":
            return None
        config: dict[str, Any] = {"schedule": {"type": "crontab", "value": check["schedule"]}}
    else:
        timeout = int(check.get("timeout") or 0)
        unit = next(((name, size) for name, size in SENTRY_UNITS if timeout and timeout % size == 0), None)
        if unit is None:
            return None
        config = {"schedule": {"type": "interval", "value": timeout // unit[1], "unit": unit[0]}}
    config["timezone"] = check.get("tz") or "UTC"
    for ours, theirs in (("grace", "checkin_margin"), ("max_runtime", "max_runtime")):
        if int(check.get(ours) or 0) % 60 == 0:  # Sentry counts these in minutes
            config[theirs] = int(check[ours]) // 60
    config["failure_issue_threshold"] = int(check.get("failure_threshold") or 1)
    config["recovery_threshold"] = int(check.get("recovery_threshold") or 1)
    return config


def sentry_snippet(check: dict[str, Any], dsn: str) -> str:
    """A Sentry SDK (Python) ``monitor`` reporting to the check (``check["slug"]``, set)
    through the project's DSN.

    The monitor slug is the check's slug, or for ``<monitor>--<environment>`` (a check of
    another environment than ``production``, as ``monitor.domain.sentry.check_slug`` spells
    it) the monitor's, with the environment given to ``sentry_sdk.init``."""
    slug = str(check["slug"])
    monitor_slug, _, environment = slug.partition(sentry_domain.ENVIRONMENT_SEPARATOR)
    init = f'sentry_sdk.init(dsn="{dsn}"'
    init += f', environment="{environment}")' if environment else ")"
    config = _sentry_config(check)
    lines = ["import sentry_sdk", "from sentry_sdk.crons import monitor", "", init, ""]
    if config is not None:
        # a Python dict literal: only strings and numbers, which JSON spells alike
        lines += [
            "monitor_config = {",
            *(f"    {json.dumps(k)}: {json.dumps(v)}," for k, v in config.items()),
            "}",
            "",
        ]
        lines.append(f'@monitor(monitor_slug="{monitor_slug}", monitor_config=monitor_config)')
    else:
        lines.append(f'@monitor(monitor_slug="{monitor_slug}")')
    lines += ["def job():", "    do_the_work()", ""]
    return "\n".join(lines)


def _header_context(found: dashboard.CheckHeader, session: users.Session, now: datetime) -> dict[str, Any]:
    """A check header's template values, its times in the user's zone."""
    zone = user_zone(session)
    check = found.check
    check["reason"] = reasons.reason(check, now, zone)
    check["started_words"] = reasons.started_words(check, now, zone)
    return {
        "status_since": found.status_since,
        "last_good": found.last_good,
        "failure": found.failure,
        "check": check,
        "now": now,
        "zone": zone,
    }


def _check_context(
    details: dashboard.CheckDetails, session: users.Session, now: datetime, base_url: str
) -> dict[str, Any]:
    """A check page's template values from its read (without the window's choice, the
    ``around`` error, the saved message and the drawings)."""
    header = _header_context(details.header, session, now)
    row, line = details.header.row, details.timeline
    return {
        **header,
        "hints": details.hints,
        "project": details.project,
        "windows": list(dashboard.WINDOWS),
        "since": line.since,
        "until": line.until,
        "requested_since": details.requested_since,
        "truncated": line.truncated,
        "max_ticks": dashboard.MAX_WINDOW_TICKS,
        "check_zone": _zone(str(row.get("tz") or "UTC")),
        "pings": details.pings,
        "alerts": details.alerts,
        "flips": details.flips,
        "channel_names": details.channel_names,
        "snippets": snippets(header["check"], base_url, details.sentry_dsn),
        "session": session,
        "csrf_token": session.csrf_token,
        "nav": "checks",
    }


def _timeline_drawings(
    marks: list[svg.TickMark], line: dashboard.Timeline, now: datetime, zone: tzinfo
) -> dict[str, Any]:
    """The tick rows (newest first), the timeline SVGs (wide and phone) and the duration chart."""
    return {
        "ticks": list(reversed(marks)),
        "timeline_svg": svg.timeline_svg(marks, line.since, line.until, now, zone=zone),
        "timeline_phone_svg": svg.timeline_svg(
            marks, line.since, line.until, now, width=420, max_marks=36, svg_id="timeline-phone", zone=zone
        ),
        "duration_svg": svg.duration_chart_svg([b for m in marks for b in m.runs]),
    }


class DashboardController(Controller):
    """The pages behind login. Every write (any POST) passes :func:`csrf_guard` first."""

    path = "/"
    include_in_schema = False
    exception_handlers = {**EXCEPTION_HANDLERS, NotFound: not_found}  # noqa: RUF012
    response_headers = SECURITY_HEADERS
    guards = [csrf_guard]  # noqa: RUF012

    # -- the checks list ------------------------------------------------------------------

    @route("/", http_method=[HttpMethod.GET, HttpMethod.HEAD])
    async def checks_page(
        self, request: Req, q: str = "", tag: str = "", status: str = "", page: str = "1", deleted: str = ""
    ) -> Template:
        """``?deleted=<name>`` after deleting a check (shown as text, escaped)."""
        session = await require_session(request)
        context = await _checks_context(request, session, q, tag, status, page)
        return _page("checks.html", session, deleted=deleted[:100], **context)

    @get("/fragments/checks")
    async def checks_fragment(
        self, request: Req, q: str = "", tag: str = "", status: str = "", page: str = "1"
    ) -> Template:
        """The live part of the checks page: summary bar, rows and pager (polled every 5 s)."""
        session = await require_session(request)
        context = await _checks_context(request, session, q, tag, status, page, with_tags=False)
        return _page("_checks_live.html", session, **context)

    # -- a check ----------------------------------------------------------------------------

    @get("/fragments/checks/{uuid:str}/header")
    async def check_header_fragment(self, request: Req, uuid: str) -> Template:
        """A check page's header (status, why, episode, last good run, next tick, output)."""
        session = await require_session(request)
        services = services_of(request.app.state)
        now = services.clock.now()
        found = await dashboard.check_header(
            services.engine, session.user.project_ids, _uuid(uuid), now, services.settings
        )
        return _page("_check_header.html", session, **_header_context(found, session, now))

    @get("/checks/{uuid:str}")
    async def check_page(
        self, request: Req, uuid: str, window: str = "auto", around: str | None = None, saved: str = ""
    ) -> Response[Any]:
        """A check's page; ``around`` (an ISO tick, as in ``#tick-…`` links) centres the window
        on that tick, so a notification's link to an old tick finds it."""
        session = await require_session(request)
        services = services_of(request.app.state)
        now = services.clock.now()
        if window not in dashboard.WINDOWS:
            window = "auto"
        uuid = _uuid(uuid)
        centre, around_error = _around(around)
        details = await dashboard.check_details(
            services.engine,
            session.user.project_ids,
            uuid,
            now,
            services.settings,
            services.channel_urls,
            window=window,
            centre=centre,
        )
        context = _check_context(details, session, now, services.settings.base_url)
        context.update(window=window, around_error=around_error, saved_message=SAVED_MESSAGES.get(saved, ""))
        row, line = details.header.row, details.timeline
        views = [
            v
            for v in line.views
            if v.runs or v.outcome not in ("no_run",) or v.scheduled >= row["created_at"]
        ]
        max_runtime = timedelta(seconds=row["max_runtime"])
        zone = user_zone(session)  # the axis speaks the zone the rest of the page does

        def render() -> str:
            # the SVGs and up to 500 tick rows are pure CPU work: off the event loop
            context.update(_timeline_drawings(_bars(views, max_runtime), line, now, zone))
            engine = request.app.template_engine
            assert engine is not None
            return str(engine.get_template("check.html").render(**context))

        html = await anyio.to_thread.run_sync(render)
        return Response(content=html, media_type=MediaType.HTML)

    async def _check_form_context(
        self, request: Req, session: users.Session, project_id: int | None
    ) -> dict[str, Any]:
        services = services_of(request.app.state)
        names, channels = await dashboard.form_choices(
            services.engine, session.user.project_ids, services.channel_urls, only=project_id
        )
        return {
            "projects": [(pid, names.get(pid, "")) for pid in session.user.project_ids],
            "channels": channels,
            "zones": zones(),
            "dialects": [d.value for d in Dialect],
            "nav": "checks",
        }

    @get("/checks/new")
    async def new_check_form(self, request: Req) -> Template:
        session = await require_session(request)
        context = await self._check_form_context(request, session, None)
        values = {
            "kind": "cron",
            "schedule": "",
            "tz": session.user.tz or "UTC",
            "dialect": "unix",
            "timeout": "86400",
            "grace": "3600",
            "max_runtime": "1800",
            "failure_threshold": "1",
            "recovery_threshold": "1",
        }
        return _page(
            "check_form.html",
            session,
            values=values,
            chosen=[],
            escalate_to=[],
            editing=None,
            errors={},
            **context,
        )

    @post("/checks/new", status_code=303)
    async def create_check(self, request: Req) -> Response[Any]:
        """Create a check from the form; every field's error is shown at once, next to it
        (:func:`monitor.services.checks.field_errors`), with what was typed kept."""
        session = await require_session(request)
        services = services_of(request.app.state)
        form = await _form(request)
        chosen = await _form_list(request, "channels")
        escalate_to = await _form_list(request, "escalate_to")
        data = check_form_data(form, chosen, escalate_to)
        now = services.clock.now()
        errors = {e.field: e.problem for e in check_service.field_errors(data, now)}
        project_id = int(form.get("project", "0")) if form.get("project", "").isdigit() else 0
        if project_id not in session.user.project_ids:
            errors["project"] = "pick one of your projects"
        status = 400
        if not errors:
            try:
                uuid = await check_service.create_from_form(
                    services.engine, project_id, data, now, shards=services.settings.shards
                )
                return Redirect(path=f"/checks/{uuid}", query_params={"saved": "created"}, status_code=303)
            except (ValidationError, Conflict) as error:
                errors, status = form_errors(error), 409 if isinstance(error, Conflict) else 400
        context = await self._check_form_context(request, session, None)
        return _page(
            "check_form.html",
            session,
            status_code=status,
            values=form,
            chosen=chosen,
            escalate_to=escalate_to,
            editing=None,
            errors=errors,
            **context,
        )

    @get("/checks/{uuid:str}/edit")
    async def edit_check_form(self, request: Req, uuid: str) -> Template:
        session = await require_session(request)
        services = services_of(request.app.state)
        row, chosen = await dashboard.check_and_channels(
            services.engine, session.user.project_ids, _uuid(uuid)
        )
        values, escalate_to = _stored_form(row, chosen)
        context = await self._check_form_context(request, session, row["project_id"])
        return _page(
            "check_form.html",
            session,
            values=values,
            chosen=chosen,
            escalate_to=escalate_to,
            editing=row,
            errors={},
            **context,
        )

    @post("/checks/{uuid:str}/edit", status_code=303)
    async def update_check(self, request: Req, uuid: str) -> Response[Any]:
        """Save the form's settings (as ``POST /api/v3/checks/<uuid>`` with them all); errors
        as in :meth:`create_check`."""
        session = await require_session(request)
        services = services_of(request.app.state)
        form = await _form(request)
        chosen = await _form_list(request, "channels")
        escalate_to = await _form_list(request, "escalate_to")
        uuid = _uuid(uuid)
        row = await dashboard.find_check(services.engine, session.user.project_ids, uuid)
        data = check_form_data(form, chosen, escalate_to)
        now = services.clock.now()
        errors = {e.field: e.problem for e in check_service.field_errors(data, now)}
        status = 400
        values = {**form, "project": str(row["project_id"])}
        if not errors:
            try:
                current = await check_service.update_unless_changed(
                    services.engine,
                    session.user.project_ids,
                    uuid,
                    data,
                    now,
                    version_of=_stored_version,
                    expected=form.get("version", ""),
                )
                if current is not None:
                    # another tab or user saved since this form was loaded (lost update)
                    values["version"] = current
                    raise Conflict(f"form: {CHANGED_SINCE_OPENED}")
                return Redirect(path=f"/checks/{uuid}", query_params={"saved": "saved"}, status_code=303)
            except (ValidationError, Conflict) as error:
                errors, status = form_errors(error), 409 if isinstance(error, Conflict) else 400
        context = await self._check_form_context(request, session, row["project_id"])
        return _page(
            "check_form.html",
            session,
            status_code=status,
            values=values,
            chosen=chosen,
            escalate_to=escalate_to,
            editing=row,
            errors=errors,
            **context,
        )

    async def _confirm_page(self, request: Req, uuid: str, action: str) -> Template:
        session = await require_session(request)
        services = services_of(request.app.state)
        row = await dashboard.find_check(services.engine, session.user.project_ids, _uuid(uuid))
        return _page(
            "confirm_check.html", session, check=row, action=action, name=_confirm_name(row), nav="checks"
        )

    @get("/checks/{uuid:str}/delete")
    async def delete_check_form(self, request: Req, uuid: str) -> Template:
        """Deleting asks the user to type the check's name (its slug or uuid when unnamed)."""
        return await self._confirm_page(request, uuid, "delete")

    @post("/checks/{uuid:str}/delete", status_code=303)
    async def delete_check(self, request: Req, uuid: str) -> Response[Any]:
        session = await require_session(request)
        services = services_of(request.app.state)
        form = await _form(request)
        uuid = _uuid(uuid)
        row, deleted = await check_service.delete_confirmed(
            services.engine, session.user.project_ids, uuid, form.get("confirm", "")
        )
        if not deleted:
            return _page(
                "confirm_check.html",
                session,
                status_code=400,
                check=row,
                action="delete",
                name=_confirm_name(row),
                error=f"confirm: type {_confirm_name(row)} to delete this check",
                nav="checks",
            )
        return Redirect(path="/", query_params={"deleted": _confirm_name(row)}, status_code=303)

    @get("/checks/{uuid:str}/pause")
    async def pause_form(self, request: Req, uuid: str) -> Template:
        return await self._confirm_page(request, uuid, "pause")

    @get("/checks/{uuid:str}/resume")
    async def resume_form(self, request: Req, uuid: str) -> Template:
        return await self._confirm_page(request, uuid, "resume")

    @post("/checks/{uuid:str}/pause", status_code=303)
    async def pause(self, request: Req, uuid: str) -> Response[Any]:
        return await self._pause_or_resume(request, uuid, resume=False)

    @post("/checks/{uuid:str}/resume", status_code=303)
    async def resume(self, request: Req, uuid: str) -> Response[Any]:
        return await self._pause_or_resume(request, uuid, resume=True)

    async def _pause_or_resume(self, request: Req, uuid: str, *, resume: bool) -> Response[Any]:
        session = await require_session(request)
        services = services_of(request.app.state)
        uuid = _uuid(uuid)
        try:
            await check_service.set_paused_in(
                services.engine, session.user.project_ids, uuid, services.clock.now(), paused=not resume
            )
        except Conflict as error:
            # resuming a check that is not paused: the API's 409 and its words, not a success
            row = await dashboard.find_check(services.engine, session.user.project_ids, uuid)
            return _page(
                "confirm_check.html",
                session,
                status_code=409,
                check=row,
                action="resume" if resume else "pause",
                name=_confirm_name(row),
                error=str(error),
                nav="checks",
            )
        return Redirect(
            path=f"/checks/{uuid}", query_params={"saved": "resumed" if resume else "paused"}, status_code=303
        )

    # -- cron explain -----------------------------------------------------------------------

    @get("/cron")
    async def cron_page(
        self, request: Req, schedule: str = "", tz: str = "UTC", dialect: str = "unix", count: str = "5"
    ) -> Template:
        session = await require_session(request)
        now = services_of(request.app.state).clock.now()
        context = _explain_context(schedule, tz, dialect, count, now)
        return _page("cron.html", session, zones=zones(), nav="cron", **context)

    @get("/fragments/cron")
    async def cron_fragment(
        self, request: Req, schedule: str = "", tz: str = "UTC", dialect: str = "unix", count: str = "5"
    ) -> Template:
        session = await require_session(request)
        now = services_of(request.app.state).clock.now()
        return _page("_cron_result.html", session, **_explain_context(schedule, tz, dialect, count, now))

    # -- channels ---------------------------------------------------------------------------

    async def _channels_page(
        self, request: Req, session: users.Session, *, status: int = 200, **extra: Any
    ) -> Template:
        services = services_of(request.app.state)
        names, listed = await channel_service.channels_overview(
            services.engine, session.user.project_ids, services.channel_urls
        )
        extra.setdefault("form", {})
        extra.setdefault("service", "slack")
        extra.setdefault("error_field", "")
        return _page(
            "channels.html",
            session,
            status_code=status,
            channels=listed,
            projects=[(pid, names.get(pid, "")) for pid in session.user.project_ids],
            kinds=sorted(channel_service.ALERT_KINDS),
            services=channel_forms.SERVICES,
            nav="channels",
            **extra,
        )

    @get("/channels")
    async def channels_page(
        self, request: Req, added: str = "", tested: str = "", done: str = ""
    ) -> Template:
        """``?added=1`` after adding a channel; ``?tested=<token>`` shows the stored result of a
        test notification this user sent (never text taken from the URL)."""
        session = await require_session(request)
        message, ok = "", False
        if added == "1":
            message, ok = "Channel added.", True
        elif done in DONE_MESSAGES:
            message, ok = DONE_MESSAGES[done], True
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
        services = services_of(request.app.state)
        form = await _form(request)
        kinds = await _form_list(request, "kinds")
        service = form.get("service", "apprise")
        try:
            project_id = int(form.get("project", "0")) if form.get("project", "").isdigit() else 0
            if project_id not in session.user.project_ids:
                raise ValidationError("project", "pick one of your projects")
            body: dict[str, Any] = {
                "name": form.get("name", ""),
                "url": channel_forms.apprise_url(service, form),
            }
            if kinds:
                body["kinds"] = kinds
            clean = await channel_service.validate_channel(
                body,
                partial=False,
                allow_private=services.settings.allow_private_targets,
                urls=services.channel_urls,
            )
            await channel_service.add_channel(services.engine, project_id, clean, services.clock.now())
        except ValidationError as error:
            safe = {k: v for k, v in form.items() if "password" not in k and "token" not in k}
            return await self._channels_page(
                request,
                session,
                status=400,
                error=str(error),
                error_field=error.field,
                form={**safe, "kinds": kinds},
                service=service,
            )
        return Redirect(path="/channels", query_params={"added": "1"}, status_code=303)

    async def _channel_form(
        self, request: Req, session: users.Session, channel_id: str, *, status: int = 200, **extra: Any
    ) -> Template:
        services = services_of(request.app.state)
        row, checks = await channel_service.channel_with_checks(
            services.engine, session.user.project_ids, channel_id
        )
        channel = channel_service.channel_to_dict(row, services.channel_urls)
        version = channel_service.channel_version(row, {c["id"] for c in checks if c["routed"]})
        return _page(
            "channel_form.html",
            session,
            status_code=status,
            channel=channel,
            checks=checks,
            version=version,
            kinds=sorted(channel_service.ALERT_KINDS),
            nav="channels",
            **extra,
        )

    @get("/channels/{channel_id:str}/edit")
    async def edit_channel_form(self, request: Req, channel_id: str) -> Template:
        session = await require_session(request)
        return await self._channel_form(request, session, channel_id)

    @post("/channels/{channel_id:str}/edit", status_code=303)
    async def update_channel(self, request: Req, channel_id: str) -> Response[Any]:
        """Name, URL (the masked URL sent back keeps the stored secrets), kinds, default, and
        which of the project's checks notify it (each check changed through the check service,
        as ``POST /api/v3/checks/<uuid>`` with ``channels`` would)."""
        session = await require_session(request)
        services = services_of(request.app.state)
        form = await _form(request)
        kinds = await _form_list(request, "kinds")
        wanted = {int(c) for c in await _form_list(request, "checks") if c.isdigit()}
        body = {
            "name": form.get("name", ""),
            "url": form.get("url", ""),
            "kinds": kinds,
            "default": form.get("default") == "on",
        }
        try:
            await channel_service.edit_channel(
                services.engine,
                session.user.project_ids,
                channel_id,
                body,
                allow_private=services.settings.allow_private_targets,
                urls=services.channel_urls,
                routed=wanted,
                now=services.clock.now(),
                expected=form.get("version", ""),
            )
        except (ValidationError, Conflict) as error:
            # a conflict (another tab saved first) shows the stored channel and its new version
            status = 409 if isinstance(error, Conflict) else 400
            return await self._channel_form(request, session, channel_id, status=status, error=str(error))
        return Redirect(path="/channels", query_params={"done": "saved"}, status_code=303)

    @get("/channels/{channel_id:str}/delete")
    async def delete_channel_form(self, request: Req, channel_id: str) -> Template:
        session = await require_session(request)
        services = services_of(request.app.state)
        row, count = await channel_service.channel_with_count(
            services.engine, session.user.project_ids, channel_id
        )
        return _page(
            "confirm_channel.html",
            session,
            channel=channel_service.channel_to_dict(row, services.channel_urls),
            checks=count,
            nav="channels",
        )

    @post("/channels/{channel_id:str}/delete", status_code=303)
    async def delete_channel(self, request: Req, channel_id: str) -> Response[Any]:
        session = await require_session(request)
        services = services_of(request.app.state)
        await channel_service.remove_own_channel(services.engine, session.user.project_ids, channel_id)
        return Redirect(path="/channels", query_params={"done": "deleted"}, status_code=303)

    @post("/channels/{channel_id:str}/test", status_code=303)
    async def test_channel(self, request: Req, channel_id: str) -> Response[Any]:
        session = await require_session(request)
        services = services_of(request.app.state)
        row = await channel_service.find_own_channel(services.engine, session.user.project_ids, channel_id)
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

    # -- users (project admins) -------------------------------------------------------------

    async def _users_page(
        self, request: Req, session: users.Session, *, status: int = 200, **extra: Any
    ) -> Template:
        services = services_of(request.app.state)
        admin_of = list(session.user.admin_project_ids)
        names, members = await users.members_overview(services.engine, admin_of)
        extra.setdefault("form", {})
        return _page(
            "users.html",
            session,
            status_code=status,
            members=members,
            projects=[(pid, names.get(pid, "")) for pid in admin_of],
            nav="users",
            **extra,
        )

    @get("/users")
    async def users_page(self, request: Req, done: str = "") -> Template:
        """The users of the projects the user administers (others see why they cannot)."""
        session = await require_session(request)
        return await self._users_page(request, session, message=DONE_MESSAGES.get(done, ""))

    def _admin_project(self, session: users.Session, text: str) -> int:
        project_id = int(text) if text.isdigit() else 0
        if project_id not in session.user.admin_project_ids:
            raise ValidationError("project", "pick a project you administer")
        return project_id

    @post("/users", status_code=303)
    async def create_user(self, request: Req) -> Response[Any]:
        """Create a user with a first password, in the projects ticked (the admin tells them)."""
        session = await require_session(request)
        services = services_of(request.app.state)
        form = await _form(request)
        ticked = await _form_list(request, "projects")
        try:
            project_ids = [self._admin_project(session, p) for p in ticked]
            if not project_ids:
                raise ValidationError("projects", "tick at least one project")
            await users.add_user(
                services.engine,
                form.get("email", ""),
                form.get("password", ""),
                project_ids,
                services.clock.now(),
                admin=form.get("admin") == "on",
            )
        except (ValidationError, Conflict) as error:
            return await self._users_page(
                request, session, status=400, error=str(error), form={"email": form.get("email", "")}
            )
        return Redirect(path="/users", query_params={"done": "user-created"}, status_code=303)

    @post("/users/members", status_code=303)
    async def change_membership(self, request: Req) -> Response[Any]:
        """Add an existing user (by ``email``) or a listed one (``user``) to a project, change
        their role, or remove them (``action`` add | admin | member | remove)."""
        session = await require_session(request)
        services = services_of(request.app.state)
        form = await _form(request)
        action = form.get("action", "")
        try:
            project_id = self._admin_project(session, form.get("project", ""))
            await users.change_membership(
                services.engine,
                project_id,
                user=form.get("user", ""),
                email=form.get("email", ""),
                action=action,
            )
        except (ValidationError, Conflict, NotFound) as error:
            return await self._users_page(request, session, status=400, error=str(error))
        return Redirect(path="/users", query_params={"done": f"user-{action}"}, status_code=303)

    # -- the user's own settings ------------------------------------------------------------

    @get("/account")
    async def account_page(self, request: Req, done: str = "") -> Template:
        session = await require_session(request)
        return _page(
            "account.html", session, zones=zones(), message=DONE_MESSAGES.get(done, ""), nav="account"
        )

    @post("/account", status_code=303)
    async def save_account(self, request: Req) -> Response[Any]:
        session = await require_session(request)
        services = services_of(request.app.state)
        form = await _form(request)
        try:
            stored = await users.save_zone(services.engine, session.user.id, form.get("tz", ""))
        except ValidationError as error:
            return _page(
                "account.html",
                session,
                status_code=400,
                zones=zones(),
                error=str(error),
                typed=form.get("tz", ""),
                nav="account",
            )
        # an empty field (or UTC) is the default: say so rather than save it silently
        done = "zone-saved" if stored else "zone-default"
        return Redirect(path="/account", query_params={"done": done}, status_code=303)


SAVED_MESSAGES = {
    "created": "Check created. Send its first ping to start watching it.",
    "saved": "Check saved.",
    "paused": "Check paused.",
    "resumed": "Check resumed; it is new until its next run ping.",
}

DONE_MESSAGES = {
    "saved": "Channel saved.",
    "deleted": "Channel deleted.",
    "user-created": "User created. Tell them their email and first password.",
    "user-add": "User added to the project.",
    "user-admin": "The user is now an admin of the project.",
    "user-member": "The user is now a plain member of the project.",
    "user-remove": "User removed from the project.",
    "zone-saved": "Time zone saved.",
    "zone-default": "Time zone saved: the default, UTC (an empty field means UTC).",
}
"""Confirmations a redirect names by key (``?done=…``): never text taken from the URL."""


_confirm_name = check_service.confirm_name


def template_globals() -> dict[str, Any]:
    """Values every template may use (colours, labels)."""
    return {
        "OUTCOME_COLORS": OUTCOME_COLORS,
        "OUTCOME_GLYPHS": OUTCOME_GLYPHS,
        "STATUS_GLYPHS": STATUS_GLYPHS,
        "OUTCOME_LABELS": OUTCOME_LABELS,
        "STATUS_COLORS": STATUS_COLORS,
        "STATUS_LABELS": STATUS_LABELS,
        "tick_id": svg.tick_id,
    }
