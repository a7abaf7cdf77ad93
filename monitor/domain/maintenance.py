"""Maintenance windows: when alerts are recorded but not sent (issue 8).

Pure: no I/O, never reads the clock. A window is either *one-off* (``[starts_at, ends_at)``)
or *recurring*: every tick of a cron schedule (any dialect of DESIGN §4, evaluated in an IANA
zone with the same DST rules as checks) opens an occurrence lasting ``duration``. A window
belongs to one check, or to the whole project when ``check_id`` is ``None``.

The rules, as Healthchecks users would expect from a "maintenance" mute plus a summary:

* an alert raised at instant ``x`` is *held back* when some applicable window has an
  occurrence with ``start <= x < end`` (:func:`covering`);
* when an occurrence ends, one summary goes out listing what was held back
  (:func:`summary_due` names the latest occurrence that ended since the last summary; older
  ones missed while no notifier ran are folded into it rather than sent as a burst).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from monitor.domain import schedules

#: Longest occurrence of a recurring window (a week); longer mutes are one-off windows.
MAX_DURATION = timedelta(days=7)


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


def occurrence_at(window: Window, instant: datetime) -> Occurrence | None:
    """The occurrence of ``window`` that contains ``instant``, if any.

    Args:
        window: the window.
        instant: an aware instant.

    Returns:
        ``Occurrence(start, end)`` with ``start <= instant < end``, else ``None``. For
        recurring windows whose occurrences overlap (duration longer than the period), the
        latest one that began is returned (it also ends last).

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
        return Occurrence(tick, tick + window.duration)
    return None


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
        The occurrence, or ``None`` when no occurrence ended in the span. O(1): one
        ``tick_at_or_before`` lookup, never a scan.
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
    if tick is not None and tick + window.duration > floor:
        return Occurrence(tick, tick + window.duration)
    return None


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
