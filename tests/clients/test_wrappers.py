"""``monitor-run`` (Python console script) and ``clients/shell/monitor-run.sh`` (under ``dash``)
against a real ``monitor serve`` process.

Both wrap a real command: the exit status reaches the monitor and is passed through, the output
tail is the finish ping's body, SIGTERM reaches the command, and a stopped monitor never stops
or delays the command beyond the ping timeout.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.clients.conftest import BODY_LIMIT, Monitor
from tests.support.process import REPO_ROOT, wait_until
from tests.support.receivers import free_port

pytestmark = pytest.mark.e2e

MONITOR_RUN = str(Path(sys.executable).parent / "monitor-run")
SHELL_WRAPPER = str(REPO_ROOT / "clients" / "shell" / "monitor-run.sh")
DASH = shutil.which("dash") or "/bin/dash"

# 600 numbered lines on stdout (7 800 bytes, more than BODY_LIMIT), then one on stderr, exit 3
NOISY_FAILURE = (
    'i=1; while [ $i -le 600 ]; do echo "line $i of output"; i=$((i+1)); done; echo oops >&2; exit 3'
)
# prints "ready", then on SIGTERM prints "got TERM" and exits 42
TERM_AWARE = (
    "import signal, sys, time\n"
    "def stop(*_):\n"
    "    print('got TERM', flush=True)\n"
    "    sys.exit(42)\n"
    "signal.signal(signal.SIGTERM, stop)\n"
    "print('ready', flush=True)\n"
    "time.sleep(30)\n"
)


def _slug() -> str:
    return f"wrap-{uuid.uuid4().hex[:10]}"


def _wrapper(kind: str, slug: str, *command: str) -> list[str]:
    if kind == "python":
        return [MONITOR_RUN, "--check", slug, "--create", "--", *command]
    return [DASH, SHELL_WRAPPER, slug, *command]


def _env(monitor: Monitor, kind: str, **extra: str) -> dict[str, str]:
    if kind == "shell":
        extra.setdefault("MONITOR_CREATE", "1")
    return monitor.env(**extra)


def _check(monitor: Monitor, slug: str) -> dict[str, str]:
    [check] = monitor.api("GET", f"checks/?slug={slug}")["checks"]
    return dict(check)


@pytest.mark.parametrize("kind", ["python", "shell"])
def test_failing_command_exit_status_and_output_tail_reach_the_monitor(monitor: Monitor, kind: str) -> None:
    slug = _slug()
    proc = subprocess.run(
        _wrapper(kind, slug, "sh", "-c", NOISY_FAILURE),
        env=_env(monitor, kind),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.count(b"of output\n") == 600  # streamed through
    assert b"oops" in proc.stdout + proc.stderr
    check = _check(monitor, slug)
    pings = monitor.pings(check["uuid"])
    assert [(p["type"], p["exit_status"]) for p in pings] == [("start", None), ("fail", 3)]
    assert pings[0]["rid"] == pings[1]["rid"] and pings[0]["rid"]
    body = monitor.body(check["uuid"], pings[1]["n"])
    assert len(body) == BODY_LIMIT  # the last Ping-Body-Limit bytes, learned from the start ping
    assert b"line 600 of output\n" in body and b"oops\n" in body
    assert b"line 1 of output\n" not in body


@pytest.mark.parametrize("kind", ["python", "shell"])
def test_success_and_scheduled_time_from_the_environment(monitor: Monitor, kind: str) -> None:
    slug = _slug()
    monitor.create_check(name=slug, slug=slug, schedule="* * * * *", grace=300)
    tick = (datetime.now(UTC) - timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:00Z")
    proc = subprocess.run(
        _wrapper(kind, slug, "sh", "-c", 'echo "tick=$MONITOR_SCHEDULED_TIME rid=$MONITOR_RUN_ID"'),
        env=_env(monitor, kind, MONITOR_SCHEDULED_TIME=tick),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    pings = monitor.pings(_check(monitor, slug)["uuid"])
    assert [(p["type"], p["exit_status"], p["scheduled"]) for p in pings] == [
        ("start", None, tick),
        ("success", 0, tick),
    ]
    assert proc.stdout.decode() == f"tick={tick} rid={pings[0]['rid']}\n"


@pytest.mark.parametrize("kind", ["python", "shell"])
def test_sigterm_is_forwarded_to_the_command(monitor: Monitor, kind: str, tmp_path: Path) -> None:
    slug = _slug()
    out = tmp_path / "out"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            _wrapper(kind, slug, sys.executable, "-c", TERM_AWARE),
            env=_env(monitor, kind),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: b"ready" in out.read_bytes(), timeout=15, what="the command to start")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 42, out.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert b"got TERM" in out.read_bytes()
    pings = monitor.pings(_check(monitor, slug)["uuid"])
    assert [(p["type"], p["exit_status"]) for p in pings] == [("start", None), ("fail", 42)]


# prints "ready", then on one of the forwarded signals prints "got <NAME>" and exits 42
TRAPS_ALL = (
    "import signal, sys, time\n"
    "def stop(signum, _):\n"
    "    print('got', signal.Signals(signum).name, flush=True)\n"
    "    sys.exit(42)\n"
    "for name in ('SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'):\n"
    "    signal.signal(getattr(signal, name), stop)\n"
    "print('ready', flush=True)\n"
    "time.sleep(30)\n"
)


@pytest.mark.parametrize("kind", ["python", "shell"])
@pytest.mark.parametrize("name", ["SIGUSR1", "SIGUSR2", "SIGQUIT", "SIGHUP", "SIGINT"])
def test_other_signals_are_forwarded_to_the_command_too(
    monitor: Monitor, kind: str, name: str, tmp_path: Path
) -> None:
    """The wrapper passes the signal on and reports the command's end, instead of dying and
    leaving the command running unreported. The shell wrapper sends SIGINT and SIGQUIT on as
    SIGTERM: its background command ignores those two (POSIX) and could not trap them."""
    slug = _slug()
    out = tmp_path / "out"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            _wrapper(kind, slug, sys.executable, "-c", TRAPS_ALL),
            env=_env(monitor, kind),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: b"ready" in out.read_bytes(), timeout=15, what="the command to start")
        proc.send_signal(getattr(signal, name))
        assert proc.wait(15) == 42, out.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    received = "SIGTERM" if kind == "shell" and name in ("SIGINT", "SIGQUIT") else name
    assert f"got {received}".encode() in out.read_bytes(), out.read_text()
    pings = monitor.pings(_check(monitor, slug)["uuid"])
    assert [(p["type"], p["exit_status"]) for p in pings] == [("start", None), ("fail", 42)]


@pytest.mark.parametrize("kind", ["python", "shell"])
def test_command_killed_by_sigterm_reports_143(monitor: Monitor, kind: str, tmp_path: Path) -> None:
    slug = _slug()
    out = tmp_path / "out"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            _wrapper(kind, slug, "sh", "-c", "echo started; exec sleep 30"),
            env=_env(monitor, kind),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: b"started" in out.read_bytes(), timeout=15, what="the command to start")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 143, out.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    check = _check(monitor, slug)
    assert [(p["type"], p["exit_status"]) for p in monitor.pings(check["uuid"])] == [
        ("start", None),
        ("fail", 143),
    ]


@pytest.mark.parametrize("kind", ["python", "shell"])
def test_monitor_stopped_the_command_runs_on_time_and_keeps_its_status(monitor: Monitor, kind: str) -> None:
    env = _env(
        monitor,
        kind,
        MONITOR_BASE_URL=f"http://127.0.0.1:{free_port()}",  # nobody listens
        MONITOR_TIMEOUT="1",
        MONITOR_RETRIES="2",
    )
    argv = _wrapper(kind, _slug(), "sh", "-c", "echo working; exit 5")
    started = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, timeout=60, check=False)
    elapsed = time.monotonic() - started
    assert proc.returncode == 5, proc.stderr
    assert proc.stdout == b"working\n"
    assert proc.stderr.count(b"not delivered") == 1, proc.stderr  # one warning, not one per ping
    # two pings, each bounded by the timeout (the shell's: one more attempt of at most the timeout)
    assert elapsed < 2 * 2 * 1 + 3, elapsed


def test_python_wrapper_reports_a_missing_command_as_127(monitor: Monitor) -> None:
    slug = _slug()
    proc = subprocess.run(
        _wrapper("python", slug, "no-such-command-here"),
        env=monitor.env(),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 127
    check = _check(monitor, slug)
    pings = monitor.pings(check["uuid"])
    assert [(p["type"], p["exit_status"]) for p in pings] == [("start", None), ("fail", 127)]
    assert b"no-such-command-here" in monitor.body(check["uuid"], pings[1]["n"])


def test_python_wrapper_is_installed_as_a_console_script() -> None:
    assert os.access(MONITOR_RUN, os.X_OK)
    proc = subprocess.run([MONITOR_RUN, "--help"], capture_output=True, text=True, timeout=30, check=True)
    assert "--check" in proc.stdout and "COMMAND" in proc.stdout


def test_shell_wrapper_is_shellcheck_clean() -> None:
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    proc = subprocess.run(
        [shellcheck, "-s", "sh", SHELL_WRAPPER], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("kind", ["python", "shell"])
def test_monitor_that_never_answers_does_not_delay_the_command(monitor: Monitor, kind: str) -> None:
    # a listener that accepts connections (the kernel's backlog) and never answers a request
    blackhole = socket.socket()
    blackhole.bind(("127.0.0.1", 0))
    blackhole.listen()
    try:
        env = _env(
            monitor,
            kind,
            MONITOR_BASE_URL=f"http://127.0.0.1:{blackhole.getsockname()[1]}",
            MONITOR_TIMEOUT="3",
            MONITOR_RETRIES="0",
        )
        command = f"{sys.executable} -c 'import time; print(time.time(), flush=True)'; exit 4"
        launched = time.time()
        proc = subprocess.run(
            _wrapper(kind, _slug(), "sh", "-c", command),
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
    finally:
        blackhole.close()
    assert proc.returncode == 4, proc.stderr  # the exit status passes through
    started = float(proc.stdout.split()[0])
    assert started - launched < 1.0, (started - launched, proc.stderr)
    assert proc.stderr.count(b"not delivered") == 1, proc.stderr
