"""The day table: the matching days of each month shape, computed once at parse time.

A *month shape* is the length of a month (28-31) and the weekday of its 1st; only 28 shapes
exist. For each, a bit mask of the days the day-of-month and day-of-week fields match (bit d:
day d). Combined by the DOM/DOW rule of DESIGN §4 (OR when both fields are restricted, i.e.
neither starts with ``*`` or is ``?``; else AND), the table proves that an expression fires at
all ("never fires" otherwise, which bounds every search), and it is the exact day predicate that
filters croniter's candidates where croniter is handed a superset
(:mod:`monitor.domain.cron.iteration`). ``L``, ``LW``, ``L-n``, ``nW``, ``n#k`` and ``nL`` are
all resolved here; ``31W`` in a month without a 31st matches no day that month (DESIGN §4).
"""

from __future__ import annotations

from datetime import date

from monitor.domain.cron.instants import DAY, EPOCH_ORD
from monitor.domain.cron.parse import ParsedField

__all__ = ["combine", "day_matches", "day_table", "fires", "first_weekday", "month_length"]


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


def month_length(year: int, month: int) -> int:
    """The number of days of ``month`` (1-12) in ``year`` (proleptic Gregorian)."""
    if month == 2:
        return 29 if (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def first_weekday(year: int, month: int) -> int:
    """Weekday of the 1st, 0=Sunday."""
    return (date(year, month, 1).weekday() + 1) % 7


def _mask(days: set[int]) -> int:
    return sum(1 << d for d in days)


def fires(table: tuple[int, ...], months: frozenset[int], years: frozenset[int] | None) -> bool:
    """Whether some allowed month (of some listed year) has a matching day in ``table``."""
    if years is not None:
        return any(
            table[(month_length(year, month) - 28) * 7 + first_weekday(year, month)]
            for year in years
            for month in months
        )
    # every month starts on every weekday within the 400-year cycle, leap Februaries too
    return any(
        table[(n - 28) * 7 + wd]
        for month in months
        for n in ((28, 29) if month == 2 else (month_length(2001, month),))
        for wd in range(7)
    )


def day_table(field: ParsedField) -> tuple[int, ...]:
    """The bit masks of the days ``field`` (day of month or day of week) matches, per shape.

    Index ``(length - 28) * 7 + weekday of the 1st`` (0=Sunday); bit d set: day d matches.
    """
    days = _dom_days if field.kind == "day of month" else _dow_days
    return tuple(_mask(days(field, n, wd1)) for n, wd1 in _SHAPES)


def combine(dom_table: tuple[int, ...], dow_table: tuple[int, ...], day_or: bool) -> tuple[int, ...]:
    """The days of the expression: the union of the two fields' (``day_or``, DESIGN §4's OR
    rule when both are restricted) or their intersection."""
    return tuple((a | b) if day_or else (a & b) for a, b in zip(dom_table, dow_table, strict=True))


def day_matches(shapes: tuple[int, ...], wall: int) -> bool:
    """Whether the day of wall second ``wall`` is set in the day table ``shapes``."""
    d = date.fromordinal(wall // DAY + EPOCH_ORD)
    shape = shapes[(month_length(d.year, d.month) - 28) * 7 + first_weekday(d.year, d.month)]
    return bool(shape >> d.day & 1)
