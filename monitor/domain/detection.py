"""Detection and the status machine (DESIGN §2, §5): what pings and passing time mean.

Two entry points, both pure (no I/O, no clock; ``now`` is an argument):

* :func:`apply_ping` — a ping arrives: bind it, pair it with its run, and decide ``late``,
  ``failed``, ``overlap``, ``duplicate`` and ``recovered``.
* :func:`evaluate` — time passes: judge runs past ``start + max_runtime`` (``timeout``) and
  watched ticks past ``tick + grace`` with no run (``missed``).

Both mutate the given :class:`CheckState` and :class:`RunBook` in place and return the
:class:`Effects` the storage layer must persist (new and changed runs, tick marks, alerts,
flips). Alerts carry a dedupe ``key`` unique per check; the database enforces it.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.domain.checks import (
    AlertKind,
    CheckSpec,
    CheckState,
    FlipReason,
    Outcome,
    PingKind,
    SimpleSchedule,
    Status,
)
from monitor.domain.errors import ValidationError
from monitor.domain.runs import (
    Binding,
    Run,
    RunBook,
    TickMark,
    bind,
    is_watched,
    new_run_id,
    tick_after,
    tick_at_or_before,
)

FINISHED_SKEW = timedelta(seconds=5)
"""How far a finish ping's ``finished`` may lie after its arrival (the client's clock running a
little ahead); later is refused, and within it the arrival is taken. A start ping's ``started``
has the same bound."""

MAX_TICKS_PER_EVALUATION = 1000
"""Ticks judged per :func:`evaluate` call; the rest wait for the next sweep (``next_due`` stays past)."""


def iso(instant: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` (microseconds kept when present)."""
    if instant.tzinfo is not UTC:
        instant = instant.astimezone(UTC)
    return instant.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, kw_only=True, slots=True)
class AlertDraft:
    """An alert to insert (``new``) or whose ``count`` to raise (not ``new``), by ``key``."""

    key: str
    kind: AlertKind
    scheduled: datetime | None
    count: int = 1
    new: bool = True
    run_id: str | None = None
    rid: str | None = None
    late_by: timedelta | None = None
    duration: timedelta | None = None
    exit_status: int | None = None
    run_ids: tuple[str, ...] = ()
    other_scheduled: datetime | None = None
    superseded: bool = False
    runs_seen: int | None = None
    runs_expected: int | None = None
    min_runtime: timedelta | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class FlipDraft:
    at: datetime
    up: bool | None
    reason: FlipReason


@dataclass(kw_only=True, slots=True)
class Effects:
    """What a decision changed. ``tick`` is where the ping was bound (for the ping row)."""

    tick: datetime | None = None
    run: Run | None = None
    stored_kind: PingKind | None = None
    new_runs: list[Run] = field(default_factory=list)
    changed_runs: dict[str, Run] = field(default_factory=dict)
    new_marks: list[TickMark] = field(default_factory=list)
    alerts: list[AlertDraft] = field(default_factory=list)
    flips: list[FlipDraft] = field(default_factory=list)

    def touch(self, run: Run) -> None:
        if all(r is not run for r in self.new_runs):
            self.changed_runs[run.id] = run

    @property
    def raised_kinds(self) -> set[AlertKind]:
        return {a.kind for a in self.alerts if a.new}


@dataclass(frozen=True, kw_only=True, slots=True)
class PingIn:
    """A validated ping, as the domain needs it."""

    kind: PingKind
    received: datetime
    scheduled: datetime | None = None
    rid: str | None = None
    exit_status: int | None = None
    post: bool = True
    finished: datetime | None = None
    """A finish ping's ``finished``: when its run really ended, as the client saw it (aware
    UTC), for a finish delivered late (docs/design.md §5); ``None``: it ended at arrival."""
    started: datetime | None = None
    """A start ping's ``started``: when its run really started, as the client saw it (aware
    UTC), for a start delivered late (docs/design.md §5); ``None``: it started at arrival. The
    ping binds, and its run is judged (late, duplicate, overlap), as if it had arrived then."""
    applied_here: frozenset[datetime] = frozenset()
    """Arrivals of the check's pings that the process applying this one stamped and applied
    before it, within :data:`REORDER_WINDOW` (aware UTC; empty: none known, e.g. another
    process's or a restarted one's). A process applies its own pings in the order it stamped
    them, so a run whose first ping is one of these came first, and a start cannot have been
    overtaken by it (:func:`_finish_overtook`)."""


# -- status -------------------------------------------------------------------------------


def status(state: CheckState, now: datetime) -> Status:
    """Healthchecks v3 status; the first match wins: paused, new, down, grace, up (DESIGN §2)."""
    if state.paused:
        return Status.PAUSED
    if state.is_new:
        return Status.NEW
    if state.is_down:
        return Status.DOWN
    if state.pending_tick is not None and state.pending_tick <= now:
        return Status.GRACE
    return Status.UP


def started(spec: CheckSpec, book: RunBook, now: datetime) -> bool:
    """A run is in progress."""
    return any(r.in_progress(now, spec.max_runtime) for r in book.runs.values())


# -- pings --------------------------------------------------------------------------------

_STATE_FIELDS = tuple(CheckState.__dataclass_fields__)
_state_values = operator.attrgetter(*_STATE_FIELDS)
"""A check state's values, in :data:`_STATE_FIELDS` order: the snapshot a rejected ping is
undone from (one C call; copying the dataclass cost about 4 µs a ping)."""


