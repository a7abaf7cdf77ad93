"""``monitor serve --dev`` on a SQLite file, as a real process: when it says "listening" the port
accepts connections, and SIGTERM stops it within 2 s even while another process holds the
database's write lock (the leases it gives back on the way out are then left to expire).
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.process import CURL, MonitorProcess, checkout_env, wait_until
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
