"""Wall-clock candidates from croniter: the only module of monitor that imports croniter.

croniter iterates; everything around it (parsing, the day table, zones and the DST rule) is ours.

* **Translation**: the parsed value sets (:mod:`monitor.domain.cron.parse`) become one or two
  croniter expressions with explicit comma lists: 6 fields read seconds first
  (``second_at_beginning=True``) plus croniter's year field when quartz lists years, or
  croniter's plain 5-field form when the seconds are just ``0`` and no year is listed; always
  ``day_or=False`` (AND). croniter runs over *wall seconds*: local wall-clock time written as
  if it were UTC, so no zone and no DST ever reaches croniter. When both day fields are
  restricted (the DOM/DOW OR rule), two expressions are iterated — DOM-only (DOW ``*``) and
  DOW-only (DOM ``*``) — and merged (union, an instant once); a side that can never match is
  dropped at parse time. Tokens croniter lacks or gets wrong are handed over as a superset and
  filtered by the day table (:mod:`monitor.domain.cron.days`); a rejected candidate re-seeds
  croniter at the end of its day, so a filter step rejects at most one candidate per day of the
  superset.
* **Iterator reuse**: each schedule (cached per expression, dialect and zone by
  :func:`~monitor.domain.cron.schedules.parse_cron`) keeps croniter iterators per direction,
  with the query each answered and its answer; a query inside that span is answered without
  croniter, a query just past it continues the iterator (one ``get_next``), and any other query
  re-seeds it (``set_current``). Iterators are checked out of a small pool, so concurrent
  threads never share one.


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
    the next change; :func:`~monitor.domain.cron.zones.validate_zone` accepts IANA names only.
11. **Never-firing expressions and long gaps.** ``0 0 30 2 *``: croniter searches and raises
    ``CroniterBadDateError`` at iteration time; we reject it at parse time ("never fires").
    croniter also gives up after 50 years by default; the wrapper allows 401 (the Gregorian
    cycle), starts every search inside a quartz year list (``prev_tick`` from year 2900 or
    ``next_tick`` from year 5 go straight to the list instead of walking offset segments),
    and maps croniter running off the calendar (year 10000 or 0) to "no tick".
12. **``is_valid(..., strict=True)``** rejects ``48 14 31 jun sun``, which fires every Sunday of
    June under the OR rule; we accept it.

Conventions: every datetime in and out is aware; outputs are UTC (``datetime.UTC``) with whole
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from croniter import CroniterBadDateError, croniter

from monitor.domain.cron.days import day_matches, fires
from monitor.domain.cron.instants import DAY, year_start
from monitor.domain.cron.parse import ParsedField

__all__ = ["WallSearch", "wall_search"]

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


@dataclass(frozen=True, slots=True)
class _Sub:
    """One croniter expression over wall seconds: 5 fields, or 6-7 (seconds first, optional year)."""

    text: str
    exact: bool  # every candidate is a tick; otherwise croniter gets a superset, filtered


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


@dataclass(slots=True)
class WallSearch:
    """The wall-clock search of one cron schedule: croniter candidates, filtered by the day table.

    Attributes:
        subs: the croniter expressions, merged (union) when the DOM/DOW OR rule applies.
        shapes: the day table (:func:`monitor.domain.cron.days.day_table`).
        years: first and last listed year (quartz), ``None``: any year.
        ahead, behind: idle croniter cursors, forward and backward (a small pool).
    """

    subs: tuple[_Sub, ...]
    shapes: tuple[int, ...]
    years: tuple[int, int] | None
    ahead: list[_Cursor] = field(default_factory=list)
    behind: list[_Cursor] = field(default_factory=list)

    def next_wall(self, wall: int) -> int | None:
        """The first matching wall-clock second >= ``wall`` (wall seconds = local time as if UTC)."""
        if self.years is not None:  # croniter searches 401 years at most: start inside the list
            if wall >= year_start(self.years[1] + 1):
                return None
            wall = max(wall, year_start(self.years[0]))
        pool = self.ahead
        try:
            cursor = pool.pop()
        except IndexError:
            cursor = _Cursor(self.subs)
        best: int | None = None
        for i, sub in enumerate(self.subs):
            base, head = cursor.bases[i], cursor.heads[i]
            if base is None or wall < base or (head is not None and wall > head):
                resume = head is not None and wall == head + 1
                head = _cron_next(self.shapes, sub, cursor.iters[i], wall, resume)
                cursor.bases[i], cursor.heads[i] = wall, head
            if head is not None and (best is None or head < best):
                best = head  # the union of the OR's two iterators: the earlier, an instant once
        if len(pool) < _POOL:
            pool.append(cursor)
        return best

    def prev_wall(self, wall: int) -> int | None:
        """The last matching wall-clock second <= ``wall``."""
        if self.years is not None:
            if wall < year_start(self.years[0]):
                return None
            wall = min(wall, year_start(self.years[1] + 1) - 1)
        pool = self.behind
        try:
            cursor = pool.pop()
        except IndexError:
            cursor = _Cursor(self.subs)
        best: int | None = None
        for i, sub in enumerate(self.subs):
            base, head = cursor.bases[i], cursor.heads[i]
            if base is None or wall > base or (head is not None and wall < head):
                resume = head is not None and wall == head - 1
                head = _cron_prev(self.shapes, sub, cursor.iters[i], wall, resume)
                cursor.bases[i], cursor.heads[i] = wall, head
            if head is not None and (best is None or head > best):
                best = head
        if len(pool) < _POOL:
            pool.append(cursor)
        return best

    def match_in(self, lo: int, hi: int) -> bool:
        """Whether a wall-clock second in ``[lo, hi]`` matches."""
        w = self.next_wall(lo)
        return w is not None and w <= hi


def _cron_next(shapes: tuple[int, ...], sub: _Sub, it: croniter, wall: int, resume: bool) -> int | None:
    """The first accepted candidate >= ``wall`` (``resume``: croniter already stands at wall - 1)."""
    try:
        w = int(it.get_next() if resume else it.get_next(start_time=float(wall - 1)))
        if sub.exact:
            return w
        for _ in range(_MAX_REJECTS):
            if day_matches(shapes, w):
                return w
            w = int(it.get_next(start_time=float(w - w % DAY + DAY - 1)))  # from the next day
    except _CRON_ENDS:
        return None
    return None  # pragma: no cover - bounded by _MAX_REJECTS; a live expression matches sooner


def _cron_prev(shapes: tuple[int, ...], sub: _Sub, it: croniter, wall: int, resume: bool) -> int | None:
    """The last accepted candidate <= ``wall`` (``resume``: croniter already stands at wall + 1)."""
    try:
        w = int(it.get_prev() if resume else it.get_prev(start_time=float(wall + 1)))
        if sub.exact:
            return w
        for _ in range(_MAX_REJECTS):
            if day_matches(shapes, w):
                return w
            w = int(it.get_prev(start_time=float(w - w % DAY)))  # from the day before
    except _CRON_ENDS:
        return None
    return None  # pragma: no cover


def wall_search(
    by: dict[str, ParsedField],
    years: frozenset[int] | None,
    tables: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]],
    day_or: bool,
) -> WallSearch:
    """Translate the parsed fields into croniter expressions and their search.

    Args:
        by: the parsed fields by kind (``"second"`` absent in ``unix``; ``"year"`` in quartz only).
        years: the listed years (quartz), ``None``: any year.
        tables: the day tables of the day of month, of the day of week, and of the expression.
        day_or: DESIGN §4's OR rule applies (both day fields restricted).

    Returns:
        The search, with one forward cursor made now (croniter parses its expressions at
        parse time, not at the first tick).
    """
    dom_table, dow_table, shapes = tables
    months = by["month"].values
    # croniter's expressions: explicit lists, seconds first, year last when listed; croniter's
    # own 5-field form (seconds 0) when neither is needed, which spares it a field
    second = _values_text(by["second"].values, 0, 59) if "second" in by else "0"
    head = f"{_values_text(by['minute'].values, 0, 59)} {_values_text(by['hour'].values, 0, 23)}"
    if second != "0" or years:
        head = f"{second} {head}"
    month = _values_text(months, 1, 12)
    tail = f" {_values_text(years, 1970, 2099)}" if years else ""
    dom_text, dom_exact = _dom_cron(by["day of month"])
    dow_text, dow_exact = _dow_cron(by["day of week"])
    if day_or:
        # the OR rule: union of a DOM-only and a DOW-only iterator; a side that never fires is dropped
        sides = ((dom_text, "*", dom_exact, dom_table), ("*", dow_text, dow_exact, dow_table))
        subs = tuple(
            _Sub(f"{head} {d} {month} {w}{tail}", exact)
            for d, w, exact, table in sides
            if fires(table, months, years)
        )
    else:
        subs = (_Sub(f"{head} {dom_text} {month} {dow_text}{tail}", dom_exact and dow_exact),)
    return WallSearch(
        subs=subs,
        shapes=shapes,
        years=(min(years), max(years)) if years else None,
        ahead=[_Cursor(subs)],
    )
