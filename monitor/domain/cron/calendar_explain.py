"""Explain for the ``oncalendar`` dialect: the same payload as cron explain (DESIGN §4).

``fields`` lists each line's components (``day of week``, ``date``, ``time``, ``time zone``;
prefixed ``line N:`` when there are several lines), ``description`` says in plain English when
each line fires, ``warnings`` name the offset changes (DST) among the listed ticks, saying what
this service does and where systemd's own timers differ, and ``next`` lists the ticks. Pure:
``after`` is passed in.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from monitor.domain.cron.calendar_events import CalendarLine, OnCalendarSchedule
from monitor.domain.cron.schedules import format_utc, offset_changes, validate_zone
from monitor.domain.cron.wording import consecutive_runs, join_and, ordinal

__all__ = ["describe", "explain"]

_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


def _weekdays(days: frozenset[int]) -> str:
    if len(days) == 7:
        return ""
    parts = [
        _WEEKDAYS[a] if a == b else f"{_WEEKDAYS[a]} to {_WEEKDAYS[b]}"
        for a, b in consecutive_runs(sorted(days))
    ]
    return "on " + join_and(parts)


def _values(values: list[int], lo: int, hi: int, name: str, word: Any = str) -> str:
    if len(values) == hi - lo + 1:
        return ""
    return join_and(
        [word(a) if a == b else f"{word(a)} to {word(b)}" for a, b in consecutive_runs(sorted(values))]
    )


def _times(line: CalendarLine) -> str:
    hours, minutes, seconds = list(line.hours), list(line.minutes), list(line.seconds)
    if len(hours) * len(minutes) * len(seconds) <= 6:
        stamps = [
            f"{h:02d}:{m:02d}" + (f":{s:02d}" if any(seconds) else "")
            for h in hours
            for m in minutes
            for s in seconds
        ]
        return "at " + join_and(stamps)
    if len(seconds) == 60:
        second = "every second"
    else:
        second = "" if seconds == [0] else f"at second {_values(seconds, 0, 59, 'second')}"
    minute = "every minute" if len(minutes) == 60 else f"at minute {_values(minutes, 0, 59, 'minute')}"
    hour = "of every hour" if len(hours) == 24 else f"past hour {_values(hours, 0, 23, 'hour')}"
    if second == "every second" and len(minutes) == 60:
        minute = ""
    return " ".join(p for p in (second, minute, hour) if p)


def _line_description(line: CalendarLine) -> str:
    parts = [_times(line)]
    if line.days or line.from_end:
        days = []
        if line.days and len(line.days) < 31:
            days.append(_values(sorted(line.days), 1, 31, "day", ordinal) + " day of the month")
        for n in sorted(line.from_end):
            days.append("the last day of the month" if n == 1 else f"the {ordinal(n)} last day of the month")
        if days:
            parts.append("on " + join_and(days))
    weekdays = _weekdays(line.weekdays)
    if weekdays:
        restricted_days = (line.days and len(line.days) < 31) or line.from_end
        # systemd ANDs the weekday with the date (no cron-style OR)
        parts.append("if it is a " + weekdays.removeprefix("on ") if restricted_days else weekdays)
    months = _values(list(line.months), 1, 12, "month", lambda m: _MONTHS[m - 1])
    if months:
        parts.append(f"in {months}")
    full_years = len(line.years) == 2199 - 1970 + 1
    if not full_years:
        parts.append(f"in {_values(list(line.years), 1970, 2199, 'year')}")
    parts.append(f"({line.tz})")
    return " ".join(p for p in parts if p)


def describe(schedule: OnCalendarSchedule) -> str:
    """A plain-English description of every line: ``At 02:30 on Monday to Friday (Europe/Berlin)``."""
    texts = [_line_description(line) for line in schedule.lines]
    text = "; and ".join(texts)
    return text[:1].upper() + text[1:]


def _fields(schedule: OnCalendarSchedule) -> list[dict[str, str]]:
    many = len(schedule.lines) > 1
    out = []
    for number, line in enumerate(schedule.lines, start=1):
        prefix = f"line {number}: " if many else ""
        weekday = _weekdays(line.weekdays).removeprefix("on ") or "every day of the week"
        out.append({"name": f"{prefix}day of week", "value": line.weekday_text or "*", "meaning": weekday})
        date_meaning = _date_meaning(line)
        out.append({"name": f"{prefix}date", "value": line.date_text or "*-*-*", "meaning": date_meaning})
        out.append({"name": f"{prefix}time", "value": line.time_text or "00:00:00", "meaning": _times(line)})
        zone_meaning = "the line's own zone" if line.explicit_tz else "the check's zone (tz)"
        out.append({"name": f"{prefix}time zone", "value": line.tz, "meaning": zone_meaning})
    return out


def _date_meaning(line: CalendarLine) -> str:
    parts = []
    full_years = len(line.years) == 2199 - 1970 + 1
    parts.append("any year" if full_years else "year " + _values(list(line.years), 1970, 2199, "year"))
    months = _values(list(line.months), 1, 12, "month", lambda m: _MONTHS[m - 1])
    parts.append(months or "any month")
    days = []
    if line.days:
        days.append("any day" if len(line.days) == 31 else "day " + _values(sorted(line.days), 1, 31, "day"))
    for n in sorted(line.from_end):
        days.append("the last day" if n == 1 else f"the {ordinal(n)} last day")
    parts.append(join_and(days))
    return ", ".join(parts)


def _offset_text(seconds: int) -> str:
    sign = "+" if seconds >= 0 else "-"
    h, rest = divmod(abs(seconds), 3600)
    m = rest // 60
    return f"{sign}{h:02d}:{m:02d}"


def _dst_warnings(schedule: OnCalendarSchedule, after: datetime, ticks: list[datetime]) -> list[str]:
    """Offset changes among the listed ticks, per line zone: our rule, and systemd's where it differs."""
    if not ticks:
        return []
    out: list[str] = []
    tick_set = set(ticks)
    for line in schedule.lines:
        for at, before, after_off in offset_changes(line.tz, after, ticks[-1] + timedelta(seconds=1)):
            wall_before = (at + timedelta(seconds=before)).replace(tzinfo=None)
            wall_after = (at + timedelta(seconds=after_off)).replace(tzinfo=None)
            change = (
                f"{line.tz} changes its UTC offset on {wall_before.date().isoformat()} "
                f"({_offset_text(before)} to {_offset_text(after_off)})"
            )
            lo = (wall_before - datetime(1970, 1, 1)).total_seconds()
            hi = (wall_after - datetime(1970, 1, 1)).total_seconds()
            if after_off > before:  # gap: wall times [wall_before, wall_after) do not exist
                if not line.wall_match_in(int(lo), int(hi) - 1):
                    continue
                if line.fixed:
                    detail = (
                        (
                            f"the tick at {format_utc(at)} is a catch-up for wall times in the gap: a "
                            "fixed-time schedule fires once at the first instant after it; systemd "
                            "skips such a time that day"
                        )
                        if at in tick_set
                        else (
                            "a fixed-time schedule fires once at the first instant after the gap; "
                            "systemd skips such a time that day"
                        )
                    )
                else:
                    detail = "wildcard ticks that would fall inside the gap do not exist (as in systemd)"
                out.append(f"{change}: {detail}")
            else:  # overlap: wall times [wall_after, wall_before) occur twice
                span = before - after_off
                near = [t for t in ticks if abs((t - at).total_seconds()) < span]
                if not near:
                    continue
                if line.fixed:
                    detail = "repeated wall times fire once, at the first occurrence (as in systemd)"
                else:
                    detail = (
                        "a wildcard schedule fires at every real occurrence of the repeated wall "
                        "times; systemd fires each only once, at its first occurrence"
                    )
                out.append(f"{change}: {detail}")
    return out


