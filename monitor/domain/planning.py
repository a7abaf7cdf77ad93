"""The bundled scheduler's planning rules: which ticks run, wait or are skipped (DESIGN §8).

Pure and clock-free: :func:`plan` takes the job's rules, what is running and queued, the
ticks that came due and are not yet claimed (the *backlog*), and ``now``; it answers which
ticks to start now (in order), which to skip (each with a :class:`SkipReason`, reported to the
monitor with a ``skip`` ping) and which to keep queued. The loop in
:mod:`monitor.scheduler.runner` calls it every round for every job whose lease it holds.

The rules, in order:

1. **Catch-up** (only after *downtime*: the oldest backlog tick is older than the handover
   window, two lease TTLs; a dead holder's lease passes within one TTL, so younger unclaimed
   ticks are a handover, not downtime, and all run): ``all`` keeps every backlog tick,
   ``latest`` only the newest, ``none`` none. ``max_catchup`` always caps the backlog to its
   newest ticks (Kubernetes refuses past 100 missed schedules).
2. **Starting deadline**: a tick that would start more than ``starting_deadline`` after its
   time is skipped (also a queued one, when its turn comes too late).
3. **Concurrency policy**, given the runs in progress (Kubernetes: ``Allow``, ``Forbid``,
   ``Replace``; Temporal: ``BufferOne``, ``BufferAll``):

   * ``Allow``: start every candidate — except catch-up ticks (missed during downtime): those
     start one after another, oldest first (queued like ``BufferAll``), so they never overlap.
   * ``Forbid``: nothing running → start the oldest candidate; every other candidate, and every
     candidate while a run is in progress, is skipped.
   * ``Replace``: the newest candidate starts and the runs in progress are terminated first;
     older candidates are skipped (each would have been replaced at once).
   * ``BufferOne``: nothing running → start the oldest; keep at most one tick queued, the
     first one buffered (Temporal keeps the first and drops later ones).
   * ``BufferAll``: nothing running → start the oldest; queue every other tick, in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum

from monitor.domain.cron import schedules
from monitor.domain.jobs import Catchup, ConcurrencyPolicy, Job


class SkipReason(StrEnum):
    """Why the scheduler skipped a tick on purpose (logged; the monitor gets a ``skip`` ping)."""

    CATCHUP = "catchup"
    """``catchup = latest | none`` dropped a tick missed during downtime."""
    MAX_CATCHUP = "max_catchup"
    """Older than the newest ``max_catchup`` overdue ticks."""
    STARTING_DEADLINE = "starting_deadline"
    """It could not start within ``starting_deadline`` of its time."""
    FORBID = "forbid"
    """``Forbid``: a run was in progress (or another tick started in its place)."""
    REPLACED = "replaced"
    """``Replace``: a newer tick replaced it before it could start."""
    BUFFER_FULL = "buffer_full"
    """``BufferOne``: a tick was already queued."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Rules:
    """A job's planning rules (the :class:`~monitor.domain.jobs.Job` keys that matter here)."""

    policy: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
    catchup: Catchup = Catchup.ALL
    max_catchup: int = 100
    starting_deadline: timedelta | None = None

    @classmethod
    def of(cls, job: Job) -> Rules:
        """The rules of ``job``."""
        return cls(
            policy=job.concurrency_policy,
            catchup=job.catchup,
            max_catchup=job.max_catchup,
            starting_deadline=job.starting_deadline,
        )


