"""Instants as epoch seconds: the supported range, conversions and the UTC text of a tick.

The schedule engines (:mod:`monitor.domain.cron.schedules`, :mod:`monitor.domain.cron.calendar_events`)
compute in whole epoch seconds. *Wall seconds* are local wall-clock time written as if it were
UTC (``2026-03-29 02:30`` local is the epoch second of ``2026-03-29T02:30:00Z``), so that no zone
reaches the wall-clock search. Ticks exist in years 2-9997 UTC only (room for offsets and a year
of look-around at both ends of what :class:`datetime.datetime` represents).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

__all__ = [
    "DAY",
    "EPOCH",
    "EPOCH_ORD",
    "MAX_TS",
    "MAX_YEAR",
    "MIN_TS",
    "MIN_YEAR",
    "as_utc",
    "format_utc",
    "split_instant",
    "wall_seconds",
    "year_start",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
EPOCH_ORD = date(1970, 1, 1).toordinal()
DAY = 86400
# Supported instants: years 2..9997 UTC (room for offsets and a year of look-around at both
# ends). Ticks outside [MIN_TS, MAX_TS] do not exist; any aware instant may be asked about.
MIN_YEAR, MAX_YEAR = 2, 9997
MIN_TS = (date(MIN_YEAR, 1, 1).toordinal() - EPOCH_ORD) * DAY
MAX_TS = (date(MAX_YEAR + 1, 1, 1).toordinal() - EPOCH_ORD) * DAY - 1


def split_instant(instant: datetime, what: str) -> tuple[int, int]:
    """Whole seconds since the epoch (floored) and the leftover microseconds.

    Args:
        instant: an aware datetime (any offset). what: the argument's name, for the error.

    Raises:
        ValueError: ``instant`` is naive (``"after must be an aware datetime, got naive ..."``).
    """
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(f"{what} must be an aware datetime, got naive {instant!r}")
    delta = instant - EPOCH
    return delta.days * DAY + delta.seconds, delta.microseconds


def as_utc(ts: int) -> datetime:
    """Epoch second ``ts`` as an aware UTC datetime."""
    return EPOCH + timedelta(seconds=ts)


def wall_seconds(wall: datetime) -> int:
    """A naive wall-clock datetime as wall seconds (whole seconds; microseconds dropped)."""
    return (wall.toordinal() - EPOCH_ORD) * DAY + wall.hour * 3600 + wall.minute * 60 + wall.second


def year_start(year: int) -> int:
    """The epoch second of January 1st, 00:00 UTC, of ``year`` (1-9999)."""
    return (date(year, 1, 1).toordinal() - EPOCH_ORD) * DAY


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
