"""Finish pings that go out late, and a monitor that never answers.

* The bundled scheduler's reporter queues a finish while the monitor is unreachable; when it is
  delivered (seconds later) it carries ``finished=`` with the instant the run ended, and the
  monitor stores that as the run's end, not the arrival (docs/design.md §5).
* ``monitor-run`` against a monitor that accepts connections and never answers
  (:class:`tests.support.tcp.SilentListener`): once the start got no answer in its whole
  ``--timeout``, the finish gets ``SILENT_FINISH_TIMEOUT`` (1 s), so the wrapper exits at
  most about ``max(run time, --timeout) + 1 s`` after it began; this file allows 2 s on top
  for the interpreter's start and a loaded machine (the old behaviour took another full
  ``--timeout``).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from monitor_client import AsyncClient, Client, _common
from monitor_client.run_command import SILENT_FINISH_TIMEOUT

from monitor.domain.jobs import parse_job
from monitor.scheduler.reporter import HttpReporter
from tests.clients.conftest import Monitor
from tests.support.process import wait_until
from tests.support.tcp import Gate, SilentListener

pytestmark = pytest.mark.e2e

MONITOR_RUN = str(Path(sys.executable).parent / "monitor-run")
SLACK = 2.0
"""Seconds allowed beyond the documented bound: the interpreter's start and a loaded machine."""

# Each silent-monitor test below must tell the new behaviour (the finish gets S =
# SILENT_FINISH_TIMEOUT = 1 s) from the old one (the finish got another whole timeout T), within
# the slack it allows (SLACK = 2 s for the wrappers, 0.5 s for the Python clients):
# * start timeout, quick command: new ~ T + S, old ~ 2T; bound T + S + slack; old fails when
#   T > S + slack: wrappers T > 3 (T = 4: bound 7 s, old 8 s), clients T > 1.5 (T = 2: bound 3.5 s,
#   old 4 s).
# * long command (R > T, the start times out during it): new ~ R + S, old ~ R + T; bound
#   R + S + SLACK; old fails when T > 3: T = 4, R = 5 (bound 8 s, old 9 s).
WRAPPER_TIMEOUT = 4
LONG_COMMAND = 5
CLIENT_TIMEOUT = 2


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_finish_queued_behind_an_outage_carries_the_time_its_run_ended(monitor: Monitor) -> None:
    gate = Gate(int(monitor.base.rsplit(":", 1)[1]))
    slug = f"late-{uuid.uuid4().hex[:8]}"
    job = parse_job({"name": slug, "schedule": "*/2 * * * * *", "dialect": "seconds", "command": "true"}, 0)
    reporter = HttpReporter(f"http://127.0.0.1:{gate.port}", monitor.api_key, [job])
    rid = str(uuid.uuid4())
    try:
        found: list[dict[str, Any]] = []

        def started() -> bool:
            checks = monitor.api("GET", f"checks/?slug={slug}")["checks"]
            found[:] = checks
            return bool(checks) and any(r["rid"] == rid for r in monitor.runs(checks[0]["uuid"]))

        tick = datetime.now(UTC).replace(microsecond=0)
        tick -= timedelta(seconds=tick.second % 2)
        reporter.start(job, tick, 1, rid)
        wait_until(started, timeout=20, what="the run's start")
        uuid_ = found[0]["uuid"]
        gate.down()  # the monitor is unreachable when the run ends
        time.sleep(0.2)
        ended = datetime.now(UTC)
        reporter.finish(job, tick, 1, rid, 0, b"done")
        time.sleep(3.0)  # the finish waits in the reporter's queue
        gate.up()

        def finished() -> dict[str, Any] | None:
            runs = [r for r in monitor.runs(uuid_) if r["rid"] == rid and r["finished"]]
            return runs[0] if runs else None

        run = wait_until(finished, timeout=30, what="the run's finish")
    finally:
        reporter.close(5.0)
        gate.down()
    [finish] = [p for p in monitor.pings(uuid_) if p["type"] == "success"]
    arrived = parse(finish["date"])
    assert arrived - ended >= timedelta(seconds=2.5)  # it really was delivered late
    # stored as ending when the reporter saw it end, not at the arrival
    assert abs(parse(run["finished"]) - ended) < timedelta(seconds=1), (run, ended)
    assert run["duration"] < 2.0, run
    assert run["outcome"] is not None


def test_a_finish_sent_at_once_carries_no_finished() -> None:
    now = time.time()
    assert _common.late_finish(now - 0.2, now) is None
    assert _common.late_finish(now - 5.0, now) == now - 5.0
    assert _common.late_finish(None, now) is None
    settings = _common.Settings.resolve("http://127.0.0.1:9", None, None, 1.0, 0, 0.1)
    plan = _common.ping_plan(
        settings,
        str(uuid.uuid4()),
        "success",
        scheduled=None,
        rid=None,
        body=None,
        exit_status=3,
        headers=None,
        create=False,
        body_limit=100,
        finished=datetime(2026, 7, 19, 3, 0, 5, 123456, tzinfo=UTC),
    )
    assert plan.params["finished"] == "2026-07-19T03:00:05.123Z"
    with pytest.raises(_common.PlanError):
        _common.ping_plan(
            settings,
            str(uuid.uuid4()),
            "start",
            scheduled=None,
            rid=None,
            body=None,
            exit_status=None,
            headers=None,
            create=False,
            body_limit=100,
            finished=time.time(),
        )


