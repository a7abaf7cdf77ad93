"""``monitor serve --dev`` on a SQLite file, as a real process: when it says "listening" the port
accepts connections, and SIGTERM stops it within 2 s even while another process holds the
database's write lock (the leases it gives back on the way out are then left to expire).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.process import CURL, MonitorProcess, checkout_env, curl_api, curl_ping, wait_until
from tests.support.receivers import free_port

pytestmark = pytest.mark.e2e

API_KEY = "serve-lifecycle-key-0123456789"


def _serve(tmp_path: Path) -> MonitorProcess:
    port = free_port()
    env = checkout_env(
        MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'monitor.db'}",
        MONITOR_API_KEY=API_KEY,
        MONITOR_EVALUATE_INTERVAL="0.2",
        MONITOR_LEASE_TTL="2",
    )
    return MonitorProcess.serve(port, env=env, cwd=tmp_path, logs=tmp_path, name="serve").start()


def test_serve_says_listening_only_when_the_port_accepts(tmp_path: Path) -> None:
    monitor = _serve(tmp_path)
    try:
        wait_until(lambda: "listening on" in monitor.stdout, timeout=60, interval=0.01, what="listening")
        probe = subprocess.run(
            [CURL, "-sS", "-m", "2", "-o", "/dev/null", "-w", "%{http_code}", f"{monitor.base}/health"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert probe.stdout == "200", (probe.stdout, probe.stderr)
    finally:
        monitor.close()


def test_sigterm_stops_serve_within_2s_while_the_sqlite_file_is_locked(tmp_path: Path) -> None:
    monitor = _serve(tmp_path)
    locker = None
    try:
        monitor.wait_healthy(60)
        # the evaluator holds its shard leases (16 by default) once it has run a while
        wait_until(
            lambda: (
                len(_query(tmp_path / "monitor.db", "SELECT name FROM leases WHERE holder IS NOT NULL")) >= 16
            ),
            timeout=30,
            what="the evaluator's leases",
        )
        locker = sqlite3.connect(tmp_path / "monitor.db", timeout=30, isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")  # another writer holds the file
        assert monitor.proc is not None
        started = time.monotonic()
        code = monitor.terminate(timeout=30)
        took = time.monotonic() - started
    finally:
        if locker is not None:
            locker.execute("ROLLBACK")
            locker.close()
        monitor.close()
    print(f"serve stopped {took:.2f}s after SIGTERM with the database locked")
    assert code == 0, monitor.describe()
    assert took <= 2.0, (took, monitor.stderr[-3000:])


def _query(db: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db, timeout=5) as conn:
        return list(conn.execute(sql).fetchall())


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def _ingest_children(pid: int) -> list[int]:
    found = []
    for child in _children(pid):
        try:
            if b"monitor.workers.ingest_child" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
        except FileNotFoundError:  # ended meanwhile
            pass
    return found


def _ingest_child(pid: int) -> int:
    found = _ingest_children(pid)
    assert len(found) == 1, found
    return found[0]


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # reaped, perhaps between open and read
        return True
    # an exited child of ours not yet reaped is a zombie: it runs nothing
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_serve_stores_pings_in_a_child_process_that_ends_with_it(tmp_path: Path) -> None:
    monitor = _serve(tmp_path)
    try:
        monitor.wait_healthy(60)
        assert monitor.proc is not None
        child = _ingest_child(monitor.proc.pid)
        status, body = curl_api(
            monitor.base, "POST", "/api/v3/checks/", API_KEY, {"name": "c", "timeout": 60}
        )
        assert status == 201, body
        assert curl_ping(body["ping_url"]) == "OK"
        assert _query(tmp_path / "monitor.db", "SELECT n_pings FROM checks") == [(1,)]
        monitor.proc.kill()  # the API process dies: the child sees its pipe close and exits
        monitor.proc.wait(10)
        wait_until(lambda: _gone(child), timeout=10, what="the ingest process to exit")
    finally:
        monitor.close()


def test_sigterm_stops_serve_and_its_ingest_process(tmp_path: Path) -> None:
    monitor = _serve(tmp_path)
    try:
        monitor.wait_healthy(60)
        assert monitor.proc is not None
        child = _ingest_child(monitor.proc.pid)
        assert monitor.terminate(timeout=10) == 0, monitor.describe()
        wait_until(lambda: _gone(child), timeout=10, what="the ingest process to exit")
    finally:
        monitor.close()
    assert "Traceback" not in monitor.stderr, monitor.stderr[-3000:]
    assert "ingest_process_failed" not in monitor.stderr and "ingest process failed" not in monitor.stderr


def _stop_then_kill_serve(monitor: MonitorProcess, child: int) -> None:
    """SIGSTOP the ingest process (it cannot see its pipe close), SIGKILL serve: the kernel
    must kill the child (PR_SET_PDEATHSIG)."""
    assert monitor.proc is not None
    os.kill(child, signal.SIGSTOP)
    monitor.proc.kill()
    monitor.proc.wait(10)
    wait_until(lambda: _gone(child), timeout=10, what="the stopped ingest process to be killed")


def test_a_stopped_ingest_process_does_not_outlive_serve(tmp_path: Path) -> None:
    monitor = _serve(tmp_path)
    child = 0
    try:
        monitor.wait_healthy(60)
        assert monitor.proc is not None
        child = _ingest_child(monitor.proc.pid)
        _stop_then_kill_serve(monitor, child)
    finally:
        monitor.close()
        if child and not _gone(child):
            os.kill(child, signal.SIGKILL)


@pytest.mark.parametrize("after", [0.0, 0.1])
def test_an_ingest_process_stopped_while_it_starts_does_not_outlive_serve(
    tmp_path: Path, after: float
) -> None:
    """Stopped as soon as it is seen (on a busy host, before its own first statement), or
    inside its imports."""
    monitor = _serve(tmp_path)
    child = 0
    try:
        assert monitor.proc is not None
        pid = monitor.proc.pid
        [child] = wait_until(
            lambda: _ingest_children(pid), timeout=60, interval=0.005, what="the ingest process"
        )
        time.sleep(after)
        _stop_then_kill_serve(monitor, child)
    finally:
        monitor.close()
        if child and not _gone(child):
            os.kill(child, signal.SIGKILL)
