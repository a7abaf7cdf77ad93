"""Detection rules beyond the shared scenarios: simple checks, binding rule 4, thresholds, pause."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from monitor.domain import detection
from monitor.domain.checks import AlertKind, CheckSpec, CheckState, Outcome, PingKind, SimpleSchedule, Status
from monitor.domain.cron import schedules
from monitor.domain.detection import PingIn
from monitor.domain.errors import ValidationError
from monitor.domain.runs import RunBook, bind

T0 = datetime(2026, 7, 18, 12, 0, tzinfo=UTC)


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def simple_spec(period: int = 60, grace: int = 30, **kw: object) -> CheckSpec:
    return CheckSpec(schedule=SimpleSchedule(period=s(period)), grace=s(grace), max_runtime=s(1800), **kw)  # type: ignore[arg-type]


def cron_spec(
    expr: str, dialect: str = "unix", tz: str = "UTC", grace: int = 60, max_runtime: int = 1800, **kw: object
) -> CheckSpec:
    schedule = schedules.parse_cron(expr, dialect, tz)
    return CheckSpec(schedule=schedule, grace=s(grace), max_runtime=s(max_runtime), **kw)  # type: ignore[arg-type]


def ping(kind: str, at: datetime, **kw: object) -> PingIn:
    return PingIn(kind=PingKind(kind), received=at, **kw)  # type: ignore[arg-type]


def new_alerts(fx: detection.Effects) -> list[AlertKind]:
    return [a.kind for a in fx.alerts if a.new]


class TestSimpleChecks:
    def test_first_ping_ends_new_and_plans_the_next_due(self) -> None:
        spec, state, book = simple_spec(), CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0))
        assert detection.status(state, T0) is Status.UP
        assert state.next_due == T0 + s(90)

    def test_missed_after_period_plus_grace_then_late_ping_recovers(self) -> None:
        spec, state, book = simple_spec(), CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0))
        assert new_alerts(detection.evaluate(spec, state, book, T0 + s(89))) == []
        assert detection.status(state, T0 + s(70)) is Status.GRACE
        fx = detection.evaluate(spec, state, book, T0 + s(91))
        assert new_alerts(fx) == [AlertKind.MISSED]
        assert detection.status(state, T0 + s(91)) is Status.DOWN
        # one due instant at a time: nothing more is judged until the job pings again
        fx = detection.evaluate(spec, state, book, T0 + s(151))
        assert new_alerts(fx) == [] and state.next_due is None
        fx = detection.apply_ping(spec, state, book, ping("success", T0 + s(155)))
        # DESIGN §5: late when the first run ping after due arrives after due + grace; the
        # run belongs to the due instant, and the late notice is the recovery notice
        assert new_alerts(fx) == [AlertKind.LATE]
        assert fx.tick == T0 + s(60)
        assert detection.status(state, T0 + s(155)) is Status.UP
        assert state.next_due == T0 + s(155 + 60 + 30)

    def test_ping_within_period_is_on_time_and_moves_the_anchor(self) -> None:
        spec, state, book = simple_spec(), CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0))
        fx = detection.apply_ping(spec, state, book, ping("success", T0 + s(50)))
        assert fx.alerts == [] and fx.tick == T0 + s(60)
        assert state.next_due == T0 + s(50 + 60 + 30)

    def test_no_duplicates_for_simple_checks(self) -> None:
        spec, state, book = simple_spec(), CheckState(), RunBook()
        for offset in (0, 1, 2, 3):
            fx = detection.apply_ping(spec, state, book, ping("success", T0 + s(offset)))
            assert AlertKind.DUPLICATE not in new_alerts(fx)


class TestBinding:
    def test_rule4_cap_keeps_sub_minute_schedules_from_binding_ahead(self) -> None:
        # every 10 s: (N - P) / 2 = 5 s caps the 60 s early tolerance
        spec = cron_spec("*/10 * * * * *", dialect="seconds", grace=5)
        state = CheckState(watch_from=T0 - s(30), judged_until=T0 - s(30))
        book = RunBook()
        assert (
            bind(spec, state, book, kind=PingKind.SUCCESS, received=T0 + s(4), scheduled=None, rid=None).tick
            == T0
        )
        # 6 s after P: 4 s before N, within the 5 s window (min(grace, 5 min), capped at half the
        # gap) -> N, even though P is watched and has no run (DESIGN §5, rule 4a)
        assert bind(
            spec, state, book, kind=PingKind.SUCCESS, received=T0 + s(6), scheduled=None, rid=None
        ).tick == T0 + s(10)

    def test_rule1_scheduled_floors_to_the_tick(self) -> None:
        spec = cron_spec("0 3 * * *")
        state = CheckState()
        tick = datetime(2026, 7, 18, 3, tzinfo=UTC)
        b = bind(
            spec, state, RunBook(), kind=PingKind.START, received=tick + s(5), scheduled=tick + s(2), rid=None
        )
        assert b.tick == tick

    def test_rule1_rejects_a_future_scheduled(self) -> None:
        spec = cron_spec("0 3 * * *")
        with pytest.raises(ValidationError) as error:
            bind(
                spec,
                CheckState(),
                RunBook(),
                kind=PingKind.START,
                received=T0,
                scheduled=T0 + s(3600),
                rid=None,
            )
        assert error.value.field == "scheduled"

    def test_rule1_rejects_a_rid_of_another_tick(self) -> None:
        spec = cron_spec("0 * * * *")
        state, book = CheckState(), RunBook()
        rid = "11111111-1111-4111-8111-111111111111"
        detection.apply_ping(spec, state, book, ping("start", T0 + s(5), rid=rid))
        with pytest.raises(ValidationError, match="does not match run"):
            bind(
                spec,
                state,
                book,
                kind=PingKind.SUCCESS,
                received=T0 + s(3700),
                scheduled=T0 + s(3600),
                rid=rid,
            )

    def test_rule3_finish_without_rid_closes_the_oldest_open_run(self) -> None:
        spec = cron_spec("0 * * * *", grace=300)
        state, book = CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("start", T0 + s(5)))
        fx = detection.apply_ping(spec, state, book, ping("success", T0 + s(65)))
        assert fx.run is not None and fx.run.duration == s(60)
        assert len(book.runs) == 1


class TestThresholds:
    def test_failure_threshold_counts_consecutive_bad_outcomes(self) -> None:
        spec = cron_spec("0 * * * *", failure_threshold=3, grace=300)
        state, book = CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0 + s(10)))
        raised = []
        for hour in (1, 2, 3):
            raised += new_alerts(
                detection.apply_ping(spec, state, book, ping("fail", T0 + s(3600 * hour + 10)))
            )
        assert raised == [AlertKind.FAILED]
        assert detection.status(state, T0 + s(3 * 3600 + 20)) is Status.DOWN

    def test_recovery_threshold_needs_consecutive_successes(self) -> None:
        spec = cron_spec("0 * * * *", recovery_threshold=2, grace=300)
        state, book = CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0 + s(10)))
        detection.apply_ping(spec, state, book, ping("fail", T0 + s(3610)))
        assert new_alerts(detection.apply_ping(spec, state, book, ping("success", T0 + s(7210)))) == []
        assert new_alerts(detection.apply_ping(spec, state, book, ping("success", T0 + s(10810)))) == [
            AlertKind.RECOVERED
        ]

    def test_a_retry_after_a_failed_run_is_not_a_duplicate(self) -> None:
        spec = cron_spec("0 * * * *", grace=300, failure_threshold=2)
        state, book = CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0 + s(10)))
        detection.apply_ping(spec, state, book, ping("fail", T0 + s(3610)))
        fx = detection.apply_ping(spec, state, book, ping("success", T0 + s(3700), scheduled=T0 + s(3600)))
        assert AlertKind.DUPLICATE not in new_alerts(fx)


class TestPause:
    def test_paused_check_raises_nothing_and_a_ping_resumes_it(self) -> None:
        spec = cron_spec("0 * * * *", grace=300)
        state, book = CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0 + s(10)))
        detection.pause(state, T0 + s(20))
        assert detection.status(state, T0 + s(20)) is Status.PAUSED
        assert detection.evaluate(spec, state, book, T0 + s(86400)).alerts == []
        fx = detection.apply_ping(spec, state, book, ping("success", T0 + s(86400 + 10)))
        assert fx.stored_kind is PingKind.SUCCESS
        assert detection.status(state, T0 + s(86400 + 20)) is Status.UP

    def test_manual_resume_stores_pings_as_ign(self) -> None:
        spec = cron_spec("0 * * * *", grace=300, manual_resume=True)
        state, book = CheckState(), RunBook()
        detection.pause(state, T0)
        fx = detection.apply_ping(spec, state, book, ping("success", T0 + s(10)))
        assert fx.stored_kind is PingKind.IGN
        assert detection.status(state, T0 + s(20)) is Status.PAUSED


def test_evaluation_is_bounded_for_a_check_silent_for_years() -> None:
    spec = cron_spec("* * * * *", grace=1)
    state, book = CheckState(), RunBook()
    detection.apply_ping(spec, state, book, ping("success", T0 + s(1)))
    far = T0 + timedelta(days=365)
    fx = detection.evaluate(spec, state, book, far)
    assert len(fx.new_marks) == detection.MAX_TICKS_PER_EVALUATION
    assert state.next_due is not None and state.next_due < far  # the next sweep continues
    assert new_alerts(fx) == [AlertKind.MISSED]


def test_a_rejected_ping_leaves_a_paused_check_paused() -> None:
    spec = cron_spec("0 3 * * *")
    state, book = CheckState(), RunBook()
    detection.pause(state, T0)
    with pytest.raises(ValidationError):
        detection.apply_ping(spec, state, book, ping("success", T0, scheduled=T0 + s(7200)))
    assert state.paused and detection.status(state, T0) is Status.PAUSED


def test_a_rejected_ping_leaves_every_state_field_as_it_was() -> None:
    """A ping refused at binding (a ``scheduled`` hours ahead) undoes whatever was applied
    before it (here the resume of a paused check): the state equals, field by field, the one
    before the ping."""
    spec = cron_spec("0 * * * *", grace=300)
    state, book = CheckState(), RunBook()
    detection.apply_ping(spec, state, book, ping("start", T0 + s(5)))
    detection.apply_ping(spec, state, book, ping("success", T0 + s(20)))
    detection.evaluate(spec, state, book, T0 + s(3 * 3600 + 400))
    detection.pause(state, T0 + s(3 * 3600 + 450))  # a run ping would resume it before binding
    before = dataclasses.replace(state)
    with pytest.raises(ValidationError):
        detection.apply_ping(
            spec, state, book, ping("start", T0 + s(3 * 3600 + 500), scheduled=T0 + s(10 * 3600))
        )
    assert state == before


def test_a_late_retry_of_a_tick_before_the_first_run_raises_nothing() -> None:
    """A first ping with scheduled= a tick before the check's first run raised late every time."""
    spec = cron_spec("0 * * * *", grace=300)
    state, book = CheckState(), RunBook()
    detection.apply_ping(spec, state, book, ping("success", T0 + s(10)))
    fx = detection.apply_ping(spec, state, book, ping("success", T0 + s(20), scheduled=T0 - s(7200)))
    assert new_alerts(fx) == []