@dataclass(frozen=True, kw_only=True, slots=True, order=True)
class Due:
    """A tick to be run: its time (aware UTC) and the attempt (2: its first claimant lost the
    lease before the run's start was recorded)."""

    tick: datetime
    attempt: int = 1
    catchup: bool = field(default=False, compare=False)
    """Missed during downtime: catch-up ticks run one after another, oldest first."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """What to do now.

    Attributes:
        start: ticks to claim and start now, oldest first.
        skip: ticks to claim as skipped, each with its reason, oldest first.
        queue: ticks to keep waiting (unclaimed) for the run in progress, oldest first.
        terminate_running: ``Replace``: terminate the runs in progress before starting.
    """

    start: tuple[Due, ...] = ()
    skip: tuple[tuple[Due, SkipReason], ...] = ()
    queue: tuple[Due, ...] = ()
    terminate_running: bool = False


def is_downtime(backlog: Sequence[Due], now: datetime, handover_window: timedelta) -> bool:
    """Whether the backlog reaches back past the handover window (so catch-up rules apply)."""
    return bool(backlog) and min(d.tick for d in backlog) < now - handover_window


def plan(
    rules: Rules,
    *,
    running: int,
    queued: Sequence[Due],
    backlog: Sequence[Due],
    now: datetime,
    handover_window: timedelta,
) -> Plan:
    """Decide which ticks start, wait or are skipped now (the rules are in the module docstring).

    Args:
        rules: the job's policy, catch-up and deadline.
        running: runs of the job in progress now (≥ 0).
        queued: ticks waiting from earlier rounds (``BufferOne`` / ``BufferAll``), oldest first.
        backlog: ticks due (``tick <= now``) and not claimed yet, newer than every queued one;
            any order.
        now: the current instant (aware).
        handover_window: unclaimed ticks younger than this are a handover, not downtime.

    Returns:
        A :class:`Plan` in which every queued and backlog tick appears exactly once.

    Raises:
        ValueError: ``running`` is negative.
    """
    if running < 0:
        raise ValueError("running must be >= 0")
    skips: list[tuple[Due, SkipReason]] = []
    pending = _catch_up(rules, backlog, now, handover_window, skips)
    candidates: list[Due] = []
    for due in [*queued, *pending]:
        if rules.starting_deadline is not None and now - due.tick > rules.starting_deadline:
            skips.append((due, SkipReason.STARTING_DEADLINE))
        else:
            candidates.append(due)
    start, queue, terminate = _by_policy(rules.policy, candidates, queued, running, skips)
    return Plan(
        start=tuple(start),
        skip=tuple(sorted(skips, key=lambda s: s[0])),
        queue=tuple(queue),
        terminate_running=terminate,
    )


def _catch_up(
    rules: Rules,
    backlog: Sequence[Due],
    now: datetime,
    handover_window: timedelta,
    skips: list[tuple[Due, SkipReason]],
) -> list[Due]:
    """The backlog ticks that may still run, oldest first: at most ``max_catchup``, and after
    downtime only what the catch-up rule keeps (the rest are appended to ``skips``)."""
    pending = sorted(backlog)
    if len(pending) > rules.max_catchup:
        cut = len(pending) - rules.max_catchup
        skips += [(d, SkipReason.MAX_CATCHUP) for d in pending[:cut]]
        pending = pending[cut:]
    downtime = is_downtime(pending, now, handover_window)
    if downtime:
        pending = [replace(d, catchup=True) for d in pending]
    if downtime and rules.catchup is not Catchup.ALL:
        keep = 1 if rules.catchup is Catchup.LATEST else 0
        cut = len(pending) - keep
        skips += [(d, SkipReason.CATCHUP) for d in pending[:cut]]
        pending = pending[cut:]
    return pending


def _by_policy(
    policy: ConcurrencyPolicy,
    candidates: list[Due],
    queued: Sequence[Due],
    running: int,
    skips: list[tuple[Due, SkipReason]],
) -> tuple[list[Due], list[Due], bool]:
    """The concurrency policy over the candidates: (start, queue, terminate running); the
    ticks it skips are appended to ``skips``."""
    start: list[Due] = []
    queue: list[Due] = []
    terminate = False
    if not candidates:
        pass
    elif policy is ConcurrencyPolicy.ALLOW and (
        any(d.catchup for d in queued) or sum(d.catchup for d in candidates) > 1
    ):
        # catch-up runs one after another (started together they would overlap), then Allow
        start, queue = (candidates[:1], candidates[1:]) if running == 0 else ([], candidates)
    elif policy is ConcurrencyPolicy.ALLOW:
        start = candidates
    elif policy is ConcurrencyPolicy.FORBID:
        rest = candidates
        if running == 0:
            start, rest = candidates[:1], candidates[1:]
        skips += [(d, SkipReason.FORBID) for d in rest]
    elif policy is ConcurrencyPolicy.REPLACE:
        start = candidates[-1:]
        skips += [(d, SkipReason.REPLACED) for d in candidates[:-1]]
        terminate = running > 0
    else:
        rest = candidates
        if running == 0:
            start, rest = candidates[:1], candidates[1:]
        if policy is ConcurrencyPolicy.BUFFER_ONE:
            queue = rest[:1]
            skips += [(d, SkipReason.BUFFER_FULL) for d in rest[1:]]
        else:
            queue = rest
    return start, queue, terminate


def overdue_ticks(
    schedule: schedules.CronSchedule, after: datetime, now: datetime, limit: int
) -> tuple[list[datetime], bool]:
    """The newest ``limit`` ticks in ``(after, now]``, oldest first, through the schedule wrapper.

    Walks back from ``now`` with :meth:`~monitor.domain.cron.schedules.CronSchedule.prev_tick`, so the
    cost is bounded by ``limit`` however long the downtime was.

    Args:
        schedule: the job's schedule.
        after: the last tick already claimed (exclusive), aware.
        now: the current instant (inclusive), aware.
        limit: the most ticks returned (≥ 1).

    Returns:
        ``(ticks, more)``: ``more`` is true when older unclaimed ticks exist beyond ``limit``.
    """
    out: list[datetime] = []
    tick = schedule.tick_at_or_before(now)
    while tick is not None and tick > after:
        if len(out) == limit:
            return out[::-1], True
        out.append(tick)
        tick = schedule.prev_tick(tick)
    return out[::-1], False
