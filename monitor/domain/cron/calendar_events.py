"""systemd calendar events (``OnCalendar=``): the ``oncalendar`` dialect (DESIGN §4, systemd.time(7)).

A schedule is one or more expressions separated by newlines, each optionally ending in an IANA
zone (``Mon..Fri 02:30 Europe/Berlin``); a line without a zone is read in the check's ``tz``.
Ticks are the union of the lines' ticks (an instant once).

Parsing is Healthchecks' own parser, the ``oncalendar`` package (cuu508/oncalendar), so exactly
the expressions Healthchecks accepts are accepted, with its error texts (``Bad hour``...):
weekday lists and ranges (``Mon,Wed``, ``Mon..Fri``), ``year-month-day`` with ``*``, lists,
``a..b`` ranges and ``/step`` repetitions, ``~`` for days counted from the month's end
(``*-02~1`` = the last day of February), ``hh:mm[:ss]``, and the shorthands ``minutely``,
``hourly``, ``daily``, ``weekly``, ``monthly``, ``yearly``/``annually``, ``quarterly``,
``semiannually``. Not accepted (as in Healthchecks): fractional seconds and ``*`` inside lists.
Years run 1970-2199 (systemd and the package stop at 2200).

Iteration is ours, in both directions: the package steps only forward (binding a ping needs the
tick at or before an instant) and follows systemd's DST behaviour rather than DESIGN §4's. We
search the wall clock over the package's parsed value sets, then apply DESIGN §4's DST rule per
UTC-offset segment of the zone, as for the cron dialects:

* *fixed-time* = none of the hour, minute and second components starts with ``*`` (``02:30``,
  ``00/2:00``); otherwise *wildcard* (``*:00``, ``hourly``).
* Spring-forward gap: a fixed-time line whose wall time the gap swallows fires once, at the
  first instant after the gap; wildcard ticks inside a gap do not exist.
* Fall-back overlap: fixed-time fires once, at the first occurrence; wildcard fires at every
  real occurrence.

systemd differs (checked with ``systemd-analyze calendar``, systemd 252): it skips a
fixed-time tick that falls in a gap (``02:30`` never fires on the spring-forward day), and in an
overlap it fires each wall time once, at its first occurrence, wildcard or not. The explain
payload says so whenever it lists ticks near an offset change.

Every search is bounded: the years are finite, a day scan visits each candidate day of the
year list at most once, and an offset-segment walk is capped.
"""

from __future__ import annotations

import functools
from bisect import bisect_left, bisect_right
from calendar import monthrange
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, cast

import oncalendar

from monitor.domain.cron import schedules
from monitor.domain.cron.instants import DAY, EPOCH_ORD, as_utc
from monitor.domain.cron.parse import Dialect, ParsedField
from monitor.domain.cron.zones import segment, validate_zone
from monitor.domain.errors import ScheduleError, ZoneError

__all__ = ["CalendarLine", "OnCalendarSchedule", "parse_oncalendar"]

MIN_YEAR, MAX_YEAR = 1970, oncalendar.MAX_YEAR - 1  # 1970-2199, as systemd
_MIN_TS = 0
_MAX_TS = (date(MAX_YEAR + 1, 1, 1).toordinal() - EPOCH_ORD) * DAY - 1
# Offset segments one search may cross: a zone changes offset a few times a year at most.
_MAX_SEGMENTS = 8 * (MAX_YEAR - MIN_YEAR + 3)
# More than any difference between two UTC offsets of one zone (they stay within ±26 h).
_SLACK = 2 * DAY


