"""Cron schedules: parsing, validation, dialects and tick arithmetic with the DST rule.

This module is the schedule engine of DESIGN §4 (issue #3). **croniter iterates**; this wrapper
owns parsing, validation, dialect translation and the DST rule, and corrects croniter 7.0.0
wherever its answer departs from the contract (the list below).

How a tick is computed
----------------------
* **Parsing and validation** (ours) of three dialects: ``unix`` (5 fields), ``seconds`` (6
  fields, seconds first) and ``quartz`` (6 or 7 fields, seconds first, optional year, DOW 1-7
  with SUN=1, exactly one of DOM/DOW ``?``). Every error is a :class:`ScheduleError` that names
  the field and its 1-based position (``field 5 (day of week): 8 is out of range 0-7``). Names,
  ``a-a``, wrap-around ranges, steps and quartz numbering are all resolved here into explicit
  value sets.
* **Day table** (ours): the matching days of each *month shape* (length of the month, weekday of
  its 1st; only 28 shapes exist), computed once at parse time. It proves that an expression
  fires at all ("never fires" otherwise, which bounds every search) and it is the exact day
  predicate that filters croniter's candidates where croniter is handed a superset.
* **Wall-clock candidates** (croniter): the value sets are translated into one or two croniter
  expressions with explicit comma lists: 6 fields read seconds first
  (``second_at_beginning=True``) plus croniter's year field when quartz lists years, or
  croniter's plain 5-field form when the seconds are just ``0`` and no year is listed; always
  ``day_or=False`` (AND). croniter runs over *wall seconds*: local wall-clock time written as
  if it were UTC, so no zone and no DST ever reaches croniter. When both day fields are
  restricted (the DOM/DOW OR rule), two expressions are iterated — DOM-only (DOW ``*``) and
  DOW-only (DOM ``*``) — and merged (union, an instant once); a side that can never match is
  dropped at parse time. Tokens croniter lacks or gets wrong are handed over as a superset and
  filtered by the day table; a rejected candidate re-seeds croniter at the end of its day, so a
  filter step rejects at most one candidate per day of the superset.
* **Iterator reuse**: each schedule (cached per expression, dialect and zone by
  :func:`parse_cron`) keeps croniter iterators per direction, with the query each answered and
  its answer; a query inside that span is answered without croniter, a query just past it
  continues the iterator (one ``get_next``), and any other query re-seeds it
  (``set_current``). Iterators are checked out of a small pool, so concurrent threads never
  share one.
* **DST rule** (ours), applied per UTC-offset segment of the zone (between two offset changes
  the wall clock is a monotonic image of the UTC line): fixed-time vs wildcard, gap and overlap
  exactly as DESIGN §4.

Where croniter 7.0.0's answer is corrected
------------------------------------------
Each kind is corrected as a whole, by translation or by the wrapper, not case by case:

1. **DOM/DOW rule for ``*``-prefixed steps.** ``0 0 */2 * 3`` from 2024-09-01: croniter
   (default ``day_or=True``) ORs, giving 09-03, 09-04, 09-05, 09-07; Vixie/ISC (``DOM_STAR``)
   ANDs because the DOM text starts with ``*``: we give 09-11, 09-25, 10-09, 10-23. (The
   wrapper decides AND vs OR itself; croniter only ever ANDs.)
2. **``#`` and ``W`` tokens in the OR rule.** ``0 0 1 * 5#3`` (both fields restricted): croniter
   ANDs the ``#`` token with the DOM (fires only when the 1st is the third Friday, i.e. never);
   we OR them by merging a DOM-only and a DOW-only iterator: the 1st of every month and every
   third Friday. Likewise ``0 0 15W * MON``.
3. **``a-a`` read as the whole field.** ``0 0 * * 3-3``: croniter 7 treats it like ``*``
   (every day); we read just ``3`` (Wednesdays) and hand croniter the list ``3``. Wrap-around
   ranges (``FRI-MON``, ``22-2/2``) and steps are expanded the same way.
4. **``5L`` and ``LW`` rejected.** ``0 0 * * 5L`` raises ``CroniterNotAlphaError`` in croniter
   (which only knows the prefix spelling ``L5``); we translate it to ``L5``: the last Friday of
   each month (2024-01-26, 2024-02-23, 2024-03-29). ``0 0 LW * *`` (last weekday of the month)
   and ``L-n`` are rejected too; croniter gets the superset days 26-31 (``28-n``-``31-n``) and
   the day table keeps 2024-01-31, 2024-02-29, 2024-03-29.
5. **``nW`` for a day the month lacks, and ``W``/``#`` in lists.** ``0 0 31W * *``: croniter
   clamps 31 to the month's last day and fires 2024-04-30; DESIGN §4 says no run that month,
   so the day table rejects it (2024-03-29, then 2024-05-31). croniter refuses ``1,15W``
   (``W`` in a list) and ``1,5#3`` (literals mixed with ``#``): it gets the superset (days
   13-17; Mondays and Fridays) and the day table filters. croniter also reads a 31-item day
   list that counts ``L`` as ``*``: ``0 0 1-29,31,L * *`` would fire on 2024-01-30; we hand it
   ``*``, filtered (2024-01-29, 2024-01-31, and 2024-04-30 through ``L``).
6. **Seconds position.** 6-field ``0 15 */1 * * *`` is read seconds-*last* by croniter unless
   ``second_at_beginning=True`` (15:00:00, 15:00:01, ...); the ``seconds`` and ``quartz``
   dialects read seconds first: 15:15:00, 16:15:00, 17:15:00. Whenever seconds matter we pass
   6 fields (7 with a year), seconds first, with that flag.
7. **Quartz DOW numbering.** ``0 0 12 ? * 2`` is Monday in Quartz (SUN=1); croniter reads ``2``
   as Tuesday. We translate quartz DOW 1-7 to SUN-SAT, names and ``#``/``L`` included.
8. **DST fall-back double fire (fixed-time).** ``30 2 * * *`` Europe/Berlin on 2026-10-25:
   croniter fires at 02:30 CEST *and* 02:30 CET; we fire once, at the first occurrence
   (00:30Z). Same for ``45 1 * * *`` on Lord Howe's 30-minute fall-back.
9. **DST gap (wildcard).** ``*/30 2 * * *`` Europe/Berlin on 2026-03-29: croniter fires at
   03:00 CEST, a time the schedule never names; wildcard ticks inside a gap do not exist, so we
   give no tick that day. (Fixed-time ticks in a gap fire once at the first instant after the
   gap, which croniter also does for 5-field expressions; we do it for every dialect:
   ``0 30 2 * * *`` seconds-first → 2026-03-29T01:00:00Z.)
10. **Fixed UTC offsets.** croniter happily iterates in ``+02:00``, which is an hour off after
    the next change; :func:`validate_zone` accepts IANA names only.
11. **Never-firing expressions and long gaps.** ``0 0 30 2 *``: croniter searches and raises
    ``CroniterBadDateError`` at iteration time; we reject it at parse time ("never fires").
    croniter also gives up after 50 years by default; the wrapper allows 401 (the Gregorian
    cycle), starts every search inside a quartz year list (``prev_tick`` from year 2900 or
    ``next_tick`` from year 5 go straight to the list instead of walking offset segments),
    and maps croniter running off the calendar (year 10000 or 0) to "no tick".
12. **``is_valid(..., strict=True)``** rejects ``48 14 31 jun sun``, which fires every Sunday of
    June under the OR rule; we accept it.

Conventions: every datetime in and out is aware; outputs are UTC (``datetime.UTC``) with whole
seconds; inputs may carry any offset and microseconds. Ticks exist in years 2-9997 UTC only;
every method answers (``None``, ``False``, nothing) for any aware instant Python can represent,
years 1 and 9999 at any offset included, and never raises ``ValueError``/``OverflowError`` for
one. Ticks are instants: two ticks that land
on one instant are one tick. Nothing here reads the clock or does I/O (beyond the zone database
that :mod:`zoneinfo` loads).
"""