def apply_ping(
    spec: CheckSpec, state: CheckState, book: RunBook, ping: PingIn, *, guard: OutageGuard | None = None
) -> Effects:
    """Apply one ping at ``ping.received`` (which is also *now*).

    ``guard``: the monitor's outages as known at ``ping.received`` (DESIGN §6). A tick whose
    grace ended inside one gets outcome ``unknown`` and its first run is not ``late`` (no alert):
    the ping may have been sent in time and waited for the monitor.

    Raises:
        ValidationError: field ``finished`` (:func:`_check_finished`), field ``started``
            (:func:`_check_started`), or from :func:`monitor.domain.runs.bind` (field
            ``scheduled``); nothing has been changed.
    """
    now = ping.received
    _check_finished(ping)
    _check_started(spec, ping)
    fx = Effects(stored_kind=ping.kind)
    snapshot = _state_values(state)
    kind = _effective_kind(spec, state, fx, ping)
    fx.stored_kind = kind
    if kind in (PingKind.IGN, PingKind.LOG):
        # stored with the tick it would bind to, for display only; a bad scheduled is a 400
        # like on any other ping (DESIGN §5)
        fx.tick = bind(
            spec, state, book, kind=ping.kind, received=now, scheduled=ping.scheduled, rid=ping.rid
        ).tick
        return fx

    binding = _bind_or_restore(spec, state, book, kind, ping, snapshot)
    ended = _ended(spec, binding, ping) if kind.is_finish else None
    spared = binding.run if ended is not None and binding.run is not None else None
    _expire_runs(spec, state, book, fx, now, spared=spared, ended=ended)
    tick = binding.tick
    fx.tick = tick
    if tick is None:  # the schedule never fires: nothing to bind to
        state.last_run_ping_at = now
        return fx
    first_run = state.is_new
    if first_run:
        _start_watching(spec, state, fx, tick, now)

    if kind is PingKind.SKIP:
        _mark_skipped(book, fx, tick)
    elif kind is PingKind.START:
        fx.run = _apply_start(spec, state, book, fx, binding, ping, first_run=first_run, guard=guard)
    else:
        run = binding.run
        if run is not None and run.finish_kind is not None:
            fx.run = run  # retransmitted finish: stored for the log, changes nothing
            state.last_run_ping_at = state.last_run_ping_at or now
            _advance(spec, state, book, now)
            return fx
        fx.run = _apply_finish(spec, state, book, fx, binding, ping, kind, ended, first_run, guard)

    state.last_run_ping_at = now
    _advance(spec, state, book, now)
    return fx


def _apply_finish(
    spec: CheckSpec,
    state: CheckState,
    book: RunBook,
    fx: Effects,
    binding: Binding,
    ping: PingIn,
    kind: PingKind,
    ended: datetime | None,
    first_run: bool,
    guard: OutageGuard | None,
) -> Run:
    """A finish ping (not a retransmission): the bound run, or a new one, ends at ``ended``
    (its real end, :func:`_ended`) or at arrival; a late finish clears the overlaps it caused."""
    now = ping.received
    run = binding.run
    if run is None:
        run = _bound_new_run(spec, state, book, fx, binding, ping, first_run=first_run, guard=guard)
    _finish(spec, state, book, fx, run, kind=kind, exit_status=ping.exit_status, now=now, ended=ended or now)
    if ended is not None and ended < now:
        _unflag_overlaps(spec, book, fx, run)
    return run


def _check_finished(ping: PingIn) -> None:
    """``finished`` only on a finish ping, and not later than its arrival plus
    :data:`FINISHED_SKEW`.

    Raises:
        ValidationError: field ``finished``.
    """
    if ping.finished is None:
        return
    if not ping.kind.is_finish:
        raise ValidationError("finished", "only for a finish ping (success, fail, an exit status, unknown)")
    if ping.finished > ping.received + FINISHED_SKEW:
        raise ValidationError("finished", "is later than the ping's arrival")


def _check_started(spec: CheckSpec, ping: PingIn) -> None:
    """``started`` only on a start ping, not later than its arrival plus :data:`FINISHED_SKEW`,
    and not earlier than its arrival minus the check's ``max_runtime``: a run that began then
    had run out of time before its start arrived, and taken at its word a client whose clock
    was reset (``started=2000-01-02…``) opened a run decades old that timed out at once and
    took the check down. A refused ``started`` costs the real start only: the clients send the
    ping again without it.

    Raises:
        ValidationError: field ``started``.
    """
    if ping.started is None:
        return
    if ping.kind is not PingKind.START:
        raise ValidationError("started", "only for a start ping")
    if ping.started > ping.received + FINISHED_SKEW:
        raise ValidationError("started", "is later than the ping's arrival")
    if ping.started < ping.received - spec.max_runtime:
        seconds = int(spec.max_runtime.total_seconds())
        raise ValidationError(
            "started", f"is more than the check's max_runtime ({seconds} s) before the ping's arrival"
        )


def _began(ping: PingIn) -> datetime:
    """When a start ping's run began: ``ping.started`` up to its arrival, else the arrival; for
    any other ping its arrival. A start binds and is judged at this instant (docs/design.md §5)."""
    if ping.kind is PingKind.START and ping.started is not None:
        return min(ping.started, ping.received)
    return ping.received


