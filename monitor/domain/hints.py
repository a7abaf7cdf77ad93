"""Hints: advice drawn from a check's recent runs, shown next to it (API ``hints``, its dashboard
page, ``monitor cron explain --check``). Pure: no I/O, no clock.

One hint so far, Healthchecks' most common support answer: **the time zone is wrong**. A job
whose crontab runs in UTC (a server or container default) while its check says
``America/New_York`` reports every run four hours before its tick; a whole number of hours,
run after run, is almost never the job's own doing.

Rule (:func:`tz_mismatch_hint`): over the check's last :data:`RUNS_CONSIDERED` runs, each run's
first ping arrived, on the same side of its tick, within :data:`TOLERANCE` of either

* a whole number of hours, at least one (``runs arrive 4 h before their ticks``), or
* the check zone's UTC offset at that tick (``Asia/Kolkata``'s 5 h 30 min; a series across a
  DST change, 1 h then 2 h) — what a job keeping UTC shows.

The hint names what would explain it: ``the job may run in UTC`` when the lag is the zone's UTC
offset at every tick; else ``the job may run at UTC+02:00`` when one fixed offset explains
every run (the check zone's offset at the tick minus the whole hours); else nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from monitor.domain.cron.schedules import validate_zone

RUNS_CONSIDERED = 5
"""How many of the latest runs must agree (fewer runs: no hint)."""

TOLERANCE = timedelta(minutes=5)
"""How far a run's lag may be from a whole hour (or from the zone's offset) and still count."""

HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class RunArrival:
    """One run as the hint sees it.

    Attributes:
        tick: the tick the run is bound to (aware UTC).
        arrived: when its first ping arrived (aware UTC).
    """

    tick: datetime
    arrived: datetime


def hints(kind: str, tz: str, runs: Sequence[RunArrival]) -> list[str]:
    """Every hint for a check, in a stable order (empty when there is none).

    Args:
        kind: the check's kind, ``"cron"`` or ``"simple"`` (a simple check has no zone: no hint).
        tz: the check's IANA zone.
        runs: its runs, any order; only the latest :data:`RUNS_CONSIDERED` by arrival count.

    Raises:
        ZoneError: ``tz`` is not an IANA zone (checks store validated zones).
    """
    if kind != "cron":
        return []
    found = tz_mismatch_hint(runs, tz)
    return [found] if found is not None else []


def tz_mismatch_hint(runs: Sequence[RunArrival], tz: str) -> str | None:
    """The time-zone hint for a check zoned ``tz``, or ``None`` (rule in the module docstring).

    Args:
        runs: the check's runs, any order; the latest :data:`RUNS_CONSIDERED` by arrival count.
        tz: the check's IANA zone.

    Returns:
        e.g. ``"runs arrive 4 h before their ticks: is tz right? the job may run in UTC"``;
        ``None`` with fewer runs, or when any of them breaks the pattern.

    Raises:
        ZoneError: ``tz`` is not an IANA zone.
    """
    latest = sorted(runs, key=lambda r: (r.arrived, r.tick))[-RUNS_CONSIDERED:]
    if len(latest) < RUNS_CONSIDERED:
        return None
    zone = validate_zone(tz)
    lags = [r.arrived - r.tick for r in latest]
    if not (all(lag > TOLERANCE for lag in lags) or all(lag < -TOLERANCE for lag in lags)):
        return None
    offsets = [r.tick.astimezone(zone).utcoffset() or timedelta(0) for r in latest]
    keeps_utc = all(abs(lag - offset) <= TOLERANCE for lag, offset in zip(lags, offsets, strict=True))
    hours = [round(lag / HOUR) for lag in lags]
    whole = all(h != 0 and abs(lag - h * HOUR) <= TOLERANCE for lag, h in zip(lags, hours, strict=True))
    if keeps_utc:
        shown = [abs(o) for o in offsets]
        because = " the job may run in UTC"
    elif whole:
        shown = [abs(h) * HOUR for h in hours]
        implied = {offset - h * HOUR for offset, h in zip(offsets, hours, strict=True)}
        because = f" the job may run at {format_offset(implied.pop())}" if len(implied) == 1 else ""
    else:
        return None
    side = "before" if lags[0] < timedelta(0) else "after"
    low, high = min(shown), max(shown)
    amount = format_span(low) if low == high else f"{format_span(low)} to {format_span(high)}"
    return f"runs arrive {amount} {side} their ticks: is tz right?{because}"


def format_span(span: timedelta) -> str:
    """Whole hours and minutes: ``4 h``, ``5 h 30 min``, ``45 min`` (seconds dropped)."""
    minutes = int(span.total_seconds()) // 60
    h, m = divmod(minutes, 60)
    if h and m:
        return f"{h} h {m} min"
    return f"{h} h" if h else f"{m} min"


def format_offset(offset: timedelta) -> str:
    """A UTC offset as ``UTC+02:00``, ``UTC-04:00``, ``UTC+05:30``; zero is ``UTC``."""
    if offset == timedelta(0):
        return "UTC"
    sign = "+" if offset > timedelta(0) else "-"
    minutes = int(abs(offset).total_seconds()) // 60
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"
