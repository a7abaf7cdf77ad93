"""Celery Beat auto-instrumentation (``CeleryIntegration(monitor_beat_tasks=True)``) with a real
Celery worker and beat on this machine's RabbitMQ, reporting to a live ``monitor serve``.

Each beat entry becomes a check with the entry's schedule (a crontab as a ``unix`` cron check,
an interval as a simple one, in the app's time zone); beat's ``in_progress`` and the worker's
``ok``/``error`` pair into one run by the check-in id; a failing task raises ``failed``; an entry
that stops firing (beat stopped) raises ``missed``. Sentry's SDK monitors no interval shorter
than a minute, so the ``missed`` test waits a minute of real time: it carries the slow marker.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.sentry.conftest import Monitor
from tests.support.process import wait_until

HERE = Path(__file__).resolve().parent
BROKER = os.environ.get("MONITOR_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")


def rabbitmq_up() -> None:
    host, port = "127.0.0.1", 5672
    try:
        socket.create_connection((host, port), timeout=3).close()
    except OSError as error:
        raise RuntimeError(f"RabbitMQ at {host}:{port} is required (.ci/run starts it): {error}") from error


@contextmanager
def celery(
    monitor: Monitor, prefix: str, tmp_path: Path, *roles: str
) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """Start ``celery worker`` and/or ``celery beat`` for ``celery_jobs``; stop them afterwards."""
    rabbitmq_up()
    env = {
        **os.environ,
        "SENTRY_DSN": monitor.dsn,
        "BROKER_URL": BROKER,
        "QUEUE": f"sentry-tests-{prefix}",
        "PREFIX": prefix,
        "PYTHONPATH": str(HERE),
    }
    commands = {
        "worker": ["worker", "-P", "solo", "-Q", env["QUEUE"], "--without-heartbeat", "--without-mingle"],
        "beat": [
            "beat",
            "-S",
            "celery_jobs:DueAtStart",
            "-s",
            str(tmp_path / "beat-schedule"),
            "--max-interval",
            "1",
        ],
    }
    started: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for role in roles:
            with (tmp_path / f"{role}.log").open("wb") as log:  # the process keeps its own copy
                started[role] = subprocess.Popen(
                    [sys.executable, "-m", "celery", "-A", "celery_jobs", *commands[role], "-l", "info"],
                    cwd=HERE,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
        yield started
    finally:
        for proc in started.values():
            stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def finished_run(monitor: Monitor, slug: str) -> dict[str, Any] | None:
    check = monitor.check(slug)
    if check is None:
        return None
    runs = [r for r in monitor.listing(check, "runs") if r["finished"] is not None]
    return runs[0] if runs else None


def test_celery_beat_entries_become_checks_with_paired_runs(monitor: Monitor, tmp_path: Path) -> None:
    prefix = f"beat-{uuid.uuid4().hex[:6]}"
    with celery(monitor, prefix, tmp_path, "worker", "beat"):
        for name in ("report", "sync", "export"):
            wait_until(
                lambda n=name: finished_run(monitor, f"{prefix}-{n}"), timeout=40, what=f"{name}'s run"
            )
    report = monitor.check(f"{prefix}-report")
    sync = monitor.check(f"{prefix}-sync")
    export = monitor.check(f"{prefix}-export")
    assert report is not None and sync is not None and export is not None
    assert (report["kind"], report["schedule"], report["dialect"], report["tz"]) == (
        "cron",
        "* * * * *",
        "unix",
        "Europe/Berlin",
    )
    assert (export["schedule"], sync["kind"], sync["timeout"]) == ("*/1 * * * *", "simple", 60)
    for check in (report, sync, export):
        runs = monitor.listing(check, "runs")
        first = runs[0]
        pings = [p for p in monitor.listing(check, "pings") if p["rid"] == first["rid"]]
        assert [p["type"] for p in pings][:2] in (["start", "success"], ["start", "fail"]), pings
        assert pings[1]["duration"] is not None and pings[1]["duration"] >= 0
        assert pings[0]["ua"].startswith("sentry.python/")
    assert monitor.listing(report, "runs")[0]["outcome"] == "on_time"
    assert monitor.listing(export, "runs")[0]["outcome"] == "failed"
    assert "failed" in [a["kind"] for a in monitor.listing(export, "alerts")]


@pytest.mark.slow
def test_celery_beat_entry_that_stops_firing_is_missed(monitor: Monitor, tmp_path: Path) -> None:
    prefix = f"beat-missed-{uuid.uuid4().hex[:6]}"
    with celery(monitor, prefix, tmp_path, "worker", "beat") as processes:
        for name in ("report", "sync"):
            wait_until(
                lambda n=name: finished_run(monitor, f"{prefix}-{n}"), timeout=40, what=f"{name}'s run"
            )
        stop(processes["beat"])  # the entries stop firing; the worker keeps running
    # beat sends no margin: the checks have Sentry's default (1 minute); shorten it to keep the test short
    for name in ("report", "sync"):
        check = monitor.check(f"{prefix}-{name}")
        assert check is not None
        monitor.api("POST", f"checks/{check['uuid']}", {"grace": 5})
    started = time.monotonic()
    for name in ("report", "sync"):
        check = monitor.check(f"{prefix}-{name}")
        assert check is not None
        wait_until(
            lambda c=check: "missed" in [a["kind"] for a in monitor.listing(c, "alerts")],
            timeout=150 - (time.monotonic() - started),
            interval=1,
            what=f"{name}'s missed alert",
        )
        assert monitor.check(f"{prefix}-{name}")["status"] == "down"  # type: ignore[index]