def _ended(spec: CheckSpec, binding: Binding, ping: PingIn) -> datetime | None:
    """When the finished run ended: ``ping.finished`` within [the run's start, the arrival]
    (a run without a start: not before its tick, unless that is after the arrival);
    ``None`` when the ping gives no ``finished``."""
    if ping.finished is None:
        return None
    run = binding.run
    if run is not None and run.started_at is not None:
        floor = run.started_at
    else:
        floor = min(binding.tick, ping.received) if binding.tick is not None else ping.received
    return min(max(ping.finished, floor), ping.received)


def _lapped(spec: CheckSpec, book: RunBook, later: Run) -> bool:
    """Whether a run of an earlier tick was in progress when ``later``'s first ping arrived,
    by what is known now (its start, its real end, its deadline)."""
    at = later.first_ping_at
    for run in book.runs.values():
        if run is later or run.early or run.scheduled >= later.scheduled or run.started_at is None:
            continue
        if run.started_at <= at <= run.started_at + spec.max_runtime and (
            run.finished_at is None or run.finished_at > at
        ):
            return True
    return False


def _unflag_overlaps(spec: CheckSpec, book: RunBook, fx: Effects, ended: Run) -> None:
    """A finish that arrived after its run ended: later runs flagged ``overlap`` while it looked
    in progress are not, when no other earlier run was in progress at their start either. Their
    outcome is judged again; the ``overlap`` alert their start raised stays (it was told)."""
    for run in list(book.runs.values()):
        if not run.overlap or run.early or run.scheduled <= ended.scheduled:
            continue
        if run.started_at is None or ended.finished_at is None or run.first_ping_at < ended.finished_at:
            continue
        if _lapped(spec, book, run):
            continue
        run.overlap = False
        if run.outcome is not None:
            run.settle(too_fast=run.outcome is Outcome.TOO_FAST or _too_fast(spec, run))
        fx.touch(run)


def _too_fast(spec: CheckSpec, run: Run) -> bool:
    duration = run.duration
    return (
        run.finish_kind is PingKind.SUCCESS
        and spec.min_runtime is not None
        and duration is not None
        and duration < spec.min_runtime
    )


def _bind_or_restore(
    spec: CheckSpec,
    state: CheckState,
    book: RunBook,
    kind: PingKind,
    ping: PingIn,
    snapshot: tuple[Any, ...],
) -> Binding:
    """Bind the ping; when it is rejected, put ``state`` back as ``snapshot`` (its
    :data:`_STATE_FIELDS`' values before the ping: it changes nothing)."""
    began = _began(ping)
    try:
        return bind(
            spec,
            state,
            book,
            kind=kind,
            received=began,
            scheduled=ping.scheduled,
            rid=ping.rid,
            # a late start binds at its real start: an error names that instant, not the arrival
            received_is="started (the run's start)" if began < ping.received else "the ping's arrival",
        )
    except ValidationError:
        for name, value in zip(_STATE_FIELDS, snapshot, strict=True):  # a rejected ping changes nothing
            setattr(state, name, value)
        raise


def _effective_kind(spec: CheckSpec, state: CheckState, fx: Effects, ping: PingIn) -> PingKind:
    """The kind the ping acts as: ignored when the check takes POST only, or is paused with
    manual resume; a run ping resumes a paused check otherwise (DESIGN §5)."""
    kind = ping.kind
    if spec.post_only and not ping.post:
        kind = PingKind.IGN
    if state.paused and kind.is_run_ping:
        if spec.manual_resume:
            kind = PingKind.IGN
        else:
            _resume(state, fx, ping.received)
    return kind


def _start_watching(spec: CheckSpec, state: CheckState, fx: Effects, tick: datetime, now: datetime) -> None:
    """The first run of a ``new`` check: watch the ticks from it on (the check is up)."""
    # Ticks after the first run's tick are watched, but never ticks before the ping
    # arrived: a first ping naming an old tick (scheduled=...) must not make every tick
    # since then missed.
    latest = tick_at_or_before(spec, state, now)
    state.watch_from = max(tick, latest) if latest is not None else tick
    state.judged_until = state.watch_from
    fx.flips.append(FlipDraft(at=now, up=True, reason=FlipReason.SUCCESS))


def _mark_skipped(book: RunBook, fx: Effects, tick: datetime) -> None:
    """A skip ping: the tick's outcome is ``skipped`` unless it already has a run or a mark."""
    if not book.has_run(tick) and tick not in book.marks:
        mark = TickMark(scheduled=tick, outcome=Outcome.SKIPPED)
        book.marks[tick] = mark
        fx.new_marks.append(mark)


def _bound_new_run(
    spec: CheckSpec,
    state: CheckState,
    book: RunBook,
    fx: Effects,
    binding: Binding,
    ping: PingIn,
    *,
    first_run: bool,
    guard: OutageGuard | None,
) -> Run:
    """A new run for the ping's bound tick, first seen when it began (:func:`_began`)."""
    assert binding.tick is not None
    return _new_run(
        spec,
        state,
        book,
        fx,
        tick=binding.tick,
        rid=ping.rid,
        now=_began(ping),
        first_run=first_run,
        guard=guard,
        early=binding.early,
    )


