"""APScheduler 3 cron triggers become checks with the schedule APScheduler really fires.

Each trigger is translated field by field and the translation is checked against the real
monitor's own schedule engine (``GET /api/v3/cron/explain``): the next 40 fire times APScheduler
computes must be exactly the next 40 ticks of the check. Triggers with no exact cron form get a
warning and a simple check; checks are upserted when the scheduler starts, before any fire, with
a grace derived from the period.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from monitor_client import Client
from monitor_client import apscheduler as monitor_apscheduler

from tests.clients.conftest import Monitor
from tests.support.process import wait_until

pytestmark = pytest.mark.e2e

AFTER = datetime(2026, 5, 4, 10, 0, 7, tzinfo=UTC)  # no DST change in the weeks after

TRIGGERS: list[tuple[str, dict[str, Any]]] = [
    ("every-5-seconds", {"second": "*/5"}),
    ("seconds-list", {"second": "10,40", "minute": "*/2"}),
    ("weekdays-by-name", {"day_of_week": "mon-fri", "hour": 9, "minute": 30}),
    ("weekend-names", {"day_of_week": "sat,sun", "hour": "8-18/5"}),
    ("weekday-numbers", {"day_of_week": "0,2,4", "hour": 1}),  # Monday = 0 in APScheduler
    ("every-other-weekday", {"day_of_week": "*/2", "hour": 2}),
    ("sunday", {"day_of_week": "sun", "hour": 3}),
    ("last-day", {"day": "last", "hour": 23, "minute": 55}),
    ("first-monday", {"day": "1st mon", "hour": 6}),
    ("last-friday", {"day": "last fri", "hour": 17}),
    ("month-names", {"month": "jan,may-jul,dec", "day": "1-3", "hour": 4}),
    ("day-ranges", {"day": "5-20/5", "hour": "*/6", "minute": 15}),
    ("hour-minute-steps", {"hour": "9-17/2", "minute": "0,30"}),
]


def _explain(monitor: Monitor, fields: dict[str, str], count: int) -> list[datetime]:
    response = httpx.get(
        f"{monitor.base}/api/v3/cron/explain",
        params={
            "schedule": fields["schedule"],
            "dialect": fields["dialect"],
            "tz": fields["tz"],
            "count": str(count),
            "after": AFTER.isoformat().replace("+00:00", "Z"),
        },
        timeout=10,
    )
    assert response.status_code == 200, (fields, response.text)
    return [datetime.fromisoformat(t["utc"].replace("Z", "+00:00")) for t in response.json()["next"]]


def _fires(trigger: CronTrigger, count: int) -> list[datetime]:
    times: list[datetime] = []
    previous, now = None, AFTER + timedelta(microseconds=1)
    while len(times) < count:
        fire = trigger.get_next_fire_time(previous, now)
        assert fire is not None
        times.append(fire.astimezone(UTC))
        previous, now = fire, fire + timedelta(microseconds=1)
    return times


@pytest.mark.parametrize(("name", "spec"), TRIGGERS, ids=[t[0] for t in TRIGGERS])
def test_a_cron_trigger_becomes_a_check_with_the_same_fire_times(
    monitor: Monitor, name: str, spec: dict[str, Any]
) -> None:
    trigger = CronTrigger(timezone="Europe/Berlin", **spec)
    fields = monitor_apscheduler.translate(trigger)
    assert fields["tz"] == "Europe/Berlin"
    assert _explain(monitor, fields, 40) == _fires(trigger, 40), fields


def test_from_crontab_is_translated_as_apscheduler_3_reads_it(monitor: Monitor) -> None:
    # APScheduler 3 numbers weekdays from Monday = 0 even in from_crontab: "1-5" fires Tuesday to
    # Saturday; the check follows what it fires, not what the text means to cron
    trigger = CronTrigger.from_crontab("0 9 * * 1-5", timezone="UTC")
    fields = monitor_apscheduler.translate(trigger)
    assert fields == {"schedule": "0 9 * * 2-6", "dialect": "unix", "tz": "UTC"}
    assert _explain(monitor, fields, 20) == _fires(trigger, 20)


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"day": "1-7", "day_of_week": "sat"}, "APScheduler fires when both match"),
        ({"week": "10"}, "week=10 has no cron field"),
        ({"year": "2027-2030"}, "year=2027-2030 has no cron field"),
    ],
)
def test_an_untranslatable_trigger_warns_and_gets_a_simple_check(
    spec: dict[str, Any], reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    trigger = CronTrigger(timezone="UTC", **spec)
    with caplog.at_level(logging.WARNING, logger="monitor_client"):
        fields = monitor_apscheduler.cron_fields(trigger, job="odd-job")
    assert set(fields) == {"timeout", "grace"} and "schedule" not in fields
    gaps = monitor_apscheduler.fire_gaps(trigger, datetime.now(UTC))
    assert fields["timeout"] == int(max(gaps))  # the longest gap: late at worst, never falsely missed
    assert any("odd-job" in r.message and reason in r.message for r in caplog.records), caplog.text


def test_checks_are_upserted_when_the_scheduler_starts_not_at_first_fire(monitor: Monitor) -> None:
    suffix = uuid.uuid4().hex[:6]
    weekday, quick, later = f"aps_weekday_{suffix}", f"aps_quick_{suffix}", f"aps_later_{suffix}"
    scheduler = BackgroundScheduler(timezone="UTC")
    client = Client(monitor.base, api_key=monitor.api_key, timeout=5)
    scheduler.add_job(print, CronTrigger(day_of_week="mon-fri", hour=9, timezone="Europe/Berlin"), id=weekday)
    monitor_apscheduler.enable(scheduler, client)
    # every 5 s, but paused: it must not fire before its check exists
    scheduler.add_job(print, CronTrigger(second="*/5", timezone="UTC"), id=quick, next_run_time=None)
    scheduler.start()
    try:
        scheduler.add_job(print, CronTrigger.from_crontab("30 2 1 * *", timezone="UTC"), id=later)
        assert monitor_apscheduler.sender.drain(20)
        checks = {
            slug: monitor.api("GET", f"checks/?slug={slug}")["checks"] for slug in (weekday, quick, later)
        }
    finally:
        scheduler.shutdown(wait=False)
        client.close()
    got = {slug: found[0] for slug, found in checks.items() if found}
    assert set(got) == {weekday, quick, later}, checks
    assert (got[weekday]["schedule"], got[weekday]["tz"], got[weekday]["grace"]) == (
        "0 9 * * 1-5",
        "Europe/Berlin",
        3600,
    )
    assert (got[quick]["schedule"], got[quick]["dialect"], got[quick]["grace"]) == (
        "*/5 * * * * *",
        "seconds",
        30,
    )
    assert got[later]["schedule"] == "30 2 1 * *"
    assert all(c["n_pings"] == 0 for c in got.values())  # none has fired


def test_enable_takes_a_grace(monitor: Monitor) -> None:
    slug = f"aps_grace_{uuid.uuid4().hex[:6]}"
    scheduler = BackgroundScheduler(timezone="UTC")
    client = Client(monitor.base, api_key=monitor.api_key, timeout=5)
    scheduler.add_job(print, CronTrigger(minute="*/15", timezone="UTC"), id=slug)
    monitor_apscheduler.enable(scheduler, client, grace=77)
    try:
        wait_until(lambda: monitor.api("GET", f"checks/?slug={slug}")["checks"], timeout=20, what="the check")
    finally:
        client.close()
    (check,) = monitor.api("GET", f"checks/?slug={slug}")["checks"]
    assert (check["schedule"], check["grace"]) == ("*/15 * * * *", 77)
