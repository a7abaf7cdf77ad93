"""Cron schedules: the engine of DESIGN §4 behind one interface, :class:`CronSchedule`.

**croniter iterates**; this package owns parsing, validation, dialect translation and the DST
rule, and corrects croniter 7.0.0 wherever its answer departs from the contract. A tick is
computed in four steps, one module each:

* **Parsing and validation** of the ``unix``, ``seconds`` and ``quartz`` dialects into explicit
  value sets: :mod:`monitor.domain.cron.parse` (every error names the field and its position).
* **Day table**: the matching days of each month shape, computed once at parse time; it proves
  that an expression fires at all and filters croniter's supersets: :mod:`monitor.domain.cron.days`.
* **Wall-clock candidates** from croniter over wall seconds (local time written as if UTC), with
  the list of corrections: :mod:`monitor.domain.cron.iteration`, the only importer of croniter.
* **DST rule**, applied per UTC-offset segment of the zone: :mod:`monitor.domain.cron.zones`.

This module compiles an expression into those parts (cached per expression, dialect and zone),
answers the tick questions, and remembers the last answered gap between two ticks. The
``oncalendar`` dialect (systemd calendar events) has its own parser and wall-clock search behind
the same interface (:mod:`monitor.domain.cron.calendar_events`). The engine's public names are
all importable from here: :class:`Dialect`, :class:`ParsedField`, :func:`format_utc`,
:func:`offset_changes` and :func:`validate_zone` are re-exported.

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
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from monitor.domain.cron import days, zones
from monitor.domain.cron.instants import (
    DAY,
    MAX_TS,
    MAX_YEAR,
    MIN_TS,
    MIN_YEAR,
    as_utc,
    format_utc,
    split_instant,
    wall_seconds,
    year_start,
)
from monitor.domain.cron.iteration import WallSearch, wall_search
from monitor.domain.cron.parse import Dialect, ParsedField, parse_fields
from monitor.domain.cron.zones import offset_changes, validate_zone
from monitor.domain.errors import ScheduleError

__all__ = [
    "CronSchedule",
    "Dialect",
    "ParsedField",
    "ensure_fires_after",
    "format_utc",
    "offset_changes",
    "parse_cron",
    "validate_zone",
]


@dataclass(frozen=True, slots=True)
class _Spec:
    fields: tuple[ParsedField, ...]
    walls: WallSearch
    fixed: bool
    zone: ZoneInfo
    # instants a search may start from: the supported range, narrowed to the year list (with
    # two days of slack for offsets) so that no search walks centuries of offset segments
    lo_ts: int
    hi_ts: int
    # the last answered gaps between two consecutive ticks, (tick, next tick) in epoch seconds,
    # newest first (at most SPANS): every run ping of every check on this schedule until the
    # next tick asks the same questions, of its tick's gap and of the next one's
    span: list[tuple[int, int]] = field(default_factory=list, compare=False)


SPANS = 4
"""Gaps between ticks a schedule remembers. One was not enough: a ping binds to its tick (the
gap before the next tick) and moves ``next_due`` past the next tick (the gap after it), so a
single remembered gap alternated between the two and two of every three lookups searched."""


def _compile(expression: str, dialect: Dialect, zone: ZoneInfo) -> _Spec:
    """Parse, prove that the expression fires, and translate it for croniter."""
    fields = parse_fields(expression, dialect)
    by = {f.kind: f for f in fields}
    dom, dow = by["day of month"], by["day of week"]
    day_or = not dom.star and not dow.star
    dom_table, dow_table = days.day_table(dom), days.day_table(dow)
    shapes = days.combine(dom_table, dow_table, day_or)
    years = by["year"].values if "year" in by and not by["year"].star else None
    if not days.fires(shapes, by["month"].values, years):
        raise ScheduleError(
            "the expression never fires: "
            + ("no listed year has a matching day" if years else "no month it names has a matching day")
        )
    lo_ts, hi_ts = MIN_TS, MAX_TS
    if years:
        lo_ts = max(lo_ts, year_start(min(years)) - 2 * DAY)
        hi_ts = min(hi_ts, year_start(max(years) + 1) + 2 * DAY)
    return _Spec(
        fields=fields,
        walls=wall_search(by, years, (dom_table, dow_table, shapes), day_or),
        fixed=all(not by[k].star for k in ("second", "minute", "hour") if k in by),
        zone=zone,
        lo_ts=lo_ts,
        hi_ts=hi_ts,
    )


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
        secs, _ = split_instant(after, "after")
        ts = self._next_ts(secs + 1)
        return None if ts is None else as_utc(ts)

    def next_ticks(self, after: datetime, count: int) -> list[datetime]:
        """The first ``count`` ticks strictly after ``after``, oldest first (fewer if they run out).

        Raises:
            ValueError: ``after`` is naive or ``count`` is negative.
        """
        if count < 0:
            raise ValueError("count must be >= 0")
        secs, _ = split_instant(after, "after")
        out: list[datetime] = []
        c = secs + 1
        while len(out) < count:
            ts = self._next_ts(c)
            if ts is None:
                break
            out.append(as_utc(ts))
            c = ts + 1
        return out

    def prev_tick(self, before: datetime) -> datetime | None:
        """The latest tick strictly before ``before`` (``10:00:00`` is before ``10:00:00.5``).

        Returns:
            The tick in UTC, or ``None`` if there is none from year 2 UTC on.

        Raises:
            ValueError: ``before`` is naive.
        """
        secs, micros = split_instant(before, "before")
        ts = self._prev_ts(secs if micros else secs - 1)
        return None if ts is None else as_utc(ts)

    def tick_at_or_before(self, instant: datetime) -> datetime | None:
        """The latest tick ``<= instant`` (the tick a run at ``instant`` belongs to), or ``None``.

        Raises:
            ValueError: ``instant`` is naive.
        """
        secs, _ = split_instant(instant, "instant")
        ts = self._prev_ts(secs)
        return None if ts is None else as_utc(ts)

    def ticks_between(self, since: datetime, until: datetime) -> Iterator[datetime]:
        """Ticks ``t`` with ``since < t <= until``: half-open, excluding ``since``, including ``until``.

        Consecutive windows ``(a, b], (b, c]`` therefore never yield a tick twice nor lose one.
        Lazy: ticks are produced as the iterator is consumed.

        Raises:
            ValueError: either bound is naive (raised when iteration starts).
        """
        since_s, _ = split_instant(since, "since")
        until_s, _ = split_instant(until, "until")
        c = since_s + 1
        while c <= until_s:
            ts = self._next_ts(c)
            if ts is None or ts > until_s:
                return
            yield as_utc(ts)
            c = ts + 1

    def is_tick(self, instant: datetime) -> bool:
        """Whether ``instant`` is exactly a tick (ticks are whole seconds).

        Raises:
            ValueError: ``instant`` is naive.
        """
        secs, micros = split_instant(instant, "instant")
        return micros == 0 and self._prev_ts(secs) == secs

    def matches_wall_between(self, start: datetime, end: datetime) -> bool:
        """Whether any wall-clock time in ``[start, end)`` matches the expression (zone ignored).

        Args:
            start, end: naive local wall-clock datetimes (whole seconds are used).

        Used by explain to tell whether a DST gap swallowed wall times this schedule names.
        """
        lo, hi = wall_seconds(start), wall_seconds(end)
        return hi > lo and self._wall_match_in(lo, hi - 1)

    def last_tick(self) -> datetime | None:
        """The last tick ever, when the schedule has a year list (quartz); else ``None``."""
        years = self._spec.walls.years
        if years is None:
            return None
        ts = self._prev_ts(year_start(years[1] + 1) + 2 * DAY)
        return None if ts is None else as_utc(ts)

    def _wall_match_in(self, lo: int, hi: int) -> bool:
        return self._spec.walls.match_in(lo, hi)

    # ------------------------------------------------------------------ instants (DST rule)

    def _next_ts(self, c: int) -> int | None:
        """The first tick at or after epoch second ``c`` (from a remembered gap when inside one)."""
        spans = tuple(self._spec.span)  # another thread may replace them; each one stays true
        for p, n in spans:
            if p < c <= n:
                return n
            if c == p:
                return p
        ts = self._next_ts_search(c)
        if ts is not None and any(n == c - 1 for _, n in spans):
            self._remember(c - 1, ts)  # walking forward: c - 1 is a tick, ts the one after it
        return ts

    def _prev_ts(self, c: int) -> int | None:
        """The last tick at or before epoch second ``c`` (from a remembered gap when inside one)."""
        for p, n in tuple(self._spec.span):
            if p <= c < n:
                return p
        ts = self._prev_ts_search(c)
        if ts is not None:
            after = self._next_ts_search(ts + 1)
            if after is not None and after > c:
                self._remember(ts, after)
        return ts

    def _remember(self, tick: int, following: int) -> None:
        """Keep the gap ``(tick, following)`` first, and at most :data:`SPANS` gaps in all."""
        spans = self._spec.span
        spans[:] = [(tick, following), *(s for s in spans if s[0] != tick)][:SPANS]

    def _next_ts_search(self, c: int) -> int | None:
        """The first tick at or after epoch second ``c``."""
        spec = self._spec
        return zones.next_instant(spec.walls, spec.zone, spec.fixed, c, spec.lo_ts, spec.hi_ts)

    def _prev_ts_search(self, c: int) -> int | None:
        """The last tick at or before epoch second ``c``."""
        spec = self._spec
        return zones.prev_instant(spec.walls, spec.zone, spec.fixed, c, spec.lo_ts, spec.hi_ts)


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
            events, :mod:`monitor.domain.cron.calendar_events`) in any case (or a :class:`Dialect`);
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
        from monitor.domain.cron import calendar_events

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
            f"no tick after {format_utc(now)} within the supported range (years {MIN_YEAR}-{MAX_YEAR})"
        )
    raise ScheduleError(
        f"the expression never fires after {format_utc(now)}: its last tick was {format_utc(last)}"
    )