def _apply_start(
    spec: CheckSpec,
    state: CheckState,
    book: RunBook,
    fx: Effects,
    binding: Binding,
    ping: PingIn,
    *,
    first_run: bool,
    guard: OutageGuard | None,
) -> Run:
    """A start ping: a new run started now (or at its ``started``, :func:`_began`), or the bound
    run's start time if it had none: an open run's, or a finished one's whose finish the start
    did not really follow (:func:`_overtaken_by_its_finish`)."""
    now = _began(ping)
    run = binding.run
    if run is None:
        overtaken = _overtaken_by_its_finish(spec, book, binding, ping)
        if overtaken is not None:
            _start_finished(fx, overtaken, now)
            fx.tick = overtaken.scheduled
            return overtaken
        run = _bound_new_run(spec, state, book, fx, binding, ping, first_run=first_run, guard=guard)
        run.started_at = now
    elif run.started_at is None and run.is_open:
        run.started_at = now
        fx.touch(run)
    elif run.started_at is None and _finish_overtook(ping, run):
        _start_finished(fx, run, now)
    # else: a retransmitted start (same rid and kind): stored, changes nothing
    return run


REORDER_WINDOW = timedelta(milliseconds=100)
"""How much later than a run's first ping its start may be stamped and still be its start.
Each process stamps a ping's arrival when it reads it, and each commits its own batches: a
client that sends the start and then, without waiting for its answer, the finish on another
connection can reach two processes, and the finish can be both stamped and applied first.
A busy process reads late: on a loaded 2-core host (load 5-7) a start sent 2 ms before its
finish was stamped up to 14 ms after it by ``--workers 2`` and by two replicas, and left open
by a 5 ms window its run stayed open, every later finish bound one run behind, and false
``overlap`` and ``duplicate`` alerts followed. A start really sent after a start-less finish
(a script's ``curl`` of a success, then of a start, about 20-30 ms apart) joins it only when
another process applied that finish: the pings one process applied itself
(:attr:`PingIn.applied_here`) are never overtaken."""


def _finish_overtook(ping: PingIn, run: Run) -> bool:
    """``run`` (finished, no start) opened with a first ping that arrived after ``ping`` (a
    start), or before it by less than :data:`REORDER_WINDOW`, and that the start's process did
    not apply itself (:attr:`PingIn.applied_here`): the start is its start. Not at the same
    instant: a process's own pings are applied in the order it stamped them, and two
    processes' stamps are never equal to the microsecond."""
    if run.finish_kind is None or run.first_ping_at in ping.applied_here:
        return False
    ahead = ping.received - run.first_ping_at
    return ahead < timedelta(0) or timedelta(0) < ahead < REORDER_WINDOW


def _start_finished(fx: Effects, run: Run, began: datetime) -> None:
    """Give a finished run the start applied after its finish (never after its end)."""
    run.started_at = min(began, run.finished_at) if run.finished_at is not None else began
    fx.touch(run)


def _overtaken_by_its_finish(spec: CheckSpec, book: RunBook, binding: Binding, ping: PingIn) -> Run | None:
    """The run a start without ``rid`` belongs to although its finish was applied first: the
    earliest-arriving finished run without ``rid`` and without a start that
    :func:`_finish_overtook`, on the start's tick (a simple check: any, since its tick is the
    due instant that finish moved). A run without a start is otherwise a client's that sends
    none, and such a client sends no start to attach either.

    Without this the start, taken as a new run, stayed open: every later finish bound to it
    (rule 3, the oldest open run) and each run was one behind, overlapped, until the last timed
    out."""
    if ping.rid is not None:
        return None
    simple = isinstance(spec.schedule, SimpleSchedule)
    candidates = [
        r
        for r in book.runs.values()
        if r.rid is None
        and r.started_at is None
        and (simple or r.scheduled == binding.tick)
        and _finish_overtook(ping, r)
    ]
    return min(candidates, key=lambda r: r.first_ping_at) if candidates else None


def _resume(state: CheckState, fx: Effects, now: datetime) -> None:
    state.paused = False
    reset_to_new(state)
    fx.flips.append(FlipDraft(at=now, up=False, reason=FlipReason.RESUMED))


def reset_to_new(state: CheckState) -> None:
    """Status ``new``: detection restarts with the next run ping (DESIGN §5, resume)."""
    state.watch_from = None
    state.judged_until = None
    state.bad_streak = 0
    state.good_streak = 0
    state.episode_key = None
    state.episode_count = 0
    state.late_in_episode = False
    state.last_missed_tick = None
    state.pending_tick = None
    state.next_due = None
    state.episode_from = None
    state.closed_key = None
    state.closed_from = None
    state.closed_to = None
    state.closed_count = 0
    state.superseded_key = None
    state.superseded_through = None
    state.superseded_count = 0


def pause(state: CheckState, now: datetime) -> Effects:
    """Pause: ticks stop being watched; open runs are dropped from detection."""
    fx = Effects()
    if state.paused:
        return fx
    reset_to_new(state)
    state.paused = True
    fx.flips.append(FlipDraft(at=now, up=False, reason=FlipReason.PAUSED))
    return fx


def resume(state: CheckState, now: datetime) -> Effects:
    """Resume a paused check: status ``new``."""
    fx = Effects()
    _resume(state, fx, now)
    return fx


