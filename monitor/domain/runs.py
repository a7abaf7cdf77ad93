"""Runs and binding: which tick a run ping belongs to (DESIGN §5, rules 1-4).

Pure: no I/O and no clock; every function takes the instants it needs.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from monitor.domain.checks import CheckSpec, CheckState, Outcome, PingKind, SimpleSchedule
from monitor.domain.errors import ValidationError


@dataclass(kw_only=True, slots=True)
class Run:
    """One execution of a job, bound to one tick.

    A run is *in progress* from its first ping until its finish or until
    ``started_at + max_runtime``, whichever is earlier (DESIGN §2). A run created by a finish
    alone (``cmd && curl``) has ``started_at = None`` and is never in progress.
    """

    id: str
    rid: str | None
    scheduled: datetime
    first_ping_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    finish_kind: PingKind | None = None
    exit_status: int | None = None
    late: bool = False
    duplicate: bool = False
    overlap: bool = False
    timed_out: bool = False
    early: bool = False
    outcome: Outcome | None = None

    @property
    def is_open(self) -> bool:
        """Not yet judged: no finish and not timed out."""
        return self.outcome is None

    def deadline(self, max_runtime: timedelta) -> datetime | None:
        """``started_at + max_runtime`` for a started, unjudged run; else ``None``."""
        if self.outcome is not None or self.started_at is None:
            return None
        return self.started_at + max_runtime

    def in_progress(self, now: datetime, max_runtime: timedelta) -> bool:
        """Started, unfinished and ``now <= started_at + max_runtime``."""
        deadline = self.deadline(max_runtime)
        return deadline is not None and now <= deadline

    @property
    def succeeded(self) -> bool:
        """Finished with success in time: not timed out, not ``too_fast``, not ``early``."""
        return (
            self.finish_kind is PingKind.SUCCESS
            and not self.timed_out
            and not self.early
            and self.outcome is not Outcome.TOO_FAST
        )

    def satisfies(self, now: datetime, max_runtime: timedelta) -> bool:
        """Counts as its tick's run at ``now``: in progress or succeeded, and not ``early``.

        A failed or timed-out run does not: a run after it is a retry (DESIGN §5).
        """
        return not self.early and (self.in_progress(now, max_runtime) or self.succeeded)

    @property
    def duration(self) -> timedelta | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at

    def settle(self, *, too_fast: bool = False) -> None:
        """Set ``outcome`` from the run's flags, in DESIGN §2's precedence order.

        ``early`` comes first: an early run satisfies nothing and is judged as nothing else.
        ``too_fast``: the run succeeded sooner than the check's ``min_runtime``.
        """
        if self.early:
            self.outcome = Outcome.EARLY
        elif self.duplicate:
            self.outcome = Outcome.DUPLICATED
        elif self.overlap:
            self.outcome = Outcome.OVERLAPPED
        elif self.timed_out:
            self.outcome = Outcome.TIMED_OUT
        elif self.finish_kind is PingKind.FAIL:
            self.outcome = Outcome.FAILED
        elif self.finish_kind is PingKind.UNKNOWN:
            self.outcome = Outcome.UNKNOWN
        elif too_fast:
            self.outcome = Outcome.TOO_FAST
        elif self.late:
            self.outcome = Outcome.LATE
        else:
            self.outcome = Outcome.ON_TIME


_UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def new_run_id(at: datetime) -> str:
    """A server-chosen run identifier: UUID version 7 text (RFC 9562 §5.7), time-ordered.

    Args:
        at: the instant the run is recorded (aware); its Unix milliseconds lead the UUID, the
            remaining 74 bits are random.

    Run ids are the runs table's primary key: a random (version 4) key put each new run on a
    random page of that index, one more page written per ping at every commit; keys that grow
    with time are appended where the last ones went. (Python 3.14's ``uuid.uuid7`` reads the
    clock itself; the domain takes its time as an argument.)
    """
    millis = (at - _UNIX_EPOCH) // timedelta(milliseconds=1) & (1 << 48) - 1
    random_bits = int.from_bytes(os.urandom(10))  # 80 bits, 74 used
    value = (
        millis << 80
        | 0x7 << 76  # version
        | (random_bits >> 68) << 64  # rand_a: 12 bits
        | 0b10 << 62  # variant (RFC 9562)
        | random_bits & (1 << 62) - 1  # rand_b: 62 bits
    )
    return str(uuid.UUID(int=value))


@dataclass(frozen=True, kw_only=True, slots=True)
class TickMark:
    """The judgement of a tick that has no run: ``missed``, ``skipped`` or ``unknown``."""

    scheduled: datetime
    outcome: Outcome


@dataclass(kw_only=True, slots=True)
class RunBook:
    """The runs and tick marks of one check that a decision may need.

    Callers load at least: every open run, every run bound to a tick after the check's
    ``judged_until``, every run bound to a tick a ping names explicitly, and, when a decision
    may be about a tick before what they load (:func:`holds_older`), the newest succeeded run.
    """

    runs: dict[str, Run] = field(default_factory=dict)
    marks: dict[datetime, TickMark] = field(default_factory=dict)

    @classmethod
    def of(cls, runs: Iterable[Run] = (), marks: Iterable[TickMark] = ()) -> RunBook:
        return cls(runs={r.id: r for r in runs}, marks={m.scheduled: m for m in marks})

    def add(self, run: Run) -> None:
        self.runs[run.id] = run

    def runs_of(self, tick: datetime) -> list[Run]:
        """Runs bound to ``tick``, oldest first (``early`` runs included)."""
        found = [r for r in self.runs.values() if r.scheduled == tick]
        if len(found) > 1:
            found.sort(key=_first_ping_at)
        return found

    def real_runs_of(self, tick: datetime) -> list[Run]:
        """Runs bound to ``tick`` that count for it (not ``early``), oldest first."""
        return [r for r in self.runs_of(tick) if not r.early]

    def has_run(self, tick: datetime) -> bool:
        """The tick has a run that counts for it (an ``early`` run does not)."""
        return any(r.scheduled == tick and not r.early for r in self.runs.values())

    def is_satisfied(self, tick: datetime, now: datetime, spec: CheckSpec) -> bool:
        """The tick needs no further run: ``expected_runs`` runs are in progress or succeeded,
        or a skip ping skipped it (DESIGN §5, rule 4b's "satisfied")."""
        mark = self.marks.get(tick)
        if mark is not None and mark.outcome is Outcome.SKIPPED:
            return True
        good = sum(1 for r in self.runs_of(tick) if r.satisfies(now, spec.max_runtime))
        return good >= spec.expected_runs

    def is_resolved(self, tick: datetime, expected_runs: int = 1) -> bool:
        """The tick has a mark (missed, skipped, unknown, incomplete) or ``expected_runs``
        runs that count for it."""
        if tick in self.marks:
            return True
        if expected_runs <= 1:
            return self.has_run(tick)
        return len(self.real_runs_of(tick)) >= expected_runs

    def latest_success_tick(self) -> datetime | None:
        """The newest tick with a succeeded run (supersession, DESIGN §5), or ``None``."""
        ticks = [r.scheduled for r in self.runs.values() if r.succeeded]
        return max(ticks) if ticks else None

    def by_rid(self, rid: str) -> Run | None:
        """The newest run carrying this client run id."""
        found = [r for r in self.runs.values() if r.rid == rid]
        return max(found, key=lambda r: r.first_ping_at) if found else None

    def open_runs(self) -> list[Run]:
        """Runs not yet judged (:attr:`Run.is_open`), oldest first."""
        found = [r for r in self.runs.values() if r.outcome is None]
        if len(found) > 1:
            found.sort(key=_first_ping_at)
        return found


def _first_ping_at(run: Run) -> datetime:
    return run.first_ping_at


def needed_since(spec: CheckSpec, state: CheckState) -> datetime | None:
    """The earliest tick whose runs and marks a decision about this check may look at.

    Detection judges ticks after its cursor ``max(watch_from, judged_until)``; a ``simple``
    check's ticks start at its due instant (last run ping + period), and its ``judged_until``
    does not move while it is healthy. Loading from here (plus every open run and the runs a
    ping names) keeps per-ping and per-sweep work independent of the check's history.
    ``None``: no cursor yet (a new check): only open and named runs are needed.
    """
    marks = [x for x in (state.judged_until, state.watch_from) if x is not None]
    schedule = spec.schedule
    if isinstance(schedule, SimpleSchedule) and state.last_run_ping_at is not None:
        marks.append(state.last_run_ping_at + schedule.period)
    return max(marks) if marks else None


def holds_older(book: RunBook, cutoff: datetime | None, ticks: Collection[datetime] = ()) -> bool:
    """Whether a decision on ``book`` (loaded from ``cutoff`` on, plus open and named runs) may
    be about a tick before ``cutoff`` (any tick, with no cutoff): the book holds a run or mark of
    one, or a ping names one (``ticks``). Such a tick is compared with the newest succeeded run
    (supersession, DESIGN §5, :meth:`RunBook.latest_success_tick`), which may be older than the
    cutoff: the loader adds that run to such a book."""
    if cutoff is None:
        return bool(book.runs or book.marks or ticks)
    return (
        any(r.scheduled < cutoff for r in book.runs.values())
        or any(t < cutoff for t in book.marks)
        or any(t < cutoff for t in ticks)
    )


def ping_needed_since(spec: CheckSpec, state: CheckState, earliest: datetime) -> datetime | None:
    """The earliest tick whose runs and marks deciding pings of this check may look at, for pings
    whose instants (arrival, ``finished=``, ``started=``) are ``earliest`` or later: the ticks
    after the cursor of a cron check (its cursor tick is judged: :func:`needed_since` also keeps
    that one, a run per check per ping that nothing reads), all of :func:`needed_since` for a
    ``simple`` check, and the tick each of those pings falls in.

    Besides the runs from here on, a decision needs every open run, the runs a ping names by
    ``rid`` and the runs and marks of a tick a ping names by ``scheduled``; the loader adds those.
    ``None``: only those are needed (a new check with no tick yet).
    """
    since = needed_since(spec, state)
    if since is not None and not isinstance(spec.schedule, SimpleSchedule):
        # the cursor's own tick is judged: detection looks at the ticks after it
        since = spec.schedule.next_tick(since) or since
    candidates = [since] if since is not None else []
    if (previous := tick_at_or_before(spec, state, earliest)) is not None:
        candidates.append(previous)
    return min(candidates) if candidates else None


# -- ticks of a check ------------------------------------------------------------------------


def tick_at_or_before(spec: CheckSpec, state: CheckState, instant: datetime) -> datetime | None:
    """The latest tick ``<= instant`` of the check's schedule, or ``None``.

    A ``simple`` check has one tick at a time: its due instant, last run ping + period
    (DESIGN §5: "a run's tick is the due instant current at its first ping").
    """
    schedule = spec.schedule
    if isinstance(schedule, SimpleSchedule):
        due = simple_due(spec, state)
        return due if due is not None and due <= instant else None
    return schedule.tick_at_or_before(instant)


def tick_after(spec: CheckSpec, state: CheckState, instant: datetime) -> datetime | None:
    """The first tick strictly after ``instant``, or ``None`` (never fires again / no anchor)."""
    schedule = spec.schedule
    if isinstance(schedule, SimpleSchedule):
        due = simple_due(spec, state)
        return due if due is not None and due > instant else None
    return schedule.next_tick(instant)


def simple_due(spec: CheckSpec, state: CheckState) -> datetime | None:
    """A ``simple`` check's due instant: last run ping + period (``None`` before the first)."""
    schedule = spec.schedule
    if not isinstance(schedule, SimpleSchedule) or state.last_run_ping_at is None:
        return None
    return state.last_run_ping_at + schedule.period


# -- binding ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Binding:
    """Where a ping belongs: its tick, the existing run it continues (if any), and whether a
    new run there is ``early`` (rule 4c: bound to the next tick from outside the early window)."""

    tick: datetime | None
    run: Run | None = None
    early: bool = False


def is_watched(state: CheckState, tick: datetime) -> bool:
    """DESIGN §2: a tick after the first run ping's tick (or after a resume), while not paused."""
    return not state.paused and state.watch_from is not None and tick > state.watch_from


def bind(
    spec: CheckSpec,
    state: CheckState,
    book: RunBook,
    *,
    kind: PingKind,
    received: datetime,
    scheduled: datetime | None,
    rid: str | None,
    received_is: str = "the ping's arrival",
) -> Binding:
    """Bind a ping to a tick by DESIGN §5's rules 1-4.

    Rule 4 (no ``scheduled``, no known ``rid``, no open run to finish): with P the latest tick
    at or before ``received``, N the next one and E the early window
    (:meth:`CheckSpec.early_window`):

    a. N when ``N - received <= E`` (a run a little early belongs to the tick it is early for);
    b. P when P is not satisfied yet (:meth:`RunBook.is_satisfied`) and either
       ``received <= P + grace`` or P is at least as near as N;
    c. else the nearer of P and N (P on a tie): a run of a satisfied P is a duplicate; a run
       bound to N this way is ``early`` (it satisfies nothing and raises nothing).

    Args:
        spec, state, book: the check, its state and its loaded runs.
        kind: the ping's kind (rule 3 applies to finishes only).
        received: arrival instant (aware UTC).
        scheduled: the client's logical run time (already parsed, aware), or ``None``.
        rid: client run id (canonical UUID text), or ``None``.
        received_is: what ``received`` is, as the ``scheduled`` error names it (a late start
            binds at its ``started`` instant, not at its arrival).

    Returns:
        The tick (``None`` when the schedule has no tick to offer), the run the ping continues,
        and whether a new run would be ``early``.

    Raises:
        ValidationError: field ``scheduled``: later than ``received`` plus the early window
            (:attr:`CheckSpec.early_limit`), before the schedule's first tick, or not matching
            the tick of the run that ``rid`` names.
    """
    named = book.by_rid(rid) if rid else None
    if scheduled is not None and scheduled > received + spec.early_limit:
        raise ValidationError("scheduled", f"is later than {received_is} plus the early tolerance")
    if isinstance(spec.schedule, SimpleSchedule):
        return _bind_simple(spec, state, book, kind=kind, received=received, named=named, rid=rid)

    # Rule 1: an explicit logical run time.
    if scheduled is not None:
        return _bind_scheduled(spec, state, scheduled, named, rid)
    # Rule 2: a rid that names a run.
    if named is not None:
        return Binding(tick=named.scheduled, run=named)
    # Rule 3: a finish while runs without rid are in progress -> the oldest such run.
    if kind.is_finish and rid is None and (oldest := _oldest_open_without_rid(spec, book, received)):
        return Binding(tick=oldest.scheduled, run=oldest)
    return _bind_nearest(spec, state, book, received)


def _bind_scheduled(
    spec: CheckSpec, state: CheckState, scheduled: datetime, named: Run | None, rid: str | None
) -> Binding:
    """Rule 1: the tick at or before the client's ``scheduled``, which the named run must share."""
    tick = tick_at_or_before(spec, state, scheduled)
    if tick is None:
        raise ValidationError("scheduled", "is before the schedule's first tick")
    if named is not None and named.scheduled != tick:
        raise ValidationError("scheduled", f"does not match run {rid}")
    return Binding(tick=tick, run=named)


def _bind_simple(
    spec: CheckSpec,
    state: CheckState,
    book: RunBook,
    *,
    kind: PingKind,
    received: datetime,
    named: Run | None,
    rid: str | None,
) -> Binding:
    """Simple checks: the due instant current at the run's first ping (DESIGN §5)."""
    if named is not None:
        return Binding(tick=named.scheduled, run=named)
    if kind.is_finish and rid is None and (oldest := _oldest_open_without_rid(spec, book, received)):
        return Binding(tick=oldest.scheduled, run=oldest)
    due = simple_due(spec, state)
    return Binding(tick=due if due is not None else received)


def _bind_nearest(spec: CheckSpec, state: CheckState, book: RunBook, received: datetime) -> Binding:
    """Rule 4: P, the latest tick <= received, or N, the next tick (see :func:`bind`)."""
    previous = tick_at_or_before(spec, state, received)
    following = tick_after(spec, state, received)
    if previous is None:
        return Binding(tick=following)
    if following is None:
        return Binding(tick=previous)
    # a. early, but within the window: N, whatever P's state
    if following - received <= spec.early_window(previous, following):
        return Binding(tick=following)
    nearer_previous = received - previous <= following - received
    # b. P's own run (on time or late) while P still needs one
    if not book.is_satisfied(previous, received, spec) and (
        received <= previous + spec.grace or nearer_previous
    ):
        return Binding(tick=previous)
    # c. the nearer tick: a duplicate of a satisfied P, or an early run of N
    if nearer_previous:
        return Binding(tick=previous)
    return Binding(tick=following, early=True)


def _oldest_open_without_rid(spec: CheckSpec, book: RunBook, received: datetime) -> Run | None:
    candidates = [r for r in book.open_runs() if r.rid is None and r.in_progress(received, spec.max_runtime)]
    return candidates[0] if candidates else None


def tick_outcome(book: RunBook, tick: datetime) -> Outcome | None:
    """A tick's outcome (DESIGN §2 precedence), or ``None`` while undecided.

    skipped, unknown, missed (no run), duplicated, overlapped, the last run's timed_out,
    failed or unknown, too_fast, incomplete (fewer than ``expected_runs``), late (first run
    ping after tick + grace), else on_time. ``early`` runs are not runs of their tick here.

    A last run ended by an ``unknown`` ping (its runner died with it) leaves the tick
    ``unknown``: it ran, so it is not missed, and nobody can say whether it did its work, so
    it is neither failed nor a success (docs/design.md §5, as DESIGN §6 judges a tick the
    monitor could not watch).
    """
    mark = book.marks.get(tick)
    if mark is not None and mark.outcome in (Outcome.SKIPPED, Outcome.UNKNOWN):
        return mark.outcome
    runs = book.real_runs_of(tick)  # an early run is judged as no run (DESIGN §5, rule 4c)
    if not runs:
        return mark.outcome if mark is not None else None
    if any(r.duplicate for r in runs):
        return Outcome.DUPLICATED
    if any(r.overlap for r in runs):
        return Outcome.OVERLAPPED
    last = runs[-1]
    if last.timed_out:
        return Outcome.TIMED_OUT
    if last.finish_kind is PingKind.FAIL:
        return Outcome.FAILED
    if last.finish_kind is PingKind.UNKNOWN:
        return Outcome.UNKNOWN
    if any(r.outcome is Outcome.TOO_FAST for r in runs):
        return Outcome.TOO_FAST
    if mark is not None and mark.outcome is Outcome.INCOMPLETE:
        return Outcome.INCOMPLETE
    if last.outcome is None:
        return None
    return Outcome.LATE if runs[0].late else Outcome.ON_TIME
