"""Scheduler replicas on PostgreSQL stalled (SIGSTOP) or killed (SIGKILL) at the worst moments.

One throwaway PostgreSQL database and one real ``monitor serve`` are shared by the module; each
test starts its own ``monitor scheduler`` replicas (lease TTL 2 s) and reads back what the jobs
wrote, the ``job_claims`` rows and the monitor's runs API.

1. A replica stopped between recording a run's start and spawning it (a test-only delay,
   ``tests/support/stalling_scheduler.py``, opens that window) never runs that tick when it is
   continued: the lease is re-checked right before the spawn, the tick is reported skipped.
2. A SIGKILLed holder's running job dies with it (parent-death signal), its run is closed by
   the successor as outcome ``unknown`` (an ``unknown`` ping: not a failure), and a ``Forbid``
   job's later runs are not flagged overlapped.
3. A SIGKILLed holder's string command dies with it as a whole process group (the shell and
   what it forked), through the scheduler's guard process.
4. A holder stalled mid-run (SIGSTOP, then SIGCONT) that finds on waking that it lost the lease
   terminates its run, so ``Forbid``'s overlap with the successor's run is bounded.
5. After a SIGKILL the successor runs the job within one TTL.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from monitor.scheduler.runner import HOLDER_DIED, ROUND, STALE_REASON
from tests.support.process import MonitorProcess, wait_until
from tests.support.scheduler_stack import Stack, lines, parse, scheduler_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

API_KEY = "scheduler-failover-key-0123456789"
TTL = 2.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    directory = tmp_path_factory.mktemp("failover")
    with scheduler_stack(directory, "monitor_failover", api_key=API_KEY, lease_ttl=str(TTL)) as shared:
        yield shared


def finish(*processes: MonitorProcess) -> None:
    for p in processes:
        if p.proc is not None and p.proc.poll() is None:
            p.terminate(15)
        p.close()


def job(name: str, out: Path, schedule: str, command: str | None = None, **keys: str) -> str:
    extra = "".join(f'{k} = "{v}"\n' for k, v in keys.items())
    command = command or f'echo "$MONITOR_SCHEDULED_TIME $MONITOR_FENCING_TOKEN $(date +%s.%N)" >> {out}'
    head = f'[[jobs]]\nname = "{name}"\nschedule = "{schedule}"\ndialect = "seconds"\n'
    return f"{head}{extra}command = '{command}'\n"


def process_gone(pid: int) -> bool:
    """No such process, or a zombie nobody reaped yet (it runs no more)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return True
    return state in ("Z", "X")


def test_a_replica_stalled_between_start_record_and_spawn_refuses_the_stale_tick(stack: Stack) -> None:
    out = stack.directory / "stalled.txt"
    jobs = job("stalled", out, "* * * * * *")
    replicas = [stack.scheduler("stall", jobs, pre_spawn_delay=0.8) for _ in range(2)]
    stopped: int | None = None
    try:
        wait_until(lambda: len(lines(out)) >= 2, timeout=20, what="two runs")
        pid, token = stack.holder_pid("stalled")
        ran = {parse(r[0]) for r in lines(out)}

        def in_the_gap() -> datetime | None:
            # a tick recorded as started by the holder that has not run yet: inside the delay
            rows = [r for r in stack.claims("stalled") if r["state"] == "started" and r["token"] == token]
            fresh = [r["tick"] for r in rows if r["tick"] not in ran]
            return fresh[-1] if fresh else None

        stale_tick = wait_until(in_the_gap, timeout=10, interval=0.02, what="a started, unspawned tick")
        os.kill(pid, signal.SIGSTOP)
        stopped = pid
        # PostgreSQL ends the stopped holder's lease session within a TTL; the other replica
        # takes over with a newer token and runs the next ticks
        wait_until(
            lambda: any(int(r[1]) > token for r in lines(out)), timeout=15, what="runs under the new token"
        )
        time.sleep(1.5)
        os.kill(pid, signal.SIGCONT)
        stopped = None
        time.sleep(3.0)  # the continued replica finishes its delay and re-checks its lease
    finally:
        if stopped is not None:
            os.kill(stopped, signal.SIGCONT)
        finish(*replicas)
    rows = lines(out)
    assert stale_tick not in {parse(r[0]) for r in rows}, rows  # never run late with the old token
    by_tick = sorted((parse(r[0]), int(r[1])) for r in rows)
    tokens = [t for _, t in by_tick]
    assert tokens == sorted(tokens), by_tick  # fencing tokens only grow tick after tick
    (claim,) = [c for c in stack.claims("stalled") if c["tick"] == stale_tick]
    assert claim["state"] == "skipped" and claim["reason"] == STALE_REASON, claim
    stamp = stale_tick.strftime("%Y-%m-%dT%H:%M:%SZ")
    skip = wait_until(
        lambda: [p for p in stack.pings("stalled") if p["type"] == "skip" and p["scheduled"] == stamp],
        timeout=10,
        what="the skip ping of the refused tick",
    )
    assert len(skip) == 1, skip


