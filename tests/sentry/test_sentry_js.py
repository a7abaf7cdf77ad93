"""The real ``@sentry/node`` SDK (from the npm registry) reporting to a live ``monitor serve``.

``tests/sentry/js/package.json`` pins the SDK; ``npm install`` runs here when its
``node_modules`` is missing (``.ci/run`` installs it beforehand). Only the DSN changes.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

from tests.sentry.conftest import Monitor

JS = Path(__file__).resolve().parent / "js"


def node_sdk() -> Path:
    """The test-local folder with ``@sentry/node`` installed."""
    if not (JS / "node_modules" / "@sentry" / "node").is_dir():
        proc = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund"],
            cwd=JS,
            capture_output=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr.decode()
    return JS


def test_sentry_node_with_monitor_and_capture_check_in(monitor: Monitor) -> None:
    prefix = f"js-{uuid.uuid4().hex[:6]}"
    proc = subprocess.run(
        ["node", "checkins.mjs", monitor.dsn, prefix],
        cwd=node_sdk(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode() + proc.stdout.decode()
    output = proc.stdout.decode()
    sent = json.loads(next(line[7:] for line in output.splitlines() if line.startswith("RESULT ")))
    logs = output + proc.stderr.decode()
    assert "Sending checkin" in logs and "responded with status code" not in logs, logs  # all 2xx

    captured = monitor.check(f"{prefix}-captured")
    assert captured is not None
    assert (captured["kind"], captured["schedule"], captured["dialect"], captured["tz"]) == (
        "cron",
        "15 4 * * *",
        "unix",
        "America/New_York",
    )
    assert (captured["grace"], captured["max_runtime"]) == (180, 1200)
    assert (captured["failure_threshold"], captured["recovery_threshold"]) == (2, 2)
    assert captured["tags"] == "env:production"
    runs = monitor.listing(captured, "runs")
    assert [r["rid"] for r in runs] == [str(uuid.UUID(sent["started"]))]
    assert runs[0]["started"] and runs[0]["finished"]
    pings = monitor.listing(captured, "pings")
    assert [p["type"] for p in pings] == ["start", "success"] and pings[1]["duration"] == 0.2

    wrapped = monitor.check(f"{prefix}-wrapped")
    assert wrapped is not None and (wrapped["kind"], wrapped["timeout"], wrapped["grace"]) == (
        "simple",
        1800,
        60,
    )
    runs = monitor.listing(wrapped, "runs")
    assert len(runs) == 1 and runs[0]["finished"] is not None and runs[0]["outcome"] == "on_time"
    assert monitor.listing(wrapped, "pings")[1]["duration"] > 0

    throws = monitor.check(f"{prefix}-throws")
    assert throws is not None
    assert [r["outcome"] for r in monitor.listing(throws, "runs")] == ["failed"]
    assert [a["kind"] for a in monitor.listing(throws, "alerts")] == ["failed"]
