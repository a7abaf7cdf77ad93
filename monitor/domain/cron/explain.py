"""Cron explain: decoded fields, a plain-English description, warnings and the next ticks.

The payload is DESIGN §4's ``GET /api/v3/cron/explain`` body (also printed by
``monitor cron explain``)::

    {"schedule", "tz", "dialect", "fields": [{"name", "value", "meaning"}], "description",
     "warnings": [...], "next": [{"utc": "...Z", "local": "...+02:00"}]}

Pure: ``after`` is always passed in; nothing here reads the clock. ``after`` must lie in years
1900-9000 (UTC): far enough from the engine's range (years 2-9997) that every schedule without a
quartz year list still has its next ticks, so "never fires after" is only ever said of a year
list that has run out.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.domain.cron.schedules import (
    CronSchedule,
    Dialect,
    ParsedField,
    ensure_fires_after,
    format_utc,
    offset_changes,
    parse_cron,
    validate_zone,
)
from monitor.domain.cron.wording import consecutive_runs, join_and, ordinal
from monitor.domain.errors import ValidationError

__all__ = ["describe", "explain"]

MAX_COUNT = 100
MAX_SCHEDULE_LENGTH = 200  # as the checks API (monitor.services.checks)
# `after` bounds (UTC, inclusive years): a schedule's next ticks lie within 401 years of
# `after` (the Gregorian cycle), which stays inside the engine's years 2-9997
MIN_AFTER_YEAR, MAX_AFTER_YEAR = 1900, 9000
_AFTER_LO = datetime(MIN_AFTER_YEAR, 1, 1, tzinfo=UTC)
_AFTER_HI = datetime(MAX_AFTER_YEAR + 1, 1, 1, tzinfo=UTC)
_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_NTH = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}
_UNITS = {"second": "second", "minute": "minute", "hour": "hour", "day of month": "day", "month": "month"}


def _step_of(text: str) -> int | None:
    """The step of a ``*/n`` field text, else None."""
    if text.startswith("*/") and text[2:].isdigit():
        return int(text[2:])
    return None


def _days_of_week(values: frozenset[int]) -> list[str]:
    """Week order, Monday first; runs of three days or more as ranges.

    {1..5} -> ['Monday to Friday']; {1, 3, 5, 0} -> ['Monday', 'Wednesday', 'Friday', 'Sunday'];
    {5, 6, 0, 1} -> ['Friday to Monday'] (a run over the weekend).
    """
    runs = consecutive_runs(sorted((d + 6) % 7 for d in values))  # Monday = 0 .. Sunday = 6
    if len(runs) > 1 and runs[0][0] == 0 and runs[-1][1] == 6:
        merged = (runs[-1][0], runs[0][1] + 7)
        if merged[1] - merged[0] >= 2:  # FRI-MON; Sunday and Monday alone stay in week order
            runs = [*runs[1:-1], merged]
    parts: list[str] = []
    for a, b in runs:
        if b - a >= 2:
            parts.append(f"{_DAYS[(a + 1) % 7]} to {_DAYS[(b + 1) % 7]}")
        else:
            parts.extend(_DAYS[(k + 1) % 7] for k in range(a, b + 1))
    return parts


def _list_numbers(values: frozenset[int], fmt: str = "{}") -> str:
    parts = []
    for a, b in consecutive_runs(sorted(values)):
        parts.append(fmt.format(a) if a == b else f"{fmt.format(a)}–{fmt.format(b)}")
    return join_and(parts)


def _dom_phrase(f: ParsedField) -> str:
    """'the 13th', 'the 1st and 15th', 'the last day', ... (no 'of the month')."""
    parts: list[str] = []
    step = _step_of(f.text)
    if step and step > 1:
        parts.append(f"every {ordinal(step)} day from the 1st")
    elif f.values and len(f.values) < 31:
        runs = consecutive_runs(sorted(f.values))
        items = [ordinal(a) if a == b else f"{ordinal(a)}–{ordinal(b)}" for a, b in runs]
        parts.append("the " + join_and(items))
    if f.last:
        parts.append("the last day")
    for n in sorted(f.last_offsets):
        parts.append(f"{n} day{'s' if n > 1 else ''} before the last day" if n else "the last day")
    if f.last_weekday:
        parts.append("the last weekday")
    for n in sorted(f.nearest):
        parts.append(f"the weekday nearest the {ordinal(n)}")
    return join_and(parts) if parts else "any day"


def _dow_parts(f: ParsedField, every: bool = False) -> list[str]:
    """'Monday', 'the third Friday', 'the last Friday' ...; ``every``: 'every Monday and Friday'."""
    parts: list[str] = []
    if f.values and len(f.values) < 7:
        days = _days_of_week(f.values)
        parts.extend([f"every {join_and(days)}"] if every else days)
    parts.extend(f"the {_NTH[k]} {_DAYS[day]}" for day, k in sorted(f.nth))
    parts.extend(f"the last {_DAYS[day]}" for day in sorted(f.last_dow))
    return parts


def _dow_phrase(f: ParsedField) -> str:
    return join_and(_dow_parts(f)) or "any day of the week"


def _on(phrase: str) -> str:
    """'on the 13th', 'on Sunday'; not before a count ('3 days before the last day')."""
    return phrase if phrase[:1].isdigit() else f"on {phrase}"


def _field_meaning(f: ParsedField) -> str:
    """A short meaning of one field for the ``fields`` list."""
    text = f.text
    if f.kind == "day of month":
        if text in ("*", "?"):
            return "any day of the month" + (" ('?' = no specific value)" if text == "?" else "")
        return _dom_phrase(f) + " of the month"
    if f.kind == "day of week":
        if text in ("*", "?"):
            return "any day of the week" + (" ('?' = no specific value)" if text == "?" else "")
        return _dow_phrase(f)
    if f.kind == "month":
        if text == "*":
            return "every month"
        return join_and(
            [
                _MONTHS[a - 1] if a == b else f"{_MONTHS[a - 1]} to {_MONTHS[b - 1]}"
                for a, b in consecutive_runs(sorted(f.values))
            ]
        )
    unit = _UNITS.get(f.kind, f.kind)
    if text == "*":
        return f"every {unit}"
    if f.kind == "year":
        return "in " + _list_numbers(f.values)
    step = _step_of(text)
    if step:
        return f"every {step} {unit}s ({_list_numbers(f.values)})" if step > 1 else f"every {unit}"
    plural = "s" if len(f.values) > 1 else ""
    return f"{unit}{plural} {_list_numbers(f.values)}"


def _time_phrase(sec: ParsedField | None, minute: ParsedField, hour: ParsedField) -> str:
    seconds = sorted(sec.values) if sec else [0]
    minutes, hours = sorted(minute.values), sorted(hour.values)
    hour_all = len(hours) == 24
    # one time (or a few) a day: "At 03:00", "At 09:00 and 17:30"
    if len(seconds) == 1 and len(minutes) * len(hours) <= 4 and not hour_all:
        fmt = "{:02d}:{:02d}" if seconds[0] == 0 else "{:02d}:{:02d}:" + f"{seconds[0]:02d}"
        return "At " + join_and([fmt.format(h, m) for h in hours for m in minutes])
    # the sub-hour part
    if sec is not None and sec.text not in ("0",):
        step = _step_of(sec.text)
        if sec.text == "*":
            lead = "Every second"
        elif step:
            lead = f"Every {step} seconds"
        else:
            lead = f"At second {_list_numbers(sec.values)}"
        if minute.text != "*":
            lead += f", minute {_list_numbers(minute.values)}"
    elif minute.text == "*":
        lead = "Every minute"
    elif _step_of(minute.text):
        lead = f"Every {_step_of(minute.text)} minutes"
    else:
        label = "minutes" if len(minutes) > 1 else "minute"
        lead = f"At {label} {_list_numbers(minute.values)}"
        if hour_all:
            return lead + " past every hour"
    if hour_all:
        return lead
    step = _step_of(hour.text)
    if step:
        return f"{lead}, every {step} hours"
    spans = [f"{a:02d}:00–{b:02d}:59" for a, b in consecutive_runs(hours)]
    return f"{lead}, {join_and(spans)}"


def _day_phrase(dom: ParsedField, dow: ParsedField, day_or: bool) -> str:
    dom_any = dom.text in ("*", "?")
    dow_any = dow.text in ("*", "?") or (len(dow.values) == 7 and not dow.nth and not dow.last_dow)
    if (dom_any and dow_any) or (dow_any and len(dom.values) == 31 and not day_or):
        return "every day"
    if dom_any and dow_any:
        return "every day"
    if day_or:
        return f"{_on(_dom_phrase(dom))} of the month and on {join_and(_dow_parts(dow, every=True))}"
    if dom_any:
        phrase = _dow_phrase(dow)
        if dow.nth or dow.last_dow:
            return f"on {phrase} of the month"
        return phrase if " to " in phrase else f"on {phrase}"  # 'Monday to Friday', 'on Sunday'
    if dow_any:
        return f"{_on(_dom_phrase(dom))} of the month"
    return f"{_on(_dom_phrase(dom))} of the month, if it is {_dow_phrase(dow)}"


def describe(schedule: CronSchedule) -> str:
    """A plain-English description: ``"At 03:00, every day"``,
    ``"Every 15 minutes, 09:00–17:59, Monday to Friday"``.

    Args:
        schedule: a parsed schedule.

    Returns:
        One sentence without a final period.
    """
    by = {f.kind: f for f in schedule.fields}
    dom, dow = by["day of month"], by["day of week"]
    day_or = not dom.star and not dow.star
    parts = [_time_phrase(by.get("second"), by["minute"], by["hour"]), _day_phrase(dom, dow, day_or)]
    month = by["month"]
    if month.text != "*":
        parts.append("in " + _field_meaning(month))
    year = by.get("year")
    if year is not None and year.text != "*":
        parts.append(_field_meaning(year))
    return ", ".join(parts)


def _or_trap_warning(schedule: CronSchedule, dom: ParsedField, dow: ParsedField) -> str:
    """The DOM/DOW OR trap: what fires, and how to get "both" (cron cannot AND the two fields)."""
    text = (
        f"fires {_on(_dom_phrase(dom))} AND on {join_and(_dow_parts(dow, every=True))}: when both day of "
        "month and day of week are restricted, cron runs on days matching either (Vixie/Debian rule) "
        "and cannot require both; to run only on days matching both, keep the day-of-week field, set "
        "day of month to '*' and test the day in the command"
    )
    plain_dom = not (dom.last or dom.last_weekday or dom.last_offsets or dom.nearest)
    if plain_dom and len(dom.values) == 1:
        day = min(dom.values)
        line = " ".join("*" if f is dom else f.text for f in schedule.fields)
        text += f', e.g. `{line} [ "$(date +\\%d)" = {day:02d} ] && your-command`'
    else:
        text += ', e.g. `[ "$(date +\\%d)" = 13 ] && your-command`'
    text += " ('%' must be written '\\%' in a crontab)"
    # the n-th weekday written as a 7-day block ('1-7' with a weekday): '#' says it directly
    first = min(dom.values) if dom.values else 0
    week_block = plain_dom and first % 7 == 1 and dom.values == frozenset(range(first, first + 7))
    if week_block and dow.values and not dow.nth and not dow.last_dow:
        k = (first + 6) // 7
        text += (
            f"; for the {_NTH[k]} {_DAYS[min(dow.values)]} of the month, this service also accepts "
            f"'{min(dow.values)}#{k}' in day of week with '*' in day of month (Debian's cron does not)"
        )
    return text


def _debian_warnings(schedule: CronSchedule) -> list[str]:
    if schedule.dialect is Dialect.QUARTZ:
        return []  # L, W, LW, nL, # and wrap-around ranges are Quartz's own syntax
    out = []
    for f in schedule.fields:
        what = []
        if f.last or f.last_offsets:
            what.append("'L' (last day)")
        if f.last_weekday:
            what.append("'LW' (last weekday)")
        if f.nearest:
            what.append("'W' (nearest weekday)")
        if f.last_dow:
            what.append("'nL' (last weekday n of the month)")
        if f.nth:
            what.append("'#' (n-th weekday of the month)")
        if f.wraps:
            what.append("wrap-around ranges")
        if what:
            out.append(
                f"field {f.position} ({f.kind}) '{f.text}' uses {join_and(what)}, which Debian's cron "
                "does not support: this service accepts it, but the same line in a system crontab will "
                "not run as described"
            )
    return out


def _quartz_looking(schedule: CronSchedule) -> list[str]:
    dow = next(f for f in schedule.fields if f.kind == "day of week")
    dom = next(f for f in schedule.fields if f.kind == "day of month")
    out = []
    for f in (dom, dow):
        if f.text == "?":
            out.append(
                f"field {f.position} ({f.kind}) is '?', which is Quartz syntax: "
                f"in '{schedule.dialect.value}' it means the same as '*'"
            )
    if "-7" in dow.text and not dow.text.startswith("0"):
        out.append(
            f"field {dow.position} (day of week) '{dow.text}' looks like Quartz numbering (1 = Sunday); in "
            f"'{schedule.dialect.value}' 1 is Monday and both 0 and 7 are Sunday ({_dow_phrase(dow)}); "
            "use dialect 'quartz' if the expression comes from Quartz"
        )
    return out


def _fmt_local(instant: datetime, tz: str) -> str:
    return instant.astimezone(validate_zone(tz)).isoformat()


def _utc(instant: datetime) -> str:
    return format_utc(instant)


def _duration(seconds: int) -> str:
    """'1 hour', '30 minutes', '24 hours', '6 minutes 32 seconds'."""
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    units = ((h, "hour"), (m, "minute"), (s, "second"))
    return " ".join(f"{n} {unit}{'s' if n != 1 else ''}" for n, unit in units if n)


def _offset_text(seconds: int) -> str:
    sign = "+" if seconds >= 0 else "-"
    h, rest = divmod(abs(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{sign}{h:02d}:{m:02d}" + (f":{s:02d}" if s else "")


def _wall_span(a: datetime, b: datetime) -> str:
    """Naive wall times [a, b): '02:00–03:00', or with dates when the span crosses a day."""
    fmt = "%H:%M:%S" if a.second or b.second else "%H:%M"
    if a.date() == b.date():
        return f"{a.strftime(fmt)}–{b.strftime(fmt)}"
    return f"{a.date().isoformat()} {a.strftime(fmt)} to {b.date().isoformat()} {b.strftime(fmt)}"


def _dst_warnings(schedule: CronSchedule, after: datetime, ticks: list[datetime]) -> list[str]:
    """Warnings for the zone's UTC-offset changes (DST or any other) among the listed ticks.

    Each names the change by the local date on which it happens (the wall clock before it):
    Pacific/Apia's date-line change skipped 2011-12-30.
    """
    if not ticks:
        return []
    zone = validate_zone(schedule.tz)
    out = []
    tick_set = set(ticks)
    for at, before, after_off in offset_changes(schedule.tz, after, ticks[-1]):
        wall_before = (at + timedelta(seconds=before)).replace(tzinfo=None)
        wall_after = (at + timedelta(seconds=after_off)).replace(tzinfo=None)
        change = (
            f"the UTC offset changes on {wall_before.date().isoformat()} "
            f"({_offset_text(before)} to {_offset_text(after_off)})"
        )
        span = _duration(abs(after_off - before))
        if after_off > before:  # gap: wall times [at+before, at+after) do not exist
            gap = f"a gap that skips {span} of wall time ({_wall_span(wall_before, wall_after)})"
            if at in tick_set and schedule.is_fixed_time:
                local = at.astimezone(zone)
                out.append(
                    f"the tick at {_utc(at)} ({local.strftime('%H:%M %Z')}) is a catch-up: {change}, "
                    f"{gap}, so a fixed-time schedule fires once at the first instant after the gap"
                )
            elif not schedule.is_fixed_time and schedule.matches_wall_between(wall_before, wall_after):
                out.append(f"{change}, {gap}; wildcard ticks that would fall inside it do not exist")
        else:  # overlap: wall times [at+after, at+before) occur twice
            window = [
                t
                for t in ticks
                if at.timestamp() - (before - after_off)
                <= t.timestamp()
                < at.timestamp() + (before - after_off)
            ]
            if not window:
                continue
            overlap = f"an overlap that repeats {span} of wall time ({_wall_span(wall_after, wall_before)})"
            if schedule.is_fixed_time:
                out.append(f"{change}, {overlap}; a fixed-time schedule fires once, at the first occurrence")
            else:
                out.append(
                    f"{change}, {overlap}; a wildcard schedule fires at every real occurrence, so wall "
                    "times repeat in the list"
                )
    return out


def explain(
    expression: str,
    *,
    dialect: str | Dialect = "unix",
    tz: str = "UTC",
    count: int = 5,
    after: datetime,
) -> dict[str, Any]:
    """Explain a cron expression (DESIGN §4, ``GET /api/v3/cron/explain``).

    Args:
        expression: the cron expression. dialect: ``unix``, ``seconds``, ``quartz`` or
            ``oncalendar`` (explained by :mod:`monitor.domain.cron.calendar_explain`).
        tz: an IANA zone name. count: how many next ticks, 1-100.
        after: an aware instant; the listed ticks are strictly after it (callers pass now).

    Returns:
        ``{"schedule", "tz", "dialect", "fields": [{"name", "value", "meaning"}],
        "description", "warnings": [str], "next": [{"utc": "...Z", "local": "...+02:00"}]}``.

    Raises:
        ValidationError: ``expression`` longer than 200 characters (field ``"schedule"``),
            ``count`` outside 1-100 (``"count"``), ``after`` naive or outside years 1900-9000
            (``"after"``).
        ScheduleError: a malformed expression, or one that never fires (after ``after``).
        ZoneError: an unknown or fixed-offset zone.
    """
    _check_arguments(expression, count, after)
    schedule = parse_cron(expression, dialect, tz)
    ensure_fires_after(schedule, after)
    if schedule.dialect is Dialect.ONCALENDAR:  # systemd calendar events have their own fields
        from monitor.domain.cron import calendar_events, calendar_explain

        assert isinstance(schedule, calendar_events.OnCalendarSchedule)
        return calendar_explain.explain(schedule, after=after, count=count, tz=tz)
    ticks = schedule.next_ticks(after, count)
    warnings = _cron_warnings(schedule, after, ticks)
    return {
        "schedule": expression,
        "tz": schedule.tz,
        "dialect": schedule.dialect.value,
        "fields": [{"name": f.kind, "value": f.text, "meaning": _field_meaning(f)} for f in schedule.fields],
        "description": describe(schedule),
        "warnings": warnings,
        "next": [{"utc": _utc(t), "local": _fmt_local(t, tz)} for t in ticks],
    }


def _check_arguments(expression: str, count: int, after: datetime) -> None:
    """The arguments of :func:`explain` that are not the schedule's own (see its Raises)."""
    if isinstance(expression, str) and len(expression) > MAX_SCHEDULE_LENGTH:
        raise ValidationError(
            "schedule", f"must be at most {MAX_SCHEDULE_LENGTH} characters, got {len(expression)}"
        )
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise ValidationError("count", f"must be a whole number from 1 to {MAX_COUNT}, got {count!r}")
    if after.tzinfo is None or after.utcoffset() is None:
        raise ValidationError("after", "has no UTC offset; add 'Z' or '+02:00'")
    if not _AFTER_LO <= after < _AFTER_HI:  # aware comparison: no overflow at years 1 and 9999
        raise ValidationError(
            "after", f"outside the supported range (years {MIN_AFTER_YEAR}-{MAX_AFTER_YEAR})"
        )


def _cron_warnings(schedule: CronSchedule, after: datetime, ticks: list[datetime]) -> list[str]:
    """The warnings of a cron (not ``oncalendar``) schedule's explain payload, in order."""
    by = {f.kind: f for f in schedule.fields}
    dom, dow = by["day of month"], by["day of week"]
    warnings: list[str] = []
    if not dom.star and not dow.star:
        warnings.append(_or_trap_warning(schedule, dom, dow))
    if schedule.dialect is not Dialect.QUARTZ:
        warnings.extend(_quartz_looking(schedule))
    warnings.extend(_debian_warnings(schedule))
    warnings.extend(_dst_warnings(schedule, after, ticks))
    if schedule.dialect is Dialect.QUARTZ:
        warnings.append(
            "real Quartz handles DST differently (it may skip or repeat runs at offset changes); this "
            "service applies the Vixie rule: fixed-time ticks in a gap fire once after it, and once "
            "at the first occurrence in an overlap"
        )
    return warnings
