"""Cron explain: decoded fields, a plain-English description, warnings and the next ticks.

The payload is DESIGN §4's ``GET /api/v3/cron/explain`` body (also printed by
``monitor cron explain``)::

    {"schedule", "tz", "dialect", "fields": [{"name", "value", "meaning"}], "description",
     "warnings": [...], "next": [{"utc": "...Z", "local": "...+02:00"}]}

Pure: ``after`` is always passed in; nothing here reads the clock.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.domain.errors import ValidationError
from monitor.domain.schedules import (
    CronSchedule,
    Dialect,
    ParsedField,
    ensure_fires_after,
    offset_changes,
    parse_cron,
    validate_zone,
)

__all__ = ["describe", "explain"]

MAX_COUNT = 100
_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_NTH = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}
_UNITS = {"second": "second", "minute": "minute", "hour": "hour", "day of month": "day", "month": "month"}


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _and(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _runs(values: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs of sorted integers: [1,2,3,5] -> [(1,3), (5,5)]."""
    out: list[tuple[int, int]] = []
    for v in values:
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out


def _step_of(text: str) -> int | None:
    """The step of a ``*/n`` field text, else None."""
    if text.startswith("*/") and text[2:].isdigit():
        return int(text[2:])
    return None


def _days_of_week(values: frozenset[int]) -> str:
    """Monday-first runs: {1..5} -> 'Monday to Friday'."""
    order = sorted(values, key=lambda d: (d + 6) % 7)  # Monday first, Sunday last
    keyed = [(d + 6) % 7 for d in order]
    runs = _runs(keyed)
    if len(runs) > 1 and runs[0][0] == 0 and runs[-1][1] == 6:  # wraps over the weekend: FRI-MON
        runs = [*runs[1:-1], (runs[-1][0], runs[0][1] + 7)]
    parts = []
    for a, b in runs:
        first, last = _DAYS[(a + 1) % 7], _DAYS[(b + 1) % 7]
        parts.append(first if a == b else f"{first} and {last}" if b == a + 1 else f"{first} to {last}")
    return _and(parts)


def _list_numbers(values: frozenset[int], fmt: str = "{}") -> str:
    parts = []
    for a, b in _runs(sorted(values)):
        parts.append(fmt.format(a) if a == b else f"{fmt.format(a)}–{fmt.format(b)}")
    return _and(parts)


def _dom_phrase(f: ParsedField) -> str:
    """'the 13th', 'the 1st and 15th', 'the last day', ... (no 'of the month')."""
    parts: list[str] = []
    step = _step_of(f.text)
    if step and step > 1:
        parts.append(f"every {_ordinal(step)} day from the 1st")
    elif f.values and len(f.values) < 31:
        runs = _runs(sorted(f.values))
        items = [_ordinal(a) if a == b else f"{_ordinal(a)}–{_ordinal(b)}" for a, b in runs]
        parts.append("the " + _and(items))
    if f.last:
        parts.append("the last day")
    for n in sorted(f.last_offsets):
        parts.append(f"{n} days before the last day" if n else "the last day")
    if f.last_weekday:
        parts.append("the last weekday")
    for n in sorted(f.nearest):
        parts.append(f"the weekday nearest the {_ordinal(n)}")
    return _and(parts) if parts else "any day"


def _dow_phrase(f: ParsedField) -> str:
    parts: list[str] = []
    if f.values and len(f.values) < 7:
        parts.append(_days_of_week(f.values))
    for day, k in sorted(f.nth):
        parts.append(f"the {_NTH[k]} {_DAYS[day]}")
    for day in sorted(f.last_dow):
        parts.append(f"the last {_DAYS[day]}")
    return _and(parts) if parts else "any day of the week"


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
        return _and([_MONTHS[a - 1] if a == b else f"{_MONTHS[a - 1]} to {_MONTHS[b - 1]}"
                     for a, b in _runs(sorted(f.values))])
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
        return "At " + _and([fmt.format(h, m) for h in hours for m in minutes])
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
    spans = [f"{a:02d}:00–{b:02d}:59" for a, b in _runs(hours)]
    return f"{lead}, {_and(spans)}"