def test_a_log_ping_with_a_bad_scheduled_is_refused() -> None:
    spec = cron_spec("0 * * * *")
    with pytest.raises(ValidationError):
        detection.apply_ping(spec, CheckState(), RunBook(), ping("log", T0, scheduled=T0 + s(7200)))


def test_pause_and_resume_flips_are_down_flips() -> None:
    """Healthchecks' flips carry up 0/1: paused and resumed (status new) are not up."""
    state = CheckState()
    assert [f.up for f in detection.pause(state, T0).flips] == [False]
    assert [f.up for f in detection.resume(state, T0).flips] == [False]


class TestOutageGuard:
    """DESIGN §6: deadlines inside a monitor outage are unknown, not missed."""

    def test_ticks_whose_grace_ended_in_an_outage_are_unknown(self) -> None:
        spec = cron_spec("* * * * *", grace=30)
        state, book = CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0 + s(1)))
        outage = detection.OutageGuard(outages=((T0 + s(10), T0 + s(600)),))
        fx = detection.evaluate(spec, state, book, T0 + s(601), guard=outage)
        assert new_alerts(fx) == []
        assert {m.outcome for m in fx.new_marks} == {Outcome.UNKNOWN}
        assert len(fx.new_marks) == 9  # 12:01 … 12:09, deadlines 12:01:30 … 12:09:30
        assert detection.status(state, T0 + s(601)) is not Status.DOWN
        # after the outage the job is really silent: missed as usual
        fx = detection.evaluate(spec, state, book, T0 + s(700), guard=outage)
        assert new_alerts(fx) == [AlertKind.MISSED]

    def test_an_ongoing_outage_defers_judgement(self) -> None:
        spec = cron_spec("* * * * *", grace=30)
        state, book = CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0 + s(1)))
        fx = detection.evaluate(
            spec, state, book, T0 + s(300), guard=detection.OutageGuard(seen_until=T0 + s(5))
        )
        assert fx.alerts == [] and fx.new_marks == []
        assert state.next_due is not None and state.next_due < T0 + s(300)  # still due

    def test_a_run_timing_out_during_an_outage_raises_nothing(self) -> None:
        spec = cron_spec("0 * * * *", grace=300)
        state, book = CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("start", T0 + s(1)))
        outage = detection.OutageGuard(outages=((T0 + s(60), T0 + s(3000)),))
        fx = detection.evaluate(spec, state, book, T0 + s(3001), guard=outage)
        assert new_alerts(fx) == []
        assert fx.run is None and any(r.timed_out for r in book.runs.values())