@dataclass(frozen=True, slots=True)
class CalendarLine:
    """One parsed calendar-event expression (one line of a schedule).

    Attributes:
        text: the line as written (stripped). expanded: after shorthand expansion.
        weekday_text, date_text, time_text: the components as written after expansion (``""`` when the line
            omits them; systemd's defaults are every day and ``00:00:00``).
        tz: the zone the line is evaluated in (its own suffix, else the schedule's ``tz``).
        explicit_tz: the line named its zone.
        weekdays: 0=Monday..6=Sunday. years, months, hours, minutes, seconds: sorted values.
        days: days of the month (1-31); from_end: days counted from the end (1 = the last day).
        fixed: fixed-time in DESIGN §4's sense (no time component starts with ``*``).
    """

    text: str
    expanded: str
    weekday_text: str
    date_text: str
    time_text: str
    tz: str
    explicit_tz: bool
    weekdays: frozenset[int]
    years: tuple[int, ...]
    months: tuple[int, ...]
    days: frozenset[int]
    from_end: frozenset[int]
    hours: tuple[int, ...]
    minutes: tuple[int, ...]
    seconds: tuple[int, ...]
    fixed: bool

    # ------------------------------------------------------------------ wall clock

    def _day_candidates(self, year: int, month: int) -> list[int]:
        length = monthrange(year, month)[1]
        wanted = {d for d in self.days if d <= length}
        wanted.update(length + 1 - n for n in self.from_end if n <= length)
        return sorted(wanted)

    def _day_ok(self, day: date) -> bool:
        return day.weekday() in self.weekdays

    def next_day(self, start: date) -> date | None:
        """The first matching day >= ``start``, or ``None`` (years run out)."""
        i = bisect_left(self.years, start.year)
        for year in self.years[i:]:
            first_month = start.month if year == start.year else 1
            for month in self.months[bisect_left(self.months, first_month) :]:
                first_day = start.day if (year, month) == (start.year, start.month) else 1
                for d in self._day_candidates(year, month):
                    if d >= first_day and self._day_ok(day := date(year, month, d)):
                        return day
        return None

    def prev_day(self, start: date) -> date | None:
        """The last matching day <= ``start``, or ``None``."""
        i = bisect_right(self.years, start.year)
        for year in reversed(self.years[:i]):
            last_month = start.month if year == start.year else 12
            for month in reversed(self.months[: bisect_right(self.months, last_month)]):
                last_day = start.day if (year, month) == (start.year, start.month) else 31
                for d in reversed(self._day_candidates(year, month)):
                    if d <= last_day and self._day_ok(day := date(year, month, d)):
                        return day
        return None

    def _day_matches(self, day: date) -> bool:
        return (
            day.year in self.years
            and day.month in self.months
            and day.day in self._day_candidates(day.year, day.month)
            and self._day_ok(day)
        )

    def next_time(self, sod: int) -> int | None:
        """The first matching second of the day >= ``sod`` (0-86399), or ``None``."""
        h, rest = divmod(sod, 3600)
        m, s = divmod(rest, 60)
        for hh in self.hours[bisect_left(self.hours, h) :]:
            m0 = m if hh == h else 0
            for mm in self.minutes[bisect_left(self.minutes, m0) :]:
                s0 = s if (hh, mm) == (h, m) else 0
                j = bisect_left(self.seconds, s0)
                if j < len(self.seconds):
                    return hh * 3600 + mm * 60 + self.seconds[j]
        return None

    def prev_time(self, sod: int) -> int | None:
        """The last matching second of the day <= ``sod``, or ``None``."""
        h, rest = divmod(sod, 3600)
        m, s = divmod(rest, 60)
        for hh in reversed(self.hours[: bisect_right(self.hours, h)]):
            m0 = m if hh == h else 59
            for mm in reversed(self.minutes[: bisect_right(self.minutes, m0)]):
                s0 = s if (hh, mm) == (h, m) else 59
                j = bisect_right(self.seconds, s0)
                if j > 0:
                    return hh * 3600 + mm * 60 + self.seconds[j - 1]
        return None

    def next_wall(self, wall: int) -> int | None:
        """The first matching wall-clock second >= ``wall`` (local time written as if UTC)."""
        wall = max(wall, _MIN_TS)
        if wall > _MAX_TS:
            return None
        d, sod = divmod(wall, DAY)
        day = date.fromordinal(d + EPOCH_ORD)
        if self._day_matches(day):
            t = self.next_time(sod)
            if t is not None:
                return d * DAY + t
        if day.toordinal() + 1 > date(MAX_YEAR, 12, 31).toordinal():
            return None
        found = self.next_day(day + timedelta(days=1))
        if found is None:
            return None
        return (
            (found.toordinal() - EPOCH_ORD) * DAY
            + self.hours[0] * 3600
            + self.minutes[0] * 60
            + self.seconds[0]
        )

    def prev_wall(self, wall: int) -> int | None:
        """The last matching wall-clock second <= ``wall``."""
        wall = min(wall, _MAX_TS)
        if wall < _MIN_TS:
            return None
        d, sod = divmod(wall, DAY)
        day = date.fromordinal(d + EPOCH_ORD)
        if self._day_matches(day):
            t = self.prev_time(sod)
            if t is not None:
                return d * DAY + t
        if d == 0:
            return None
        found = self.prev_day(day - timedelta(days=1))
        if found is None:
            return None
        last = self.hours[-1] * 3600 + self.minutes[-1] * 60 + self.seconds[-1]
        return (found.toordinal() - EPOCH_ORD) * DAY + last

    def wall_match_in(self, lo: int, hi: int) -> bool:
        """Whether a wall-clock second in ``[lo, hi]`` matches."""
        w = self.next_wall(lo)
        return w is not None and w <= hi

    # ------------------------------------------------------------------ instants (DST rule)

    def next_ts(self, c: int) -> int | None:
        """The first tick at or after epoch second ``c`` (DESIGN §4 DST rule)."""
        c = max(c, _MIN_TS - 2 * DAY)
        memo: tuple[int, int] | None = None  # (lo, first match >= lo): no match in [lo, w)
        for _ in range(_MAX_SEGMENTS):
            if c > _MAX_TS + 2 * DAY:
                return None
            start, end, off, prev = segment(validate_zone(self.tz), c)
            # spring-forward gap at `start`: fixed-time wall times it swallowed fire once at `start`
            if self.fixed and prev < off and start == c and self.wall_match_in(start + prev, start + off - 1):
                return c
            lo = c + off
            if self.fixed and prev > off:
                lo = max(lo, start + prev)  # fall-back: repeated wall times fired at first occurrence
            if memo is not None and memo[0] <= lo <= memo[1]:
                w: int | None = memo[1]
            else:
                w = self.next_wall(lo)
            if w is None:
                return None
            memo = (lo, w)
            if w - off < end:
                return w - off
            # No wall in [lo, w) matches, and an instant a slack after c has a wall >= lo
            # (offsets differ by less than the slack), so no instant in
            # [c + slack, w - off - slack) is a tick: jump over years of offset segments.
            c = max(end, w - off - _SLACK) if end >= c + _SLACK else end
        return None  # pragma: no cover - bounded; the years run out first

    def prev_ts(self, c: int) -> int | None:
        """The last tick at or before epoch second ``c``."""
        c = min(c, _MAX_TS + 2 * DAY)
        memo: tuple[int, int] | None = None  # (hi, last match <= hi): no match in (w, hi]
        for _ in range(_MAX_SEGMENTS):
            if c < _MIN_TS - 2 * DAY:
                return None
            start, _end, off, prev = segment(validate_zone(self.tz), c)
            lo = start + off
            if self.fixed and prev > off:
                lo = start + prev
            hi = c + off
            if memo is not None and memo[1] <= hi <= memo[0]:
                w: int | None = memo[1]
            else:
                w = self.prev_wall(hi)
            if w is None:
                return None
            memo = (hi, w)
            if w >= lo:
                return w - off
            if self.fixed and prev < off and self.wall_match_in(start + prev, start + off - 1):
                return start
            # mirror of next_ts: no instant in (w - off + slack, c - slack] is a tick
            c = min(start - 1, w - off + _SLACK) if start - 1 <= c - _SLACK else start - 1
        return None  # pragma: no cover


