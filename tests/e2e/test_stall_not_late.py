"""With real processes: a SIGSTOPped API process is an outage, not a late job.

``monitor serve`` on SQLite (TTL 1 s, so 2 s without a liveness renewal is an outage) watches a
``*/4`` seconds schedule with 1 s of grace. The server is stopped (SIGSTOP) 1 s before a tick;
the job's ping for that tick is sent on time with curl and waits in the kernel's queue; the
server resumes 3.5 s after the tick (past the grace). The ping is stored and bound to its tick,
whose outcome is ``unknown``; no ``late`` alert is raised (before: a delivered ``late``).
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from contextlib import closing
from pathlib import Path

import pytest

from tests.support.process import CURL, MonitorProcess, checkout_env, curl_api, sleep_until
from tests.support.receivers import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # ~15 s of real ticks: over the default suite's budget

KEY = "stall-api-key-0123456789"
PERIOD = 4


def test_a_ping_that_waited_out_a_stall_is_not_late(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    env = checkout_env(
        MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{db}",
        MONITOR_LEASE_TTL="1",
        MONITOR_EVALUATE_INTERVAL="0.2",
        MONITOR_API_KEY=KEY,
    )
    with MonitorProcess.serve(free_port(), env=env, cwd=tmp_path, logs=tmp_path, name="serve") as server:
        server.wait_healthy()
        status, check = curl_api(
            server.base,
            "POST",
            "/api/v3/checks/",
            KEY,
            {"name": "stalled", "schedule": f"*/{PERIOD} * * * * *", "dialect": "seconds", "grace": 1},
        )
        assert status == 201, check
        ping = f"{server.base}/ping/{check['uuid']}"
        first = (time.time() // PERIOD + 1) * PERIOD
        sleep_until(first + 0.1)
        assert (
            subprocess.run([CURL, "-fsS", "-m", "5", ping], capture_output=True, check=False).returncode == 0
        )
        tick = first + PERIOD  # the next tick: watched
        sleep_until(tick - 1.0)
        assert server.proc is not None
        server.proc.send_signal(signal.SIGSTOP)
        try:
            sleep_until(tick + 0.1)
            queued = subprocess.Popen([CURL, "-fsS", "-m", "20", ping], stdout=subprocess.DEVNULL)
            sleep_until(tick + 3.5)  # grace ended at tick + 1, inside the stall
        finally:
            server.proc.send_signal(signal.SIGCONT)
        assert queued.wait(timeout=20) == 0
        time.sleep(1.0)  # the evaluator and the liveness loop catch up

        status, alerts = curl_api(server.base, "GET", f"/api/v3/checks/{check['uuid']}/alerts/", KEY)
        assert status == 200
        assert [a["kind"] for a in alerts["alerts"]] == [], (alerts, server.describe())
        with closing(sqlite3.connect(db)) as conn:
            runs = [r[0] for r in conn.execute("SELECT scheduled FROM runs ORDER BY scheduled")]
            marks = conn.execute("SELECT outcome FROM tick_marks").fetchall()
            outages = conn.execute("SELECT count(*) FROM outages").fetchone()[0]
        assert len(runs) == 2, runs  # stored and bound to its tick
        assert marks == [("unknown",)], (marks, server.describe())
        assert outages == 1
