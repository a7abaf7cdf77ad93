"""With a real server: a missed tick is judged and alerted just after its deadline, not at the
evaluator's next beat.

``monitor serve`` on SQLite sweeps every 5 s (``MONITOR_EVALUATE_INTERVAL=5``, TTL 10 s) and
renews its liveness row as rarely. Two checks on a ``*/5`` seconds schedule, pinged right after
a tick, miss the next one with 1 s and 3 s of grace: two deadlines 2 s apart, both inside one
interval. Each ``missed`` alert is created between ``EARLY_MARGIN`` and 1 s after its own
deadline (by the beat alone it would come up to 5 s later, and by the liveness loop's renewal
up to 5 s more: the early sweep renews the process's liveness first).
"""

from __future__ import annotations

import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest

from monitor.workers.evaluator import EARLY_MARGIN
from tests.support.process import CURL, MonitorProcess, checkout_env, curl_api, sleep_until
from tests.support.receivers import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # ~25 s of real ticks: over the default suite's budget

KEY = "early-sweep-key-0123456789"
PERIOD = 5


def test_missed_ticks_are_alerted_just_after_their_deadlines(tmp_path: Path) -> None:
    env = checkout_env(
        MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'm.db'}",
        MONITOR_EVALUATE_INTERVAL="5",
        MONITOR_LEASE_TTL="10",
        MONITOR_API_KEY=KEY,
    )
    with MonitorProcess.serve(free_port(), env=env, cwd=tmp_path, logs=tmp_path, name="serve") as server:
        server.wait_healthy()
        graces = {"one": 1, "three": 3}
        uuids = {}
        for name, grace in graces.items():
            body = {
                "name": name,
                "schedule": f"*/{PERIOD} * * * * *",
                "dialect": "seconds",
                "grace": grace,
                "early_tolerance": 0,
            }
            status, check = curl_api(server.base, "POST", "/api/v3/checks/", KEY, body)
            assert status == 201, check
            uuids[name] = check["uuid"]
        tick = (time.time() // PERIOD + 1) * PERIOD
        sleep_until(tick + 0.1)
        for uuid in uuids.values():
            ping = subprocess.run([CURL, "-fsS", "-m", "5", f"{server.base}/ping/{uuid}"], check=False)
            assert ping.returncode == 0
        missed = tick + PERIOD
        sleep_until(missed + max(graces.values()) + 1.5)
        for name, uuid in uuids.items():
            status, alerts = curl_api(server.base, "GET", f"/api/v3/checks/{uuid}/alerts/", KEY)
            assert status == 200
            kinds = [a["kind"] for a in alerts["alerts"]]
            assert kinds == ["missed"], (name, alerts, server.describe())
            created = datetime.fromisoformat(alerts["alerts"][0]["created"].replace("Z", "+00:00"))
            after = created.timestamp() - (missed + graces[name])
            assert EARLY_MARGIN <= after <= 1.0, (name, after, server.describe())


def test_deadlines_a_quarter_second_apart_across_beats_are_each_alerted_just_after(tmp_path: Path) -> None:
    """Twelve simple checks pinged 0.25 s apart: their deadlines cover 3 s, across beats of a
    2 s interval, with early sweeps at least 0.2 s apart. A deadline swept on the beat, or just
    after a liveness renewal, must not be deferred to a later beat by the self-outage guard, nor
    stop the early sweeps of the deadlines after it while it stays due."""
    env = checkout_env(
        MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'm.db'}",
        MONITOR_EVALUATE_INTERVAL="2",
        MONITOR_LEASE_TTL="10",
        MONITOR_API_KEY=KEY,
    )
    timeout, grace = 3, 1
    with MonitorProcess.serve(free_port(), env=env, cwd=tmp_path, logs=tmp_path, name="serve") as server:
        server.wait_healthy()
        uuids = []
        for index in range(12):
            body = {"name": f"s{index}", "timeout": timeout, "grace": grace}
            status, check = curl_api(server.base, "POST", "/api/v3/checks/", KEY, body)
            assert status == 201, check
            uuids.append(check["uuid"])
        start = time.time() + 0.2
        for index, uuid in enumerate(uuids):
            sleep_until(start + 0.25 * index)
            ping = subprocess.run([CURL, "-fsS", "-m", "5", f"{server.base}/ping/{uuid}"], check=False)
            assert ping.returncode == 0
        sleep_until(time.time() + timeout + grace + 1.5)
        lateness = {}
        for uuid in uuids:
            status, check = curl_api(server.base, "GET", f"/api/v3/checks/{uuid}", KEY)
            assert status == 200, check
            deadline = datetime.fromisoformat(check["last_ping"].replace("Z", "+00:00")).timestamp()
            deadline += timeout + grace
            status, alerts = curl_api(server.base, "GET", f"/api/v3/checks/{uuid}/alerts/", KEY)
            assert status == 200
            assert [a["kind"] for a in alerts["alerts"]] == ["missed"], (check["name"], alerts)
            created = datetime.fromisoformat(alerts["alerts"][0]["created"].replace("Z", "+00:00"))
            lateness[check["name"]] = round(created.timestamp() - deadline, 3)
        assert all(0 < late <= 1.0 for late in lateness.values()), (lateness, server.describe())