# --------------------------------------------------------------------------- parsing


def _components(expanded: str) -> tuple[str, str, str]:
    """(weekday, date, time) as written, split the way the ``oncalendar`` package splits them."""
    parts = expanded.split()
    clock = parts.pop() if parts and ":" in parts[-1] else ""
    day = parts.pop() if parts and "-" in parts[-1] and parts[-1][0] in "0123456789*" else ""
    weekday = parts[0] if parts else ""
    return weekday, day, clock


def _parse_line(text: str, default_tz: str, number: int, many: bool) -> CalendarLine:
    where = f"line {number} ({text!r}): " if many else ""
    tz, explicit = default_tz, False  # default_tz was validated by parse_oncalendar
    body = text
    if " " in text:
        head, maybe = text.rsplit(maxsplit=1)
        # as the oncalendar package: a last word that names a zone is the line's zone
        if maybe[0] not in "0123456789*" and ":" not in maybe:
            try:
                validate_zone(maybe)
            except ZoneError as error:
                if "/" in maybe:  # meant as a zone (Europe/Atlantis): say so, not "Bad time"
                    raise ScheduleError(f"{where}{error}") from None
            else:
                tz, explicit, body = maybe, True, head
    try:
        parsed = oncalendar.BaseIterator(body, datetime(2000, 1, 1))
    except oncalendar.OnCalendarError as error:
        raise ScheduleError(f"{where}{error}") from None
    expanded = oncalendar.SPECIALS.get(body.lower(), body)
    weekday, day, clock = _components(expanded)
    hms = clock.split(":") if clock else ["00", "00", "00"]
    fixed = not any(part.startswith("*") for part in hms)
    days: set[int] = parsed.days
    return CalendarLine(
        text=text,
        expanded=expanded,
        weekday_text=weekday,
        date_text=day,
        time_text=clock,
        tz=tz,
        explicit_tz=explicit,
        weekdays=frozenset(parsed.weekdays),
        years=tuple(sorted(y for y in parsed.years if MIN_YEAR <= y <= MAX_YEAR)),
        months=tuple(sorted(parsed.months)),
        days=frozenset(d for d in days if d > 0),
        from_end=frozenset(-d for d in days if d < 0),
        hours=tuple(sorted(parsed.hours)),
        minutes=tuple(sorted(parsed.minutes)),
        seconds=tuple(sorted(parsed.seconds)),
        fixed=fixed,
    )


