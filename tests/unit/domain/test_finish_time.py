"""A finish ping that carries the time its run really ended (``finished=``, docs/design.md §5).

A reporter stalled (or a monitor that did not answer) delivers a run's finish after the run
ended. Stored at its arrival, the run would look in progress past the next tick, so that tick's
run would read as ``overlapped``, and a run whose finish waited past ``start + max_runtime``
as timed out. With ``finished`` the run ends when it ended, within bounds: never later than the
arrival (plus a small clock skew), never before the run's start.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from monitor.domain import detection
from monitor.domain.checks import AlertKind, CheckSpec, CheckState, Outcome, PingKind
from monitor.domain.cron import schedules
from monitor.domain.detection import Effects, PingIn
from monitor.domain.errors import ValidationError
from monitor.domain.runs import RunBook, tick_outcome

T0 = datetime(2026, 7, 18, 12, 0, tzinfo=UTC)  # a tick of the every-minute schedule
RIDS = [f"00000000-0000-4000-8000-{n:012d}" for n in range(10)]


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def tick(n: int) -> datetime:
    return T0 + s(60 * n)


class Job:
    """One every-minute check fed pings as the bundled scheduler sends them."""

    def __init__(self, max_runtime: int = 1800) -> None:
        schedule = schedules.parse_cron("* * * * *", "unix", "UTC")
        self.spec = CheckSpec(schedule=schedule, grace=s(20), max_runtime=s(max_runtime))
        self.state = CheckState()
        self.book = RunBook()

    def ping(self, kind: str, n: int, at: datetime, finished: datetime | None = None) -> Effects:
        ping = PingIn(kind=PingKind(kind), received=at, scheduled=tick(n), rid=RIDS[n], finished=finished)
        return detection.apply_ping(self.spec, self.state, self.book, ping)

    def run_of(self, n: int) -> detection.Run:
        run = self.book.by_rid(RIDS[n])
        assert run is not None
        return run


def test_a_run_that_ended_before_the_next_tick_does_not_overlap_it_when_its_finish_arrives_late() -> None:
    job = Job()
    job.ping("success", 0, tick(0) + s(1))  # the check's first run
    job.ping("start", 1, tick(1) + s(1))
    # run 1 ended 5 s in; its finish was held up (a stalled reporter) while the next tick's
    # run started (a successor replica), and arrives 40 s into tick 2
    fx_start = job.ping("start", 2, tick(2) + s(1))
    fx = job.ping("success", 1, tick(2) + s(40), finished=tick(1) + s(5))
    assert job.run_of(1).finished_at == tick(1) + s(5)
    assert job.run_of(1).duration == s(4)
    assert job.run_of(1).outcome is Outcome.ON_TIME
    # the later run was flagged when its start arrived; the real end clears it
    assert fx_start.alerts and fx_start.alerts[0].kind is AlertKind.OVERLAP
    assert job.run_of(2).overlap is False
    assert job.run_of(2).id in fx.changed_runs
    job.ping("success", 2, tick(2) + s(45))
    assert job.run_of(2).outcome is Outcome.ON_TIME
    assert tick_outcome(job.book, tick(2)) is Outcome.ON_TIME


def test_a_late_finish_with_its_real_end_before_the_next_start_leaves_that_run_unflagged() -> None:
    job = Job()
    job.ping("success", 0, tick(0) + s(1))
    job.ping("start", 1, tick(1) + s(1))
    job.ping("success", 1, tick(2) + s(30), finished=tick(1) + s(5))
    fx = job.ping("start", 2, tick(2) + s(31))
    assert AlertKind.OVERLAP not in {a.kind for a in fx.alerts}
    assert job.run_of(1).finished_at == tick(1) + s(5)


def test_a_run_that_really_ran_into_the_next_tick_still_overlaps_it() -> None:
    job = Job()
    job.ping("success", 0, tick(0) + s(1))
    job.ping("start", 1, tick(1) + s(1))
    job.ping("start", 2, tick(2) + s(1))
    job.ping("success", 1, tick(2) + s(40), finished=tick(2) + s(10))
    assert job.run_of(2).overlap is True


def test_a_finish_within_max_runtime_that_arrives_after_it_is_not_a_timeout() -> None:
    job = Job(max_runtime=30)
    job.ping("success", 0, tick(0) + s(1))
    job.ping("start", 1, tick(1) + s(1))
    fx = job.ping("success", 1, tick(1) + s(50), finished=tick(1) + s(20))
    assert AlertKind.TIMEOUT not in {a.kind for a in fx.alerts}
    assert job.run_of(1).outcome is Outcome.ON_TIME


def test_a_finish_without_finished_after_max_runtime_is_still_a_timeout() -> None:
    job = Job(max_runtime=30)
    job.ping("success", 0, tick(0) + s(1))
    job.ping("start", 1, tick(1) + s(1))
    fx = job.ping("success", 1, tick(1) + s(50))
    assert AlertKind.TIMEOUT in {a.kind for a in fx.alerts}


def test_finished_before_the_run_started_is_taken_as_its_start() -> None:
    job = Job()
    job.ping("success", 0, tick(0) + s(1))
    job.ping("start", 1, tick(1) + s(10))
    job.ping("success", 1, tick(1) + s(30), finished=tick(1) + s(2))
    assert job.run_of(1).finished_at == tick(1) + s(10)
    assert job.run_of(1).duration == s(0)


def test_finished_a_little_after_the_arrival_is_taken_as_the_arrival() -> None:
    job = Job()
    job.ping("success", 0, tick(0) + s(1))
    job.ping("start", 1, tick(1) + s(1))
    job.ping("success", 1, tick(1) + s(10), finished=tick(1) + s(12))
    assert job.run_of(1).finished_at == tick(1) + s(10)


def test_finished_far_after_the_arrival_is_refused_and_changes_nothing() -> None:
    job = Job()
    job.ping("success", 0, tick(0) + s(1))
    job.ping("start", 1, tick(1) + s(1))
    with pytest.raises(ValidationError) as error:
        job.ping("success", 1, tick(1) + s(10), finished=tick(1) + s(10) + detection.FINISHED_SKEW + s(1))
    assert error.value.field == "finished"
    assert job.run_of(1).is_open


def test_finished_on_a_start_ping_is_refused() -> None:
    job = Job()
    job.ping("success", 0, tick(0) + s(1))
    with pytest.raises(ValidationError) as error:
        job.ping("start", 1, tick(1) + s(1), finished=tick(1))
    assert error.value.field == "finished"
