"""Tick claims and the scheduler's rounds on real SQLite and PostgreSQL, with an injected clock.

Claims are unique per (job, tick) and fenced by the job's lease; a tick whose claimant lost the
lease before recording the start runs again as attempt 2; after 10 ticks of downtime each
catch-up setting runs the right ticks, in order, with their original times;
Forbid/BufferAll/Replace act on real processes. Commands really run (``sh -c``).
"""

from __future__ import annotations

import asyncio
import os
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.domain.clock import FrozenClock
from monitor.domain.errors import StaleLease
from monitor.domain.jobs import Job, parse_job
from monitor.scheduler.runner import Scheduler
from monitor.storage import claims

T0 = datetime(2026, 7, 18, 2, 0, tzinfo=UTC)
TTL = timedelta(seconds=5)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class RecordingReporter:
    """Keeps every report in order (the real one pings the monitor; see the e2e tests)."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def start(self, job: Job, tick: datetime, attempt: int, rid: str, began: float | None = None) -> None:
        self.events.append(("start", job.name, tick, attempt))

    def finish(
        self,
        job: Job,
        tick: datetime,
        attempt: int,
        rid: str,
        exit_status: int,
        output: bytes,
        ended: float | None = None,
    ) -> None:
        self.events.append(("finish", job.name, tick, attempt, exit_status, output))

    def lost(self, job: Job, tick: datetime, attempt: int, rid: str, output: bytes) -> None:
        self.events.append(("lost", job.name, tick, attempt, output))

    def skip(self, job: Job, tick: datetime, attempt: int, reason: str) -> None:
        self.events.append(("skip", job.name, tick, reason))

    def liveness(self) -> None:
        self.events.append(("liveness",))

    def close(self, timeout: float) -> None:
        pass

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        return [e for e in self.events if e[0] == kind]


def make_job(out: Path, **keys: Any) -> Job:
    raw = {
        "name": "tick",
        "schedule": "*/2 * * * * *",
        "dialect": "seconds",
        "command": f'echo "$MONITOR_SCHEDULED_TIME $MONITOR_ATTEMPT $MONITOR_FENCING_TOKEN" >> {out}',
        **keys,
    }
    return parse_job(raw, 0)


def make_scheduler(
    engine: AsyncEngine, job: Job, clock: FrozenClock, holder: str
) -> tuple[Scheduler, RecordingReporter]:
    reporter = RecordingReporter()
    return Scheduler(engine, [job], clock, reporter, lease_ttl=TTL, holder=holder), reporter


async def settle(scheduler: Scheduler) -> None:
    """Wait for every run started so far to end and be reported."""
    for _ in range(200):
        if not scheduler._tasks:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("runs did not finish")


async def test_a_tick_is_claimed_once_and_only_under_the_current_token(engine: AsyncEngine) -> None:
    clock = FrozenClock(T0)
    scheduler, _ = make_scheduler(engine, make_job(Path("/dev/null")), clock, "a:1")
    try:
        token = await scheduler.leases.acquire("job-tick", clock.now())
        assert token is not None
        fence = claims.Fence(lease="job-tick", token=token, holder="a:1")
        async with engine.begin() as conn:
            assert await claims.claim(conn, fence, "tick", at(2), now=clock.now(), run_id="r1")
        async with engine.begin() as conn:
            assert not await claims.claim(conn, fence, "tick", at(2), now=clock.now(), run_id="r2")
        stale = claims.Fence(lease="job-tick", token=token - 1, holder="a:1")
        with pytest.raises(StaleLease):
            async with engine.begin() as conn:
                await claims.claim(conn, stale, "tick", at(4), now=clock.now(), run_id="r3")
        (row,) = await claims.list_claims(engine, "tick")
        assert (row.tick, row.run_id, row.state, row.token) == (at(2), "r1", claims.ClaimState.CLAIMED, token)
        async with engine.connect() as conn:
            assert await claims.last_claimed(conn, "tick") == at(2)
    finally:
        await scheduler.leases.close()


async def test_a_tick_claimed_by_a_holder_that_lost_its_lease_runs_again_as_attempt_2(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    out = tmp_path / "out.txt"
    clock = FrozenClock(at(2.1))
    job = make_job(out)
    a, _ = make_scheduler(engine, job, clock, "a:1")
    b, reports = make_scheduler(engine, job, clock, "b:2")
    try:
        token_a = await a.leases.acquire("job-tick", clock.now())
        assert token_a is not None
        async with engine.begin() as conn:
            fence = claims.Fence(lease="job-tick", token=token_a, holder="a:1")
            assert await claims.claim(conn, fence, "tick", at(2), now=clock.now(), run_id="lost")
        await a.leases.release("job-tick")  # A loses the lease before recording the start
        clock.set(at(2.5))
        await b.round()  # B takes the lease: the claimed, unstarted tick is an orphan
        with pytest.raises(StaleLease):  # A can no longer record a start
            async with engine.begin() as conn:
                await claims.mark_started(conn, fence, "tick", at(2), clock.now())
        await settle(b)
        (row,) = await claims.list_claims(engine, "tick")
        assert (row.attempt, row.state, row.holder, row.exit_status) == (
            2,
            claims.ClaimState.FINISHED,
            "b:2",
            0,
        )
        assert row.token > token_a
        assert out.read_text().split() == ["2026-07-18T02:00:02Z", "2", str(row.token)]
        assert reports.of("start") == [("start", "tick", at(2), 2)]
    finally:
        await a.leases.close()
        await b.leases.close()


@pytest.mark.parametrize(
    ("catchup", "ran", "skipped"),
    [
        pytest.param("all", list(range(2, 22, 2)), [], id="all"),
        pytest.param("latest", [20], list(range(2, 20, 2)), id="latest"),
        pytest.param("none", [], list(range(2, 22, 2)), id="none"),
    ],
)
async def test_after_ten_ticks_of_downtime_catchup_runs_the_right_ticks_in_order(
    engine: AsyncEngine, tmp_path: Path, catchup: str, ran: list[int], skipped: list[int]
) -> None:
    out = tmp_path / "out.txt"
    clock = FrozenClock(at(0.1))
    job = make_job(out, catchup=catchup)
    first, _ = make_scheduler(engine, job, clock, "a:1")
    try:
        token = await first.leases.acquire("job-tick", clock.now())
        assert token is not None
        async with engine.begin() as conn:  # the last tick run before the scheduler went down
            fence = claims.Fence(lease="job-tick", token=token, holder="a:1")
            await claims.claim(conn, fence, "tick", at(0), now=clock.now(), run_id="r0")
            await claims.mark_started(conn, fence, "tick", at(0), clock.now())
    finally:
        await first.leases.close()
    clock.set(at(21))  # down for 10 ticks (2 … 20 s)
    restarted, reports = make_scheduler(engine, job, clock, "b:2")
    try:
        for _ in range(10):  # rounds every 0.5 s up to 25.5 s: ticks 22 and 24 run on time
            for _ in range(3):  # catch-up runs one after another: a round starts the next
                await restarted.round()
                await settle(restarted)
            clock.advance(0.5)
    finally:
        await restarted.leases.close()
    expected = [*ran, 22, 24]
    assert [e[2] for e in reports.of("start")] == [at(s) for s in expected]
    assert [e[2] for e in reports.of("skip")] == [at(s) for s in skipped]
    assert {e[3] for e in reports.of("skip")} <= {"catchup"}
    written = [line.split()[0] for line in out.read_text().splitlines()] if out.exists() else []
    assert sorted(written) == [f"2026-07-18T02:00:{s:02d}Z" for s in expected]
    rows = {int((c.tick - T0).total_seconds()): c.state for c in await claims.list_claims(engine, "tick")}
    assert all(rows[s] is claims.ClaimState.SKIPPED for s in skipped)
    assert all(rows[s] is claims.ClaimState.FINISHED for s in expected)


async def test_forbid_skips_bufferall_queues_replace_terminates(engine: AsyncEngine, tmp_path: Path) -> None:
    """A job that sleeps until told to stop, on a 2 s schedule, with the clock driven by hand."""
    clock = FrozenClock(at(1.9))
    jobs = [
        parse_job(
            {
                "name": name,
                "schedule": "*/2 * * * * *",
                "dialect": "seconds",
                "command": "sleep 30 & wait",
                "concurrency_policy": policy,
            },
            i,
        )
        for i, (name, policy) in enumerate(
            [("forbid", "Forbid"), ("buffer", "BufferAll"), ("replace", "Replace")]
        )
    ]
    reporter = RecordingReporter()
    scheduler = Scheduler(engine, jobs, clock, reporter, lease_ttl=TTL, holder="a:1")
    try:
        for now in (1.9, 2.05, 4.05, 6.05):  # the first round takes the leases
            clock.set(at(now))
            await scheduler.round()
            # the replacement of each tick has started its run before the next tick comes (a
            # tick due while a run is still ending would replace the tick waiting for it)
            for _ in range(200):
                if now < 2 or ("replace", now // 2 * 2) in {
                    (e[1], int((e[2] - T0).total_seconds())) for e in reporter.of("start")
                }:
                    break
                await asyncio.sleep(0.05)
        starts = {(e[1], int((e[2] - T0).total_seconds())) for e in reporter.of("start")}
        skips = {(e[1], int((e[2] - T0).total_seconds()), e[3]) for e in reporter.of("skip")}
        assert {s for s in starts if s[0] == "forbid"} == {("forbid", 2)}
        assert {s for s in skips if s[0] == "forbid"} == {("forbid", 4, "forbid"), ("forbid", 6, "forbid")}
        assert {s for s in starts if s[0] == "buffer"} == {("buffer", 2)}
        buffer_slot = next(s for s in scheduler.slots if s.job.name == "buffer")
        assert [int((d.tick - T0).total_seconds()) for d in buffer_slot.queue] == [4, 6]
        # the replaced runs end once SIGTERM reaches them: waited for (up to 10 s on a loaded
        # host, where a fixed 0.3 s missed the second), not timed
        replaced = {("replace", 2, 143), ("replace", 4, 143)}  # SIGTERM: 128 + 15
        started = {("replace", 2), ("replace", 4), ("replace", 6)}
        for _ in range(200):
            finished = {(e[1], int((e[2] - T0).total_seconds()), e[4]) for e in reporter.of("finish")}
            starts = {(e[1], int((e[2] - T0).total_seconds())) for e in reporter.of("start")}
            if replaced <= finished and {s for s in starts if s[0] == "replace"} == started:
                break
            await asyncio.sleep(0.05)
        assert replaced <= finished
        assert {s for s in starts if s[0] == "replace"} == started
    finally:
        for slot in scheduler.slots:
            for run in list(slot.runs):
                await run.terminate("test over")
        await settle(scheduler)
        await scheduler.leases.close()


def slow_to_end(out: Path, **keys: Any) -> Job:
    """A ``Replace`` job on a 2 s schedule whose runs take 0.6 s to end on SIGTERM; each appends
    ``start <tick>`` and ``end <tick>`` to ``out``."""
    return parse_job(
        {
            "name": "replace",
            "schedule": "*/2 * * * * *",
            "dialect": "seconds",
            "command": (  # the trap is set before the start line tells the test the run began
                f"trap 'sleep 0.6; echo \"end $MONITOR_SCHEDULED_TIME\" >> {out}; exit 0' TERM; "
                f'echo "start $MONITOR_SCHEDULED_TIME" >> {out}; '
                "sleep 30 & wait"
            ),
            "concurrency_policy": "Replace",
            **keys,
        },
        0,
    )


def slow_replace_scheduler(
    engine: AsyncEngine, tmp_path: Path, **keys: Any
) -> tuple[Scheduler, FrozenClock, RecordingReporter, Path]:
    """A scheduler of one :func:`slow_to_end` job (``keys`` added to it), its clock at 1.9 s,
    its reporter and the job's log; a 30 s lease, so rounds up to 8 s need no renewal."""
    out = tmp_path / "log"
    clock = FrozenClock(at(1.9))
    reporter = RecordingReporter()
    job = slow_to_end(out, **keys)
    scheduler = Scheduler(engine, [job], clock, reporter, lease_ttl=timedelta(seconds=30), holder="a:1")
    return scheduler, clock, reporter, out


