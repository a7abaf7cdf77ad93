"""Running a tick for real: the run's environment, output tail, kill_after, HTTP jobs, clean
shutdown, and ``monitor scheduler --check`` (DESIGN §8)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor import cli
from monitor.domain.clock import SystemClock
from monitor.domain.jobs import parse_job
from monitor.scheduler import executor, guard
from monitor.scheduler.reporter import idempotency_key
from monitor.scheduler.runner import Scheduler
from monitor.storage import claims, leases
from tests.integration.test_scheduler_claims import RecordingReporter
from tests.support.receivers import HttpReceiver

TICK = datetime(2026, 7, 18, 3, 0, tzinfo=UTC)


def context(**changes: Any) -> executor.RunContext:
    values: dict[str, Any] = {"job": "nightly", "tick": TICK, "run_id": "rid-1", "token": 42, "attempt": 1}
    values.update(changes)
    return executor.RunContext(**values)


async def run(raw: dict[str, Any], ctx: executor.RunContext | None = None, **base: str) -> executor.Outcome:
    job = parse_job({"name": "nightly", "schedule": "0 3 * * *", **raw}, 0)
    execution = executor.Execution(context=ctx or context())
    return await executor.execute(execution, job, {"PATH": "/usr/bin:/bin", **base})


async def test_the_run_gets_its_environment_and_not_the_schedulers_secrets() -> None:
    outcome = await run(
        {"command": "env | grep -E '^(MONITOR_|EXTRA)' | sort", "env": {"EXTRA": "x"}},
        MONITOR_API_KEY="secret-key",
        MONITOR_DATABASE_URL="postgresql://x",
    )
    assert outcome.exit_status == 0
    assert outcome.output.decode().splitlines() == [
        "EXTRA=x",
        "MONITOR_ATTEMPT=1",
        "MONITOR_FENCING_TOKEN=42",
        "MONITOR_IDEMPOTENCY_KEY=nightly:2026-07-18T03:00:00Z",
        "MONITOR_RUN_ID=rid-1",
        "MONITOR_SCHEDULED_TIME=2026-07-18T03:00:00Z",
    ]
    assert idempotency_key("nightly", TICK, 2, "start") == "nightly:2026-07-18T03:00:00Z:2:start"


async def test_exit_status_output_tail_and_missing_command() -> None:
    outcome = await run(
        {"command": ["sh", "-c", "head -c 150000 /dev/zero | tr '\\0' a; echo; echo end; exit 7"]}
    )
    assert outcome.exit_status == 7
    assert len(outcome.output) == executor.OUTPUT_TAIL and outcome.output.endswith(b"a\nend\n")
    outcome = await run({"command": ["/nonexistent/job"]})
    assert outcome.exit_status == 127 and b"/nonexistent/job" in outcome.output


async def test_kill_after_terminates_the_whole_process_group() -> None:
    started = asyncio.get_running_loop().time()
    outcome = await run({"command": "sleep 30 & sleep 30; echo never", "kill_after": 0.3})
    assert asyncio.get_running_loop().time() - started < 5
    assert outcome.exit_status == 124 and outcome.terminated == "kill_after 0.3s"
    assert b"never" not in outcome.output and b"terminated: kill_after 0.3s" in outcome.output
    # a job that exits 0 on SIGTERM still did not finish in time: a failure, like timeout(1)
    outcome = await run({"command": "trap 'exit 0' TERM; sleep 30 & wait", "kill_after": 0.3})
    assert outcome.exit_status == 124


async def test_terminating_a_run_that_already_exited_keeps_its_own_exit_status() -> None:
    """A run that exits (3) while its replica decides to end it: its exit is not yet read when
    ``terminate`` comes, and it is neither signalled nor reported as terminated."""
    execution = executor.Execution(context=context())
    argv = ("sh", "-c", "sleep 0.2; exit 3")
    assert await executor.spawn_command(execution, argv, {"PATH": "/usr/bin:/bin"}) is None
    assert execution.process is not None
    # block the loop until the process exits: its exit stays unread (the child watcher's
    # thread may reap it meanwhile, but the loop does not run to read the status)
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, execution.process.pid, os.WEXITED | os.WNOWAIT)  # noqa: ASYNC222 (on purpose)
    assert executor.exited(execution) and execution.process.returncode is None
    await execution.terminate("lease lost")
    outcome = await executor.wait_command(execution, None)
    assert outcome.exit_status == 3 and outcome.terminated is None
    assert b"terminated" not in outcome.output


GUARDED = """
import asyncio, os, signal, sys
from datetime import UTC, datetime
from monitor.scheduler import executor, guard

