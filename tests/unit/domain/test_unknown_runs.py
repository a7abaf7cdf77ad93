"""Runs ended by an ``unknown`` ping: their runner died with them (the bundled scheduler closes
a dead replica's runs this way, DESIGN §8).

Such a run is over (later runs are not ``overlapped``), its outcome is ``unknown``, and it is
neither a failure nor a success: no alert, no flip, the down episode and both streaks stay as
they were. Its tick has run (never ``missed``) and is judged ``unknown`` (docs/design.md §5).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from monitor.domain import detection
from monitor.domain.checks import AlertKind, CheckSpec, CheckState, Outcome, PingKind, Status
from monitor.domain.cron import schedules
from monitor.domain.detection import Effects, PingIn
from monitor.domain.runs import RunBook, tick_outcome

T0 = datetime(2026, 7, 18, 12, 0, tzinfo=UTC)  # a tick of the every-minute schedule
RIDS = [f"00000000-0000-4000-8000-{n:012d}" for n in range(10)]


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def minutely(**kw: object) -> CheckSpec:
    schedule = schedules.parse_cron("* * * * *", "unix", "UTC")
    return CheckSpec(**{"schedule": schedule, "grace": s(20), "max_runtime": s(1800), **kw})  # type: ignore[arg-type]


def tick(n: int) -> datetime:
    return T0 + s(60 * n)


class Job:
    """One check fed pings as the bundled scheduler sends them (``scheduled`` and ``rid``)."""

    def __init__(self, spec: CheckSpec | None = None) -> None:
        self.spec = spec or minutely()
        self.state = CheckState()
        self.book = RunBook()

    def ping(self, kind: str, n: int, after: float = 1.0, *, rid: int | None = None) -> Effects:
        ping = PingIn(
            kind=PingKind(kind),
            received=tick(n) + s(after),
            scheduled=tick(n),
            rid=RIDS[n if rid is None else rid],
        )
        return detection.apply_ping(self.spec, self.state, self.book, ping)

    def run(self, n: int, finish: str = "success") -> Effects:
        self.ping("start", n)
        return self.ping(finish, n, after=2.0)

    def evaluate(self, at: datetime) -> Effects:
        return detection.evaluate(self.spec, self.state, self.book, at)


def alerts(fx: Effects) -> list[AlertKind]:
    return [a.kind for a in fx.alerts if a.new]


def test_unknown_ends_the_run_with_outcome_unknown_and_no_alert_or_flip() -> None:
    job = Job()
    job.run(0)
    job.ping("start", 1)
    fx = job.ping("unknown", 1, after=3.0)
    assert fx.run is not None and fx.run.outcome is Outcome.UNKNOWN
    assert fx.run.finish_kind is PingKind.UNKNOWN and fx.run.finished_at == tick(1) + s(3)
    assert alerts(fx) == [] and fx.flips == []
    assert detection.status(job.state, tick(1) + s(3)) is Status.UP
    assert not detection.started(job.spec, job.book, tick(1) + s(3))  # no longer in progress
    assert tick_outcome(job.book, tick(1)) is Outcome.UNKNOWN


def test_a_run_after_an_unknown_run_is_not_overlapped() -> None:
    job = Job()
    job.run(0)
    job.ping("start", 1)
    job.ping("unknown", 1, after=3.0)
    fx = job.ping("start", 2)
    assert AlertKind.OVERLAP not in alerts(fx)
    fx = job.ping("success", 2, after=2.0)
    assert fx.run is not None and fx.run.outcome is Outcome.ON_TIME
    assert tick_outcome(job.book, tick(2)) is Outcome.ON_TIME


def test_without_the_unknown_ping_the_next_run_is_overlapped() -> None:
    # the case the unknown ping exists for: the dead replica's run stays in progress
    job = Job()
    job.run(0)
    job.ping("start", 1)
    fx = job.ping("start", 2)
    assert alerts(fx) == [AlertKind.OVERLAP]


def test_a_tick_whose_only_run_is_unknown_is_never_missed() -> None:
    job = Job()
    job.run(0)
    job.ping("start", 1)
    job.ping("unknown", 1, after=3.0)
    fx = job.evaluate(tick(1) + s(30))  # past tick 1's grace
    assert alerts(fx) == [] and fx.new_marks == []
    assert tick_outcome(job.book, tick(1)) is Outcome.UNKNOWN
    assert job.state.judged_until == tick(1)  # resolved: detection moved past it


def test_unknown_neither_fails_nor_recovers_a_down_check() -> None:
    job = Job()
    job.run(0)
    fx = job.run(1, finish="fail")
    assert alerts(fx) == [AlertKind.FAILED]
    job.ping("start", 2)
    fx = job.ping("unknown", 2, after=3.0)
    assert alerts(fx) == [] and fx.flips == []
    assert detection.status(job.state, tick(2) + s(3)) is Status.DOWN  # the episode stays open
    fx = job.run(3)
    assert alerts(fx) == [AlertKind.RECOVERED]


def test_unknown_leaves_the_failure_streak_as_it_was() -> None:
    # failure_threshold 2: fail, unknown, fail opens the episode at the second failure (the
    # unknown run says nothing either way), as fail, fail would
    job = Job(minutely(failure_threshold=2))
    job.run(0)
    assert alerts(job.run(1, finish="fail")) == []
    assert alerts(job.run(2, finish="unknown")) == []
    assert job.state.bad_streak == 1
    assert alerts(job.run(3, finish="fail")) == [AlertKind.FAILED]


def test_unknown_leaves_the_recovery_streak_as_it_was() -> None:
    job = Job(minutely(recovery_threshold=2))
    job.run(0)
    job.run(1, finish="fail")
    assert alerts(job.run(2)) == []
    job.run(3, finish="unknown")
    assert job.state.good_streak == 1
    assert alerts(job.run(4)) == [AlertKind.RECOVERED]


def test_a_retry_of_a_tick_after_its_unknown_run_is_not_a_duplicate() -> None:
    job = Job()
    job.run(0)
    job.ping("start", 1)
    job.ping("unknown", 1, after=3.0)
    job.ping("start", 1, after=10.0, rid=9)
    fx = job.ping("success", 1, after=12.0, rid=9)
    assert AlertKind.DUPLICATE not in alerts(fx)
    assert tick_outcome(job.book, tick(1)) is Outcome.ON_TIME  # the last run decides


def test_an_unknown_ping_after_the_run_timed_out_changes_nothing() -> None:
    job = Job(minutely(max_runtime=s(30)))
    job.run(0)
    job.ping("start", 1)
    fx = job.evaluate(tick(1) + s(40))
    assert alerts(fx) == [AlertKind.TIMEOUT]
    fx = job.ping("unknown", 1, after=45.0)
    assert fx.run is not None and fx.run.outcome is Outcome.TIMED_OUT
    assert alerts(fx) == []
    assert tick_outcome(job.book, tick(1)) is Outcome.TIMED_OUT


def test_a_retransmitted_unknown_ping_changes_nothing() -> None:
    job = Job()
    job.run(0)
    job.ping("start", 1)
    job.ping("unknown", 1, after=3.0)
    fx = job.ping("unknown", 1, after=4.0)
    assert fx.run is not None and fx.run.outcome is Outcome.UNKNOWN and fx.run.finished_at == tick(1) + s(3)
    assert alerts(fx) == []


def test_unknown_is_a_finish_and_a_run_ping() -> None:
    assert PingKind.UNKNOWN.is_finish and PingKind.UNKNOWN.is_run_ping