async def wait_for_skip(reporter: RecordingReporter) -> None:
    """Until a skip was reported, up to 5 s."""
    for _ in range(100):
        if reporter.of("skip"):
            return
        await asyncio.sleep(0.05)


async def start_first_run(scheduler: Scheduler, clock: FrozenClock, out: Path) -> None:
    """Rounds at 1.9 s (the lease) and 2.05 s, until the tick 2 run has set its trap."""
    for now in (1.9, 2.05):
        clock.set(at(now))
        await scheduler.round()
    for _ in range(200):
        if written(out):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the first run did not start")


def written(out: Path) -> list[str]:
    """The first word of each line the job appended (``start`` / ``end``)."""
    return [line.split()[0] for line in out.read_text().splitlines()] if out.exists() else []


async def wait_written(out: Path, lines: list[str]) -> None:
    """Until the job's lines begin with ``lines`` (a run's start line is written after its
    start is reported, and after its trap is set), up to 10 s."""
    for _ in range(200):
        if written(out)[: len(lines)] == lines:
            return
        await asyncio.sleep(0.05)
    assert written(out)[: len(lines)] == lines


async def wait_for_reports(
    reporter: RecordingReporter, finished: set[tuple[str, int, int]], starts: list[int]
) -> None:
    """Until ``finished`` (job, tick second, exit status) were reported and the starts (tick
    seconds, in order) are ``starts``, up to 15 s."""
    for _ in range(300):
        seen = {(e[1], int((e[2] - T0).total_seconds()), e[4]) for e in reporter.of("finish")}
        started = [int((e[2] - T0).total_seconds()) for e in reporter.of("start")]
        if finished <= seen and started == starts:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"finished {seen}, started {started}")