def test_sigkill_of_the_holder_kills_its_job_and_closes_its_run_so_forbid_sees_no_overlap(
    stack: Stack,
) -> None:
    out = stack.directory / "forbid.txt"
    command = f'echo "$MONITOR_SCHEDULED_TIME $MONITOR_FENCING_TOKEN $$" >> {out}; exec sleep 3'
    jobs = job("forbid", out, "*/2 * * * * *", command, concurrency_policy="Forbid")
    replicas = [stack.scheduler("forbid", jobs) for _ in range(2)]
    try:
        wait_until(lambda: len(lines(out)) >= 1, timeout=20, what="a run")
        before = len(lines(out))
        wait_until(lambda: len(lines(out)) > before, timeout=20, what="a fresh run")
        tick, token, job_pid = lines(out)[-1]
        holder, holder_token = stack.holder_pid("forbid")
        assert holder_token == int(token)
        (victim,) = [p for p in replicas if p.proc is not None and p.proc.pid == holder]
        assert victim.proc is not None
        victim.proc.kill()
        victim.proc.wait(5)
        killed = time.monotonic()
        wait_until(lambda: process_gone(int(job_pid)), timeout=2, interval=0.02, what="the job's death")
        assert time.monotonic() - killed < 1.0  # it died with its scheduler, not after `sleep 3`
        wait_until(
            lambda: len([r for r in lines(out) if int(r[1]) > int(token)]) >= 2,
            timeout=20,
            what="two runs by the successor",
        )
    finally:
        finish(*replicas)
    (claim,) = [c for c in stack.claims("forbid") if c["tick"] == parse(tick)]
    assert claim["state"] == "finished" and claim["reason"] == HOLDER_DIED and claim["exit_status"] is None

    def reported() -> list[dict[str, Any]] | None:
        runs = {r["scheduled"]: r for r in stack.runs("forbid")}
        wanted = [r[0] for r in lines(out)]
        return [runs[t] for t in wanted] if all(t in runs and runs[t]["outcome"] for t in wanted) else None

    runs = wait_until(reported, timeout=20, what="every run reported")
    killed_run = next(r for r in runs if r["scheduled"] == tick)
    # nobody knows how the killed run ended: unknown, not failed (no failure alert, no 137)
    assert killed_run["outcome"] == "unknown" and killed_run["exit_status"] is None, killed_run
    closing = [p for p in stack.pings("forbid") if p["scheduled"] == tick and p["type"] != "start"]
    assert [p["type"] for p in closing] == ["unknown"], closing
    later = [r for r in runs if parse(r["scheduled"]) > parse(tick)]
    assert later and all(r["outcome"] == "on_time" for r in later), later  # none overlapped


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def test_sigkill_of_the_holder_kills_a_string_commands_whole_process_group(stack: Stack) -> None:
    out = stack.directory / "group.txt"
    # dash does not exec the last command of -c: the shell waits for `sleep 42`, and `sleep 43`
    # runs in the background; both are the shell's children, in the run's process group
    command = f'echo "$MONITOR_SCHEDULED_TIME $MONITOR_FENCING_TOKEN $$" >> {out}; sleep 43 & sleep 42'
    jobs = job("group", out, "*/2 * * * * *", command, concurrency_policy="Forbid")
    replicas = [stack.scheduler("group", jobs) for _ in range(2)]
    leader = 0  # the shell: its pid is the run's process group
    try:
        wait_until(lambda: len(lines(out)) >= 1, timeout=20, what="a run")
        _, token, shell = lines(out)[-1]
        leader = int(shell)
        members = wait_until(
            lambda: m if len(m := group_members(leader)) == 3 else None,
            timeout=5,
            interval=0.02,
            what="the shell and its two sleeps",
        )
        holder, holder_token = stack.holder_pid("group")
        assert holder_token == int(token)
        (victim,) = [p for p in replicas if p.proc is not None and p.proc.pid == holder]
        assert victim.proc is not None
        victim.proc.kill()
        victim.proc.wait(5)
        killed = time.monotonic()
        wait_until(lambda: not group_members(leader), timeout=5, interval=0.02, what="the group's death")
        took = time.monotonic() - killed
        assert took < 1.0, (took, members)  # the sleeps died with their scheduler
        # the successor's runs do not overlap a leftover: under Forbid each one runs
        wait_until(
            lambda: len([r for r in lines(out) if int(r[1]) > int(token)]) >= 1,
            timeout=20,
            what="a run by the successor",
        )
    finally:
        finish(*replicas)
        for pid in group_members(leader) if leader else []:
            os.kill(pid, signal.SIGKILL)  # leave nothing behind when the assertion failed
    assert all(process_gone(pid) for pid in members), members


