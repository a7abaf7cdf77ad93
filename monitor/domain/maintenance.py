"""Maintenance windows: when alerts are recorded but not sent.

Pure: no I/O, never reads the clock. A window is either *one-off* (``[starts_at, ends_at)``)
or *recurring*: every tick of a cron schedule (any dialect of DESIGN §4, evaluated in an IANA
zone with the same DST rules as checks) opens an occurrence lasting ``duration``. A window
belongs to one check, or to the whole project when ``check_id`` is ``None``.

The rules, as Healthchecks users would expect from a "maintenance" mute plus a summary:

* an alert raised at instant ``x`` is *held back* when some applicable window has an
  occurrence with ``start <= x < end`` (:func:`covering`);
* when an occurrence ends, one summary goes out listing what was held back, and only if
  something was (:func:`summary_due` names the latest occurrence that ended since the last
  summary; older ones missed while no notifier ran are folded into it rather than sent as a
  burst); deleting a window ends its current occurrence at once (:func:`cut_short`);
* occurrences that overlap or touch (one starts when or before the previous ends) are one
  span (:func:`occurrence_at` merges them, at most :data:`MERGE_LIMIT` ticks each way), so a
  window never sends one summary per tick. New recurring windows must be shorter than the
  shortest gap between their ticks (:func:`shortest_gap`), so this only matters for windows
  saved before that rule or irregular schedules.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from monitor.domain.cron import schedules

#: Longest occurrence of a recurring window (a week); longer mutes are one-off windows.
MAX_DURATION = timedelta(days=7)

#: Longest one-off window: a mute longer than a year is a forgotten mute.
MAX_ONE_OFF = timedelta(days=366)

#: Most neighbouring ticks merged into one occurrence each way (bounds every call).
MERGE_LIMIT = 50

#: :func:`shortest_gap` looks at most this many ticks, and at most this far ahead.
GAP_SAMPLE_TICKS = 2000
GAP_SAMPLE_SPAN = timedelta(days=366)


@dataclass(frozen=True, kw_only=True, slots=True)
class Window:
    """One maintenance window.

    Attributes:
        id: the window's public id.
        check_id: the check it mutes, or ``None`` for every check of the project.
        name: shown in the summary.
        starts_at / ends_at: a one-off window's span (aware UTC), ``None`` for recurring ones.
        schedule / dialect / tz: a recurring window's cron expression, dialect and IANA zone.
        duration: how long each recurring occurrence lasts (``0 < duration <= MAX_DURATION``).
        created_at: when the window was saved; occurrences ending before it need no summary.
    """

    id: str
    check_id: int | None
    name: str
    created_at: datetime
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    schedule: str | None = None
    dialect: str = "unix"
    tz: str = "UTC"
    duration: timedelta | None = None

    @property
    def recurring(self) -> bool:
        """True for a cron window, False for a one-off span."""
        return self.schedule is not None

    def applies_to(self, check_id: int | None) -> bool:
        """Whether this window mutes alerts of ``check_id`` (``None``: a project-level alert)."""
        return self.check_id is None or self.check_id == check_id


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One span of a window, ``[start, end)``, aware UTC."""

    start: datetime
    end: datetime


def _merged(cron: schedules.CronSchedule, duration: timedelta, tick: datetime) -> Occurrence:
    """The span of ``tick``'s occurrence joined with every neighbour that overlaps or touches it."""
    start, end = tick, tick + duration
    earlier = cron.prev_tick(start)
    for _ in range(MERGE_LIMIT):
        if earlier is None or earlier + duration < start:
            break
        start = earlier
        earlier = cron.prev_tick(start)
    later = cron.next_tick(tick)
    for _ in range(MERGE_LIMIT):
        if later is None or later > end:
            break
        end = max(end, later + duration)
        later = cron.next_tick(later)
    return Occurrence(start, end)


def occurrence_at(window: Window, instant: datetime) -> Occurrence | None:
    """The occurrence of ``window`` that contains ``instant``, if any.

    Args:
        window: the window.
        instant: an aware instant.

    Returns:
        ``Occurrence(start, end)`` with ``start <= instant < end``, else ``None``. Occurrences
        of a recurring window that overlap or touch are merged into one span.

    Raises:
        ScheduleError / ZoneError: the window's schedule is invalid (validated at creation).
    """
    if not window.recurring:
        assert window.starts_at is not None and window.ends_at is not None
        if window.starts_at <= instant < window.ends_at:
            return Occurrence(window.starts_at, window.ends_at)
        return None
    assert window.schedule is not None and window.duration is not None
    cron = schedules.parse_cron(window.schedule, window.dialect, window.tz)
    # The latest tick at or before the instant ends last: if its occurrence does not cover the
    # instant, no earlier one does.
    tick = cron.tick_at_or_before(instant)
    if tick is not None and instant < tick + window.duration:
        return _merged(cron, window.duration, tick)
    return None