def _monitor_run(listener: SilentListener, timeout: float, *command: str) -> tuple[int, float]:
    env = {"MONITOR_BASE_URL": listener.base, "PATH": "/usr/bin:/bin", "MONITOR_RETRIES": "3"}
    started = time.monotonic()
    proc = subprocess.run(
        [MONITOR_RUN, "--check", str(uuid.uuid4()), "--timeout", str(timeout), "--", *command],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return proc.returncode, time.monotonic() - started


def test_monitor_run_against_a_silent_monitor_exits_soon_after_a_long_command() -> None:
    with SilentListener() as listener:
        status, elapsed = _monitor_run(listener, WRAPPER_TIMEOUT, "sh", "-c", f"sleep {LONG_COMMAND}; exit 5")
        assert listener.accepted >= 2  # the start and the finish both reached the socket
    assert status == 5
    # the start timed out during the command; the finish had SILENT_FINISH_TIMEOUT, not
    # WRAPPER_TIMEOUT more
    assert elapsed < LONG_COMMAND + SILENT_FINISH_TIMEOUT + SLACK, elapsed


def test_monitor_run_against_a_silent_monitor_exits_soon_after_its_start_timeout() -> None:
    with SilentListener() as listener:
        status, elapsed = _monitor_run(listener, WRAPPER_TIMEOUT, "true")
    assert status == 0
    # waits for the start's own timeout (so the pings stay in order), then 1 s for the finish
    assert elapsed < WRAPPER_TIMEOUT + SILENT_FINISH_TIMEOUT + SLACK, elapsed


def test_monitor_run_stores_the_commands_end_when_a_background_child_holds_its_output(
    monitor: Monitor,
) -> None:
    # the command exits at once; a child it left in the background keeps the output pipes open,
    # so monitor-run waits (up to 2 s) for the rest of the output before it reports: that wait
    # is not the run's, and the finish says when the command really ended
    slug = f"bg-{uuid.uuid4().hex[:8]}"
    proc = subprocess.run(
        [MONITOR_RUN, "--check", slug, "--create", "--", "sh", "-c", "sleep 4 & echo started"],
        env=monitor.env(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    [check] = monitor.api("GET", f"checks/?slug={slug}")["checks"]
    [run] = monitor.runs(check["uuid"])
    assert run["outcome"] is not None
    assert run["duration"] < 1.0, run


def test_finished_in_unix_milliseconds_is_read_as_the_monitor_reads_it(monitor: Monitor) -> None:
    # finished= as a number from 10^11 up is unix milliseconds, as the ping API reads it
    from monitor_client import Client

    check = monitor.create_check(schedule="* * * * *", grace=60)
    rid = str(uuid.uuid4())
    with Client(monitor.base, api_key=monitor.api_key) as client:
        assert client.ping(check["uuid"], "start", rid=rid).ok
        ended = time.time()
        time.sleep(1.2)
        result = client.ping(check["uuid"], rid=rid, finished=ended * 1000)
    assert result.ok, result
    [run] = monitor.runs(check["uuid"])
    assert abs(parse(run["finished"]).timestamp() - ended) < 0.01, run


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (float("nan"), "is not a finite number"),
        (float("inf"), "is not a finite number"),
        (1e300, "is out of range"),
        (datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))), "is out of range"),
    ],
)
def test_an_unusable_finished_is_refused_with_a_finished_message(value: Any, problem: str) -> None:
    settings = _common.Settings.resolve("http://127.0.0.1:9", None, None, 1.0, 0, 0.1)
    with pytest.raises(_common.PlanError, match=f"^finished: .*{problem}"):
        _common.ping_plan(
            settings,
            str(uuid.uuid4()),
            "success",
            scheduled=None,
            rid=None,
            body=None,
            exit_status=None,
            headers=None,
            create=False,
            body_limit=100,
            finished=value,
        )


SHELL_WRAPPER = str(Path(__file__).resolve().parents[2] / "clients" / "shell" / "monitor-run.sh")
DASH = shutil.which("dash") or "/bin/dash"