async def stop_runs(scheduler: Scheduler) -> None:
    for slot in scheduler.slots:
        for run in list(slot.runs):
            await run.terminate("test over")
    await settle(scheduler)
    await scheduler.leases.close()


async def test_replace_starts_only_the_newest_tick_due_while_a_run_is_ending(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    """A run slow to end on SIGTERM is still ending when two more ticks come: the newer replaces
    the older, which is skipped as replaced (Kubernetes' Replace), not started beside the run
    nor queued behind it (a queue a slow-to-die job would grow without end)."""
    scheduler, clock, reporter, out = slow_replace_scheduler(engine, tmp_path)
    try:
        await start_first_run(scheduler, clock, out)
        for now in (4.05, 6.05):  # both while the tick 2 run is ending (0.6 s)
            clock.set(at(now))
            await scheduler.round()
            await asyncio.sleep(0.05)
        await wait_for_reports(reporter, {("replace", 2, 143)}, [2, 6])
        skips = [(int((e[2] - T0).total_seconds()), e[3]) for e in reporter.of("skip")]
        assert skips == [(4, "replaced")]
        await wait_written(out, ["start", "end", "start"])
        # the next tick replaces the run that replacement started, once more one at a time
        clock.set(at(8.05))
        await scheduler.round()
        await wait_for_reports(reporter, {("replace", 2, 143), ("replace", 6, 143)}, [2, 6, 8])
        await wait_written(out, ["start", "end", "start", "end", "start"])
    finally:
        await stop_runs(scheduler)


async def test_a_replacement_whose_successor_is_due_already_leaves_it_to_the_next_round(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    """The run ends just as the next tick comes, before that tick's round: the tick waiting for
    the run is skipped as replaced, not started only to be killed by that round at once."""
    scheduler, clock, reporter, out = slow_replace_scheduler(engine, tmp_path)
    try:
        await start_first_run(scheduler, clock, out)
        clock.set(at(4.05))
        await scheduler.round()
        clock.set(at(6.01))  # tick 6 is due; its round comes after the run of tick 2 ended
        await wait_for_reports(reporter, {("replace", 2, 143)}, [2])
        await wait_for_skip(reporter)
        assert [(int((e[2] - T0).total_seconds()), e[3]) for e in reporter.of("skip")] == [(4, "replaced")]
        await settle(scheduler)
        clock.set(at(6.05))
        await scheduler.round()
        await wait_for_reports(reporter, {("replace", 2, 143)}, [2, 6])
        await wait_written(out, ["start", "end", "start"])
    finally:
        await stop_runs(scheduler)


async def test_a_replacement_past_its_starting_deadline_is_skipped(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    """The starting deadline holds for a tick waiting for the run it replaces to end."""
    scheduler, clock, reporter, out = slow_replace_scheduler(engine, tmp_path, starting_deadline=1)
    try:
        await start_first_run(scheduler, clock, out)
        clock.set(at(4.05))
        await scheduler.round()
        clock.set(at(5.5))  # the tick 4 run could start only now, 1.5 s after its time
        await wait_for_reports(reporter, {("replace", 2, 143)}, [2])
        await wait_for_skip(reporter)
        skips = [(int((e[2] - T0).total_seconds()), e[3]) for e in reporter.of("skip")]
        assert skips == [(4, "starting_deadline")]
        assert [int((e[2] - T0).total_seconds()) for e in reporter.of("start")] == [2]
    finally:
        await stop_runs(scheduler)


async def test_replicas_share_the_jobs_fairly(engine: AsyncEngine) -> None:
    """A replica holding every job gives idle ones up, one a round, once another is live."""
    clock = FrozenClock(at(0))
    jobs = [parse_job({"name": f"j{i}", "schedule": "0 0 1 1 *", "command": "true"}, i) for i in range(4)]
    a = Scheduler(engine, jobs, clock, RecordingReporter(), lease_ttl=TTL, holder="a:1")
    b = Scheduler(engine, jobs, clock, RecordingReporter(), lease_ttl=TTL, holder="b:2")
    try:
        await a.announce()
        await a.round()
        assert len(a.leases.held) == 4
        await b.announce()
        await a.announce()
        assert (a.live, a.share) == (2, 2)
        for _ in range(3):
            await a.round()
            await b.round()
        assert len(a.leases.held) == 2 and len(b.leases.held) == 2
        assert set(a.leases.held).isdisjoint(b.leases.held)
    finally:
        await a.leases.close()
        await b.leases.close()


async def test_old_claims_are_pruned_but_the_newest_and_unfinished_stay(engine: AsyncEngine) -> None:
    clock = FrozenClock(at(0))
    scheduler, _ = make_scheduler(engine, make_job(Path("/dev/null")), clock, "a:1")
    try:
        token = await scheduler.leases.acquire("job-tick", clock.now())
        assert token is not None
        fence = claims.Fence(lease="job-tick", token=token, holder="a:1")
        async with engine.begin() as conn:
            for s in (2, 4, 6, 8):
                await claims.claim(conn, fence, "tick", at(s), now=clock.now(), run_id=f"r{s}")
            await claims.mark_started(conn, fence, "tick", at(4), clock.now())
            await claims.claim(
                conn, fence, "tick", at(10), now=clock.now(), run_id=None, state=claims.ClaimState.SKIPPED
            )
        await claims.mark_finished(engine, "tick", at(4), token, clock.now(), 0)
        async with engine.begin() as conn:
            await claims.mark_started(conn, fence, "tick", at(6), clock.now())
        assert await claims.prune(engine, "tick", at(100)) == 1  # only the finished tick 4
        left = {
            int((c.tick - T0).total_seconds()): c.state.value
            for c in await claims.list_claims(engine, "tick")
        }
        assert left == {2: "claimed", 6: "started", 8: "claimed", 10: "skipped"}
    finally:
        await scheduler.leases.close()


async def test_replicas_with_different_jobs_files_hold_every_job(engine: AsyncEngine) -> None:
    """A rolling deploy: ``a`` knows j0-j3, ``b`` knows j0, j1 and the new j4. Fair shares
    (a: 3 of 5… counted on its own file) leave some job unheld at first; a lease left unheld for
    a TTL is taken anyway by a replica that knows the job, so every job gets a holder."""
    clock = FrozenClock(at(0))

    def job(i: int) -> Job:
        return parse_job({"name": f"j{i}", "schedule": "0 0 1 1 *", "command": "true"}, i)

    a = Scheduler(engine, [job(i) for i in range(4)], clock, RecordingReporter(), lease_ttl=TTL, holder="a:1")
    b = Scheduler(engine, [job(0), job(1), job(4)], clock, RecordingReporter(), lease_ttl=TTL, holder="b:2")
    try:
        await a.announce()
        await b.announce()
        await a.announce()
        assert (a.live, a.share, b.share) == (2, 2, 2)
        for _ in range(16):  # 8 s of rounds, leases renewed as the renewal task would
            for s in (a, b):
                await s.leases.renew(clock.now())
                await s.round()
            clock.advance(0.5)
        held_a, held_b = set(a.leases.held), set(b.leases.held)
        assert held_a.isdisjoint(held_b)
        assert held_a | held_b == {f"job-j{i}" for i in range(5)}
        assert held_b >= {"job-j4"}  # only b knows it
        # it stays held: a sticky lease is not given back to the fair share
        for _ in range(4):
            for s in (a, b):
                await s.leases.renew(clock.now())
                await s.round()
            clock.advance(0.5)
        assert set(a.leases.held) | set(b.leases.held) == {f"job-j{i}" for i in range(5)}
    finally:
        await a.leases.close()
        await b.leases.close()


async def test_a_lease_handed_over_before_its_first_tick_runs_that_tick(engine: AsyncEngine) -> None:
    """Two replicas start together; ``a`` takes both jobs, gives one back before its first tick
    (fair share); ``b`` takes it after the tick came due: never claimed, so the job's ticks count
    from ``b``'s start and the tick runs."""
    clock = FrozenClock(at(0.5))
    jobs = [
        parse_job({"name": n, "schedule": "*/2 * * * * *", "dialect": "seconds", "command": "true"}, i)
        for i, n in enumerate(("p", "q"))
    ]
    a = Scheduler(engine, jobs, clock, RecordingReporter(), lease_ttl=TTL, holder="a:1")
    reports_b = RecordingReporter()
    b = Scheduler(engine, jobs, clock, reports_b, lease_ttl=TTL, holder="b:2")
    try:
        await a.announce()
        await a.round()
        assert len(a.leases.held) == 2
        await b.announce()
        await a.announce()
        clock.set(at(1.9))
        await a.round()  # above its share of 1: gives one job back, before the tick at 2 s
        assert len(a.leases.held) == 1
        clock.set(at(2.3))
        await b.round()  # takes it after the tick came due
        (taken,) = b.leases.held
        await settle(b)
        assert [(e[1], e[2]) for e in reports_b.of("start")] == [(taken.removeprefix("job-"), at(2))]
    finally:
        await settle(a)
        await a.leases.close()
        await b.leases.close()


async def test_replacing_a_run_that_ignores_sigterm_never_holds_the_loop_up(engine: AsyncEngine) -> None:
    """Replace terminates in the background (SIGKILL comes 5 s later): the round returns at once,
    the other jobs' ticks are on time; a replaced run that exits 0 on SIGTERM is still a failure
    (143), and after the stop no new tick starts."""
    clock = FrozenClock(at(1.9))
    raw = {"schedule": "*/2 * * * * *", "dialect": "seconds", "concurrency_policy": "Replace"}
    jobs = [
        parse_job({**raw, "name": "stubborn", "command": "trap '' TERM; sleep 30"}, 0),
        parse_job({**raw, "name": "polite", "command": "trap 'exit 0' TERM; sleep 30 & wait"}, 1),
        parse_job({"name": "other", "schedule": "*/2 * * * * *", "dialect": "seconds", "command": "true"}, 2),
    ]
    reporter = RecordingReporter()
    scheduler = Scheduler(engine, jobs, clock, reporter, lease_ttl=TTL, holder="a:1")
    try:
        for now in (1.9, 2.05, 4.05):
            clock.set(at(now))
            began = asyncio.get_running_loop().time()
            await scheduler.round()
            assert asyncio.get_running_loop().time() - began < 1.0  # not TERMINATE_GRACE
            await asyncio.sleep(0.3)
        starts = {(e[1], int((e[2] - T0).total_seconds())) for e in reporter.of("start")}
        assert {("other", 2), ("other", 4), ("stubborn", 2), ("polite", 2), ("polite", 4)} <= starts
        assert ("stubborn", 4) not in starts  # waits for the old run's end (SIGKILL at 5 s)
        finished = {(e[1], int((e[2] - T0).total_seconds())): e[4] for e in reporter.of("finish")}
        assert finished[("polite", 2)] == 143  # exited 0 on SIGTERM: still cut short
        scheduler.stopping = True  # as after SIGTERM: the replacement must not start now
    finally:
        scheduler.stopping = True
        for slot in scheduler.slots:
            for run in list(slot.runs):
                if run.process is not None and run.process.returncode is None:
                    os.killpg(run.process.pid, signal.SIGKILL)
        await settle(scheduler)
        await scheduler.leases.close()
    assert ("stubborn", at(4)) not in {(e[1], e[2]) for e in reporter.of("start")}


async def test_a_stopping_replica_hands_its_buffered_tick_to_the_next_holder(engine: AsyncEngine) -> None:
    """BufferOne: tick 4 waits for the run of tick 2, tick 6 is skipped as buffer_full (claimed).
    The replica stops (SIGTERM) once that run has ended: the next holder resumes after the newest
    claimed tick (6), and still runs tick 4 (attempt 1, its own time) instead of leaving a hole
    the monitor would report as missed."""
    job = parse_job(
        {
            "name": "buffered",
            "schedule": "*/2 * * * * *",
            "dialect": "seconds",
            "command": "sleep 2",  # still running at the next two rounds, even on a loaded host
            "concurrency_policy": "BufferOne",
        },
        0,
    )
    clock = FrozenClock(at(1.9))
    first, second = RecordingReporter(), RecordingReporter()
    a = Scheduler(engine, [job], clock, first, lease_ttl=TTL, holder="a:1")
    b = Scheduler(engine, [job], clock, second, lease_ttl=TTL, holder="b:2")
    try:
        for now in (1.9, 2.05, 4.05, 6.05):
            clock.set(at(now))
            await a.round()
        assert [(int((e[2] - T0).total_seconds()), e[3]) for e in first.of("skip")] == [(6, "buffer_full")]
        a.stopping = True  # as after SIGTERM: the run ends, then the lease is handed over
        for _ in range(300):
            if not a.leases.held:
                break
            await asyncio.sleep(0.05)
        assert not a.leases.held
        clock.set(at(6.5))
        await b.round()
        assert [(int((e[2] - T0).total_seconds()), e[3]) for e in second.of("start")] == [(4, 1)]
        await settle(b)
        rows = await claims.list_claims(engine, "buffered")
        states = {int((c.tick - T0).total_seconds()): c.state for c in rows}
        assert states == {
            2: claims.ClaimState.FINISHED,
            4: claims.ClaimState.FINISHED,
            6: claims.ClaimState.SKIPPED,
        }
    finally:
        await a.leases.close()
        await b.leases.close()


async def test_a_lease_lost_while_a_round_settles_stranded_runs_ends_that_round_quietly(
    engine: AsyncEngine,
) -> None:
    # the lease renewal forgets a slot (lease lost) while the slot's round is waiting on the
    # database for a previous holder's stranded runs: the round must stop there, not plan with
    # the forgotten slot (it raised TypeError on the cleared `through` and failed the round)
    clock = FrozenClock(T0)
    scheduler, reporter = make_scheduler(engine, make_job(Path("/dev/null")), clock, "a:1")
    try:
        [slot] = scheduler.slots
        slot.token = await scheduler.leases.acquire("job-tick", clock.now())
        assert slot.token is not None
        slot.through = T0
        slot.stranded[at(-2)] = claims.Claim(
            job="tick",
            tick=at(-2),
            attempt=1,
            state=claims.ClaimState.STARTED,
            token=slot.token - 1,
            holder="b:2",
            run_id="r0",
            reason=None,
            claimed_at=at(-2),
            started_at=at(-2),
            finished_at=None,
            exit_status=None,
        )
        clock.advance(6)  # three ticks overdue

        async def lose_the_lease() -> None:
            slot.forget()

        losing = asyncio.create_task(lose_the_lease())  # runs at the round's first database wait
        await scheduler._step(slot)
        await losing
        assert slot.token is None and slot.through is None
        assert reporter.of("start") == [] and reporter.of("skip") == []
        assert await claims.list_claims(engine, "tick") == []
    finally:
        await scheduler.leases.close()