@dataclass(frozen=True, slots=True)
class OnCalendarSchedule(schedules.CronSchedule):
    """A parsed ``oncalendar`` schedule: the union of its lines' ticks.

    A :class:`~monitor.domain.cron.schedules.CronSchedule` subtype, so every consumer of the schedule
    interface (checks, scheduler jobs, maintenance windows, the dashboard) takes it unchanged:
    it inherits the public methods and overrides the searches under them (the first tick at or
    after an epoch second, the last at or before it, a wall-clock match); the cron spec of the
    base class is unused (``None``). All methods take aware datetimes and return aware UTC
    datetimes with whole seconds; the ticks end with 2199, so ``next_tick`` past it is ``None``.

    Attributes:
        lines: the parsed lines, in order.
    """

    lines: tuple[CalendarLine, ...] = ()

    @property
    def is_fixed_time(self) -> bool:
        """True when every line is fixed-time (DESIGN §4)."""
        return all(line.fixed for line in self.lines)

    @property
    def fields(self) -> tuple[ParsedField, ...]:
        """Cron fields do not apply; see :attr:`lines` (explain reads those)."""
        return ()

    def _next_ts(self, c: int) -> int | None:
        found = [t for line in self.lines if (t := line.next_ts(c)) is not None]
        return min(found) if found else None

    def _prev_ts(self, c: int) -> int | None:
        found = [t for line in self.lines if (t := line.prev_ts(c)) is not None]
        return max(found) if found else None

    def _wall_match_in(self, lo: int, hi: int) -> bool:
        return any(line.wall_match_in(lo, hi) for line in self.lines)

    def last_tick(self) -> datetime | None:
        """The last tick ever (every calendar schedule ends by 2199), or ``None`` if it never fires."""
        ts = self._prev_ts(_MAX_TS + 2 * DAY)
        return None if ts is None else as_utc(ts)


@functools.lru_cache(maxsize=4096)
def parse_oncalendar(expression: str, tz: str = "UTC") -> OnCalendarSchedule:
    """Parse and validate an ``oncalendar`` schedule, cached per (expression, tz).

    Args:
        expression: one or more systemd calendar-event expressions separated by newlines, each
            optionally ending in an IANA zone; blank lines around them are ignored.
        tz: the IANA zone of lines without their own.

    Returns:
        The :class:`OnCalendarSchedule` (dialect ``oncalendar``).

    Raises:
        ScheduleError: a malformed line (``line 2 ('Mon 25:00'): Bad hour`` when there are
            several lines), an empty expression or line, or a line that never fires
            (``*-02-30``).
        ZoneError: ``tz`` is unknown or a fixed offset.
    """
    validate_zone(tz)
    texts = [line.strip() for line in expression.strip().split("\n")]
    if not texts or texts == [""]:
        raise ScheduleError("the expression is empty")
    many = len(texts) > 1
    lines = []
    for number, text in enumerate(texts, start=1):
        if not text:
            raise ScheduleError(f"line {number} is empty")
        line = _parse_line(text, tz, number, many)
        if line.next_ts(_MIN_TS) is None:
            where = f"line {number} ({text!r}) " if many else ""
            raise ScheduleError(f"{where}never fires (no tick from {MIN_YEAR} to {MAX_YEAR})")
        lines.append(line)
    return OnCalendarSchedule(expression, Dialect.ONCALENDAR, tz, cast(Any, None), lines=tuple(lines))