def test_a_holder_stalled_mid_run_terminates_its_run_on_waking_so_forbid_overlap_is_bounded(
    stack: Stack,
) -> None:
    out = stack.directory / "stall-run.txt"
    done = stack.directory / "stall-run.done"  # ends the runs (8 s each) when the test is over
    stamp = "$MONITOR_SCHEDULED_TIME $MONITOR_FENCING_TOKEN $$"
    command = (
        f'echo "S {stamp} $(date +%s.%N)" >> {out}; '
        f'terminated() {{ echo "T {stamp} $(date +%s.%N)" >> {out}; exit 143; }}; trap terminated TERM; '
        f"n=0; while [ $n -lt 80 ] && [ ! -e {done} ]; do sleep 0.1; n=$((n + 1)); done; "
        f'echo "E {stamp} $(date +%s.%N)" >> {out}'
    )
    jobs = job("stall-run", out, "*/2 * * * * *", command, concurrency_policy="Forbid")
    replicas = [stack.scheduler("stall-run", jobs) for _ in range(2)]
    stopped: int | None = None
    try:
        wait_until(lambda: any(r[0] == "S" for r in lines(out)), timeout=20, what="a run")
        seen = len(lines(out))
        fresh = wait_until(
            lambda: next((r for r in lines(out)[seen:] if r[0] == "S"), None), timeout=10, what="a fresh run"
        )
        _, tick, token, job_pid, _ = fresh
        pid, holder_token = stack.holder_pid("stall-run")
        assert holder_token == int(token)
        os.kill(pid, signal.SIGSTOP)
        stopped = pid
        stalled = time.monotonic()
        wait_until(
            lambda: stack.holder_pid("stall-run")[1] > int(token),
            timeout=10,
            interval=0.05,
            what="a takeover",
        )
        takeover = time.monotonic() - stalled
        successor = wait_until(
            lambda: next((r for r in lines(out) if r[0] == "S" and int(r[2]) > int(token)), None),
            timeout=10,
            interval=0.05,
            what="a run by the successor",
        )
        assert not process_gone(int(job_pid))  # the stalled holder's run goes on meanwhile
        time.sleep(0.5)
        os.kill(pid, signal.SIGCONT)
        stopped = None
        woke = time.time()
        # on waking the replica finds the lease lost after a lapse of its heartbeat: it
        # terminates its run rather than let it run beside the successor's
        wait_until(lambda: process_gone(int(job_pid)), timeout=6, interval=0.05, what="the stalled run's end")
        ended = next(r for r in lines(out) if r[0] in "TE" and r[1] == tick)
    finally:
        if stopped is not None:
            os.kill(stopped, signal.SIGCONT)
        done.touch()
        finish(*replicas)
    assert ended[0] == "T", ended  # SIGTERM, not run to its end
    took = float(ended[4]) - woke
    overlap = float(ended[4]) - float(successor[4])
    print(f"stalled run terminated {took:.2f}s after SIGCONT; overlap with the successor's {overlap:.2f}s")
    assert took < TTL, took  # noticed at the first renewal after waking (every TTL/3)
    print(f"takeover: the lease changed hands {takeover:.2f}s after the SIGSTOP (TTL {TTL:g}s)")
    assert takeover < TTL, takeover  # the stalled session is ended 3/4 TTL after its renewal
    (claim,) = [c for c in stack.claims("stall-run") if c["tick"] == parse(tick)]
    assert claim["state"] == "finished" and claim["exit_status"] == 143, claim

    def reported() -> dict[str, Any] | None:
        run = next((r for r in stack.runs("stall-run") if r["scheduled"] == tick), None)
        return run if run is not None and run["outcome"] else None

    run = wait_until(reported, timeout=15, what="the terminated run reported")
    assert run["outcome"] == "failed" and run["exit_status"] == 143, run
    (body,) = [p for p in stack.pings("stall-run") if p["scheduled"] == tick and p["type"] == "fail"]
    assert body["exit_status"] == 143, body


