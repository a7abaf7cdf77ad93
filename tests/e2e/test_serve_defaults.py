"""``monitor serve`` defaults a new user meets."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support.process import MonitorProcess, checkout_env, curl_api
from tests.support.receivers import HttpReceiver, free_port

pytestmark = pytest.mark.e2e

KEY = "serve-defaults-key-0123456789"


def test_ping_urls_follow_the_served_port_without_base_url(tmp_path: Path) -> None:
    port = free_port()
    env = checkout_env(MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'm.db'}", MONITOR_API_KEY=KEY)
    with MonitorProcess.serve(port, env=env, cwd=tmp_path, logs=tmp_path, name="serve") as server:
        server.wait_healthy()
        status, check = curl_api(server.base, "POST", "/api/v3/checks/", KEY, {"name": "x"})
        assert status == 201
        assert check["ping_url"] == f"http://127.0.0.1:{port}/ping/{check['uuid']}"


@pytest.mark.slow
def test_a_restart_longer_than_the_outage_gap_pages_once_not_a_storm(
    tmp_path: Path, http_receiver: HttpReceiver
) -> None:
    """QA: a 30 s restart sent false missed alerts. Now: unknown ticks and one monitor_unavailable."""
    receiver = http_receiver
    port = free_port()
    env = checkout_env(
        MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'm.db'}",
        MONITOR_API_KEY=KEY,
        MONITOR_LEASE_TTL="1",
        MONITOR_EVALUATE_INTERVAL="0.2",
        MONITOR_NOTIFY_BACKOFF="0.2",
    )
    server = MonitorProcess.serve(port, env=env, cwd=tmp_path, logs=tmp_path, name="first").start()
    try:
        server.wait_healthy()
        _, channel = curl_api(server.base, "POST", "/api/v3/channels/", KEY, {"url": receiver.url})
        _, check = curl_api(
            server.base,
            "POST",
            "/api/v3/checks/",
            KEY,
            {
                "name": "beat",
                "schedule": "*/2 * * * * *",
                "dialect": "seconds",
                "grace": 1,
                "channels": channel["id"],
            },
        )
        curl_api(server.base, "GET", f"/ping/{check['uuid']}", None)
        # the monitor must have recorded itself alive before it stops (a process that lived a few
        # hundred milliseconds may be stopped before its first liveness renewal commits)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not _liveness_rows(tmp_path / "m.db"):
            time.sleep(0.1)
        assert _liveness_rows(tmp_path / "m.db"), "the first server never renewed its liveness"
        time.sleep(0.5)
        assert server.terminate() == 0
    finally:
        server.close()
    time.sleep(6)  # the monitor is down for 3 × the 2 s outage gap
    restarted = datetime.now(UTC)
    with MonitorProcess.serve(port, env=env, cwd=tmp_path, logs=tmp_path, name="second") as again:
        again.wait_healthy()
        # the project alert and a missed alert for a tick after the restart may be delivered in
        # either order (separate notifications); wait for the project alert itself
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not any(
            r.json["kind"] == "monitor_unavailable" for r in receiver.requests
        ):
            time.sleep(0.1)
        time.sleep(1.5)
        _, body = curl_api(again.base, "GET", f"/api/v3/checks/{check['uuid']}/alerts/", KEY)
    kinds = [r.json["kind"] for r in receiver.requests]
    assert kinds.count("monitor_unavailable") == 1, kinds
    for alert in body["alerts"]:
        # any missed alert is for a tick whose grace ended after the restart, never inside the outage
        scheduled = datetime.fromisoformat(alert["scheduled"].replace("Z", "+00:00"))
        assert scheduled.timestamp() + 1 > restarted.timestamp() - 0.5, alert


def _liveness_rows(database: Path) -> int:
    """Liveness rows in the SQLite file (0 while the table or file does not exist yet)."""
    try:
        with contextlib.closing(sqlite3.connect(database, timeout=5)) as conn:
            return int(conn.execute("SELECT count(*) FROM liveness").fetchone()[0])
    except sqlite3.Error:
        return 0