def _new_run(
    spec: CheckSpec,
    state: CheckState,
    book: RunBook,
    fx: Effects,
    *,
    tick: datetime,
    rid: str | None,
    now: datetime,
    first_run: bool,
    guard: OutageGuard | None = None,
    early: bool = False,
) -> Run:
    run = Run(id=new_run_id(now), rid=rid, scheduled=tick, first_ping_at=now, early=early)
    if early:
        # bound to the next tick from outside the early window (rule 4c): stored and shown
        # with that tick, satisfies nothing and raises nothing by itself (DESIGN §5)
        book.add(run)
        fx.new_runs.append(run)
        return run
    earlier = book.real_runs_of(tick)
    _flag_duplicate(spec, fx, run, earlier, now)
    _flag_overlap(spec, book, fx, run, earlier, now)
    if not earlier and tick == state.last_missed_tick and book.marks.get(tick) is not None:
        # The newest tick judged missed ran after all: its miss no longer breaks the run of
        # successes that recovery counts (DESIGN §2: runs that succeed "on time or late").
        state.good_streak = state.good_before_miss
    if not earlier:
        _judge_lateness(spec, book, fx, run, now, guard)
    book.add(run)
    fx.new_runs.append(run)
    return run


def _flag_duplicate(spec: CheckSpec, fx: Effects, run: Run, earlier: list[Run], now: datetime) -> None:
    """Duplicate: the tick already has its expected_runs runs in progress or succeeded; after
    a failed or timed-out run it is a retry (DESIGN §5, fleets)."""
    tick = run.scheduled
    satisfying = [r for r in earlier if r.satisfies(now, spec.max_runtime)]
    if len(satisfying) >= spec.expected_runs:
        already = any(r.duplicate for r in earlier)
        run.duplicate = True
        runs = (*earlier, run)
        fx.alerts.append(
            AlertDraft(
                key=f"duplicate:{iso(tick)}",
                kind=AlertKind.DUPLICATE,
                scheduled=tick,
                count=len(runs),
                new=not already,
                run_id=run.id,
                rid=run.rid,
                run_ids=tuple(r.rid or r.id for r in runs),
            )
        )


def _flag_overlap(
    spec: CheckSpec, book: RunBook, fx: Effects, run: Run, earlier: list[Run], now: datetime
) -> None:
    """Overlap: a run for an earlier tick is still in progress."""
    tick = run.scheduled
    lapped = [
        r
        for r in book.runs.values()
        if r.scheduled < tick and not r.early and r.in_progress(now, spec.max_runtime)
    ]
    if lapped:
        run.overlap = True
        oldest = min(lapped, key=lambda r: r.scheduled)
        fx.alerts.append(
            AlertDraft(
                key=f"overlap:{iso(tick)}",
                kind=AlertKind.OVERLAP,
                scheduled=tick,
                new=not any(r.overlap for r in earlier),
                other_scheduled=oldest.scheduled,
                run_id=run.id,
                rid=run.rid,
                duration=now - (oldest.started_at or oldest.first_ping_at),
                run_ids=tuple(r.rid or r.id for r in (*lapped, run)),
            )
        )


def _judge_lateness(
    spec: CheckSpec, book: RunBook, fx: Effects, run: Run, now: datetime, guard: OutageGuard | None
) -> None:
    """Late: the tick's first run ping arrives after tick + grace (the tick's outcome). The
    alert waits for the run's success (DESIGN §5: never raised by a start)."""
    tick = run.scheduled
    if now <= tick + spec.grace:
        return
    mark = book.marks.get(tick)
    if (guard is not None and guard.covers(tick + spec.grace)) or (
        mark is not None and mark.outcome is Outcome.UNKNOWN
    ):
        # its grace ended inside a monitor outage: the ping may have been sent in time and
        # waited for the monitor (a stalled process, the kernel's queue). DESIGN §2: the
        # tick's outcome is unknown (it comes before late) and nothing is raised.
        if mark is None:
            mark = TickMark(scheduled=tick, outcome=Outcome.UNKNOWN)
            book.marks[tick] = mark
            fx.new_marks.append(mark)
    else:
        run.late = True


def _finish(
    spec: CheckSpec,
    state: CheckState,
    book: RunBook,
    fx: Effects,
    run: Run,
    *,
    kind: PingKind,
    exit_status: int | None,
    now: datetime,
    ended: datetime,
) -> None:
    """End ``run`` at ``ended`` (its real end, ``now`` unless the ping said otherwise; never
    before its start: two processes stamp the start and the finish apart, and the finish can be
    stamped first) and judge it; alerts and flips are raised at ``now``."""
    run.finished_at = max(ended, run.started_at) if run.started_at is not None else ended
    run.finish_kind = kind
    run.exit_status = exit_status
    fx.touch(run)
    if run.timed_out:  # judged already; the late finish changes nothing more
        return
    too_fast = _too_fast(spec, run)
    run.settle(too_fast=too_fast)
    if kind is PingKind.UNKNOWN:
        # its runner died with it: no longer in progress (later runs are not overlapped),
        # and neither a bad nor a good outcome: no alert, both streaks as they were
        return
    if run.early or state.paused or state.is_new:
        return  # an early run raises nothing by itself (DESIGN §5, rule 4c)
    if kind is PingKind.FAIL:
        _bad_run(spec, state, book, fx, AlertKind.FAILED, FlipReason.FAILED, run=run, now=now)
    elif too_fast:
        _bad_run(spec, state, book, fx, AlertKind.TOO_FAST, FlipReason.TOO_FAST, run=run, now=now)
    elif spec.expected_runs > 1 and not _tick_complete(spec, book, run.scheduled):
        return  # a fleet's tick counts as a success once all its runs have succeeded
    else:
        _good(spec, state, book, fx, run, now=now)


def _tick_complete(spec: CheckSpec, book: RunBook, tick: datetime) -> bool:
    """The tick has its ``expected_runs`` distinct succeeded runs (by rid, else by run)."""
    return len({r.rid or r.id for r in book.real_runs_of(tick) if r.succeeded}) >= spec.expected_runs


