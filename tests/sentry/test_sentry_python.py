"""The real Python ``sentry-sdk`` reporting cron jobs to a live ``monitor serve``.

Only the DSN changes: ``capture_checkin`` with and without ``monitor_config``, the ``@monitor``
decorator and the ``monitor`` context manager, over brotli and gzip envelopes (the SDK picks
brotli when the module is installed, as it is here), with an error event in the same stream.
"""

from __future__ import annotations

import uuid

import pytest

from tests.sentry.conftest import Monitor, run_python


@pytest.mark.parametrize("compression", ["br", "gzip"])
def test_sentry_sdk_check_ins_become_checks_and_paired_runs(monitor: Monitor, compression: str) -> None:
    prefix = f"py-{compression}-{uuid.uuid4().hex[:6]}"
    monitor.api("POST", "checks/", {"name": "precreated", "slug": f"{prefix}-precreated", "timeout": 3600})
    stderr = run_python("sdk_python.py", monitor.dsn, prefix, compression)
    assert "Unexpected status code" not in stderr, stderr  # the SDK got a 2xx for every envelope

    configured = monitor.check(f"{prefix}-configured")
    assert configured is not None
    assert (configured["kind"], configured["schedule"], configured["dialect"], configured["tz"]) == (
        "cron",
        "*/5 * * * *",
        "unix",
        "Europe/Berlin",
    )
    assert (configured["grace"], configured["max_runtime"]) == (120, 600)
    assert (configured["failure_threshold"], configured["recovery_threshold"]) == (2, 3)
    assert set(configured["tags"].split()) == {"env:production", "owner:team:ops"}
    runs = monitor.listing(configured, "runs")
    assert len(runs) == 1 and runs[0]["started"] and runs[0]["finished"]
    pings = monitor.listing(configured, "pings")
    assert [p["type"] for p in pings] == ["start", "success"]
    assert pings[0]["rid"] == pings[1]["rid"] == runs[0]["rid"]
    assert pings[1]["duration"] == 0.3
    assert pings[0]["ua"].startswith("sentry.python/")

    precreated = monitor.check(f"{prefix}-precreated")
    assert precreated is not None and [p["type"] for p in monitor.listing(precreated, "pings")] == ["success"]

    for slug in ("decorated", "context"):
        check = monitor.check(f"{prefix}-{slug}")
        assert check is not None and (check["kind"], check["timeout"], check["grace"]) == (
            "simple",
            3600,
            300,
        )
        runs = monitor.listing(check, "runs")
        assert len(runs) == 1 and runs[0]["finished"] is not None and runs[0]["outcome"] == "on_time", runs
        assert [p["type"] for p in monitor.listing(check, "pings")] == ["start", "success"]

    broken = monitor.check(f"{prefix}-broken")
    assert broken is not None
    assert [r["outcome"] for r in monitor.listing(broken, "runs")] == ["failed"]
    assert [a["kind"] for a in monitor.listing(broken, "alerts")] == ["failed"]
    assert broken["status"] == "down"


def test_sentry_sdk_environment_reports_to_its_own_check(monitor: Monitor) -> None:
    prefix = f"py-env-{uuid.uuid4().hex[:6]}"
    monitor.api("POST", "checks/", {"name": "precreated", "slug": f"{prefix}-precreated", "timeout": 3600})
    stderr = run_python("sdk_python.py", monitor.dsn, prefix, "gzip", "staging")
    assert "Unexpected status code" not in stderr, stderr
    staging = monitor.check(f"{prefix}-configured--staging")
    assert staging is not None and set(staging["tags"].split()) == {"env:staging", "owner:team:ops"}
    assert staging["name"] == f"{prefix}-configured (staging)" and staging["schedule"] == "*/5 * * * *"
    assert monitor.check(f"{prefix}-configured") is None  # production has not reported
    # without a config, a new environment of a known monitor takes the monitor's settings
    precreated = monitor.check(f"{prefix}-precreated--staging")
    assert precreated is not None and (precreated["timeout"], precreated["tags"]) == (3600, "env:staging")
    assert [p["type"] for p in monitor.listing(precreated, "pings")] == ["success"]
