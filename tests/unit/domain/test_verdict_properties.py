"""Properties of the verdicts (DESIGN §5: binding rule 4, supersession, two notices per episode).

Random schedules (zones with DST, sub-minute and weekday schedules), random grace windows
(shorter and longer than the period) and ping streams with bounded clock skew and outages.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from monitor.domain import detection
from monitor.domain.checks import AlertKind, CheckSpec, CheckState, Outcome, PingKind
from monitor.domain.cron import schedules
from monitor.domain.runs import Run, RunBook, bind, tick_outcome

EPSILON = timedelta(milliseconds=1)

#: (expression, dialect, zone); starts are chosen next to DST changes of these zones.
SCHEDULES = [
    ("*/2 * * * *", "unix", "UTC"),
    ("0 * * * *", "unix", "Europe/Berlin"),
    ("30 2 * * *", "unix", "Europe/Berlin"),
    ("*/30 1-3 * * *", "unix", "Europe/Berlin"),
    ("0 9 * * 1-5", "unix", "America/New_York"),
    ("0 */6 * * *", "unix", "Australia/Lord_Howe"),
    ("*/10 * * * * *", "seconds", "UTC"),
    ("15 */5 * * * *", "seconds", "Europe/Berlin"),
]
STARTS = [
    datetime(2026, 3, 28, 20, 0, tzinfo=UTC),  # before Berlin's spring-forward night
    datetime(2026, 10, 24, 20, 0, tzinfo=UTC),  # before Berlin's fall-back night
    datetime(2026, 3, 7, 20, 0, tzinfo=UTC),  # before New York's spring forward
    datetime(2026, 7, 15, 6, 0, tzinfo=UTC),  # a quiet summer day
]


def ticks_from(schedule: schedules.CronSchedule, start: datetime, count: int) -> list[datetime]:
    return schedule.next_ticks(start, count)


def horizon(schedule: schedules.CronSchedule, ticks: list[datetime], spec: CheckSpec) -> datetime:
    """Every given tick's deadline has passed, the next tick's has not."""
    following = schedule.next_tick(ticks[-1])
    assert following is not None
    return following + spec.grace


def min_gap(ticks: list[datetime]) -> timedelta:
    return min(b - a for a, b in itertools.pairwise(ticks))


class Simulation:
    """A check driven like the scenario runner: the evaluator runs whenever something is due."""

    def __init__(self, spec: CheckSpec) -> None:
        self.spec = spec
        self.state = CheckState()
        self.book = RunBook()
        self.notices: list[tuple[AlertKind, datetime | None, bool]] = []

    def _record(self, fx: detection.Effects) -> None:
        for alert in fx.alerts:
            if alert.new:
                self.notices.append((alert.kind, alert.scheduled, alert.superseded))

    def until(self, now: datetime) -> None:
        for _ in range(100_000):
            due = self.state.next_due
            if due is None or not due + EPSILON < now:
                return
            self._record(detection.evaluate(self.spec, self.state, self.book, due + EPSILON))

    def ping(self, kind: PingKind, at: datetime, rid: str | None = None) -> detection.Effects:
        self.until(at)
        fx = detection.apply_ping(
            self.spec, self.state, self.book, detection.PingIn(kind=kind, received=at, rid=rid)
        )
        self._record(fx)
        return fx


spec_inputs = st.tuples(
    st.sampled_from(SCHEDULES),
    st.sampled_from(STARTS),
    st.floats(min_value=0.05, max_value=3.0),  # grace as a fraction of the shortest gap
)


def make_spec(expression: str, dialect: str, zone: str, grace: timedelta) -> CheckSpec:
    return CheckSpec(
        schedule=schedules.parse_cron(expression, dialect, zone),
        grace=max(grace, timedelta(seconds=1)),
        max_runtime=timedelta(hours=2),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=spec_inputs, data=st.data())
def test_clock_skew_alone_never_makes_a_duplicate(
    inputs: tuple[tuple[str, str, str], datetime, float], data: st.DataObject
) -> None:
    """One run per tick, each off by at most min(grace, shortest gap / 4): no run is ever a
    duplicate and no tick's outcome is ``duplicated`` (a run earlier than the early window is
    ``early``, or by rule 4b a late run of an unsatisfied tick, never a duplicate); and when
    every run is within the early window nothing is raised at all."""
    (expression, dialect, zone), start, grace_fraction = inputs
    schedule = schedules.parse_cron(expression, dialect, zone)
    ticks = ticks_from(schedule, start, 14)
    gap = min_gap(ticks)
    spec = make_spec(expression, dialect, zone, gap * grace_fraction)
    bound = min(spec.grace, gap / 4)
    limit_ms = int(bound.total_seconds() * 1000)
    skews = data.draw(
        st.lists(st.integers(-limit_ms, limit_ms), min_size=len(ticks), max_size=len(ticks)),
        label="skews (ms)",
    )
    skews[0] = 0  # the check's first run (new checks bind by rule 4b to an unwatched past tick)
    with_start = data.draw(st.booleans(), label="start+finish")
    sim = Simulation(spec)
    for tick, skew_ms in zip(ticks, skews, strict=True):
        at = tick + timedelta(milliseconds=skew_ms)
        if with_start:
            rid = f"00000000-0000-4000-8000-{int(tick.timestamp()):012d}"
            sim.ping(PingKind.START, at, rid)
            sim.ping(PingKind.SUCCESS, at + timedelta(milliseconds=1), rid)
        else:
            sim.ping(PingKind.SUCCESS, at)
    sim.until(horizon(schedule, ticks, spec))
    assert all(kind is not AlertKind.DUPLICATE for kind, _, _ in sim.notices), sim.notices
    runs: list[Run] = list(sim.book.runs.values())
    assert not any(r.duplicate for r in runs)
    for tick in ticks:
        assert tick_outcome(sim.book, tick) is not Outcome.DUPLICATED
    # skews inside the early window give no alert at all
    if all(timedelta(milliseconds=-s) <= spec.early_limit for s in skews):
        assert sim.notices == [], sim.notices


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=spec_inputs, data=st.data())
def test_an_outage_and_a_recovery_give_exactly_two_notices(
    inputs: tuple[tuple[str, str, str], datetime, float], data: st.DataObject
) -> None:
    """The job runs on time, stops long enough for a tick's grace to run out, then runs on time
    again: exactly two notices (missed, then recovered), whatever grace is against the period."""
    (expression, dialect, zone), start, grace_fraction = inputs
    schedule = schedules.parse_cron(expression, dialect, zone)
    ticks = ticks_from(schedule, start, 60)
    gap = min_gap(ticks)
    spec = make_spec(expression, dialect, zone, gap * grace_fraction)
    before = data.draw(st.integers(1, 4), label="good ticks before")
    # the outage lasts until the first silent tick's grace has run out, plus a few ticks
    first_silent = ticks[before]
    resume_at = next((i for i, t in enumerate(ticks) if t > first_silent + spec.grace), None)
    assume(resume_at is not None)
    assert resume_at is not None
    resume = data.draw(st.integers(resume_at, min(resume_at + 5, len(ticks) - 8)), label="resume index")
    skew_limit = int(min(spec.grace, gap / 4, spec.early_limit).total_seconds() * 1000)
    skews = data.draw(st.lists(st.integers(0, skew_limit), min_size=len(ticks), max_size=len(ticks)))
    sim = Simulation(spec)
    for index, tick in enumerate(ticks):
        if before <= index < resume:
            continue
        sim.ping(PingKind.SUCCESS, tick + timedelta(milliseconds=skews[index]))
    end = horizon(schedule, ticks, spec)
    sim.until(end)
    kinds = [kind for kind, _, _ in sim.notices]
    assert kinds == [AlertKind.MISSED, AlertKind.RECOVERED], sim.notices
    assert detection.status(sim.state, end).value in ("up", "grace")


@settings(max_examples=200, deadline=None)
@given(
    inputs=spec_inputs,
    offset=st.floats(min_value=0.0, max_value=1.0),
    satisfied=st.booleans(),
    early_tolerance=st.one_of(st.none(), st.integers(0, 3600)),
)
def test_a_run_binds_to_the_nearer_tick_unless_rules_4a_or_4b_say_otherwise(
    inputs: tuple[tuple[str, str, str], datetime, float],
    offset: float,
    satisfied: bool,
    early_tolerance: int | None,
) -> None:
    (expression, dialect, zone), start, grace_fraction = inputs
    schedule = schedules.parse_cron(expression, dialect, zone)
    previous, following = ticks_from(schedule, start, 2)
    gap = following - previous
    spec = CheckSpec(
        schedule=schedule,
        grace=max(gap * grace_fraction, timedelta(seconds=1)),
        max_runtime=timedelta(seconds=1),
        early_tolerance=None if early_tolerance is None else timedelta(seconds=early_tolerance),
    )
    received = previous + gap * offset
    if received >= following:
        received = following - timedelta(microseconds=1)
    state = CheckState(watch_from=previous - gap, judged_until=previous - gap)
    book = RunBook()
    if satisfied:
        run = Run(id="r1", rid=None, scheduled=previous, first_ping_at=previous, finished_at=previous)
        run.finish_kind = PingKind.SUCCESS
        run.settle()
        book.add(run)
    binding = bind(spec, state, book, kind=PingKind.SUCCESS, received=received, scheduled=None, rid=None)
    window = spec.early_window(previous, following)
    rule_4a = following - received <= window
    rule_4b = not satisfied and received <= previous + spec.grace
    nearer_previous = received - previous <= following - received
    assert binding.tick in (previous, following)
    if rule_4a:
        assert binding.tick == following and not binding.early
    elif rule_4b or nearer_previous:
        assert binding.tick == previous
    else:
        assert binding.tick == following and binding.early
    # the nearer tick wins unless 4a or 4b decided
    if not rule_4a and not rule_4b:
        assert binding.tick == (previous if nearer_previous else following)