def _good(spec: CheckSpec, state: CheckState, book: RunBook, fx: Effects, run: Run, *, now: datetime) -> None:
    """A run succeeded: count it towards recovery; close the episode, or tell of a late run.

    DESIGN §5 (two notices per episode): a late run's single ``late`` notice is raised here,
    by the ping that ends it successfully, never by its start; never for the check's first
    run; while down, only when this run closes the episode (it is then the closing notice).
    """
    state.bad_streak = 0
    state.good_streak += 1
    late = run.late and is_watched(state, run.scheduled) and run is _first_run_of_tick(book, run)
    closes = (
        state.is_down
        and state.good_streak >= spec.recovery_threshold
        and not (state.last_missed_tick is not None and run.scheduled < state.last_missed_tick)
    )
    if state.is_down and not closes:
        return  # the episode stays open; nothing new to tell
    if late:
        fx.alerts.append(
            AlertDraft(
                key=f"late:{iso(run.scheduled)}",
                kind=AlertKind.LATE,
                scheduled=run.scheduled,
                run_id=run.id,
                rid=run.rid,
                late_by=run.first_ping_at - run.scheduled,
                duration=run.duration,
            )
        )
    if not closes:
        return
    state.closed_key = state.episode_key
    state.closed_from = state.episode_from
    state.closed_to = run.scheduled
    state.closed_count = state.episode_count
    state.episode_key = None
    state.episode_count = 0
    state.episode_from = None
    state.late_in_episode = False
    state.last_missed_tick = None
    fx.flips.append(FlipDraft(at=now, up=True, reason=FlipReason.LATE if late else FlipReason.SUCCESS))
    if not late:
        fx.alerts.append(
            AlertDraft(
                key=f"recovered:run:{run.id}",
                kind=AlertKind.RECOVERED,
                scheduled=run.scheduled,
                run_id=run.id,
                rid=run.rid,
                duration=run.duration,
            )
        )


def _first_run_of_tick(book: RunBook, run: Run) -> Run | None:
    runs = book.real_runs_of(run.scheduled)
    return runs[0] if runs else None


def _bad_run(
    spec: CheckSpec,
    state: CheckState,
    book: RunBook,
    fx: Effects,
    kind: AlertKind,
    reason: FlipReason,
    *,
    run: Run,
    now: datetime,
) -> None:
    """A run's bad outcome (failed, too fast, timed out). DESIGN §5, supersession: when a run
    of a newer tick has already succeeded (a retry or backfill of an old tick failed), it never
    opens or reopens an episode nor changes the status: it is counted in the open episode, or
    in the episode the newer run closed when that was open at the run's tick, or raises its
    alert marked ``superseded`` and the check stays up."""
    latest_success = book.latest_success_tick()
    if latest_success is None or latest_success <= run.scheduled or isinstance(spec.schedule, SimpleSchedule):
        _bad(spec, state, fx, kind, reason, run=run, now=now)
        return
    if state.is_down and state.episode_key is not None:
        state.episode_count += 1
        fx.alerts.append(_bump(state.episode_key, state.episode_count))
        return
    if _in_closed_episode(state, run.scheduled):
        # the episode that the newer run closed was open at this run's tick: counted in it,
        # as a tick judged there is (_superseded)
        assert state.closed_key is not None
        state.closed_count += 1
        fx.alerts.append(_bump(state.closed_key, state.closed_count))
        return
    fx.alerts.append(
        AlertDraft(
            key=f"{kind}:run:{run.id}",
            kind=kind,
            scheduled=run.scheduled,
            run_id=run.id,
            rid=run.rid,
            duration=((run.finished_at or now) - run.started_at) if run.started_at else None,
            exit_status=run.exit_status,
            superseded=True,
            min_runtime=spec.min_runtime if kind is AlertKind.TOO_FAST else None,
        )
    )


def _bad(
    spec: CheckSpec,
    state: CheckState,
    fx: Effects,
    kind: AlertKind,
    reason: FlipReason,
    *,
    now: datetime,
    run: Run | None = None,
    tick: datetime | None = None,
    runs_seen: int | None = None,
) -> None:
    was_down = state.is_down
    if kind is AlertKind.MISSED:
        # successes in an open episode survive a miss that a late run later fills in
        state.good_before_miss = state.good_streak if was_down else 0
    state.good_streak = 0
    state.bad_streak += 1
    scheduled = run.scheduled if run is not None else tick
    if state.is_down:
        state.episode_count += 1
        assert state.episode_key is not None
        fx.alerts.append(_bump(state.episode_key, state.episode_count))
        return
    if state.bad_streak < spec.failure_threshold:
        return
    key = f"{kind}:run:{run.id}" if run is not None else f"{kind}:{iso(scheduled or now)}"
    state.episode_key = key
    state.episode_count = state.bad_streak
    state.episode_from = scheduled
    state.late_in_episode = False
    fx.flips.append(FlipDraft(at=now, up=False, reason=reason))
    fx.alerts.append(
        AlertDraft(
            key=key,
            kind=kind,
            scheduled=scheduled,
            count=state.episode_count,
            run_id=run.id if run is not None else None,
            rid=run.rid if run is not None else None,
            duration=((run.finished_at or now) - run.started_at)
            if run is not None and run.started_at
            else None,
            exit_status=run.exit_status if run is not None else None,
            runs_seen=runs_seen,
            runs_expected=spec.expected_runs if runs_seen is not None else None,
            min_runtime=spec.min_runtime if kind is AlertKind.TOO_FAST else None,
        )
    )