def test_shell_wrapper_under_dash_against_a_silent_monitor_exits_soon_after_its_start_timeout() -> None:
    with SilentListener() as listener:
        env = {
            "MONITOR_BASE_URL": listener.base,
            "PATH": "/usr/bin:/bin",
            "MONITOR_TIMEOUT": str(WRAPPER_TIMEOUT),
        }
        started = time.monotonic()
        proc = subprocess.run(
            [DASH, SHELL_WRAPPER, str(uuid.uuid4()), "sh", "-c", "exit 4"],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        elapsed = time.monotonic() - started
        assert listener.accepted >= 2  # the start and the finish both reached the socket
    assert proc.returncode == 4, proc.stderr
    # the start's own timeout (so the pings stay in order), then 1 s for the finish, not the
    # timeout again
    assert elapsed < WRAPPER_TIMEOUT + SILENT_FINISH_TIMEOUT + SLACK, (elapsed, proc.stderr)
    assert proc.stderr.count(b"not delivered") == 1, proc.stderr  # one warning per run


def test_shell_wrapper_under_dash_against_a_silent_monitor_exits_soon_after_a_long_command() -> None:
    with SilentListener() as listener:
        env = {
            "MONITOR_BASE_URL": listener.base,
            "PATH": "/usr/bin:/bin",
            "MONITOR_TIMEOUT": str(WRAPPER_TIMEOUT),
        }
        started = time.monotonic()
        proc = subprocess.run(
            [DASH, SHELL_WRAPPER, str(uuid.uuid4()), "sh", "-c", f"sleep {LONG_COMMAND}; exit 5"],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        elapsed = time.monotonic() - started
    assert proc.returncode == 5, proc.stderr
    assert elapsed < LONG_COMMAND + SILENT_FINISH_TIMEOUT + SLACK, (elapsed, proc.stderr)


def test_python_client_run_against_a_silent_monitor_adds_at_most_its_timeout_and_a_second() -> None:
    with SilentListener() as listener, Client(listener.base, timeout=CLIENT_TIMEOUT, retries=0) as client:
        began = time.monotonic()
        with client.run(str(uuid.uuid4())) as run:
            body_started = time.monotonic() - began
        elapsed = time.monotonic() - began
        assert listener.accepted >= 2
    assert not run.started.ok and not run.finished.ok  # type: ignore[union-attr]
    assert run.started.status is None  # type: ignore[union-attr]
    # the start blocks the body for its timeout; the finish then has 1 s, not the timeout again
    assert CLIENT_TIMEOUT - 0.5 < body_started < CLIENT_TIMEOUT + 0.5, body_started
    assert elapsed < CLIENT_TIMEOUT + SILENT_FINISH_TIMEOUT + 0.5, elapsed


def test_python_client_decorator_against_a_silent_monitor_adds_at_most_its_timeout_and_a_second() -> None:
    with SilentListener() as listener, Client(listener.base, timeout=CLIENT_TIMEOUT) as client:

        @client.monitored(str(uuid.uuid4()))
        def job() -> int:
            raise SystemExit(3)

        began = time.monotonic()
        with pytest.raises(SystemExit):
            job()
        elapsed = time.monotonic() - began
    assert elapsed < CLIENT_TIMEOUT + SILENT_FINISH_TIMEOUT + 0.5, elapsed


def test_async_client_run_against_a_silent_monitor_adds_at_most_its_timeout_and_a_second() -> None:
    async def main() -> float:
        async with AsyncClient(listener.base, timeout=CLIENT_TIMEOUT) as client:
            began = time.monotonic()
            async with client.run(str(uuid.uuid4())):
                pass
            return time.monotonic() - began

    with SilentListener() as listener:
        elapsed = asyncio.run(main())
    assert elapsed < CLIENT_TIMEOUT + SILENT_FINISH_TIMEOUT + 0.5, elapsed


def test_python_client_finish_keeps_its_whole_timeout_after_a_quick_refusal() -> None:
    # a refused start (a monitor restarting) is no reason to cut the finish short
    started = _common.PingResult(ok=False, status=None, body_limit=100, error="refused", text="")
    assert _common.finish_timeout(started, 0.01, 3.0) is None
    answered = _common.PingResult(ok=False, status=503, body_limit=100, error="503", text="")
    assert _common.finish_timeout(answered, 3.0, 3.0) is None
    assert _common.finish_timeout(started, 3.0, 3.0) == SILENT_FINISH_TIMEOUT
    assert _common.finish_timeout(started, 0.5, 0.5) == 0.5


def test_python_client_run_by_slug_lookup_against_a_silent_monitor_adds_at_most_timeout_and_1s() -> None:
    # an API key and a slug: each ping looks the slug's uuid up first, within the ping's bound
    with (
        SilentListener() as listener,
        Client(listener.base, api_key="k" * 20, timeout=CLIENT_TIMEOUT) as client,
    ):
        began = time.monotonic()
        with client.run("nightly-billing"):
            body_started = time.monotonic() - began
        elapsed = time.monotonic() - began
    assert body_started < CLIENT_TIMEOUT + 0.5, body_started
    assert elapsed < CLIENT_TIMEOUT + SILENT_FINISH_TIMEOUT + 0.5, elapsed
