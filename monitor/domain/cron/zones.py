"""Zones and the DST rule: IANA zone validation, UTC-offset segments and ticks as instants.

* **Zones** are IANA names, never fixed offsets (DESIGN §4): :func:`validate_zone`. croniter
  would happily iterate in ``+02:00``, which is an hour off after the next change.
* **Offset segments**: between two offset changes the wall clock is a monotonic image of the UTC
  line. :func:`segment` gives the constant-offset segment holding an instant; the changes are
  found by sampling every 6 hours and bisecting to the second (:func:`offset_changes`).
* **The DST rule** (DESIGN §4), applied per segment by :func:`next_instant` and
  :func:`prev_instant` over any wall-clock search (:class:`WallClock`): a *fixed-time* schedule
  (no seconds/minute/hour field starts with ``*``) fires once at the first instant after a
  spring-forward gap for wall times the gap swallows, and only at the first occurrence of a
  repeated wall time in a fall-back overlap; a *wildcard* schedule has no ticks inside a gap and
  fires at every real occurrence in an overlap. Examples: ``30 2 * * *`` Europe/Berlin on
  2026-10-25 fires once, at 00:30Z (croniter fires at 02:30 CEST *and* 02:30 CET);
  ``*/30 2 * * *`` on 2026-03-29 has no tick that day (croniter fires at 03:00 CEST); seconds-first
  ``0 30 2 * * *`` fires at 2026-03-29T01:00:00Z, the first instant after the gap.

Nothing here reads the clock; :mod:`zoneinfo` loads the zone database.
"""

from __future__ import annotations

import functools
import re
import time
from bisect import bisect_right
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from monitor.domain.cron.instants import (
    DAY,
    EPOCH_ORD,
    MAX_TS,
    MIN_TS,
    as_utc,
    split_instant,
    year_start,
)
from monitor.domain.errors import ZoneError

__all__ = ["WallClock", "next_instant", "offset_changes", "prev_instant", "segment", "validate_zone"]

# Instants whose local time is representable in every zone (offsets stay within a day), for
# offset look-ups: the offset at the calendar's very ends is the one a day inside them.
_OFFSET_LO = (datetime(1, 1, 2).toordinal() - EPOCH_ORD) * DAY
_OFFSET_HI = (datetime(9999, 12, 30).toordinal() - EPOCH_ORD) * DAY
# Offset segments crossed by one search (two offset changes a year at most, in practice).
_MAX_SEGMENTS = 4 * 401
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
    return off.days * DAY + off.seconds


# Offset changes are found by sampling every 6 hours and bisecting to the second; two changes
# less than 6 hours apart that cancel out would be missed (none exist in the tz database).
_SAMPLE = 6 * 3600


@functools.lru_cache(maxsize=16384)
def _year_transitions(zone: ZoneInfo, year: int) -> tuple[tuple[int, int, int], ...]:
    """Offset changes (instant, offset before, offset after) in (start of year, start of next]."""
    start, end = year_start(year), year_start(year + 1)
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
    lo = year_start(year - 1)
    return _Window(
        starts=tuple(t[0] for t in trans),
        trans=trans,
        base=_offset(zone, lo),
        lo=lo,
        hi=year_start(year + 2),
    )


def segment(zone: ZoneInfo, ts: int) -> tuple[int, int, int, int]:
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
    lo, _ = split_instant(since, "since")
    hi, _ = split_instant(until, "until")
    out: list[tuple[datetime, int, int]] = []
    first = time.gmtime(max(lo, MIN_TS)).tm_year
    last = time.gmtime(min(hi, MAX_TS)).tm_year
    for year in range(first - 1, min(last, first + 200) + 1):
        for ts, before, after in _year_transitions(zone, year):
            if lo < ts <= hi:
                out.append((as_utc(ts), before, after))
    return out


# --------------------------------------------------------------------------- the DST rule


class WallClock(Protocol):
    """A search over wall seconds (local wall-clock time written as if it were UTC)."""

    def next_wall(self, wall: int) -> int | None:
        """The first matching wall second >= ``wall``, or ``None``."""
        ...

    def prev_wall(self, wall: int) -> int | None:
        """The last matching wall second <= ``wall``, or ``None``."""
        ...

    def match_in(self, lo: int, hi: int) -> bool:
        """Whether a wall second in ``[lo, hi]`` matches."""
        ...


def next_instant(walls: WallClock, zone: ZoneInfo, fixed: bool, c: int, lo_ts: int, hi_ts: int) -> int | None:
    """The first tick at or after epoch second ``c``, by the DST rule over ``walls``' matches.

    Args:
        walls: the wall-clock search. zone: the schedule's zone. fixed: fixed-time (DESIGN §4).
        c: an epoch second. lo_ts, hi_ts: the instants a search may start from and reach.

    Returns:
        The tick (epoch seconds), or ``None`` when there is none up to ``hi_ts``.
    """
    if c < lo_ts:
        c = lo_ts  # no tick before the supported range (or the year list)
    for _ in range(_MAX_SEGMENTS):
        if c > hi_ts:
            return None
        start, end, off, prev = segment(zone, c)
        # spring-forward gap at `start`: fixed-time wall times it swallowed fire once at `start`
        if fixed and prev < off and start == c and walls.match_in(start + prev, start + off - 1):
            return c
        lo = c + off
        if fixed and prev > off:
            lo = max(lo, start + prev)  # fall-back: repeated wall times fired at first occurrence
        w = walls.next_wall(lo)
        if w is None:
            return None
        if w - off < end:
            return w - off if w - off <= MAX_TS else None
        c = end
    return None  # pragma: no cover - bounded by _MAX_SEGMENTS; parse guarantees a nearer tick


def prev_instant(walls: WallClock, zone: ZoneInfo, fixed: bool, c: int, lo_ts: int, hi_ts: int) -> int | None:
    """The last tick at or before epoch second ``c`` (the mirror of :func:`next_instant`)."""
    if c > hi_ts:
        c = hi_ts  # no tick after the supported range (or the year list)
    for _ in range(_MAX_SEGMENTS):
        if c < lo_ts:
            return None
        start, _end, off, prev = segment(zone, c)
        lo = start + off
        if fixed and prev > off:
            lo = start + prev
        w = walls.prev_wall(c + off)
        if w is None:
            return None
        if w >= lo:
            return w - off if w - off >= MIN_TS else None
        if fixed and prev < off and walls.match_in(start + prev, start + off - 1):
            return start if start >= MIN_TS else None
        c = start - 1
    return None  # pragma: no cover