async def main() -> None:
    pids = []
    for n, command in enumerate(("sleep 41 & sleep 41", "sleep 42 & sleep 42")):
        ctx = executor.RunContext(job="j", tick=datetime.now(UTC), run_id=str(n), token=1, attempt=1)
        execution = executor.Execution(context=ctx)
        await executor.spawn_command(execution, ("sh", "-c", command), dict(os.environ))
        assert execution.process is not None
        pids.append(execution.process.pid)
        if n == 0:  # the guard dies: the next spawn starts another, told of the first run too
            old = guard.shared().pid
            assert old is not None
            os.kill(old, signal.SIGKILL)
            os.waitpid(old, 0)
    await asyncio.sleep(0.3)
    print(*pids, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def _group(pgid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if entry.name.isdigit() and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


async def test_a_sigkilled_scheduler_takes_its_runs_process_groups_along_even_after_its_guard_died(
    tmp_path: Path,
) -> None:
    script = tmp_path / "scheduler.py"
    script.write_text(GUARDED)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), stdout=asyncio.subprocess.PIPE, cwd=Path(__file__).parents[2]
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == -signal.SIGKILL
    groups = [int(p) for p in out.split()]
    assert len(groups) == 2, out
    for _ in range(100):
        if not any(_group(g) for g in groups):
            break
        await asyncio.sleep(0.02)
    left = {g: _group(g) for g in groups}
    for pids in left.values():
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
    assert left == {groups[0]: [], groups[1]: []}  # both runs' shells and sleeps died within 2 s


def _exists(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie nobody reaped included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


ONE_RUN = """
import asyncio, os
from datetime import UTC, datetime
from monitor.scheduler import executor, guard

async def main() -> None:
    ctx = executor.RunContext(job="j", tick=datetime.now(UTC), run_id="r", token=1, attempt=1)
    execution = executor.Execution(context=ctx)
    await executor.spawn_command(execution, ("true",), dict(os.environ))
    outcome = await executor.wait_command(execution, None)
    print(guard.shared().pid, outcome.exit_status, flush=True)

asyncio.run(main())
"""


async def test_a_process_that_ran_a_job_exits_without_leaving_its_guard_running(tmp_path: Path) -> None:
    """At interpreter exit the guard is stopped and reaped, its socket closed: no
    ``ResourceWarning`` (``subprocess … is still running``, ``unclosed <socket…>``)."""
    script = tmp_path / "one_run.py"
    script.write_text(ONE_RUN)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-X",
        "dev",
        "-W",
        "error::ResourceWarning",
        str(script),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )
    out, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 0, err
    guard_pid, status = (int(word) for word in out.split())
    assert status == 0
    assert b"ResourceWarning" not in err, err.decode()
    assert not _exists(guard_pid)


async def test_an_http_job_calls_its_url_with_idempotency_key_and_token() -> None:
    with HttpReceiver(path="/warm") as receiver:
        ok = await run({"http": {"method": "POST", "url": receiver.http_url, "body": "{}"}})
        receiver.status = 500
        failed = await run({"http": {"url": receiver.http_url}})
    assert (ok.exit_status, failed.exit_status) == (0, 1)
    assert failed.output.startswith(b"HTTP 500")
    first = receiver.requests[0]
    assert (first.method, first.body) == ("POST", b"{}")
    assert first.headers["idempotency-key"] == "nightly:2026-07-18T03:00:00Z"
    assert first.headers["x-monitor-fencing-token"] == "42"


@pytest.mark.parametrize(("grace", "exit_status"), [(5.0, 0), (0.2, 143)])
async def test_sigterm_lets_running_jobs_finish_up_to_the_grace_then_releases_leases(
    engine: AsyncEngine, grace: float, exit_status: int
) -> None:
    """Stop while a run is in progress: it finishes (or is terminated), is reported, leases go."""
    job = parse_job(
        {"name": "slow", "schedule": "* * * * * *", "dialect": "seconds", "command": "sleep 1.2"}, 0
    )
    reporter = RecordingReporter()
    scheduler = Scheduler(
        engine, [job], SystemClock(), reporter, lease_ttl=timedelta(seconds=5), holder="t:1"
    )
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop, shutdown_grace=grace))
    for _ in range(300):
        if reporter.of("start"):
            break
        await asyncio.sleep(0.01)
    guard_pid = guard.shared().pid
    assert guard_pid is not None
    stop.set()
    await asyncio.wait_for(task, 15)
    # the last scheduler of the process stopped its guard and reaped it
    assert guard.shared().pid is None
    assert not _exists(guard_pid)
    (start,) = reporter.of("start")
    (finish,) = reporter.of("finish")  # no new tick was taken after the stop
    assert finish[2] == start[2] and finish[4] == exit_status
    (row,) = [c for c in await claims.list_claims(engine, "slow") if c.state is not claims.ClaimState.SKIPPED]
    assert (row.state, row.exit_status) == (claims.ClaimState.FINISHED, exit_status)
    # handed over: free for another replica at once (on PostgreSQL the row still names the
    # stopping holder, so even a replica at its fair share takes it as a vacancy)
    other = leases.open_leases(engine, "t:2", timedelta(seconds=5), timedelta(seconds=4))
    try:
        (vacancy,) = await other.vacancies(["job-slow"], datetime.now(UTC))
        assert vacancy.last_holder == ("t:1" if engine.dialect.name == "postgresql" else None)
        assert await other.acquire("job-slow", datetime.now(UTC)) is not None
    finally:
        await other.close()