# -- time ---------------------------------------------------------------------------------


def _expire_runs(
    spec: CheckSpec,
    state: CheckState,
    book: RunBook,
    fx: Effects,
    now: datetime,
    *,
    spared: Run | None = None,
    ended: datetime | None = None,
) -> None:
    """Judge runs whose ``started_at + max_runtime`` has passed as timed out, oldest first;
    ``spared`` (the run a late finish ends) is not when it ``ended`` by its deadline."""
    expired = [
        (deadline, r)
        for r in book.open_runs()
        if (deadline := r.deadline(spec.max_runtime)) is not None
        and now > deadline
        and not (r is spared and ended is not None and ended <= deadline)
    ]
    for _, run in sorted(expired, key=lambda item: item[0]):
        _time_out(spec, state, book, fx, run, now=now)


def _time_out(
    spec: CheckSpec,
    state: CheckState,
    book: RunBook,
    fx: Effects,
    run: Run,
    *,
    now: datetime,
    silent: bool = False,
) -> None:
    run.timed_out = True
    run.settle()
    fx.touch(run)
    if not silent and not state.paused and not state.is_new:
        _bad_run(spec, state, book, fx, AlertKind.TIMEOUT, FlipReason.TIMEOUT, run=run, now=now)


@dataclass(frozen=True, kw_only=True, slots=True)
class OutageGuard:
    """What the monitor knows of its own outages (DESIGN §6, self-outage guard).

    Attributes:
        outages: ``(start, end)`` spans with no live HTTP process: pings could not arrive, so
            a deadline inside one (``start < deadline <= end``) proves nothing: its tick gets
            outcome ``unknown`` and no alert.
        seen_until: the monitor is in an outage *now* (no fresh liveness since this instant):
            deadlines after it are not judged until the outage has ended and been recorded.
            ``None``: no such outage.
    """

    outages: tuple[tuple[datetime, datetime], ...] = ()
    seen_until: datetime | None = None

    def covers(self, deadline: datetime) -> bool:
        return bool(self.outages) and any(start < deadline <= end for start, end in self.outages)

    def defers(self, deadline: datetime) -> bool:
        return self.seen_until is not None and deadline > self.seen_until


NO_OUTAGE = OutageGuard()


def evaluate(
    spec: CheckSpec, state: CheckState, book: RunBook, now: datetime, *, guard: OutageGuard = NO_OUTAGE
) -> Effects:
    """Judge what time has decided by ``now``: timed-out runs and missed watched ticks.

    Runs past ``start + max_runtime`` and ticks past ``tick + grace`` without a run are taken
    in the order their deadlines passed, so consecutive-outcome counting follows time. At most
    :data:`MAX_TICKS_PER_EVALUATION` ticks are judged per call; ``state.next_due`` then stays
    in the past so the next sweep continues. A deadline that fell inside a monitor outage
    gives ``unknown`` (tick) or a silent time-out (run) instead of an alert; deadlines of an
    outage still going on wait (``guard``).
    """
    fx = Effects()
    if state.paused:
        state.next_due = None
        state.pending_tick = None
        return fx
    events: list[tuple[datetime, int, Run | datetime]] = []
    for run in book.open_runs():
        deadline = run.deadline(spec.max_runtime)
        if deadline is not None and now > deadline:
            events.append((deadline, 0, run))
    if not state.is_new:
        cursor = _cursor(state)
        judged = 0
        while cursor is not None and judged < MAX_TICKS_PER_EVALUATION:
            tick = tick_after(spec, state, cursor)
            if tick is None or not now > tick + spec.grace:
                break
            events.append((tick + spec.grace, 1, tick))
            cursor = tick
            judged += 1
    if len(events) > 1:
        events.sort(key=_event_order)
    for deadline, _, item in events:
        if guard.defers(deadline):
            break  # judged once the outage has ended and been recorded
        blind = guard.covers(deadline)
        if isinstance(item, Run):
            _time_out(spec, state, book, fx, item, now=now, silent=blind or item.early)
            continue
        tick = item
        if not book.is_resolved(tick, spec.expected_runs):
            _judge_tick(spec, state, book, fx, tick, now=now, blind=blind)
        state.judged_until = tick
    _advance(spec, state, book, now)
    return fx


def _event_order(event: tuple[datetime, int, Run | datetime]) -> tuple[datetime, int]:
    """Deadline first; at one instant, a run's time-out before a tick's miss."""
    return event[0], event[1]