def _day_phrase(dom: ParsedField, dow: ParsedField, day_or: bool) -> str:
    dom_any = dom.text in ("*", "?")
    dow_any = dow.text in ("*", "?") or (len(dow.values) == 7 and not dow.nth and not dow.last_dow)
    if (dom_any and dow_any) or (dow_any and len(dom.values) == 31 and not day_or):
        return "every day"
    if dom_any and dow_any:
        return "every day"
    if day_or:
        return f"on {_dom_phrase(dom)} of the month and on every {_dow_phrase(dow)}"
    if dom_any:
        phrase = _dow_phrase(dow)
        return phrase if dow.values and not dow.nth and not dow.last_dow else f"on {phrase} of the month"
    if dow_any:
        return f"on {_dom_phrase(dom)} of the month"
    return f"on {_dom_phrase(dom)} of the month, if it is {_dow_phrase(dow)}"


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


def _debian_warnings(schedule: CronSchedule) -> list[str]:
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
                f"field {f.position} ({f.kind}) '{f.text}' uses {_and(what)}, which Debian's cron does not "
                "support: this service accepts it, but the same line in a system crontab will not run as "
                "described"
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
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dst_warnings(schedule: CronSchedule, after: datetime, ticks: list[datetime]) -> list[str]:
    if not ticks:
        return []
    zone = validate_zone(schedule.tz)
    out = []
    tick_set = set(ticks)
    for at, before, after_off in offset_changes(schedule.tz, after, ticks[-1]):
        delta = abs(after_off - before) // 60
        local = at.astimezone(zone)
        if after_off > before:  # gap: wall times [at+before, at+after) do not exist
            if at in tick_set and schedule.is_fixed_time:
                out.append(
                    f"the tick at {_utc(at)} ({local.strftime('%H:%M %Z')}) is a catch-up: the DST gap on "
                    f"{local.date().isoformat()} skips {delta} minutes of wall time, so a fixed-time "
                    "schedule fires once at the first instant after the gap"
                )
            elif not schedule.is_fixed_time and schedule.matches_wall_between(
                (at + timedelta(seconds=before)).replace(tzinfo=None),
                (at + timedelta(seconds=after_off)).replace(tzinfo=None),
            ):
                out.append(
                    f"the DST gap on {local.date().isoformat()} skips {delta} minutes of wall time before "
                    f"{local.strftime('%H:%M %Z')}; wildcard ticks that would fall inside it do not exist"
                )
        else:  # overlap: wall times [at+after, at+before) occur twice
            window = [t for t in ticks if at.timestamp() - (before - after_off) <= t.timestamp()
                      < at.timestamp() + (before - after_off)]
            if not window:
                continue
            if schedule.is_fixed_time:
                out.append(
                    f"the DST overlap on {local.date().isoformat()} repeats {delta} minutes of wall time; "
                    "a fixed-time schedule fires once, at the first occurrence"
                )
            else:
                out.append(
                    f"the DST overlap on {local.date().isoformat()} repeats {delta} minutes of wall time; "
                    "a wildcard schedule fires at every real occurrence, so wall times repeat in the list"
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
        expression: the cron expression. dialect: ``unix``, ``seconds`` or ``quartz``.
        tz: an IANA zone name. count: how many next ticks, 1-100.
        after: an aware instant; the listed ticks are strictly after it (callers pass now).

    Returns:
        ``{"schedule", "tz", "dialect", "fields": [{"name", "value", "meaning"}],
        "description", "warnings": [str], "next": [{"utc": "...Z", "local": "...+02:00"}]}``.

    Raises:
        ValidationError: ``count`` outside 1-100 (field ``"count"``).
        ScheduleError: a malformed expression, or one that never fires (after ``after``).
        ZoneError: an unknown or fixed-offset zone.
    """
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise ValidationError("count", f"must be a whole number from 1 to {MAX_COUNT}, got {count!r}")
    schedule = parse_cron(expression, dialect, tz)
    ensure_fires_after(schedule, after)
    ticks = schedule.next_ticks(after, count)
    by = {f.kind: f for f in schedule.fields}
    dom, dow = by["day of month"], by["day of week"]
    warnings: list[str] = []
    if not dom.star and not dow.star:
        warnings.append(
            f"fires on {_dom_phrase(dom)} AND on every {_dow_phrase(dow)}: when both day of month and "
            "day of week are restricted, cron runs on days matching either (Vixie/Debian rule); to "
            "require both, start one of the fields with '*' (e.g. '*/1') or use '#'"
        )
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
    return {
        "schedule": expression,
        "tz": tz,
        "dialect": schedule.dialect.value,
        "fields": [{"name": f.kind, "value": f.text, "meaning": _field_meaning(f)} for f in schedule.fields],
        "description": describe(schedule),
        "warnings": warnings,
        "next": [{"utc": _utc(t), "local": _fmt_local(t, tz)} for t in ticks],
    }
