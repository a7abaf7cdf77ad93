"""The Celery beat and APScheduler 3.x integrations, driven by the real libraries against a real
``monitor serve`` process.

Celery: a real worker (``celery.contrib.testing.worker.start_worker``, solo pool) and a real
beat ``Service`` in threads of this process, talking through kombu's in-memory transport (no
broker server to run; the signals, the beat scheduler and the worker's request handling are
Celery's own). APScheduler: a real ``BackgroundScheduler`` with cron triggers firing every second.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from celery import Celery
from celery.beat import ScheduleEntry, Service
from celery.contrib.testing.worker import start_worker
from celery.schedules import crontab
from monitor_client import Client
from monitor_client import apscheduler as monitor_apscheduler
from monitor_client import celery as monitor_celery

from tests.clients.conftest import Monitor
from tests.support.process import wait_until

pytestmark = pytest.mark.e2e


def _client(monitor: Monitor) -> Client:
    return Client(monitor.base, api_key=monitor.api_key, ping_key=monitor.ping_key, timeout=5)


def _kinds(pings: list[dict[str, Any]]) -> list[str]:
    return [p["type"] for p in pings]


def _every_second_check(monitor: Monitor, slug: str) -> str:
    check = monitor.create_check(name=slug, slug=slug, schedule="* * * * * *", dialect="seconds", grace=30)
    return str(check["uuid"])


def test_celery_beat_runs_are_reported_with_their_tick_and_task_id(monitor: Monitor, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    good, bad = f"billing-{suffix}", f"export-{suffix}"
    good_uuid, bad_uuid = _every_second_check(monitor, good), _every_second_check(monitor, bad)

    app = Celery(f"monitor_it_{suffix}", broker="memory://", backend="cache+memory://")
    app.conf.update(timezone="UTC", broker_connection_retry_on_startup=False, worker_hijack_root_logger=False)
    task_ids: list[str] = []

    @app.task(name=f"it.bill.{suffix}", bind=True)
    def bill(self: Any) -> int:
        task_ids.append(self.request.id)
        return 1

    @app.task(name=f"it.export.{suffix}")
    def export() -> None:
        raise RuntimeError("export failed: disk full")

    app.conf.beat_schedule = {
        # the entry name becomes the slug (slugified) unless `checks` maps it
        f"Billing {suffix}": {"task": bill.name, "schedule": timedelta(seconds=1)},
        "broken export": {"task": export.name, "schedule": timedelta(seconds=1)},
    }
    client = _client(monitor)
    monitor_celery.enable(app, client, checks={"broken export": bad}, upsert=False)

    beat = Service(app, max_interval=0.2, schedule_filename=str(tmp_path / "beat-schedule"))
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        thread = threading.Thread(target=beat.start, daemon=True)
        thread.start()
        try:
            wait_until(
                lambda: (
                    _kinds(monitor.pings(good_uuid)).count("success") >= 2
                    and _kinds(monitor.pings(bad_uuid)).count("fail") >= 2
                ),
                timeout=20,
                what="two reported runs of each beat entry",
            )
        finally:
            beat.stop()
            thread.join(10)
    client.close()

    pings = monitor.pings(good_uuid)
    starts = [p for p in pings if p["type"] == "start"]
    successes = [p for p in pings if p["type"] == "success"]
    assert {p["rid"] for p in successes} <= set(task_ids)  # run id = Celery task id
    assert {p["rid"] for p in successes} <= {p["rid"] for p in starts}
    ticks = [p["scheduled"] for p in starts]
    assert len(set(ticks)) == len(ticks) and ticks == sorted(ticks)  # one tick per beat run

    failures = [p for p in monitor.pings(bad_uuid) if p["type"] == "fail"]
    body = monitor.body(bad_uuid, failures[0]["n"]).decode()
    assert body.startswith("RuntimeError: export failed: disk full") and "Traceback" in body


def test_celery_beat_entry_tick_is_the_crontab_time_not_the_wake_up() -> None:
    app = Celery("monitor_tick", broker="memory://")
    app.conf.timezone = "Europe/Berlin"
    last_run = datetime(2026, 7, 19, 0, 30, tzinfo=UTC)  # 02:30 Berlin
    entry = ScheduleEntry(
        name="nightly billing",
        task="bill",
        schedule=crontab(minute="0", hour="3"),
        last_run_at=last_run,
        app=app,
    )
    assert monitor_celery.entry_tick(entry) == datetime(2026, 7, 19, 1, 0, tzinfo=UTC)  # 03:00 Berlin
    assert monitor_celery.check_fields(entry, "Europe/Berlin") == {
        "schedule": "0 3 * * *",
        "tz": "Europe/Berlin",
        "grace": 3600,  # half a day, at most an hour
    }
    every = ScheduleEntry(name="x", task="x", schedule=timedelta(minutes=5), last_run_at=last_run, app=app)
    assert monitor_celery.entry_tick(every) == last_run + timedelta(minutes=5)
    assert monitor_celery.check_fields(every, "UTC") == {"timeout": 300, "grace": 150}
    assert monitor_celery.check_fields(every, "UTC", grace=45) == {"timeout": 300, "grace": 45}
    minutely = ScheduleEntry(name="m", task="m", schedule=crontab(), last_run_at=last_run, app=app)
    assert monitor_celery.check_fields(minutely, "UTC")["grace"] == 30  # not the server's hour
    assert monitor_celery.slugify("Nightly Billing (EU)") == "nightly-billing-eu"


def test_celery_interval_ticks_are_whole_seconds_never_after_the_send(tmp_path: Path) -> None:
    app = Celery(f"monitor_interval_{uuid.uuid4().hex[:6]}", broker="memory://")
    app.conf.update(timezone="UTC", broker_connection_retry_on_startup=False)
    app.conf.beat_schedule = {"every second": {"task": "x", "schedule": timedelta(seconds=1)}}
    monitor_celery.enable(app, Client("http://127.0.0.1:9", retries=0, timeout=1), upsert=False)
    sent: list[tuple[float, str]] = []
    send_task = app.send_task

    def recording_send_task(*args: Any, **kwargs: Any) -> Any:
        sent.append((time.time(), (kwargs.get("headers") or {})[monitor_celery.HEADER_SCHEDULED]))
        return send_task(*args, **kwargs)

    app.send_task = recording_send_task  # type: ignore[method-assign]
    beat = Service(app, max_interval=0.2, schedule_filename=str(tmp_path / "beat-schedule"))
    thread = threading.Thread(target=beat.start, daemon=True)
    thread.start()
    try:
        wait_until(lambda: len(sent) >= 3, timeout=20, what="three beat sends")
    finally:
        beat.stop()
        thread.join(10)
    ticks = [datetime.fromisoformat(tick.replace("Z", "+00:00")) for _, tick in sent]
    assert all(tick.microsecond == 0 for tick in ticks), sent  # as the monitor shows ticks
    assert all(tick.timestamp() <= at for tick, (at, _) in zip(ticks, sent, strict=True)), sent
    assert len(set(ticks)) == len(ticks)
    # a sub-second interval keeps its precision: truncating would merge consecutive ticks
    last = datetime(2026, 7, 19, 0, 30, 0, 250_000, tzinfo=UTC)
    fast = ScheduleEntry(name="f", task="f", schedule=timedelta(milliseconds=500), last_run_at=last, app=app)
    assert monitor_celery.entry_tick(fast) == last + timedelta(milliseconds=500)
    slow = ScheduleEntry(name="s", task="s", schedule=timedelta(seconds=90), last_run_at=last, app=app)
    assert monitor_celery.entry_tick(slow) == datetime(2026, 7, 19, 0, 31, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("fields", "expression"),
    [
        # Celery ANDs a restricted day of month with a restricted day of week; cron ORs them
        ({"minute": 0, "hour": 0, "day_of_week": "mon", "day_of_month": "1-7"}, "0 0 * * 1#1"),
        (
            {"minute": 30, "hour": 6, "day_of_week": "mon,fri", "day_of_month": "8-21"},
            "30 6 * * 1#2,1#3,5#2,5#3",
        ),
        ({"minute": 0, "hour": 12, "day_of_week": "*", "day_of_month": "1-7"}, "0 12 1-7 * *"),
        ({"minute": 0, "hour": 12, "day_of_week": "sat", "day_of_month": "*/2"}, "0 12 */2 * sat"),
        ({"minute": 5, "hour": 3, "day_of_week": "tue", "day_of_month": "1-31"}, "5 3 * * tue"),
        ({"minute": 5, "hour": 3, "day_of_week": "0-6", "day_of_month": "15"}, "5 3 15 * *"),
    ],
)
def test_celery_crontab_becomes_a_cron_check_firing_at_celerys_own_times(
    monitor: Monitor, fields: dict[str, Any], expression: str
) -> None:
    app = Celery("monitor_and_days", broker="memory://")
    app.conf.timezone = "Europe/Berlin"
    schedule = crontab(**fields, app=app)
    entry = ScheduleEntry(name="days", task="x", schedule=schedule, app=app)
    check = monitor_celery.check_fields(entry, "Europe/Berlin")
    assert check["schedule"] == expression and check["tz"] == "Europe/Berlin"
    after = datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)
    celery_times = [t.astimezone(UTC) for t in monitor_celery.fire_times(schedule, after, count=12)]
    explained = monitor.api(
        "GET",
        f"cron/explain?schedule={quote(expression)}&tz=Europe/Berlin&count=12&after=2026-01-01T00:00:30Z",
    )
    monitor_times = [datetime.fromisoformat(t["utc"].replace("Z", "+00:00")) for t in explained["next"]]
    assert monitor_times == celery_times


def test_celery_crontab_that_cron_cannot_express_becomes_a_simple_check(
    monitor: Monitor, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Mondays among the 1st-10th: no cron expression fires only then, so late at worst, never wrong
    app = Celery("monitor_early_mondays", broker="memory://")
    app.conf.timezone = "UTC"
    schedule = crontab(minute=0, hour=9, day_of_week="mon", day_of_month="1-10", app=app)
    entry = ScheduleEntry(name="early-mondays", task="x", schedule=schedule, app=app)
    with pytest.raises(monitor_celery.Untranslatable):
        monitor_celery.cron_expression(schedule)
    with caplog.at_level("WARNING", logger="monitor_client"):
        check = monitor_celery.check_fields(entry, "UTC")
    assert "cannot be expressed as a cron schedule" in caplog.text
    times = monitor_celery.fire_times(schedule, datetime.now(UTC), count=12)
    assert all(t.day <= 10 and t.weekday() == 0 for t in times)  # Celery's own times
    longest = max((b - a).total_seconds() for a, b in itertools.pairwise(times))
    assert check == {"timeout": int(longest), "grace": 3600}
    slug = f"early-mondays-{uuid.uuid4().hex[:6]}"
    client = _client(monitor)
    try:
        assert client.upsert_check(slug, **check) is not None
    finally:
        client.close()
    [stored] = monitor.api("GET", f"checks/?slug={slug}")["checks"]
    assert (stored["kind"], stored["timeout"]) == ("simple", int(longest))
    # Friday the 13th can be 14 months apart: the period is capped at the monitor's year
    friday = crontab(minute=0, hour=9, day_of_week="fri", day_of_month="13", app=app)
    unlucky = ScheduleEntry(name="unlucky", task="x", schedule=friday, app=app)
    assert monitor_celery.check_fields(unlucky, "UTC")["timeout"] == monitor_celery.MAX_TIMEOUT


def test_celery_beat_start_upserts_a_check_per_entry(monitor: Monitor, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    app = Celery(f"monitor_upsert_{suffix}", broker="memory://")
    app.conf.update(timezone="Europe/Berlin")
    app.conf.beat_schedule = {
        f"nightly-{suffix}": {"task": "x", "schedule": crontab(minute="15", hour="2")},
        f"often-{suffix}": {"task": "y", "schedule": timedelta(minutes=10)},
    }
    client = _client(monitor)
    monitor_celery.enable(app, client)
    beat = Service(app, max_interval=0.1, schedule_filename=str(tmp_path / "beat-schedule"))
    thread = threading.Thread(target=beat.start, daemon=True)
    thread.start()
    try:
        wait_until(lambda: client.get_check(f"often-{suffix}"), timeout=10, what="the upserted checks")
    finally:
        beat.stop()
        thread.join(10)
        client.close()
    nightly = monitor.api("GET", f"checks/?slug=nightly-{suffix}")["checks"][0]
    often = monitor.api("GET", f"checks/?slug=often-{suffix}")["checks"][0]
    assert (nightly["kind"], nightly["schedule"], nightly["tz"]) == ("cron", "15 2 * * *", "Europe/Berlin")
    assert (often["kind"], often["timeout"]) == ("simple", 600)


def test_apscheduler_listener_reports_runs_with_the_scheduled_fire_time(monitor: Monitor) -> None:
    suffix = uuid.uuid4().hex[:6]
    good, bad, slow = f"aps_good_{suffix}", f"aps_bad_{suffix}", f"aps_slow_{suffix}"
    uuids = {slug: _every_second_check(monitor, slug) for slug in (good, bad, slow)}

    def job_ok() -> None:
        time.sleep(0.05)

    def job_fail() -> None:
        raise ValueError("no invoices today")

    release = threading.Event()

    def job_slow() -> None:
        release.wait(2.5)

    scheduler = BackgroundScheduler(timezone="UTC")
    client = _client(monitor)
    monitor_apscheduler.enable(scheduler, client, upsert=False)
    every_second = {"second": "*", "timezone": "UTC"}
    scheduler.add_job(job_ok, CronTrigger(**every_second), id=good)
    scheduler.add_job(job_fail, CronTrigger(**every_second), id=bad)
    scheduler.add_job(job_slow, CronTrigger(**every_second), id=slow, max_instances=1)
    scheduler.start()
    try:
        wait_until(
            lambda: (
                _kinds(monitor.pings(uuids[good])).count("success") >= 2
                and _kinds(monitor.pings(uuids[bad])).count("fail") >= 2
                and "skip" in _kinds(monitor.pings(uuids[slow]))
            ),
            timeout=20,
            what="runs, failures and a skipped fire time",
        )
    finally:
        release.set()
        scheduler.shutdown(wait=True)
        client.close()

    for slug in (good, bad):
        pings = [p for p in monitor.pings(uuids[slug]) if p["type"] != "log"]
        finishes = [p for p in pings if p["type"] in ("success", "fail")]
        for finish in finishes:
            fire_time = datetime.fromisoformat(finish["scheduled"].replace("Z", "+00:00"))
            # the run id is derived from the fire time the server bound the ping to: the ping
            # carried the scheduled fire time exactly
            assert finish["rid"] == monitor_apscheduler.run_id(slug, fire_time)
            [start] = [p for p in pings if p["type"] == "start" and p["rid"] == finish["rid"]]
            assert start["scheduled"] == finish["scheduled"]
    fail = next(p for p in monitor.pings(uuids[bad]) if p["type"] == "fail")
    body = monitor.body(uuids[bad], fail["n"]).decode()
    assert body.startswith("ValueError: no invoices today") and "job_fail" in body
    runs = monitor.runs(uuids[good])
    assert runs and all(r["outcome"] == "on_time" for r in runs if r["finished"])


def test_apscheduler_trigger_fields() -> None:
    assert monitor_apscheduler.cron_fields(IntervalTrigger(minutes=15)) == {"timeout": 900, "grace": 450}
    berlin = CronTrigger(hour="3", minute="30", timezone="Europe/Berlin")
    assert monitor_apscheduler.cron_fields(berlin) == {
        "schedule": "30 3 * * *",
        "dialect": "unix",
        "tz": "Europe/Berlin",
        "grace": 3600,
    }
    monday = CronTrigger(day_of_week="mon", hour="1", timezone="UTC")
    assert monitor_apscheduler.cron_fields(monday, grace=120) == {
        "schedule": "0 1 * * 1",
        "dialect": "unix",
        "tz": "UTC",
        "grace": 120,
    }