def _judge_tick(
    spec: CheckSpec,
    state: CheckState,
    book: RunBook,
    fx: Effects,
    tick: datetime,
    *,
    now: datetime,
    blind: bool,
) -> None:
    """A watched tick's deadline passed without the runs it needs: ``missed``, ``incomplete``
    (some but fewer than ``expected_runs``) or, inside a monitor outage, ``unknown``.

    DESIGN §5, supersession: a tick older than a succeeded run never opens or reopens an
    episode nor changes the status; it is counted in the episode that run closed, or else
    raises one ``missed`` alert shared with the consecutive superseded ticks before it.
    """
    real = book.real_runs_of(tick)
    present = {r.rid or r.id for r in real if r.satisfies(now, spec.max_runtime) or r.succeeded}
    outcome = Outcome.INCOMPLETE if real else Outcome.MISSED
    if blind:
        outcome = Outcome.UNKNOWN
    mark = TickMark(scheduled=tick, outcome=outcome)
    book.marks[tick] = mark
    fx.new_marks.append(mark)
    if blind:
        return
    latest_success = book.latest_success_tick()
    if latest_success is not None and latest_success > tick and not isinstance(spec.schedule, SimpleSchedule):
        _superseded(spec, state, fx, tick, now=now)
        return
    if outcome is Outcome.MISSED:
        state.last_missed_tick = tick
        _bad(spec, state, fx, AlertKind.MISSED, FlipReason.MISSED, tick=tick, now=now)
    else:
        _bad(
            spec,
            state,
            fx,
            AlertKind.INCOMPLETE,
            FlipReason.INCOMPLETE,
            tick=tick,
            now=now,
            runs_seen=len(present),
        )


def _superseded(spec: CheckSpec, state: CheckState, fx: Effects, tick: datetime, *, now: datetime) -> None:
    """Judge a tick that a newer successful run supersedes (DESIGN §5, supersession)."""
    if state.is_down and state.episode_key is not None:
        # counted in the open episode (a newer run succeeded but did not close it yet)
        state.episode_count += 1
        fx.alerts.append(_bump(state.episode_key, state.episode_count))
        return
    if _in_closed_episode(state, tick):
        # the episode that the newer run closed was open at this tick: counted in it
        assert state.closed_key is not None
        state.closed_count += 1
        fx.alerts.append(_bump(state.closed_key, state.closed_count))
        return
    before = tick_at_or_before(spec, state, tick - _INSTANT)
    if state.superseded_key is not None and before is not None and before == state.superseded_through:
        state.superseded_count += 1
        state.superseded_through = tick
    else:
        state.superseded_key = f"missed:{iso(tick)}"
        state.superseded_through = tick
        state.superseded_count = 1
    # as a plain miss, a stretch pages only once it is failure_threshold ticks long
    if state.superseded_count < spec.failure_threshold:
        return
    first = datetime.fromisoformat(state.superseded_key.split(":", 1)[1].replace("Z", "+00:00"))
    fx.alerts.append(
        AlertDraft(
            key=state.superseded_key,
            kind=AlertKind.MISSED,
            scheduled=first,
            count=state.superseded_count,
            new=state.superseded_count == spec.failure_threshold,
            superseded=True,
        )
    )


def _in_closed_episode(state: CheckState, tick: datetime) -> bool:
    """Whether the down episode that a newer run closed was open at ``tick`` (DESIGN §5)."""
    return (
        state.closed_key is not None
        and state.closed_from is not None
        and state.closed_to is not None
        and state.closed_from <= tick < state.closed_to
    )


_INSTANT = timedelta(microseconds=1)


def _bump(key: str, count: int) -> AlertDraft:
    """Raise the ``count`` of an episode's alert (no new notice)."""
    return AlertDraft(key=key, kind=AlertKind(key.split(":", 1)[0]), scheduled=None, count=count, new=False)


def _cursor(state: CheckState) -> datetime | None:
    """The later of ``watch_from`` and ``judged_until`` (``None`` when neither is set)."""
    watch_from, judged_until = state.watch_from, state.judged_until
    if watch_from is None or judged_until is None:
        return judged_until if watch_from is None else watch_from
    return max(watch_from, judged_until)


def refresh(spec: CheckSpec, state: CheckState, book: RunBook, now: datetime) -> None:
    """Recompute ``pending_tick`` and ``next_due`` (after a settings change)."""
    _advance(spec, state, book, now)


def _advance(spec: CheckSpec, state: CheckState, book: RunBook, now: datetime) -> None:
    """Move ``judged_until`` over resolved ticks; recompute ``pending_tick`` and ``next_due``.

    ``next_due`` = min(first unresolved watched tick + grace, start + max_runtime of each run
    in progress) (DESIGN §6); ``None`` while new or paused. ``pending_tick`` (``grace``
    status) skips ticks that a newer successful run supersedes: they never change the status.
    """
    if state.paused or state.is_new:
        state.pending_tick = None
        state.next_due = None
        return
    expected = spec.expected_runs
    first_unresolved = _first_unresolved_after(spec, state, book, _cursor(state), expected, move=True)
    pending = first_unresolved
    latest_success = book.latest_success_tick()
    if pending is not None and latest_success is not None and latest_success > pending:
        pending = _first_unresolved_after(spec, state, book, latest_success, expected, move=False)
    state.pending_tick = pending
    candidates = [first_unresolved + spec.grace] if first_unresolved is not None else []
    candidates.extend(d for r in book.open_runs() if (d := r.deadline(spec.max_runtime)) is not None)
    state.next_due = min(candidates) if candidates else None


def _first_unresolved_after(
    spec: CheckSpec, state: CheckState, book: RunBook, cursor: datetime | None, expected: int, *, move: bool
) -> datetime | None:
    """The first tick after ``cursor`` that is not resolved; with ``move``, ``judged_until``
    follows over the resolved ticks before it. Each resolved tick has a run or mark in the
    book, so the loop runs at most len(book) + 1 times."""
    for _ in range(len(book.runs) + len(book.marks) + 2):
        tick = tick_after(spec, state, cursor) if cursor is not None else None
        if tick is None:
            return None
        if book.is_resolved(tick, expected):
            if move:
                state.judged_until = tick
            cursor = tick
            continue
        return tick
    return None