from __future__ import annotations

import functools
import re
import time
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterBadDateError, croniter

from monitor.domain.errors import ScheduleError, ZoneError

__all__ = [
    "CronSchedule",
    "Dialect",
    "ensure_fires_after",
    "format_utc",
    "offset_changes",
    "parse_cron",
    "validate_zone",
]


class Dialect(StrEnum):
    """The cron dialects of DESIGN §4; looked up case-insensitively (``Dialect("QUARTZ")``)."""

    UNIX = "unix"
    SECONDS = "seconds"
    QUARTZ = "quartz"
    ONCALENDAR = "oncalendar"  # systemd calendar events: monitor.domain.calendar_events

    @classmethod
    def _missing_(cls, value: object) -> Dialect | None:
        if isinstance(value, str):
            folded = value.strip().lower()
            for member in cls:
                if member.value == folded:
                    return member
        return None


# --------------------------------------------------------------------------- constants

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_ORD = date(1970, 1, 1).toordinal()
_DAY = 86400
# Supported instants: years 2..9997 UTC (room for offsets and a year of look-around at both
# ends). Ticks outside [_MIN_TS, _MAX_TS] do not exist; any aware instant may be asked about.
_MIN_YEAR, _MAX_YEAR = 2, 9997
_MIN_TS = (date(_MIN_YEAR, 1, 1).toordinal() - _EPOCH_ORD) * _DAY
_MAX_TS = (date(_MAX_YEAR + 1, 1, 1).toordinal() - _EPOCH_ORD) * _DAY - 1
# Instants whose local time is representable in every zone (offsets stay within a day), for
# offset look-ups: the offset at the calendar's very ends is the one a day inside them.
_OFFSET_LO = (date(1, 1, 2).toordinal() - _EPOCH_ORD) * _DAY
_OFFSET_HI = (date(9999, 12, 30).toordinal() - _EPOCH_ORD) * _DAY
# The day pattern of an expression without a year list recurs every 400 years (the Gregorian
# cycle), so a live expression matches within any 401 years: croniter's search limit.
_CRON_YEARS = 401
# A filter step rejects one candidate per day at most, and a live expression matches within
# 401 years: a hard bound on rejections per query, never reached by a correct run.
_MAX_REJECTS = 366 * _CRON_YEARS
# croniter running off the calendar (year 10000 / 0) or past a year list: no candidate.
_CRON_ENDS = (CroniterBadDateError, OverflowError, ValueError, OSError)
# Idle croniter cursors kept per schedule and direction (one per concurrent caller).
_POOL = 4
# Offset segments crossed by one search (two offset changes a year at most, in practice).
_MAX_SEGMENTS = 4 * 401