def test_check_prints_next_ticks_and_refuses_a_bad_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "jobs.toml"
    good.write_text('[[jobs]]\nname = "a"\nschedule = "30 2 * * *"\ntz = "Europe/Berlin"\ncommand = "true"\n')
    assert cli.main(["scheduler", "--jobs", str(good), "--check", "--count", "3"]) == 0
    (job,) = json.loads(capsys.readouterr().out)["jobs"]
    assert (job["name"], job["tz"], len(job["next"])) == ("a", "Europe/Berlin", 3)
    assert all(t["utc"].endswith(("T00:30:00Z", "T01:30:00Z")) for t in job["next"])
    assert all(t["local"][10:] in ("T02:30:00+02:00", "T02:30:00+01:00") for t in job["next"])
    # --after an instant before the spring-forward: the DST warning of cron explain, the run rules
    assert (
        cli.main(
            ["scheduler", "--jobs", str(good), "--check", "--count", "3", "--after", "2026-03-27T00:00Z"]
        )
        == 0
    )
    (job,) = json.loads(capsys.readouterr().out)["jobs"]
    assert job["next"][-1] == {"utc": "2026-03-29T01:00:00Z", "local": "2026-03-29T03:00:00+02:00"}
    assert any("UTC offset changes on 2026-03-29" in w for w in job["warnings"])
    assert (job["kill_after"], job["starting_deadline"], job["max_catchup"]) == (None, None, 100)
    assert cli.main(["scheduler", "--jobs", str(good), "--check", "--count", "1001"]) == 2
    assert "count: must be between 1 and 1000" in capsys.readouterr().err
    nan = tmp_path / "nan.toml"
    nan.write_text('[[jobs]]\nname = "a"\nschedule = "* * * * *"\ncommand = "true"\nkill_after = nan\n')
    assert cli.main(["scheduler", "--jobs", str(nan), "--check"]) == 2
    assert "jobs[0].kill_after: must be a finite number" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text('[[jobs]]\nname = "a"\nschedule = "0 0 * * 8"\ncommand = "true"\n')
    assert cli.main(["scheduler", "--jobs", str(bad), "--check"]) == 2
    assert "jobs[0].schedule: field 5 (day of week): 8 is out of range 0-7" in capsys.readouterr().err
    several = tmp_path / "several.toml"
    several.write_text(
        '[[jobs]]\nname = "a"\nschedule = "0 0 * * 8"\ncommand = "true"\n'
        '[[jobs]]\nname = "b"\nschedule = "* * * * *"\ncommand = "true"\n'
        '[[jobs]]\nname = "nul"\nschedule = "*/5 * * * * *"\ndialect = "seconds"\n'
        'command = ["echo", "a\\u0000b"]\nenv = {"A=B" = "x"}\n'
    )
    assert cli.main(["scheduler", "--jobs", str(several), "--check"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "monitor: jobs[0].schedule: field 5 (day of week): 8 is out of range 0-7",
        "monitor: jobs[2].command[1]: must not contain a NUL character (\\u0000): it cannot be executed",
    ]
    broken = tmp_path / "broken.toml"
    broken.write_text("[[jobs]\n")
    assert cli.main(["scheduler", "--jobs", str(broken), "--check"]) == 2
    err = capsys.readouterr().err
    assert "jobs: " in err and "is not valid TOML" in err


def test_the_readme_jobs_file_is_valid() -> None:
    """The README's full example stays true to the parser (every key of DESIGN §8)."""
    import re
    import tomllib

    from monitor.domain.jobs import KEYS, parse_jobs
    from tests.support.process import REPO_ROOT

    readme = (REPO_ROOT / "README.md").read_text()
    (block,) = re.findall(r"```toml\n(# jobs\.toml.*?)```", readme, re.S)
    document = tomllib.loads(block)
    jobs = parse_jobs(document)
    assert [j.name for j in jobs] == ["billing", "cleanup", "warm-cache"]
    assert set().union(*(set(raw) for raw in document["jobs"])) == KEYS


def test_an_unreachable_monitor_never_holds_a_run_up() -> None:
    """Reporting is queued for a background thread: every call returns at once."""
    import time

    from monitor.scheduler.reporter import HttpReporter
    from tests.support.receivers import free_port

    job = parse_job({"name": "a", "schedule": "* * * * *", "command": "true"}, 0)
    reporter = HttpReporter(f"http://127.0.0.1:{free_port()}", "k" * 20, [job])  # the default client
    began = time.monotonic()
    for _ in range(100):
        reporter.start(job, TICK, 1, "rid")
        reporter.finish(job, TICK, 1, "rid", 0, b"out")
        reporter.skip(job, TICK, 1, "forbid")
    reporter.liveness()
    assert time.monotonic() - began < 0.5
    began = time.monotonic()
    reporter.close(0.2)
    assert time.monotonic() - began < 2
    for _ in range(100):  # the thread ends after its request in flight (retries included)
        if not reporter.alive:
            break
        time.sleep(0.1)
    assert not reporter.alive


@pytest.mark.parametrize(
    ("change", "named"),
    [
        pytest.param({"env": {"A": "a\x00b"}}, b"embedded null byte", id="nul-in-env"),
        pytest.param({"env": {"A=B": "x"}}, b"environment variable name", id="equals-in-env-name"),
        pytest.param({"command": ("true", "x" * 3_000_000)}, b"Argument list too long", id="past-arg-max"),
    ],
)
async def test_a_run_that_cannot_be_spawned_is_finished_and_reported_as_failed(
    engine: AsyncEngine, change: dict[str, Any], named: bytes
) -> None:
    """The jobs file refuses what the kernel cannot exec, but a spawn that still raises (a Job
    built otherwise, E2BIG) must not leave the claim started and the monitor uninformed."""
    import dataclasses

    job = parse_job({"name": "broken", "schedule": "* * * * * *", "dialect": "seconds", "command": "true"}, 0)
    job = dataclasses.replace(job, **change)
    reporter = RecordingReporter()
    scheduler = Scheduler(
        engine, [job], SystemClock(), reporter, lease_ttl=timedelta(seconds=5), holder="t:1"
    )
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop, shutdown_grace=2.0))
    for _ in range(500):
        if reporter.of("finish"):
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 15)
    finish, *_ = reporter.of("finish")
    assert finish[4] == 126 and named in finish[5], finish
    assert reporter.of("start")[0][2] == finish[2]
    rows = [c for c in await claims.list_claims(engine, "broken") if c.state is not claims.ClaimState.SKIPPED]
    assert rows and all(row.state is claims.ClaimState.FINISHED for row in rows), rows
    assert rows[0].exit_status == 126
