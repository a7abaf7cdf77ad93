"""A start ping that carries the time its run really started (``started=``, docs/design.md §5).

A reporter stopped before it sent the start (or a monitor that did not answer) delivers a
run's start after the run started. Taken at its arrival, the run's start would be that late
arrival: a finish carrying ``finished=`` would be clamped to it (duration 0), a start without
``scheduled`` would bind to the tick nearest its arrival, and a start that went out on time
would read as late. With ``started`` the start is taken, bound and judged when it happened,
within bounds: never later than the arrival (plus a small clock skew).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from monitor.domain import detection
from monitor.domain.checks import AlertKind, CheckSpec, CheckState, PingKind, SimpleSchedule
from monitor.domain.cron import schedules
from monitor.domain.detection import Effects, PingIn
from monitor.domain.errors import ValidationError
from monitor.domain.runs import RunBook

T0 = datetime(2026, 7, 18, 12, 0, tzinfo=UTC)  # a tick of the every-minute schedule
RID = "00000000-0000-4000-8000-000000000001"


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def tick(n: int) -> datetime:
    return T0 + s(60 * n)


class Job:
    """One every-minute check (grace 20 s)."""

    def __init__(self) -> None:
        schedule = schedules.parse_cron("* * * * *", "unix", "UTC")
        self.spec = CheckSpec(schedule=schedule, grace=s(20), max_runtime=s(1800))
        self.state = CheckState()
        self.book = RunBook()

    def ping(self, kind: str, at: datetime, **fields: object) -> Effects:
        ping = PingIn(kind=PingKind(kind), received=at, **fields)  # type: ignore[arg-type]
        return detection.apply_ping(self.spec, self.state, self.book, ping)

    def run(self) -> detection.Run:
        run = self.book.by_rid(RID)
        assert run is not None
        return run


def test_a_late_start_with_its_real_start_is_the_runs_start_and_keeps_its_real_duration() -> None:
    job = Job()
    job.ping("success", tick(0) + s(1))
    # the run started 1 s after tick 1 and ended 2 s later; its scheduler was stopped meanwhile,
    # so both pings went out 5 s after the end, the finish saying when the run ended
    job.ping("start", tick(1) + s(8), scheduled=tick(1), rid=RID, started=tick(1) + s(1))
    job.ping("success", tick(1) + s(8), scheduled=tick(1), rid=RID, finished=tick(1) + s(3))
    assert job.run().started_at == tick(1) + s(1)
    assert job.run().finished_at == tick(1) + s(3)
    assert job.run().duration == s(2)


def test_a_start_without_started_is_still_taken_at_its_arrival() -> None:
    job = Job()
    job.ping("success", tick(0) + s(1))
    job.ping("start", tick(1) + s(8), scheduled=tick(1), rid=RID)
    job.ping("success", tick(1) + s(8), scheduled=tick(1), rid=RID, finished=tick(1) + s(3))
    assert (job.run().started_at, job.run().duration) == (tick(1) + s(8), s(0))


def test_a_late_start_binds_to_the_tick_it_started_for_and_is_not_late() -> None:
    job = Job()
    job.ping("success", tick(0) + s(1))
    # no scheduled, no rid: arriving 2 s before tick 2 it would bind to tick 2 (rule 4a); it
    # started 2 s after tick 1, within its grace
    fx = job.ping("start", tick(1) + s(58), started=tick(1) + s(2))
    assert fx.run is not None
    assert (fx.run.scheduled, fx.run.started_at) == (tick(1), tick(1) + s(2))
    assert not fx.run.early and not fx.run.late
    fx = job.ping("success", tick(1) + s(59))
    assert fx.run is not None and fx.run.scheduled == tick(1)
    assert AlertKind.LATE not in {a.kind for a in fx.alerts}


def test_the_same_start_without_started_binds_to_the_next_tick() -> None:
    job = Job()
    job.ping("success", tick(0) + s(1))
    fx = job.ping("start", tick(1) + s(58))
    assert fx.run is not None and fx.run.scheduled == tick(2)


def test_started_a_little_after_the_arrival_is_taken_as_the_arrival() -> None:
    job = Job()
    job.ping("success", tick(0) + s(1))
    job.ping("start", tick(1) + s(5), scheduled=tick(1), rid=RID, started=tick(1) + s(8))
    assert job.run().started_at == tick(1) + s(5)


def test_started_far_after_the_arrival_is_refused_and_changes_nothing() -> None:
    job = Job()
    job.ping("success", tick(0) + s(1))
    too_late = tick(1) + s(5) + detection.FINISHED_SKEW + s(1)
    with pytest.raises(ValidationError) as error:
        job.ping("start", tick(1) + s(5), scheduled=tick(1), rid=RID, started=too_late)
    assert (error.value.field, str(error.value)) == ("started", "started: is later than the ping's arrival")
    assert job.book.by_rid(RID) is None


def test_started_longer_ago_than_the_max_runtime_is_refused_and_changes_nothing() -> None:
    job = Job()
    job.ping("success", tick(0) + s(1))
    before = dataclasses.replace(job.state)
    arrival = tick(1) + s(5)
    with pytest.raises(ValidationError) as error:
        job.ping("start", arrival, rid=RID, started=arrival - job.spec.max_runtime - s(1))
    assert (error.value.field, str(error.value)) == (
        "started",
        "started: is more than the check's max_runtime (1800 s) before the ping's arrival",
    )
    assert job.book.by_rid(RID) is None
    assert job.state == before
    # exactly max_runtime before is a run that is just timing out, taken as sent
    job.ping("start", arrival, rid=RID, started=arrival - job.spec.max_runtime)
    assert job.run().started_at == arrival - job.spec.max_runtime


@pytest.mark.parametrize("kind", ["success", "fail", "unknown", "log", "skip"])
def test_started_on_a_ping_that_is_not_a_start_is_refused(kind: str) -> None:
    job = Job()
    job.ping("success", tick(0) + s(1))
    with pytest.raises(ValidationError) as error:
        job.ping(kind, tick(1) + s(5), scheduled=tick(1), started=tick(1))
    assert (error.value.field, str(error.value)) == ("started", "started: only for a start ping")


class SimpleJob(Job):
    """A simple check (period 60 s, grace 20 s)."""

    def __init__(self) -> None:
        super().__init__()
        self.spec = CheckSpec(schedule=SimpleSchedule(period=s(60)), grace=s(20), max_runtime=s(30))


@pytest.mark.parametrize("job", [Job(), SimpleJob()], ids=["cron", "simple"])
def test_a_start_applied_after_its_finish_that_arrived_later_starts_that_run(job: Job) -> None:
    # two processes each commit their own batches: the finish, received 5 ms after the start,
    # was applied first and opened a run of its own
    job.ping("success", tick(0) + s(1))
    job.ping("success", tick(1) + s(2.005))
    fx = job.ping("start", tick(1) + s(2))
    runs = sorted(job.book.runs.values(), key=lambda r: r.first_ping_at)
    assert [(r.started_at, r.finished_at) for r in runs] == [
        (None, tick(0) + s(1)),
        (tick(1) + s(2), tick(1) + s(2.005)),
    ]
    assert fx.run is runs[1] and fx.tick == runs[1].scheduled
    assert not job.book.open_runs()  # nothing left to time out or overlap later runs
    assert detection.evaluate(job.spec, job.state, job.book, tick(1) + s(50)).alerts == []


@pytest.mark.parametrize("job", [Job(), SimpleJob()], ids=["cron", "simple"])
def test_a_start_stamped_just_after_the_finish_it_preceded_starts_that_run(job: Job) -> None:
    # two processes stamp arrivals apart: the start, sent first, was read (and stamped) 1 ms
    # after the finish by a busier process, and applied after it
    job.ping("success", tick(0) + s(1))
    job.ping("success", tick(1) + s(2))
    job.ping("start", tick(1) + s(2.001))
    assert not job.book.open_runs()
    run = max(job.book.runs.values(), key=lambda r: r.first_ping_at)
    assert (run.started_at, run.finished_at) == (tick(1) + s(2), tick(1) + s(2))  # never negative


def test_a_finish_stamped_before_its_start_that_was_applied_first_ends_no_earlier() -> None:
    job = Job()
    job.ping("success", tick(0) + s(1))
    job.ping("start", tick(1) + s(2.001))
    job.ping("success", tick(1) + s(2))  # stamped 1 ms earlier by another process, applied later
    run = max(job.book.runs.values(), key=lambda r: r.first_ping_at)
    assert (run.started_at, run.finished_at) == (tick(1) + s(2.001), tick(1) + s(2.001))


def test_a_start_well_after_the_finish_opens_a_run_as_before() -> None:
    job = Job()
    job.ping("success", tick(0) + s(1))
    job.ping("success", tick(1) + s(2))
    job.ping("start", tick(1) + s(5))  # really after: the next run (a duplicate of tick 1)
    assert [r.started_at for r in job.book.open_runs()] == [tick(1) + s(5)]


def test_a_start_applied_after_its_finish_joins_its_own_tick_only() -> None:
    job = Job()
    job.ping("success", tick(0) + s(1))
    job.ping("success", tick(2) - s(1), scheduled=tick(1))  # arrived after the start below, for tick 1
    job.ping("start", tick(2) - s(2))  # received 2 s before tick 2: binds to tick 2 (early)
    open_runs = job.book.open_runs()
    assert [(r.scheduled, r.started_at) for r in open_runs] == [(tick(2), tick(2) - s(2))]


def test_a_start_with_its_rid_applied_after_its_finish_starts_that_run() -> None:
    job = Job()
    job.ping("success", tick(0) + s(1))
    job.ping("success", tick(1) + s(2.005), rid=RID)
    job.ping("start", tick(1) + s(2), rid=RID)
    assert (job.run().started_at, job.run().duration) == (tick(1) + s(2), s(0.005))
    # a start that really came after its run's finish changes nothing (a retransmission)
    job.ping("start", tick(1) + s(9), rid=RID)
    assert job.run().started_at == tick(1) + s(2)


def test_a_start_with_its_rid_long_after_its_start_less_finish_changes_nothing() -> None:
    job = Job()
    job.ping("success", tick(0) + s(1))
    job.ping("success", tick(1) + s(2), rid=RID)
    job.ping("start", tick(1) + s(9), rid=RID)
    assert job.run().started_at is None


def test_a_start_at_the_instant_of_a_start_less_finish_opens_a_run() -> None:
    # one process's own pings: applied in the order it stamped them, so this start is a new run
    job = Job()
    job.ping("success", tick(0) + s(1))
    job.ping("success", tick(1) + s(2))
    job.ping("start", tick(1) + s(2))
    assert [r.started_at for r in job.book.open_runs()] == [tick(1) + s(2)]


@pytest.mark.parametrize("lag_ms", [14, 60, 99])
def test_a_start_another_process_stamped_late_after_its_finish_still_starts_that_run(lag_ms: int) -> None:
    # sent 2 ms before its finish on another connection, read late by a busy process: on a
    # loaded host the start's stamp came up to 14 ms after the finish's
    job = Job()
    job.ping("success", tick(0) + s(1))
    job.ping("success", tick(1) + s(2))
    job.ping("start", tick(1) + s(2) + timedelta(milliseconds=lag_ms))
    assert not job.book.open_runs()
    # the next run pairs as usual: nothing is left one run behind
    job.ping("start", tick(2) + s(2))
    job.ping("success", tick(2) + s(3))
    assert not job.book.open_runs()
    newest = max(job.book.runs.values(), key=lambda r: r.first_ping_at)
    assert (newest.started_at, newest.finished_at) == (tick(2) + s(2), tick(2) + s(3))


def test_a_start_after_a_finish_its_own_process_applied_opens_a_run() -> None:
    # a script's `curl` of a success, then of a start, about 20 ms later, on one process: the
    # finish was applied first because it came first
    job = Job()
    job.ping("success", tick(0) + s(1))
    job.ping("success", tick(1) + s(2))
    later = tick(1) + s(2) + timedelta(milliseconds=20)
    job.ping("start", later, applied_here=frozenset({tick(1) + s(2)}))
    assert [r.started_at for r in job.book.open_runs()] == [later]


def test_a_start_a_window_after_a_start_less_finish_opens_a_run() -> None:
    job = Job()
    job.ping("success", tick(0) + s(1))
    job.ping("success", tick(1) + s(2))
    later = tick(1) + s(2) + detection.REORDER_WINDOW
    job.ping("start", later)
    assert [r.started_at for r in job.book.open_runs()] == [later]