_MONTH_NAMES = {
    name: i + 1
    for i, name in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
    )
}
_DOW_NAMES = {name: i for i, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@dataclass(frozen=True, slots=True)
class _FieldKind:
    name: str
    lo: int
    hi: int


_SECOND = _FieldKind("second", 0, 59)
_MINUTE = _FieldKind("minute", 0, 59)
_HOUR = _FieldKind("hour", 0, 23)
_DOM = _FieldKind("day of month", 1, 31)
_MONTH = _FieldKind("month", 1, 12)
_DOW_UNIX = _FieldKind("day of week", 0, 7)
_DOW_QUARTZ = _FieldKind("day of week", 1, 7)
_YEAR = _FieldKind("year", 1970, 2099)

_LAYOUTS: dict[Dialect, tuple[_FieldKind, ...]] = {
    Dialect.UNIX: (_MINUTE, _HOUR, _DOM, _MONTH, _DOW_UNIX),
    Dialect.SECONDS: (_SECOND, _MINUTE, _HOUR, _DOM, _MONTH, _DOW_UNIX),
    Dialect.QUARTZ: (_SECOND, _MINUTE, _HOUR, _DOM, _MONTH, _DOW_QUARTZ, _YEAR),
}


# --------------------------------------------------------------------------- parsed fields


@dataclass(frozen=True, slots=True)
class ParsedField:
    """One decoded field (read by :mod:`monitor.domain.explain`).

    Attributes:
        kind: the field's name (``"minute"``, ``"day of week"``...).
        position: 1-based position in the expression as written.
        text: the field's text as written (after macro expansion).
        values: plain values; day of week uses 0=Sunday..6=Saturday in every dialect.
        star: the text starts with ``*`` or is ``?`` (DESIGN §4 DOM/DOW rule).
        last: DOM ``L``. last_weekday: DOM ``LW``. last_offsets: DOM ``L-n`` (n days before
        the last). nearest: DOM ``nW``. nth: DOW ``n#k`` as (weekday, k). last_dow: DOW ``nL``.
        wraps: some range wrapped around (``FRI-MON``, ``22-2``).
    """

    kind: str
    position: int
    text: str
    values: frozenset[int]
    star: bool
    last: bool = False
    last_weekday: bool = False
    last_offsets: frozenset[int] = frozenset()
    nearest: frozenset[int] = frozenset()
    nth: frozenset[tuple[int, int]] = frozenset()
    last_dow: frozenset[int] = frozenset()
    wraps: bool = False

    @property
    def extended(self) -> bool:
        """Whether the field uses syntax Debian's cron does not support."""
        return bool(
            self.last
            or self.last_weekday
            or self.last_offsets
            or self.nearest
            or self.nth
            or self.last_dow
            or self.wraps
        )


@dataclass(frozen=True, slots=True)
class _Sub:
    """One croniter expression over wall seconds: 5 fields, or 6-7 (seconds first, optional year)."""

    text: str
    exact: bool  # every candidate is a tick; otherwise croniter gets a superset, filtered


@dataclass(frozen=True, slots=True)
class _Spec:
    fields: tuple[ParsedField, ...]
    years: tuple[int, int] | None  # first and last listed year (quartz), None: any year
    # matching days per month shape, a bit mask (bit d: day d matches), at index
    # (length - 28) * 7 + weekday of the 1st (0=Sunday)
    shapes: tuple[int, ...]
    subs: tuple[_Sub, ...]  # merged (union) when the DOM/DOW OR rule applies
    fixed: bool
    zone: ZoneInfo
    # instants a search may start from: the supported range, narrowed to the year list (with
    # two days of slack for offsets) so that no search walks centuries of offset segments
    lo_ts: int
    hi_ts: int
    # idle croniter cursors, forward and backward (see _Cursor)
    ahead: list[_Cursor] = field(default_factory=list, compare=False)
    behind: list[_Cursor] = field(default_factory=list, compare=False)
    # the last answered gap between two consecutive ticks, (tick, next tick) in epoch seconds:
    # every run ping of every check on this schedule until the next tick asks the same question
    span: list[tuple[int, int]] = field(default_factory=list, compare=False)


def _err(kind: _FieldKind, position: int, problem: str) -> ScheduleError:
    return ScheduleError(f"field {position} ({kind.name}): {problem}", field=kind.name, position=position)


def _number(token: str, kind: _FieldKind, position: int, dialect: Dialect) -> int:
    """A number or a name in ``kind``, range-checked; quartz DOW stays 1-7 here."""
    if token.isdigit() and token.isascii():
        value = int(token)
    else:
        upper = token.upper()
        if kind is _MONTH and upper in _MONTH_NAMES:
            return _MONTH_NAMES[upper]
        if kind.name == "day of week" and upper in _DOW_NAMES:
            return _DOW_NAMES[upper] + (1 if dialect is Dialect.QUARTZ else 0)
        if token == "":
            raise _err(kind, position, "a number is missing")
        what = {
            "month": "a number or a month name (JAN-DEC)",
            "day of week": "a number or a day name (SUN-SAT)",
        }
        raise _err(kind, position, f"{token!r} is not {what.get(kind.name, 'a number')}")
    if not kind.lo <= value <= kind.hi:
        raise _err(kind, position, f"{value} is out of range {kind.lo}-{kind.hi}")
    return value


def _to_cron_dow(value: int, dialect: Dialect) -> int:
    """Day of week as 0=Sunday..6=Saturday."""
    return (value - 1) % 7 if dialect is Dialect.QUARTZ else value % 7


def _expand(item: str, kind: _FieldKind, position: int, dialect: Dialect) -> tuple[list[int], bool]:
    """Expand ``*``, ``a``, ``a-b``, with an optional ``/step``; returns (values, wrapped)."""
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        span = kind.hi - kind.lo + 1 if kind.name != "day of week" else 7
        if not step_text.isdigit() or not step_text.isascii():
            raise _err(kind, position, f"step {step_text!r} is not a number")
        step = int(step_text)
        if not 1 <= step <= span:
            raise _err(kind, position, f"step {step} is out of range 1-{span}")
    if base in ("*", "?"):
        if base == "?" and kind.name not in ("day of month", "day of week"):
            raise _err(kind, position, "'?' is only allowed in day of month or day of week")
        lo, hi = kind.lo, kind.hi
        if kind is _DOW_UNIX:
            hi = 6  # 7 is Sunday again: '*' and '*/s' cover 0-6
        return list(range(lo, hi + 1, step)), False
    if "-" in base:
        a_text, _, b_text = base.partition("-")
        if "-" in b_text:
            raise _err(kind, position, f"{base!r} is not a range a-b")
        a = _number(a_text, kind, position, dialect)
        b = _number(b_text, kind, position, dialect)
    else:
        a = _number(base, kind, position, dialect)
        b = kind.hi if slash else a
        if slash and kind is _DOW_UNIX:
            b = 7  # DESIGN §4: in DOW the max is 7, so 1/2 = Mon, Wed, Fri, Sun
    if a <= b:
        return list(range(a, b + 1))[::step], False
    if kind is _YEAR:  # Quartz: years do not wrap around
        raise _err(kind, position, f"{base!r}: the start year must not be greater than the end year")
    # wrap-around range (FRI-MON, 22-2/2): DOW wraps modulo 7, others at the field's max
    if kind.name == "day of week":
        first = 1 if dialect is Dialect.QUARTZ else 0
        a_c, b_c = _to_cron_dow(a, dialect), _to_cron_dow(b, dialect)
        seq = [(a_c + i) % 7 for i in range((b_c - a_c) % 7 + 1)]
        return [v + first for v in seq][::step], True
    seq = list(range(a, kind.hi + 1)) + list(range(kind.lo, b + 1))
    return seq[::step], True


_MONTH_NAME_RE = re.compile("|".join(_MONTH_NAMES))
_NTH_RE = re.compile(r"^([A-Za-z0-9]+)#([0-9]+)$")


def _parse_field(text: str, kind: _FieldKind, position: int, dialect: Dialect) -> ParsedField:
    if text == "":
        raise _err(kind, position, "is empty")
    values: set[int] = set()
    last = last_weekday = wraps = False
    last_offsets: set[int] = set()
    nearest: set[int] = set()
    nth: set[tuple[int, int]] = set()
    last_dow: set[int] = set()
    is_dom = kind is _DOM
    is_dow = kind.name == "day of week"
    for item in text.split(","):
        if item == "":
            raise _err(kind, position, f"empty item in list {text!r}")
        upper = item.upper()
        if is_dom and ("L" in upper or "W" in upper):
            if upper == "L":
                last = True
            elif upper == "LW":
                last_weekday = True
            elif upper.startswith("L-"):
                if not upper[2:].isdigit() or not upper[2:].isascii():
                    raise _err(kind, position, f"{item!r}: L-n needs a number of days n")
                n = int(upper[2:])
                if not 0 <= n <= 30:
                    raise _err(kind, position, f"{item!r}: {n} is out of range 0-30")
                last_offsets.add(n)
            elif upper.endswith("W") and upper[:-1].isdigit() and upper[:-1].isascii():
                nearest.add(_number(upper[:-1], kind, position, dialect))
            else:
                raise _err(kind, position, f"{item!r} is not L, LW, L-n or nW (nearest weekday, as in 15W)")
            continue
        if is_dow and "#" in item:
            match = _NTH_RE.match(item)
            if match is None:
                raise _err(kind, position, f"{item!r} is not n#k (k-th weekday n of the month, as in 5#3)")
            n = _number(match.group(1), kind, position, dialect)
            k = int(match.group(2))
            if not 1 <= k <= 5:
                raise _err(kind, position, f"{item!r}: occurrence {k} is out of range 1-5")
            nth.add((_to_cron_dow(n, dialect), k))
            continue
        if is_dow and upper.endswith("L"):
            if upper == "L":
                if dialect is not Dialect.QUARTZ:
                    raise _err(
                        kind,
                        position,
                        "'L' alone is not a day here; write 5L for the last Friday, or 6 for Saturday",
                    )
                values.add(6)  # Quartz: 'L' alone in day of week is 7 = SAT
                continue
            n = _number(item[:-1], kind, position, dialect)
            last_dow.add(_to_cron_dow(n, dialect))
            continue
        if not (is_dom or is_dow) and re.search(r"[LW#]", _MONTH_NAME_RE.sub("", upper)):
            raise _err(kind, position, f"{item!r}: L, W and # are only allowed in the day fields")
        expanded, wrapped = _expand(item, kind, position, dialect)
        wraps = wraps or wrapped
        if is_dow:
            values.update(_to_cron_dow(v, dialect) for v in expanded)
        else:
            values.update(expanded)
    return ParsedField(
        kind=kind.name,
        position=position,
        text=text,
        values=frozenset(values),
        star=text.startswith("*") or text == "?",
        last=last,
        last_weekday=last_weekday,
        last_offsets=frozenset(last_offsets),
        nearest=frozenset(nearest),
        nth=frozenset(nth),
        last_dow=frozenset(last_dow),
        wraps=wraps,
    )


def _dom_days(dom: ParsedField, length: int, wd1: int) -> set[int]:
    """Days matched by the day-of-month field in a month of ``length`` days whose 1st is ``wd1``."""
    days = {d for d in dom.values if d <= length}
    if dom.last:
        days.add(length)
    for n in dom.last_offsets:
        if length - n >= 1:
            days.add(length - n)
    if dom.last_weekday:
        wd = (wd1 + length - 1) % 7
        days.add(length - 1 if wd == 6 else length - 2 if wd == 0 else length)
    for d in dom.nearest:
        if d > length:
            continue  # a day the month lacks: no run that month (DESIGN §4)
        wd = (wd1 + d - 1) % 7
        if wd == 6:  # Saturday -> Friday, or Monday when the 1st is a Saturday
            days.add(d - 1 if d > 1 else d + 2)
        elif wd == 0:  # Sunday -> Monday, or Friday when it is the last day
            days.add(d + 1 if d < length else d - 2)
        else:
            days.add(d)
    return days


def _dow_days(dow: ParsedField, length: int, wd1: int) -> set[int]:
    """Days matched by the day-of-week field in a month of ``length`` days whose 1st is ``wd1``."""
    days = set()
    for d in range(1, length + 1):
        wd = (wd1 + d - 1) % 7
        if wd in dow.values or (wd, (d - 1) // 7 + 1) in dow.nth or (wd in dow.last_dow and d + 7 > length):
            days.add(d)
    return days


_SHAPES = tuple((length, wd1) for length in range(28, 32) for wd1 in range(7))


def _month_length(year: int, month: int) -> int:
    if month == 2:
        return 29 if (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _first_weekday(year: int, month: int) -> int:
    """Weekday of the 1st, 0=Sunday."""
    return (date(year, month, 1).weekday() + 1) % 7


def _split_fields(expression: str, dialect: Dialect) -> list[str]:
    text = expression.strip()
    if text == "":
        raise ScheduleError("the expression is empty")
    if text.startswith("@"):
        macro = text.lower()
        if macro == "@reboot":
            raise ScheduleError(
                "@reboot is not supported: it runs once at boot, which has no predictable time; "
                "monitor such a job with a simple (period) check instead"
            )
        if macro not in _MACROS:
            raise ScheduleError(f"unknown macro {text!r}; known: {', '.join(sorted(_MACROS))}")
        body = _MACROS[macro]
        if dialect is Dialect.SECONDS:
            body = "0 " + body
        elif dialect is Dialect.QUARTZ:
            minute, hour, dom, month, dow = body.split()
            weekly = dow == "0"
            body = f"0 {minute} {hour} ? {month} 1" if weekly else f"0 {minute} {hour} {dom} {month} ?"
        return body.split()
    parts = text.split()
    layout = _LAYOUTS[dialect]
    allowed = (6, 7) if dialect is Dialect.QUARTZ else (len(layout),)
    if len(parts) not in allowed:
        names = " ".join(k.name.replace(" ", "-") for k in layout)
        expected = "6 or 7" if dialect is Dialect.QUARTZ else str(len(layout))
        hint = {
            5: "dialect 'unix' reads 5 fields (minute first)",
            6: "dialect 'seconds' reads 6 fields with seconds first; dialect 'quartz' reads 6 or 7 "
            "(seconds first, DOW 1-7 with SUN=1, optional year)",
            7: "dialect 'quartz' reads 7 fields (seconds first, year last)",
        }.get(len(parts))
        message = f"dialect {dialect.value!r} expects {expected} fields ({names}), got {len(parts)}"
        if hint:
            message += f"; {hint}"
        raise ScheduleError(message)
    return parts


def _compile(expression: str, dialect: Dialect, zone: ZoneInfo) -> _Spec:
    parts = _split_fields(expression, dialect)
    layout = _LAYOUTS[dialect]
    fields = tuple(
        _parse_field(text, kind, i + 1, dialect)
        for i, (text, kind) in enumerate(zip(parts, layout[: len(parts)], strict=True))
    )
    by = {f.kind: f for f in fields}
    dom, dow = by["day of month"], by["day of week"]
    if dialect is Dialect.QUARTZ and (dom.text == "?") == (dow.text == "?"):
        which = dom if dom.text == "?" else dow
        problem = (
            "exactly one of day of month and day of week must be '?' in quartz, not both"
            if dom.text == "?"
            else "exactly one of day of month and day of week must be '?' in quartz "
            "(e.g. '0 0 12 ? * MON' or '0 0 12 1 * ?')"
        )
        raise ScheduleError(
            f"field {which.position} ({which.kind}): {problem}", field=which.kind, position=which.position
        )
    day_or = not dom.star and not dow.star
    dom_table = tuple(_mask(_dom_days(dom, n, wd1)) for n, wd1 in _SHAPES)
    dow_table = tuple(_mask(_dow_days(dow, n, wd1)) for n, wd1 in _SHAPES)
    shapes = tuple((a | b) if day_or else (a & b) for a, b in zip(dom_table, dow_table, strict=True))
    years = by["year"].values if "year" in by and not by["year"].star else None
    months = by["month"].values
    if not _fires(shapes, months, years):
        raise ScheduleError(
            "the expression never fires: "
            + ("no listed year has a matching day" if years else "no month it names has a matching day")
        )
    # croniter's expressions: explicit lists, seconds first, year last when listed; croniter's
    # own 5-field form (seconds 0) when neither is needed, which spares it a field
    second = _values_text(by["second"].values, 0, 59) if "second" in by else "0"
    head = f"{_values_text(by['minute'].values, 0, 59)} {_values_text(by['hour'].values, 0, 23)}"
    if second != "0" or years:
        head = f"{second} {head}"
    month = _values_text(months, 1, 12)
    tail = f" {_values_text(years, 1970, 2099)}" if years else ""
    dom_text, dom_exact = _dom_cron(dom)
    dow_text, dow_exact = _dow_cron(dow)
    if day_or:
        # the OR rule: union of a DOM-only and a DOW-only iterator; a side that never fires is dropped
        sides = ((dom_text, "*", dom_exact, dom_table), ("*", dow_text, dow_exact, dow_table))
        subs = tuple(
            _Sub(f"{head} {d} {month} {w}{tail}", exact)
            for d, w, exact, table in sides
            if _fires(table, months, years)
        )
    else:
        subs = (_Sub(f"{head} {dom_text} {month} {dow_text}{tail}", dom_exact and dow_exact),)
    lo_ts, hi_ts = _MIN_TS, _MAX_TS
    if years:
        lo_ts = max(lo_ts, _year_start(min(years)) - 2 * _DAY)
        hi_ts = min(hi_ts, _year_start(max(years) + 1) + 2 * _DAY)
    return _Spec(
        fields=fields,
        years=(min(years), max(years)) if years else None,
        shapes=shapes,
        subs=subs,
        fixed=all(not by[k].star for k in ("second", "minute", "hour") if k in by),
        zone=zone,
        lo_ts=lo_ts,
        hi_ts=hi_ts,
        ahead=[_Cursor(subs)],  # croniter parses its expressions now, not at the first tick
    )


def _mask(days: set[int]) -> int:
    return sum(1 << d for d in days)


def _fires(table: tuple[int, ...], months: frozenset[int], years: frozenset[int] | None) -> bool:
    """Whether some allowed month (of some listed year) has a matching day in ``table``."""
    if years is not None:
        return any(
            table[(_month_length(year, month) - 28) * 7 + _first_weekday(year, month)]
            for year in years
            for month in months
        )
    # every month starts on every weekday within the 400-year cycle, leap Februaries too
    return any(
        table[(n - 28) * 7 + wd]
        for month in months
        for n in ((28, 29) if month == 2 else (_month_length(2001, month),))
        for wd in range(7)
    )


def _values_text(values: Iterable[int], lo: int, hi: int) -> str:
    """croniter's text for a value set: ``*`` when it is the whole range, else an explicit list."""
    vals = sorted(set(values))
    return "*" if vals == list(range(lo, hi + 1)) else ",".join(map(str, vals))


def _dom_cron(dom: ParsedField) -> tuple[str, bool]:
    """croniter's day-of-month text for ``dom``, and whether its days are exact (else a superset)."""
    if not (dom.last_weekday or dom.last_offsets or dom.nearest):
        last = dom.last and not {28, 29, 30, 31} <= dom.values  # else L adds no day
        if len(dom.values) == 31:
            return "*", True
        if last and len(dom.values) == 30:
            # croniter reads a 31-item list as '*' (it counts L as an item): every day, filtered
            return "*", False
        return ",".join([str(v) for v in sorted(dom.values)] + (["L"] if last else [])), True
    if len(dom.nearest) == 1 and not (dom.values or dom.last or dom.last_weekday or dom.last_offsets):
        # croniter clamps nW to the month's last day when the month lacks n: the day table rejects it
        return f"{min(dom.nearest)}W", False
    # LW, L-n, W in a list: croniter refuses them; hand it the days they can land on
    days = set(dom.values)
    if dom.last:
        days.update(range(28, 32))
    if dom.last_weekday:
        days.update(range(26, 32))
    for n in dom.last_offsets:
        days.update(range(max(1, 28 - n), 32 - n))
    for n in dom.nearest:
        days.update(range(max(1, n - 2), min(31, n + 2) + 1))
    return _values_text(days, 1, 31), False


def _dow_cron(dow: ParsedField) -> tuple[str, bool]:
    """croniter's day-of-week text for ``dow`` (0=Sunday), and whether its days are exact."""
    if not (dow.nth or dow.last_dow):
        return _values_text(dow.values, 0, 6), True
    if not dow.values:
        # n#k as is; nL in croniter's prefix spelling Ln
        items = [f"{wd}#{k}" for wd, k in sorted(dow.nth)] + [f"L{wd}" for wd in sorted(dow.last_dow)]
        return ",".join(items), True
    # croniter refuses literals mixed with '#': every day of the weekdays named, filtered
    return _values_text(dow.values | {wd for wd, _ in dow.nth} | dow.last_dow, 0, 6), False


# --------------------------------------------------------------------------- croniter cursors


class _Cursor:
    """croniter iterators of one schedule in one direction, one per sub-expression.

    For each sub-expression ``bases[i]`` is the last query and ``heads[i]`` its answer: the
    first accepted candidate at or after the query (forward) or at or before it (backward), or
    ``None`` when there is none. croniter's current position is ``heads[i]``.
    """

    __slots__ = ("bases", "heads", "iters")

    def __init__(self, subs: tuple[_Sub, ...]) -> None:
        self.iters = [
            croniter(
                sub.text,
                0.0,
                ret_type=float,
                day_or=False,
                max_years_between_matches=_CRON_YEARS,
                second_at_beginning=True,
            )
            for sub in subs
        ]
        self.bases: list[int | None] = [None] * len(subs)
        self.heads: list[int | None] = [None] * len(subs)


def _day_ok(spec: _Spec, wall: int) -> bool:
    d = date.fromordinal(wall // _DAY + _EPOCH_ORD)
    shape = spec.shapes[(_month_length(d.year, d.month) - 28) * 7 + _first_weekday(d.year, d.month)]
    return bool(shape >> d.day & 1)


def _cron_next(spec: _Spec, sub: _Sub, it: croniter, wall: int, resume: bool) -> int | None:
    """The first accepted candidate >= ``wall`` (``resume``: croniter already stands at wall - 1)."""
    try:
        w = int(it.get_next() if resume else it.get_next(start_time=float(wall - 1)))
        if sub.exact:
            return w
        for _ in range(_MAX_REJECTS):
            if _day_ok(spec, w):
                return w
            w = int(it.get_next(start_time=float(w - w % _DAY + _DAY - 1)))  # from the next day
    except _CRON_ENDS:
        return None
    return None  # pragma: no cover - bounded by _MAX_REJECTS; a live expression matches sooner


def _cron_prev(spec: _Spec, sub: _Sub, it: croniter, wall: int, resume: bool) -> int | None:
    """The last accepted candidate <= ``wall`` (``resume``: croniter already stands at wall + 1)."""
    try:
        w = int(it.get_prev() if resume else it.get_prev(start_time=float(wall + 1)))
        if sub.exact:
            return w
        for _ in range(_MAX_REJECTS):
            if _day_ok(spec, w):
                return w
            w = int(it.get_prev(start_time=float(w - w % _DAY)))  # from the day before
    except _CRON_ENDS:
        return None
    return None  # pragma: no cover


# --------------------------------------------------------------------------- zones


_OFFSET_RE = re.compile(r"^(?:(?:Etc/)?(?:UTC|GMT|UCT|Z))?\s*[+-]\s*\d", re.IGNORECASE)
_ZONE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+)*$")


@functools.lru_cache(maxsize=1024)
def validate_zone(tz: str) -> ZoneInfo:
    """Load an IANA time zone, refusing fixed offsets and non-names.

    Args:
        tz: an IANA zone name such as ``"Europe/Berlin"`` or ``"UTC"`` (DESIGN §4: zones are
            IANA names, never fixed offsets).

    Returns:
        The loaded :class:`zoneinfo.ZoneInfo` (cached per name).

    Raises:
        ZoneError: ``"unknown time zone 'Mars/Olympus'"``; a name that differs from a known one
            only in case gets a hint (``"unknown time zone 'utc' (did you mean 'UTC'?)"``); a
            fixed offset (``"+02:00"``, ``"UTC+2"``, ``"Etc/GMT-2"``), a path and the ``right/``
            (leap seconds) and ``posix/`` trees are refused with a message saying so. Links
            such as ``US/Eastern`` and ``EST`` are accepted.
    """
    if not isinstance(tz, str) or tz.strip() == "":
        raise ZoneError("time zone is empty; use an IANA name such as 'Europe/Berlin' or 'UTC'")
    if _OFFSET_RE.match(tz) or re.match(r"^(Etc/)?(GMT|UTC)[+-]\d+$", tz):
        raise ZoneError(
            f"{tz!r} is a fixed UTC offset; use an IANA zone name such as 'Europe/Berlin' so that "
            "offset changes (DST) are followed"
        )
    if not _ZONE_RE.match(tz) or tz in _NOT_ZONES:
        raise ZoneError(f"unknown time zone {tz!r}")
    names, folded = _zone_names()
    head, _, tail = tz.partition("/")
    if head.lower() in ("right", "posix"):
        # right/ counts leap seconds (its clock is ~27 s off UTC); posix/ only repeats the names
        hint = f"; use {tail!r}" if tail in names else ""
        raise ZoneError(f"unknown time zone {tz!r}: the '{head}/' zone variants are not accepted{hint}")
    if tz not in names:
        # a case-insensitive file system would load 'europe/berlin': refuse it here with a hint
        canonical = folded.get(tz.lower())
        if canonical is not None:
            raise ZoneError(f"unknown time zone {tz!r} (did you mean {canonical!r}?)")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ZoneError(f"unknown time zone {tz!r}") from None


_NOT_ZONES = ("localtime", "posixrules", "Factory")


@functools.cache
def _zone_names() -> tuple[frozenset[str], dict[str, str]]:
    """The zone database's names, and each by its lower-case spelling (for a hint)."""
    names = frozenset(
        name
        for name in available_timezones()
        if name not in _NOT_ZONES and not name.lower().startswith(("right/", "posix/"))
    )
    folded: dict[str, str] = {}
    for name in sorted(names):
        folded.setdefault(name.lower(), name)
    return names, folded


def zone_names() -> frozenset[str]:
    """Every name :func:`validate_zone` accepts: the zone database's names without
    ``localtime``, ``posixrules``, ``Factory`` and the ``right/`` and ``posix/`` trees."""
    return _zone_names()[0]


def _offset(zone: ZoneInfo, ts: int) -> int:
    # a local time in year 0 or 10000 does not exist for datetime: use the offset a day inside
    off = datetime.fromtimestamp(min(max(ts, _OFFSET_LO), _OFFSET_HI), zone).utcoffset()
    assert off is not None
    return off.days * _DAY + off.seconds


def _year_start(year: int) -> int:
    return (date(year, 1, 1).toordinal() - _EPOCH_ORD) * _DAY


# Offset changes are found by sampling every 6 hours and bisecting to the second; two changes
# less than 6 hours apart that cancel out would be missed (none exist in the tz database).
_SAMPLE = 6 * 3600


@functools.lru_cache(maxsize=16384)
def _year_transitions(zone: ZoneInfo, year: int) -> tuple[tuple[int, int, int], ...]:
    """Offset changes (instant, offset before, offset after) in (start of year, start of next]."""
    start, end = _year_start(year), _year_start(year + 1)
    out: list[tuple[int, int, int]] = []
    prev_ts, prev_off = start, _offset(zone, start)
    ts = start
    while ts < end:
        ts = min(ts + _SAMPLE, end)
        off = _offset(zone, ts)
        if off != prev_off:
            lo, hi = prev_ts, ts  # offset(lo) == prev_off, offset(hi) == off
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if _offset(zone, mid) == prev_off:
                    lo = mid
                else:
                    hi = mid
            out.append((hi, prev_off, off))
        prev_ts, prev_off = ts, off
    return tuple(out)


@dataclass(frozen=True, slots=True)
class _Window:
    starts: tuple[int, ...]
    trans: tuple[tuple[int, int, int], ...]
    base: int  # offset at the window's start
    lo: int  # window start (an artificial segment boundary)
    hi: int  # window end


@functools.lru_cache(maxsize=16384)
def _window(zone: ZoneInfo, year: int) -> _Window:
    """The offset changes of years ``year-1 .. year+1``, for segment look-ups in ``year``."""
    trans = _year_transitions(zone, year - 1) + _year_transitions(zone, year)
    trans += _year_transitions(zone, year + 1)
    lo = _year_start(year - 1)
    return _Window(
        starts=tuple(t[0] for t in trans),
        trans=trans,
        base=_offset(zone, lo),
        lo=lo,
        hi=_year_start(year + 2),
    )


def _segment(zone: ZoneInfo, ts: int) -> tuple[int, int, int, int]:
    """The constant-offset segment [start, end) holding ``ts``: (start, end, offset, previous offset).

    ``start``/``end`` may be artificial boundaries (no offset change; previous offset ==
    offset) when no change happens within a year of ``ts``.
    """
    window = _window(zone, time.gmtime(ts).tm_year)
    i = bisect_right(window.starts, ts)
    end = window.starts[i] if i < len(window.starts) else window.hi
    if i == 0:
        return window.lo, end, window.base, window.base
    start, before, after = window.trans[i - 1]
    return start, end, after, before


# --------------------------------------------------------------------------- schedule


def _split_instant(instant: datetime, what: str) -> tuple[int, int]:
    """Whole seconds since the epoch (floored) and the leftover microseconds."""
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(f"{what} must be an aware datetime, got naive {instant!r}")
    delta = instant - _EPOCH
    return delta.days * _DAY + delta.seconds, delta.microseconds


def _as_utc(ts: int) -> datetime:
    return _EPOCH + timedelta(seconds=ts)


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed cron expression in a dialect and an IANA zone; obtain one with :func:`parse_cron`.

    All methods take aware datetimes (any offset, microseconds allowed) and return aware UTC
    datetimes with whole seconds. Ticks follow DESIGN §4, DST rule included: a *fixed-time*
    schedule (no seconds/minute/hour field starts with ``*``) fires once at the first instant
    after a spring-forward gap for wall times the gap swallows, and only at the first occurrence
    of a repeated wall time; a *wildcard* schedule has no ticks inside a gap and fires at every
    real occurrence in an overlap. Two ticks on one instant are one tick.

    Attributes:
        expression: the expression as given. dialect: its :class:`Dialect`. tz: the IANA zone.
    """

    expression: str
    dialect: Dialect
    tz: str
    _spec: _Spec = field(repr=False, compare=False)

    # ------------------------------------------------------------------ public API

    @property
    def is_fixed_time(self) -> bool:
        """True when none of the seconds, minute and hour fields starts with ``*`` (DESIGN §4)."""
        return self._spec.fixed

    @property
    def fields(self) -> tuple[ParsedField, ...]:
        """The decoded fields, in expression order (macros expanded)."""
        return self._spec.fields

    def next_tick(self, after: datetime) -> datetime | None:
        """The first tick strictly after ``after``.

        Args:
            after: an aware instant; microseconds allowed.

        Returns:
            The tick in UTC, or ``None`` when the schedule has no later tick (a quartz year list
            that has run out, or none up to the end of year 9997 UTC).

        Raises:
            ValueError: ``after`` is naive.
        """
        secs, _ = _split_instant(after, "after")
        ts = self._next_ts(secs + 1)
        return None if ts is None else _as_utc(ts)

    def next_ticks(self, after: datetime, count: int) -> list[datetime]:
        """The first ``count`` ticks strictly after ``after``, oldest first (fewer if they run out).

        Raises:
            ValueError: ``after`` is naive or ``count`` is negative.
        """
        if count < 0:
            raise ValueError("count must be >= 0")
        secs, _ = _split_instant(after, "after")
        out: list[datetime] = []
        c = secs + 1
        while len(out) < count:
            ts = self._next_ts(c)
            if ts is None:
                break
            out.append(_as_utc(ts))
            c = ts + 1
        return out

    def prev_tick(self, before: datetime) -> datetime | None:
        """The latest tick strictly before ``before`` (``10:00:00`` is before ``10:00:00.5``).

        Returns:
            The tick in UTC, or ``None`` if there is none from year 2 UTC on.

        Raises:
            ValueError: ``before`` is naive.
        """
        secs, micros = _split_instant(before, "before")
        ts = self._prev_ts(secs if micros else secs - 1)
        return None if ts is None else _as_utc(ts)

    def tick_at_or_before(self, instant: datetime) -> datetime | None:
        """The latest tick ``<= instant`` (the tick a run at ``instant`` belongs to), or ``None``.

        Raises:
            ValueError: ``instant`` is naive.
        """
        secs, _ = _split_instant(instant, "instant")
        ts = self._prev_ts(secs)
        return None if ts is None else _as_utc(ts)

    def ticks_between(self, since: datetime, until: datetime) -> Iterator[datetime]:
        """Ticks ``t`` with ``since < t <= until``: half-open, excluding ``since``, including ``until``.

        Consecutive windows ``(a, b], (b, c]`` therefore never yield a tick twice nor lose one.
        Lazy: ticks are produced as the iterator is consumed.

        Raises:
            ValueError: either bound is naive (raised when iteration starts).
        """
        since_s, _ = _split_instant(since, "since")
        until_s, _ = _split_instant(until, "until")
        c = since_s + 1
        while c <= until_s:
            ts = self._next_ts(c)
            if ts is None or ts > until_s:
                return
            yield _as_utc(ts)
            c = ts + 1

    def is_tick(self, instant: datetime) -> bool:
        """Whether ``instant`` is exactly a tick (ticks are whole seconds).

        Raises:
            ValueError: ``instant`` is naive.
        """
        secs, micros = _split_instant(instant, "instant")
        return micros == 0 and self._prev_ts(secs) == secs

    def matches_wall_between(self, start: datetime, end: datetime) -> bool:
        """Whether any wall-clock time in ``[start, end)`` matches the expression (zone ignored).

        Args:
            start, end: naive local wall-clock datetimes (whole seconds are used).

        Used by explain to tell whether a DST gap swallowed wall times this schedule names.
        """
        lo = (start.toordinal() - _EPOCH_ORD) * _DAY + start.hour * 3600 + start.minute * 60 + start.second
        hi = (end.toordinal() - _EPOCH_ORD) * _DAY + end.hour * 3600 + end.minute * 60 + end.second
        return hi > lo and self._wall_match_in(lo, hi - 1)

    def last_tick(self) -> datetime | None:
        """The last tick ever, when the schedule has a year list (quartz); else ``None``."""
        spec = self._spec
        if spec.years is None:
            return None
        ts = self._prev_ts(_year_start(spec.years[1] + 1) + 2 * _DAY)
        return None if ts is None else _as_utc(ts)

    # ------------------------------------------------------------------ wall-clock candidates (croniter)

    def _next_wall(self, wall: int) -> int | None:
        """The first matching wall-clock second >= ``wall`` (wall seconds = local time as if UTC)."""
        spec = self._spec
        if spec.years is not None:  # croniter searches 401 years at most: start inside the list
            if wall >= _year_start(spec.years[1] + 1):
                return None
            wall = max(wall, _year_start(spec.years[0]))
        pool = spec.ahead
        try:
            cursor = pool.pop()
        except IndexError:
            cursor = _Cursor(spec.subs)
        best: int | None = None
        for i, sub in enumerate(spec.subs):
            base, head = cursor.bases[i], cursor.heads[i]
            if base is None or wall < base or (head is not None and wall > head):
                resume = head is not None and wall == head + 1
                head = _cron_next(spec, sub, cursor.iters[i], wall, resume)
                cursor.bases[i], cursor.heads[i] = wall, head
            if head is not None and (best is None or head < best):
                best = head  # the union of the OR's two iterators: the earlier, an instant once
        if len(pool) < _POOL:
            pool.append(cursor)
        return best

    def _prev_wall(self, wall: int) -> int | None:
        """The last matching wall-clock second <= ``wall``."""
        spec = self._spec
        if spec.years is not None:
            if wall < _year_start(spec.years[0]):
                return None
            wall = min(wall, _year_start(spec.years[1] + 1) - 1)
        pool = spec.behind
        try:
            cursor = pool.pop()
        except IndexError:
            cursor = _Cursor(spec.subs)
        best: int | None = None
        for i, sub in enumerate(spec.subs):
            base, head = cursor.bases[i], cursor.heads[i]
            if base is None or wall > base or (head is not None and wall < head):
                resume = head is not None and wall == head - 1
                head = _cron_prev(spec, sub, cursor.iters[i], wall, resume)
                cursor.bases[i], cursor.heads[i] = wall, head
            if head is not None and (best is None or head > best):
                best = head
        if len(pool) < _POOL:
            pool.append(cursor)
        return best

    def _wall_match_in(self, lo: int, hi: int) -> bool:
        w = self._next_wall(lo)
        return w is not None and w <= hi

    # ------------------------------------------------------------------ instants (DST rule)

    def _next_ts(self, c: int) -> int | None:
        """The first tick at or after epoch second ``c`` (from the remembered span when inside it)."""
        span = self._spec.span
        if span:
            p, n = span[0]
            if p < c <= n:
                return n
            if c == p:
                return p
        ts = self._next_ts_search(c)
        if ts is not None and span and span[0][1] == c - 1:
            self._spec.span[:] = [(c - 1, ts)]  # walking forward: the previous answer is the tick before
        return ts

    def _prev_ts(self, c: int) -> int | None:
        """The last tick at or before epoch second ``c`` (from the remembered span when inside it)."""
        span = self._spec.span
        if span:
            p, n = span[0]
            if p <= c < n:
                return p
        ts = self._prev_ts_search(c)
        if ts is not None:
            after = self._next_ts_search(ts + 1)
            if after is not None and after > c:
                self._spec.span[:] = [(ts, after)]
        return ts

    def _next_ts_search(self, c: int) -> int | None:
        """The first tick at or after epoch second ``c``."""
        spec = self._spec
        zone, fixed, hi_ts = spec.zone, spec.fixed, spec.hi_ts
        if c < spec.lo_ts:
            c = spec.lo_ts  # no tick before the supported range (or the year list)
        for _ in range(_MAX_SEGMENTS):
            if c > hi_ts:
                return None
            start, end, off, prev = _segment(zone, c)
            # spring-forward gap at `start`: fixed-time wall times it swallowed fire once at `start`
            if fixed and prev < off and start == c and self._wall_match_in(start + prev, start + off - 1):
                return c
            lo = c + off
            if fixed and prev > off:
                lo = max(lo, start + prev)  # fall-back: repeated wall times fired at first occurrence
            w = self._next_wall(lo)
            if w is None:
                return None
            if w - off < end:
                return w - off if w - off <= _MAX_TS else None
            c = end
        return None  # pragma: no cover - bounded by _MAX_SEGMENTS; parse guarantees a nearer tick

    def _prev_ts_search(self, c: int) -> int | None:
        """The last tick at or before epoch second ``c``."""
        spec = self._spec
        zone, fixed, lo_ts = spec.zone, spec.fixed, spec.lo_ts
        if c > spec.hi_ts:
            c = spec.hi_ts  # no tick after the supported range (or the year list)
        for _ in range(_MAX_SEGMENTS):
            if c < lo_ts:
                return None
            start, _end, off, prev = _segment(zone, c)
            lo = start + off
            if fixed and prev > off:
                lo = start + prev
            w = self._prev_wall(c + off)
            if w is None:
                return None
            if w >= lo:
                return w - off if w - off >= _MIN_TS else None
            if fixed and prev < off and self._wall_match_in(start + prev, start + off - 1):
                return start if start >= _MIN_TS else None
            c = start - 1
        return None  # pragma: no cover


@functools.lru_cache(maxsize=4096)
def _parse_cached(expression: str, dialect: Dialect, tz: str) -> CronSchedule:
    zone = validate_zone(tz)
    return CronSchedule(expression, dialect, tz, _compile(expression, dialect, zone))


def parse_cron(expression: str, dialect: str | Dialect = "unix", tz: str = "UTC") -> CronSchedule:
    """Parse and validate a cron expression (DESIGN §4), cached per (expression, dialect, tz).

    Args:
        expression: 5 fields for ``unix``, 6 (seconds first) for ``seconds``, 6 or 7 (seconds
            first, optional year) for ``quartz``; or a macro (``@daily``...; ``@reboot`` is
            refused). Names JAN-DEC / SUN-SAT in any case.
        dialect: ``"unix"``, ``"seconds"``, ``"quartz"`` or ``"oncalendar"`` (systemd calendar
            events, :mod:`monitor.domain.calendar_events`) in any case (or a :class:`Dialect`);
            the schedule's ``dialect`` is the :class:`Dialect`, whose value is lower case.
        tz: an IANA zone name; see :func:`validate_zone`.

    Returns:
        The :class:`CronSchedule` (the same object for equal arguments: ``functools.lru_cache``).

    Raises:
        ScheduleError: a malformed expression (message names the field and 1-based position,
            e.g. ``field 5 (day of week): 8 is out of range 0-7``), a wrong field count (naming
            the dialects that would accept it), an unknown dialect, or an expression that
            never fires (``0 0 30 2 *``).
        ZoneError: ``tz`` is unknown, not an IANA name, or a fixed offset.
    """
    if not isinstance(expression, str):
        raise ScheduleError("the expression must be a string")
    try:
        d = Dialect(dialect)  # case-insensitive: 'QUARTZ' is Dialect.QUARTZ
    except ValueError:
        raise ScheduleError(
            f"unknown dialect {dialect!r}; use one of: {', '.join(x.value for x in Dialect)}"
        ) from None
    if d is Dialect.ONCALENDAR:  # its own parser and engine, behind the same interface
        from monitor.domain import calendar_events

        return calendar_events.parse_oncalendar(expression, tz)
    return _parse_cached(expression, d, tz)


def ensure_fires_after(schedule: CronSchedule, now: datetime) -> None:
    """Reject a schedule whose ticks have all passed (a quartz year list in the past).

    :func:`parse_cron` is pure and clock-free, so it can reject only expressions that can never
    fire at all; callers that know ``now`` (creating a check, explain) call this as well.

    Args:
        schedule: a parsed schedule. now: the current instant (aware).

    Raises:
        ScheduleError: ``"the expression never fires after <now>: its last tick was <t>"`` when a
            quartz year list has run out; ``"no tick after <now> within the supported range
            (years 2-9997)"`` when ``now`` is so late that the next tick would be after year 9997.
    """
    if schedule.next_tick(now) is not None:
        return
    last = schedule.last_tick()
    if last is None or last > now:
        # no year list has run out: the search hit the end of the supported range
        raise ScheduleError(
            f"no tick after {format_utc(now)} within the supported range (years {_MIN_YEAR}-{_MAX_YEAR})"
        )
    raise ScheduleError(
        f"the expression never fires after {format_utc(now)}: its last tick was {format_utc(last)}"
    )


def format_utc(instant: datetime) -> str:
    """``instant`` as ISO 8601 UTC with whole seconds and a 4-digit year: ``0002-01-02T00:00:00Z``.

    An instant whose UTC time falls outside years 1-9999 (``datetime(1, 1, 1)`` at ``+01:00``)
    is given as written.
    """
    try:
        utc = instant.astimezone(UTC)
    except OverflowError:
        return instant.isoformat(timespec="seconds")
    return f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}Z"


def offset_changes(tz: str, since: datetime, until: datetime) -> list[tuple[datetime, int, int]]:
    """The UTC-offset changes of zone ``tz`` in ``(since, until]``.

    Args:
        tz: an IANA zone name. since, until: aware instants.

    Returns:
        ``(instant in UTC, offset before, offset after)`` tuples, offsets in seconds east of UTC;
        offset after > before is a spring-forward gap, < before a fall-back overlap.

    Raises:
        ZoneError: ``tz`` is not a usable IANA zone.
    """
    zone = validate_zone(tz)
    lo, _ = _split_instant(since, "since")
    hi, _ = _split_instant(until, "until")
    out: list[tuple[datetime, int, int]] = []
    first = time.gmtime(max(lo, _MIN_TS)).tm_year
    last = time.gmtime(min(hi, _MAX_TS)).tm_year
    for year in range(first - 1, min(last, first + 200) + 1):
        for ts, before, after in _year_transitions(zone, year):
            if lo < ts <= hi:
                out.append((_as_utc(ts), before, after))
    return out