def explain(schedule: OnCalendarSchedule, *, after: datetime, count: int, tz: str) -> dict[str, Any]:
    """The DESIGN §4 explain payload for an ``oncalendar`` schedule.

    Args:
        schedule: a parsed schedule (:func:`monitor.domain.cron.calendar_events.parse_oncalendar`).
        after: an aware instant; the listed ticks are strictly after it.
        count: how many ticks (already validated, 1-100).
        tz: the zone ``local`` times are shown in (the check's ``tz``).

    Returns:
        ``{"schedule", "tz", "dialect", "fields", "description", "warnings", "next"}``.
    """
    ticks = schedule.next_ticks(after, count)
    zone = validate_zone(tz)
    warnings = _dst_warnings(schedule, after, ticks)
    if len(ticks) < count:
        last = schedule.last_tick()
        if last is not None:
            warnings.append(
                f"the schedule ends: its last tick is {format_utc(last)} (years end at 2199, as in systemd)"
            )
    return {
        "schedule": schedule.expression,
        "tz": schedule.tz,
        "dialect": schedule.dialect.value,
        "fields": _fields(schedule),
        "description": describe(schedule),
        "warnings": warnings,
        "next": [{"utc": format_utc(t), "local": t.astimezone(zone).isoformat()} for t in ticks],
    }