class TestEdgeCases:
    """Findings of the breaking session for runs and detection, each pinned."""

    def test_late_runs_count_towards_recovery_threshold(self) -> None:
        # a daily job that runs 20 min late every day, grace 10 min, recovery_threshold 2:
        # the second late run closes the episode (DESIGN §2: runs succeed "on time or late")
        spec = cron_spec("0 3 * * *", grace=600, recovery_threshold=2)
        state, book = CheckState(), RunBook()
        day = datetime(2026, 7, 18, 3, tzinfo=UTC)
        detection.apply_ping(spec, state, book, ping("success", day + s(10)))
        raised: list[AlertKind] = []
        for n in range(1, 5):
            tick = day + timedelta(days=n)
            raised += new_alerts(detection.evaluate(spec, state, book, tick + s(601)))
            raised += new_alerts(detection.apply_ping(spec, state, book, ping("success", tick + s(1200))))
        # the first late run does not close the episode (threshold 2) and tells nothing; the
        # second closes it with its one late notice (DESIGN §5: two notices per episode)
        assert raised == [AlertKind.MISSED, AlertKind.LATE, AlertKind.MISSED, AlertKind.LATE]
        assert detection.status(state, day + timedelta(days=4, seconds=1300)) is Status.UP

    def test_a_run_within_the_early_window_belongs_to_the_next_tick_even_after_a_miss(self) -> None:
        # DESIGN §5, rule 4a: a run a little early belongs to the tick it is early for,
        # whatever the previous tick's state (clocks run ahead, cron daemons jitter)
        spec = cron_spec("0 * * * *", grace=300, max_runtime=7200)
        state, book = CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0 + s(10)))
        detection.evaluate(spec, state, book, T0 + s(3600 + 301))  # 13:00 missed
        fx = detection.apply_ping(spec, state, book, ping("success", T0 + s(7200 - 30)))
        assert fx.tick == T0 + s(7200)
        assert new_alerts(fx) == [AlertKind.RECOVERED]
        # a run well inside the missed tick's grace window is still that tick's (rule 4b)
        state2, book2 = CheckState(), RunBook()
        detection.apply_ping(spec, state2, book2, ping("success", T0 + s(10)))
        detection.evaluate(spec, state2, book2, T0 + s(3600 + 301))
        fx = detection.apply_ping(spec, state2, book2, ping("success", T0 + s(3600 + 1800)))
        assert fx.tick == T0 + s(3600)
        assert new_alerts(fx) == [AlertKind.LATE]

    def test_a_first_ping_for_an_old_tick_does_not_watch_the_ticks_since(self) -> None:
        spec = cron_spec("0 3 * * *", grace=600)
        state, book = CheckState(), RunBook()
        now = datetime(2026, 7, 20, 12, tzinfo=UTC)
        fx = detection.apply_ping(
            spec, state, book, ping("success", now, scheduled=datetime(2026, 1, 1, 3, tzinfo=UTC))
        )
        assert fx.run is not None and fx.run.outcome is Outcome.LATE  # the outcome is late, no alert
        fx = detection.evaluate(spec, state, book, now + s(60))
        assert fx.alerts == [] and fx.new_marks == []
        assert state.next_due == datetime(2026, 7, 21, 3, 10, tzinfo=UTC)


def test_an_early_run_ends_new_but_satisfies_and_raises_nothing() -> None:
    """DESIGN §5: "the first run ping ends ``new``" (status ``new``: no run ping yet), and an
    early run (rule 4c) satisfies nothing and raises nothing: a failed test ping an hour before
    the first tick makes the check ``up`` without an alert, and the real run at 03:00 is that
    tick's run, not a duplicate."""
    spec = cron_spec("0 3 * * *")
    state, book = CheckState(), RunBook()
    early_at = T0.replace(hour=2)  # an hour before 03:00, outside the 60 s early window
    for kind in ("start", "fail"):
        fx = detection.apply_ping(spec, state, book, ping(kind, early_at))
        assert fx.run is not None and fx.run.early and fx.tick == T0.replace(hour=3)
        assert new_alerts(fx) == []
        assert detection.status(state, early_at) is Status.UP
    real_at = T0.replace(hour=3, second=10)
    fx = detection.apply_ping(spec, state, book, ping("success", real_at))
    assert fx.run is not None and not fx.run.early and fx.tick == T0.replace(hour=3)
    assert new_alerts(fx) == []
    assert detection.status(state, real_at) is Status.UP
