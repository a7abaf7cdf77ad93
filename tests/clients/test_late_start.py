"""Start pings that go out late: they carry ``started=`` (docs/design.md §5).

The bundled scheduler's reporter queues a start while the monitor is unreachable (or while the
scheduler itself is stopped before its start goes out); delivered seconds later it carries
``started=`` with the instant the run was spawned, and the monitor stores that as the run's
start, not the arrival, so the run's finish (with ``finished=``) keeps its real duration.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from monitor_client import _common

from monitor.domain.jobs import parse_job
from monitor.scheduler.reporter import HttpReporter
from tests.clients.conftest import Monitor
from tests.support.process import wait_until
from tests.support.tcp import Gate


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.e2e
def test_a_start_queued_behind_an_outage_carries_the_time_its_run_started(monitor: Monitor) -> None:
    gate = Gate(int(monitor.base.rsplit(":", 1)[1]))
    slug = f"late-start-{uuid.uuid4().hex[:8]}"
    job = parse_job({"name": slug, "schedule": "*/2 * * * * *", "dialect": "seconds", "command": "true"}, 0)
    reporter = HttpReporter(f"http://127.0.0.1:{gate.port}", monitor.api_key, [job])
    rid = str(uuid.uuid4())
    try:
        wait_until(
            lambda: bool(monitor.api("GET", f"checks/?slug={slug}")["checks"]), timeout=20, what="the check"
        )
        [check] = monitor.api("GET", f"checks/?slug={slug}")["checks"]
        gate.down()  # the monitor is unreachable when the run starts and ends
        time.sleep(0.2)
        tick = datetime.now(UTC).replace(microsecond=0)
        tick -= timedelta(seconds=tick.second % 2)
        began = time.time()
        reporter.start(job, tick, 1, rid, began=began)
        time.sleep(0.5)
        ended = time.time()
        reporter.finish(job, tick, 1, rid, 0, b"done", ended=ended)
        time.sleep(3.0)  # both wait in the reporter's queue
        gate.up()

        def finished() -> dict[str, Any] | None:
            runs = [r for r in monitor.runs(check["uuid"]) if r["rid"] == rid and r["finished"]]
            return runs[0] if runs else None

        run = wait_until(finished, timeout=30, what="the run's finish")
    finally:
        reporter.close(5.0)
        gate.down()
    [start] = [p for p in monitor.pings(check["uuid"]) if p["type"] == "start"]
    assert parse(start["date"]).timestamp() - began >= 2.5  # it really was delivered late
    assert abs(parse(run["started"]).timestamp() - began) < 0.01, (run, began)
    assert abs(parse(run["finished"]).timestamp() - ended) < 0.01, (run, ended)
    assert 0.4 < run["duration"] < 0.7, run


def test_a_start_sent_at_once_carries_no_started() -> None:
    now = time.time()
    assert _common.late_start(now - 0.2, now) is None
    assert _common.late_start(now - 5.0, now) == now - 5.0
    assert _common.late_start(None, now) is None
    settings = _common.Settings.resolve("http://127.0.0.1:9", None, None, 1.0, 0, 0.1)

    def plan(kind: str, exit_status: int | None = None, **fields: Any) -> _common.Plan:
        return _common.ping_plan(
            settings,
            str(uuid.uuid4()),
            kind,
            scheduled=None,
            rid=None,
            body=None,
            exit_status=exit_status,
            headers=None,
            create=False,
            body_limit=100,
            **fields,
        )

    started = plan("start", started=datetime(2026, 7, 19, 3, 0, 5, 123456, tzinfo=UTC))
    assert started.params["started"] == "2026-07-19T03:00:05.123Z"
    assert "started" not in plan("start").params
    for kind, status in (("success", None), ("fail", None), ("log", None), ("success", 3)):
        with pytest.raises(_common.PlanError, match=r"^started: only for a start ping"):
            plan(kind, status, started=time.time())
    with pytest.raises(_common.PlanError, match=r"^started: .*is not a finite number"):
        plan("start", started=float("nan"))


@pytest.mark.e2e
def test_monitor_runs_start_held_up_a_second_or_more_carries_the_commands_start(monitor: Monitor) -> None:
    # monitor-run's start ping as its thread sends it; the thread got to run 3 s after the
    # command started (the process was stopped meanwhile), so the start says when that was
    from monitor_client.run_command import LightClient, _StartPing

    check = monitor.create_check(schedule="* * * * *", grace=60)
    rid = str(uuid.uuid4())
    client = LightClient(monitor.base, timeout=10)
    start = _StartPing(client, check["uuid"], rid=rid, scheduled=None, create=False)
    start.began -= 3.0
    start.thread.start()
    start.thread.join(15)
    assert start.result is not None and start.result.ok, start.result
    [run] = monitor.runs(check["uuid"])
    assert abs(parse(run["started"]).timestamp() - start.began) < 0.01, (run, start.began)
    on_time = _StartPing(client, check["uuid"], rid=str(uuid.uuid4()), scheduled=None, create=False)
    on_time.thread.start()
    on_time.thread.join(15)
    [ping] = [p for p in monitor.pings(check["uuid"]) if p["type"] == "start"][1:]
    run = next(r for r in monitor.runs(check["uuid"]) if r["rid"] != rid)
    assert run["started"] == ping["date"]  # sent at once: stored at its arrival
