"""Supersession, one notice per episode edge, fleets and too-fast runs (DESIGN §5), case by case."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from monitor.domain import detection
from monitor.domain.checks import AlertKind, CheckSpec, CheckState, Outcome, PingKind, Status
from monitor.domain.cron import schedules
from monitor.domain.runs import RunBook, tick_outcome

T0 = datetime(2026, 7, 18, 10, 0, tzinfo=UTC)


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def hourly(**kwargs: object) -> CheckSpec:
    return CheckSpec(
        schedule=schedules.parse_cron("0 * * * *"),
        grace=kwargs.pop("grace", s(300)),  # type: ignore[arg-type]
        max_runtime=kwargs.pop("max_runtime", s(1800)),  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )


def ping(kind: str, at: datetime, rid: str | None = None) -> detection.PingIn:
    return detection.PingIn(kind=PingKind(kind), received=at, rid=rid)


def new(fx: detection.Effects) -> list[detection.AlertDraft]:
    return [a for a in fx.alerts if a.new]


class TestSupersession:
    def test_a_tick_judged_after_a_newer_success_pages_once_and_leaves_the_check_up(self) -> None:
        # the evaluator was away (failover) while 11:00 passed; 12:00's run succeeded first
        spec, state, book = hourly(), CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0 + s(10)))
        detection.apply_ping(spec, state, book, ping("success", T0 + s(7200 + 10)))
        fx = detection.evaluate(spec, state, book, T0 + s(7200 + 60))
        alerts = new(fx)
        assert [(a.kind, a.scheduled, a.superseded) for a in alerts] == [
            (AlertKind.MISSED, T0 + s(3600), True)
        ]
        assert fx.flips == []
        assert detection.status(state, T0 + s(7200 + 60)) is Status.UP
        assert tick_outcome(book, T0 + s(3600)) is Outcome.MISSED

    def test_consecutive_superseded_ticks_share_one_alert(self) -> None:
        spec, state, book = hourly(), CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0 + s(10)))
        detection.apply_ping(spec, state, book, ping("success", T0 + s(3 * 3600 + 10)))
        fx = detection.evaluate(spec, state, book, T0 + s(3 * 3600 + 60))
        assert len(new(fx)) == 1
        bumps = [a for a in fx.alerts if not a.new]
        assert bumps and bumps[-1].count == 2 and bumps[-1].key == new(fx)[0].key
        assert detection.status(state, T0 + s(3 * 3600 + 60)) is Status.UP

    def test_separate_stretches_of_superseded_ticks_page_separately(self) -> None:
        spec, state, book = hourly(), CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0 + s(10)))
        detection.apply_ping(spec, state, book, ping("success", T0 + s(2 * 3600 + 10)))  # 11:00 silent
        first = new(detection.evaluate(spec, state, book, T0 + s(2 * 3600 + 60)))
        detection.apply_ping(spec, state, book, ping("success", T0 + s(4 * 3600 + 10)))  # 13:00 silent
        second = new(detection.evaluate(spec, state, book, T0 + s(4 * 3600 + 60)))
        assert [a.scheduled for a in first + second] == [T0 + s(3600), T0 + s(3 * 3600)]

    def test_a_tick_inside_the_episode_that_a_newer_run_closed_counts_there(self) -> None:
        # every 2 min, grace 20 min: the episode opened at 08:02 and 08:40's run closed it;
        # 08:20..08:38 are judged afterwards and only raise the episode's count
        spec = CheckSpec(schedule=schedules.parse_cron("*/2 * * * *"), grace=s(1200), max_runtime=s(60))
        state, book = CheckState(), RunBook()
        start = datetime(2026, 3, 10, 8, 0, tzinfo=UTC)
        detection.apply_ping(spec, state, book, ping("success", start + s(3)))
        raised: list[AlertKind] = []
        for minute in range(2, 41, 2):
            raised += [a.kind for a in new(detection.evaluate(spec, state, book, start + s(60 * minute)))]
        fx = detection.apply_ping(spec, state, book, ping("success", start + s(2400 + 3)))
        raised += [a.kind for a in new(fx)]
        # 08:20..08:38 are still unjudged, but superseded: they do not make the check "grace"
        assert detection.status(state, start + s(2400 + 10)) is Status.UP
        later = detection.evaluate(spec, state, book, start + s(2400 + 1200 + 1))
        assert new(later) == []
        assert raised == [AlertKind.MISSED, AlertKind.RECOVERED]
        counts = [a.count for a in later.alerts]
        assert counts and counts == sorted(counts)  # the closed episode's count grows

    def test_an_old_ticks_failure_after_a_newer_success_pages_but_leaves_the_check_up(self) -> None:
        # a backfill of 11:00 (scheduled=) fails after 12:00's run succeeded
        spec, state, book = hourly(grace=s(3 * 3600)), CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0 + s(5)))
        detection.apply_ping(spec, state, book, ping("success", T0 + s(2 * 3600 + 5)))
        backfill = detection.PingIn(
            kind=PingKind.FAIL, received=T0 + s(2 * 3600 + 1800), scheduled=T0 + s(3600)
        )
        fx = detection.apply_ping(spec, state, book, backfill)
        assert [(a.kind, a.scheduled, a.superseded) for a in new(fx)] == [
            (AlertKind.FAILED, T0 + s(3600), True)
        ]
        assert fx.flips == []
        assert detection.status(state, T0 + s(2 * 3600 + 1801)) is Status.UP

    def test_an_old_ticks_failure_inside_the_episode_a_newer_run_closed_counts_there(self) -> None:
        # 11:00 missed (down), 12:00's run closed the episode; then 11:00's backfill fails: it
        # is counted in that closed episode, as a tick judged there would be, and raises nothing
        spec, state, book = hourly(), CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0 + s(5)))
        missed = detection.evaluate(spec, state, book, T0 + s(3600 + 301))
        assert [a.kind for a in new(missed)] == [AlertKind.MISSED]
        closed = detection.apply_ping(spec, state, book, ping("success", T0 + s(7200 + 5)))
        assert [a.kind for a in new(closed)] == [AlertKind.RECOVERED]
        backfill = detection.PingIn(kind=PingKind.FAIL, received=T0 + s(7200 + 60), scheduled=T0 + s(3600))
        fx = detection.apply_ping(spec, state, book, backfill)
        assert new(fx) == [] and fx.flips == []
        assert [(a.key, a.count) for a in fx.alerts] == [(new(missed)[0].key, 2)]
        assert detection.status(state, T0 + s(7200 + 61)) is Status.UP

    def test_superseded_misses_page_only_from_failure_threshold_ticks_in_a_row(self) -> None:
        spec = hourly(grace=s(3 * 3600), failure_threshold=3)
        state, book = CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0 + s(5)))
        # 11:00 silent, 12:00..15:00 succeed: one superseded tick, below the threshold
        for hour in range(2, 6):
            detection.apply_ping(spec, state, book, ping("success", T0 + s(hour * 3600 + 5)))
        raised = new(detection.evaluate(spec, state, book, T0 + s(5 * 3600 + 10)))
        assert raised == []
        # 16:00..18:00 silent, 19:00 succeeds: three in a row page once
        detection.apply_ping(spec, state, book, ping("success", T0 + s(9 * 3600 + 5)))
        fx = detection.evaluate(spec, state, book, T0 + s(12 * 3600 + 10))
        assert [(a.kind, a.scheduled, a.count) for a in new(fx)] == [(AlertKind.MISSED, T0 + s(6 * 3600), 3)]
        assert fx.flips == [] and not state.is_down


class TestLateNotice:
    def test_a_late_start_says_nothing_and_its_failure_is_the_only_news(self) -> None:
        spec, state, book = hourly(), CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0 + s(10)))
        rid = "00000000-0000-4000-8000-000000000001"
        assert new(detection.apply_ping(spec, state, book, ping("start", T0 + s(3600 + 600), rid))) == []
        fx = detection.apply_ping(spec, state, book, ping("fail", T0 + s(3600 + 700), rid))
        assert [a.kind for a in new(fx)] == [AlertKind.FAILED]

    def test_a_late_run_while_up_tells_late_once_at_its_success(self) -> None:
        # the evaluator had not judged 11:00 yet (no episode): the success still says late
        spec, state, book = hourly(), CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0 + s(10)))
        rid = "00000000-0000-4000-8000-000000000002"
        assert new(detection.apply_ping(spec, state, book, ping("start", T0 + s(3600 + 600), rid))) == []
        fx = detection.apply_ping(spec, state, book, ping("success", T0 + s(3600 + 900), rid))
        assert [(a.kind, a.late_by) for a in new(fx)] == [(AlertKind.LATE, s(600))]


class TestFleets:
    def test_one_run_more_than_expected_is_a_duplicate(self) -> None:
        spec, state, book = hourly(expected_runs=3), CheckState(), RunBook()
        raised: list[AlertKind] = []
        for host in range(4):
            rid = f"00000000-0000-4000-8000-00000000000{host}"
            raised += [
                a.kind
                for a in new(detection.apply_ping(spec, state, book, ping("success", T0 + s(host), rid)))
            ]
        assert raised == [AlertKind.DUPLICATE]

    def test_a_fleet_tick_with_every_run_recovers_the_check(self) -> None:
        spec, state, book = hourly(expected_runs=2), CheckState(), RunBook()
        detection.apply_ping(
            spec, state, book, ping("success", T0 + s(1), "00000000-0000-4000-8000-00000000000a")
        )
        detection.apply_ping(
            spec, state, book, ping("success", T0 + s(2), "00000000-0000-4000-8000-00000000000b")
        )
        tick = T0 + s(3600)
        detection.apply_ping(
            spec, state, book, ping("success", tick + s(1), "00000000-0000-4000-8000-00000000000c")
        )
        fx = detection.evaluate(spec, state, book, tick + s(301))
        assert [(a.kind, a.runs_seen, a.runs_expected) for a in new(fx)] == [(AlertKind.INCOMPLETE, 1, 2)]
        tick2 = tick + s(3600)
        raised = []
        for n, rid in enumerate(
            ("00000000-0000-4000-8000-00000000000d", "00000000-0000-4000-8000-00000000000e")
        ):
            raised += [
                a.kind
                for a in new(detection.apply_ping(spec, state, book, ping("success", tick2 + s(n), rid)))
            ]
        assert raised == [AlertKind.RECOVERED]  # only once both hosts succeeded


class TestTooFast:
    def test_a_finish_without_start_is_never_too_fast(self) -> None:
        spec, state, book = hourly(min_runtime=s(600)), CheckState(), RunBook()
        detection.apply_ping(spec, state, book, ping("success", T0 + s(10)))
        fx = detection.apply_ping(spec, state, book, ping("success", T0 + s(3600 + 10)))
        assert new(fx) == []

    def test_a_run_at_least_min_runtime_long_is_fine_and_a_shorter_one_pages(self) -> None:
        spec, state, book = hourly(min_runtime=s(600)), CheckState(), RunBook()
        rid = "00000000-0000-4000-8000-0000000000aa"
        detection.apply_ping(spec, state, book, ping("start", T0 + s(1), rid))
        assert new(detection.apply_ping(spec, state, book, ping("success", T0 + s(601), rid))) == []
        rid2 = "00000000-0000-4000-8000-0000000000bb"
        detection.apply_ping(spec, state, book, ping("start", T0 + s(3601), rid2))
        fx = detection.apply_ping(spec, state, book, ping("success", T0 + s(3601 + 15), rid2))
        assert [(a.kind, a.duration, a.min_runtime) for a in new(fx)] == [(AlertKind.TOO_FAST, s(15), s(600))]
        assert detection.status(state, T0 + s(3700)) is Status.DOWN
