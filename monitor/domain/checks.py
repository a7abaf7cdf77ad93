"""Checks: the kinds, states and settings of a monitored job (DESIGN §2, §9).

Pure values. A check's *spec* is what the user configured; its *state* is what the
monitor has learned from pings and time (status machine, down episode, watched ticks).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from monitor.domain.cron import schedules


class CheckKind(StrEnum):
    """``simple``: a period measured from the last run ping; ``cron``: an expression."""

    SIMPLE = "simple"
    CRON = "cron"


class Status(StrEnum):
    """Healthchecks v3 statuses (DESIGN §2); the first match wins: paused, new, down, grace, up."""

    NEW = "new"
    UP = "up"
    GRACE = "grace"
    DOWN = "down"
    PAUSED = "paused"


class PingKind(StrEnum):
    """What a ping says. *Run pings* are start, success, fail, unknown and skip.

    ``unknown`` (our extension, like ``skip``) ends a run whose result nobody can tell: its
    runner died with it (the bundled scheduler sends it for the runs of a replica found dead,
    DESIGN §8). The run's outcome is ``unknown``: neither a failure nor a success.
    """

    START = "start"
    SUCCESS = "success"
    FAIL = "fail"
    UNKNOWN = "unknown"
    LOG = "log"
    SKIP = "skip"
    IGN = "ign"

    @property
    def is_run_ping(self) -> bool:
        return self in (PingKind.START, PingKind.SUCCESS, PingKind.FAIL, PingKind.UNKNOWN, PingKind.SKIP)

    @property
    def is_finish(self) -> bool:
        return self in (PingKind.SUCCESS, PingKind.FAIL, PingKind.UNKNOWN)


class Outcome(StrEnum):
    """Tick and run outcomes (DESIGN §2)."""

    ON_TIME = "on_time"
    LATE = "late"
    MISSED = "missed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    DUPLICATED = "duplicated"
    OVERLAPPED = "overlapped"
    SKIPPED = "skipped"
    UNKNOWN = "unknown"
    EARLY = "early"
    INCOMPLETE = "incomplete"
    TOO_FAST = "too_fast"


class AlertKind(StrEnum):
    """Detections worth telling a person (DESIGN §2)."""

    MISSED = "missed"
    LATE = "late"
    FAILED = "failed"
    TIMEOUT = "timeout"
    OVERLAP = "overlap"
    DUPLICATE = "duplicate"
    RECOVERED = "recovered"
    INCOMPLETE = "incomplete"
    TOO_FAST = "too_fast"
    MONITOR_UNAVAILABLE = "monitor_unavailable"


class FlipReason(StrEnum):
    """Why a check changed between up and down, or to/from paused."""

    MISSED = "missed"
    FAILED = "failed"
    TIMEOUT = "timeout"
    LATE = "late"
    SUCCESS = "success"
    INCOMPLETE = "incomplete"
    TOO_FAST = "too_fast"
    PAUSED = "paused"
    RESUMED = "resumed"


@dataclass(frozen=True, kw_only=True, slots=True)
class SimpleSchedule:
    """A ``simple`` check's schedule: due ``period`` after the last run ping.

    DESIGN §2/§5: "a period measured from the last run ping"; the tick of a run is the due
    instant current at its first ping; ``missed`` when ``now > due + grace`` with no run ping
    since (one due instant at a time, so a silent simple check has one missed tick).
    """

    period: timedelta


Schedule = SimpleSchedule | schedules.CronSchedule


#: The early window when ``early_tolerance`` is unset: min(grace, this) (DESIGN §5, rule 4).
DEFAULT_EARLY_LIMIT = timedelta(seconds=300)


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckSpec:
    """What the user configured for a check. Durations are ``timedelta``; instants aware UTC.

    Attributes:
        early_tolerance: how early a run may arrive and still belong to the tick it is early
            for; ``None`` (the default) means min(grace, 5 min) (DESIGN §5, binding rule 4).
        expected_runs: distinct successful runs each tick needs by its deadline (fleets: the
            same job on N hosts); fewer but at least one is ``incomplete``, more ``duplicate``.
        min_runtime: a run that succeeds sooner than this after its start is ``too_fast``
            (a bad outcome); ``None``: no lower bound.
    """

    schedule: Schedule
    grace: timedelta
    max_runtime: timedelta
    failure_threshold: int = 1
    recovery_threshold: int = 1
    early_tolerance: timedelta | None = None
    expected_runs: int = 1
    min_runtime: timedelta | None = None
    manual_resume: bool = False
    post_only: bool = False
    name: str = ""
    tz: str = "UTC"

    @property
    def kind(self) -> CheckKind:
        return CheckKind.SIMPLE if isinstance(self.schedule, SimpleSchedule) else CheckKind.CRON

    @property
    def early_limit(self) -> timedelta:
        """The early window before capping: ``early_tolerance``, else min(grace, 5 min).

        Also the furthest a ping's ``scheduled`` may lie after its arrival (DESIGN §5).
        """
        if self.early_tolerance is not None:
            return self.early_tolerance
        return min(self.grace, DEFAULT_EARLY_LIMIT)

    def early_window(self, previous: datetime, following: datetime) -> timedelta:
        """E of binding rule 4: :attr:`early_limit` capped at half the gap between two ticks."""
        return min(self.early_limit, (following - previous) / 2)


@dataclass(kw_only=True, slots=True)
class CheckState:
    """What the monitor has learned about a check. Mutated only by ``monitor.domain.detection``.

    Attributes:
        paused: the check is paused (no ticks watched, runs raise nothing).
        watch_from: ticks strictly after this instant are watched; ``None`` while the check is
            ``new`` (no run ping since creation or resume).
        judged_until: every watched tick at or before this instant is resolved (has a run, was
            skipped or judged missed).
        last_run_ping_at: arrival of the last run ping (anchor of ``simple`` schedules).
        bad_streak / good_streak: consecutive bad outcomes / successful runs, in arrival order.
        good_before_miss: ``good_streak`` just before the newest missed tick was judged; a late
            run for that tick restores it (the miss turned out to be a late run).
        episode_key: dedupe key of the alert that opened the current down episode, or ``None``
            when no episode is open (status is not down).
        episode_count: bad outcomes in the open episode (the episode alert's ``count``).
        late_in_episode: a ``late`` alert was already raised in this episode.
        last_missed_tick: the newest tick judged missed (recovery needs a run at or after it).
        pending_tick: the first unresolved watched tick that no newer successful run
            supersedes (drives ``grace`` status), or ``None``.
        next_due: when the evaluator must next look at this check, or ``None``.
        episode_from: the tick of the bad outcome that opened the open episode.
        closed_key / closed_from / closed_to / closed_count: the last closed down episode: its
            alert's key, the tick that opened it, the tick of the run that closed it, and its
            count. A superseded tick in ``[closed_from, closed_to)`` is counted in it (DESIGN §5,
            supersession).
        superseded_key / superseded_through / superseded_count: the shared ``missed`` alert of
            the latest run of consecutive superseded ticks, the newest tick it covers, and how
            many it covers.
    """

    paused: bool = False
    watch_from: datetime | None = None
    judged_until: datetime | None = None
    last_run_ping_at: datetime | None = None
    bad_streak: int = 0
    good_streak: int = 0
    good_before_miss: int = 0
    episode_key: str | None = None
    episode_count: int = 0
    late_in_episode: bool = False
    last_missed_tick: datetime | None = None
    pending_tick: datetime | None = None
    next_due: datetime | None = None
    episode_from: datetime | None = None
    closed_key: str | None = None
    closed_from: datetime | None = None
    closed_to: datetime | None = None
    closed_count: int = 0
    superseded_key: str | None = None
    superseded_through: datetime | None = None
    superseded_count: int = 0

    @property
    def is_new(self) -> bool:
        return self.watch_from is None

    @property
    def is_down(self) -> bool:
        return self.episode_key is not None