def shortest_gap(cron: schedules.CronSchedule, after: datetime) -> timedelta | None:
    """The shortest time between two consecutive ticks of ``cron`` after ``after``.

    Looks at the ticks of the next :data:`GAP_SAMPLE_SPAN` (a year: every DST change and month
    length), at most :data:`GAP_SAMPLE_TICKS` of them (a dense schedule shows its shortest
    gap long before that). ``None`` when fewer than two ticks are in the sample.

    Args:
        cron: a parsed schedule.
        after: an aware instant (now).
    """
    shortest: timedelta | None = None
    horizon = after + GAP_SAMPLE_SPAN
    previous = cron.next_tick(after)
    for _ in range(GAP_SAMPLE_TICKS):
        if previous is None or previous > horizon:
            break
        current = cron.next_tick(previous)
        if current is None:
            break
        gap = current - previous
        shortest = gap if shortest is None else min(shortest, gap)
        previous = current
    return shortest


def covering(windows: Iterable[Window], check_id: int | None, instant: datetime) -> Window | None:
    """The first window that mutes an alert of ``check_id`` raised at ``instant``, or ``None``.

    Args:
        windows: the project's windows (check-level and project-level).
        check_id: the alert's check, ``None`` for a project-level alert.
        instant: when the alert was raised (aware).
    """
    for window in windows:
        if window.applies_to(check_id) and occurrence_at(window, instant) is not None:
            return window
    return None


def summary_due(window: Window, since: datetime | None, now: datetime) -> Occurrence | None:
    """The latest occurrence of ``window`` that ended in ``(since, now]``: its summary is due.

    Args:
        window: the window.
        since: the end of the last occurrence already summarised (``None``: none yet; then
            only occurrences ending after ``window.created_at`` count).
        now: the current instant (aware).

    Returns:
        The occurrence (merged with its overlapping neighbours), or ``None`` when no occurrence
        ended in the span. Bounded: a few tick lookups, never a scan.
    """
    floor = since if since is not None else window.created_at
    if not window.recurring:
        assert window.starts_at is not None and window.ends_at is not None
        if floor < window.ends_at <= now and window.starts_at < window.ends_at:
            return Occurrence(window.starts_at, window.ends_at)
        return None
    assert window.schedule is not None and window.duration is not None
    cron = schedules.parse_cron(window.schedule, window.dialect, window.tz)
    # end = tick + duration lies in (floor, now]  <=>  tick lies in (floor - duration, now - duration]
    tick = cron.tick_at_or_before(now - window.duration)
    if tick is None:
        return None
    occurrence = _merged(cron, window.duration, tick)
    if occurrence.end > now:
        # the tick's occurrence runs on, merged with later ones: the one before it is the
        # latest that ended
        earlier = cron.prev_tick(occurrence.start)
        if earlier is None:
            return None
        occurrence = _merged(cron, window.duration, earlier)
    if floor < occurrence.end <= now:
        return occurrence
    return None


def cut_short(window: Window, since: datetime | None, now: datetime) -> Occurrence | None:
    """What a window being deleted at ``now`` still owes a summary for.

    Deleting a window ends it: its current occurrence counts as ended at ``now``, and an
    occurrence that ended but whose summary was not raised yet is still owed.

    Args:
        window: the window being deleted.
        since: its ``summarized_until``.
        now: the deletion instant (aware).

    Returns:
        ``Occurrence(start, now + 1 µs)`` for an occurrence going on (an alert raised at the
        deletion instant itself was held back too), else :func:`summary_due`'s answer.
    """
    current = occurrence_at(window, now)
    if current is not None:
        return Occurrence(current.start, now + timedelta(microseconds=1))
    return summary_due(window, since, now)


def next_occurrence(window: Window, after: datetime) -> Occurrence | None:
    """The first occurrence that is going on at or starts after ``after`` (for display)."""
    current = occurrence_at(window, after)
    if current is not None:
        return current
    if not window.recurring:
        assert window.starts_at is not None and window.ends_at is not None
        return Occurrence(window.starts_at, window.ends_at) if window.starts_at > after else None
    assert window.schedule is not None and window.duration is not None
    tick = schedules.parse_cron(window.schedule, window.dialect, window.tz).next_tick(after)
    return Occurrence(tick, tick + window.duration) if tick is not None else None