def test_the_successor_runs_a_sigkilled_holders_job_within_one_ttl(stack: Stack) -> None:
    outs = {name: stack.directory / f"{name}.txt" for name in ("take-a", "take-b")}
    jobs = "".join(job(name, out, "* * * * * *") for name, out in outs.items())
    replicas = [stack.scheduler("take", jobs) for _ in range(2)]
    try:
        # each replica holds one job (its fair share), so the survivor is at its share when
        # the other dies
        wait_until(
            lambda: (
                len({stack.holder_pid(n)[0] for n in outs} - {0}) == 2
                and all(lines(o) for o in outs.values())
            ),
            timeout=20,
            what="one job per replica",
        )
        holder, token = stack.holder_pid("take-a")
        (victim,) = [p for p in replicas if p.proc is not None and p.proc.pid == holder]
        assert victim.proc is not None
        time.sleep(0.3)
        victim.proc.kill()
        killed = time.time()
        victim.proc.wait(5)
        first = wait_until(
            lambda: next((float(r[2]) for r in lines(outs["take-a"]) if int(r[1]) > token), None),
            timeout=15,
            what="the successor's first run",
        )
    finally:
        finish(*replicas)
    took = first - killed
    print(f"takeover: the successor ran take-a {took:.2f}s after the SIGKILL (TTL {TTL:g}s)")
    assert took <= TTL + ROUND, took
    assert took < TTL, took  # within one TTL, as the README promises


def test_a_run_that_ends_while_its_scheduler_is_stopped_is_recorded_at_its_real_end(stack: Stack) -> None:
    """The guard (not stopped with the scheduler) sees the run's process exit and tells the
    scheduler when: the finish carries that instant (``finished=``), not the SIGCONT's.

    The stop comes once the monitor has the run's start: a start ping caught half-sent by the
    stop goes out at the wake-up as it was, on time by its own reckoning (the late start's
    ``started=`` is ``tests/clients/test_late_start.py``'s)."""
    out = stack.directory / "stopped-end.txt"
    stamp = "$MONITOR_SCHEDULED_TIME"
    command = f'echo "S {stamp} $(date +%s.%N)" >> {out}; sleep 3; echo "E {stamp} $(date +%s.%N)" >> {out}'
    jobs = job("stopped-end", out, "*/20 * * * * *", command, concurrency_policy="Forbid")
    replica = stack.scheduler("stopped-end", jobs)
    stopped: int | None = None
    try:
        started = wait_until(
            lambda: next((r for r in lines(out) if r[0] == "S"), None),
            timeout=30,
            interval=0.02,
            what="a run",
        )
        wait_until(
            lambda: any(r["scheduled"] == started[1] for r in stack.runs("stopped-end")),
            timeout=5,
            interval=0.05,
            what="the run's start at the monitor",
        )
        pid = replica.proc.pid if replica.proc is not None else 0
        os.kill(pid, signal.SIGSTOP)
        stopped = pid
        stopped_at = time.time()
        wait_until(lambda: any(r[0] == "E" for r in lines(out)), timeout=5, interval=0.02, what="the end")
        time.sleep(3)  # the scheduler stays stopped ~4 s while its run has ended
        os.kill(pid, signal.SIGCONT)
        stopped = None
        woke = time.time()
    finally:
        if stopped is not None:
            os.kill(stopped, signal.SIGCONT)
    try:
        tick = started[1]
        real_end = float(next(r for r in lines(out) if r[0] == "E" and r[1] == tick)[2])

        def reported() -> dict[str, Any] | None:
            run = next((r for r in stack.runs("stopped-end") if r["scheduled"] == tick), None)
            return run if run is not None and run["finished"] else None

        run = wait_until(reported, timeout=15, what="the run reported")
    finally:
        finish(replica)
    recorded = parse(run["finished"]).timestamp()
    print(f"run ended {woke - real_end:.2f}s before SIGCONT; recorded {recorded - real_end:+.3f}s off")
    assert woke - real_end > 2.5
    assert real_end > stopped_at, "the run ended before the scheduler was stopped"
    assert run["exit_status"] == 0, run
    assert abs(recorded - real_end) < 0.5, (recorded, real_end, run)
