"""``dialect: "oncalendar"`` end to end over the in-process app (SQLite and PostgreSQL), with the
clock injected: creation and validation, ticks, binding, a missed alert, explain over HTTP; and
``monitor cron explain --dialect oncalendar``."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from monitor.services.evaluator import evaluate_due
from tests.conftest import Api
from tests.support.app import create_check, get_check, list_of
from tests.support.process import MonitorProcess, checkout_env, curl_api, curl_ping, wait_until
from tests.support.receivers import free_port


async def test_an_oncalendar_check_is_created_and_read_back(api: Api) -> None:
    check = await create_check(
        api, name="nightly", schedule="Mon..Fri 03:00\nSat 12:00", dialect="OnCalendar", tz="Europe/Berlin"
    )
    assert (check["kind"], check["dialect"], check["tz"]) == ("cron", "oncalendar", "Europe/Berlin")
    assert check["schedule"] == "Mon..Fri 03:00\nSat 12:00"
    assert (await get_check(api, check["uuid"]))["dialect"] == "oncalendar"


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        pytest.param({"schedule": "Mon 25:00"}, "schedule: Bad hour", id="bad-hour"),
        pytest.param({"schedule": "*-02-30"}, "schedule: never fires", id="never-fires"),
        pytest.param(
            {"schedule": "2020-01-01"}, "schedule: the expression never fires after", id="in-the-past"
        ),
        pytest.param({"schedule": "daily\nMon 99:00"}, "schedule: line 2 ('Mon 99:00'): Bad hour", id="line"),
        pytest.param({"schedule": "daily", "tz": "Mars/Olympus"}, "tz: ", id="bad-tz"),
    ],
)
async def test_bad_oncalendar_schedules_are_refused_naming_the_field(
    api: Api, fields: dict[str, str], error: str
) -> None:
    r = await api.client.post(
        "/api/v3/checks/", json={"name": "x", "dialect": "oncalendar", **fields}, headers=api.headers
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith(error)


async def test_a_missed_oncalendar_tick_raises_missed_and_the_next_run_recovers(api: Api) -> None:
    # 03:00 Berlin is 01:00Z in summer; grace 10 minutes
    api.clock.set(datetime(2026, 7, 20, 0, 59, 30, tzinfo=UTC))
    check = await create_check(
        api, name="backup", schedule="*-*-* 03:00", dialect="oncalendar", tz="Europe/Berlin", grace=600
    )
    uuid = check["uuid"]
    assert (await api.client.get(f"/ping/{uuid}")).status_code == 200  # early, for 01:00Z
    got = await get_check(api, uuid)
    assert (got["status"], got["next_ping"]) == ("up", "2026-07-20T01:00:00Z")
    [run] = await list_of(api, uuid, "runs")
    assert run["scheduled"] == "2026-07-20T01:00:00Z"
    # the next day's tick passes without a ping: missed once its grace is over
    api.clock.set(datetime(2026, 7, 21, 1, 10, 1, tzinfo=UTC))
    await evaluate_due(api.engine, api.clock.now(), settings=api.settings)
    assert (await get_check(api, uuid))["status"] == "down"
    alerts = await list_of(api, uuid, "alerts")
    assert [(a["kind"], a["scheduled"]) for a in alerts] == [("missed", "2026-07-21T01:00:00Z")]
    api.clock.set(datetime(2026, 7, 22, 1, 0, 5, tzinfo=UTC))
    assert (await api.client.get(f"/ping/{uuid}")).status_code == 200
    assert (await get_check(api, uuid))["status"] == "up"
    kinds = [a["kind"] for a in await list_of(api, uuid, "alerts")]
    assert sorted(kinds) == ["missed", "recovered"]


async def test_a_scheduled_ping_binds_to_the_latest_oncalendar_tick(api: Api) -> None:
    api.clock.set(datetime(2026, 7, 20, 12, 0, tzinfo=UTC))
    check = await create_check(api, name="q", schedule="*:0/15", dialect="oncalendar", grace=60)
    r = await api.client.get(f"/ping/{check['uuid']}", params={"scheduled": "2026-07-20T11:52:00Z"})
    assert r.status_code == 200
    [run] = await list_of(api, check["uuid"], "runs")
    assert run["scheduled"] == "2026-07-20T11:45:00Z"


async def test_explain_over_http_for_oncalendar(api: Api) -> None:
    r = await api.client.get(
        "/api/v3/cron/explain",
        params={
            "schedule": "*-*-* 02:30",
            "dialect": "oncalendar",
            "tz": "Europe/Berlin",
            "count": "2",
            "after": "2026-03-28T12:00:00Z",
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["dialect"] == "oncalendar"
    assert [f["name"] for f in body["fields"]] == ["day of week", "date", "time", "time zone"]
    assert [n["utc"] for n in body["next"]] == ["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]
    assert any("systemd skips" in w for w in body["warnings"])
    bad = await api.client.get(
        "/api/v3/cron/explain", params={"schedule": "Mon 25:00", "dialect": "oncalendar"}
    )
    assert (bad.status_code, bad.json()["error"]) == (400, "schedule: Bad hour")


def test_cli_explains_oncalendar() -> None:
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "monitor", "cron", "explain", "Sat,Sun 10:00", "--dialect", "oncalendar"),
            *("--tz", "Asia/Tokyo", "--count", "2", "--after", "2026-07-01T00:00:00Z"),
        ],
        capture_output=True,
        env=checkout_env(),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    document = json.loads(proc.stdout)
    assert document["description"] == "At 10:00 on Saturday to Sunday (Asia/Tokyo)"
    assert [n["local"] for n in document["next"]] == [
        "2026-07-04T10:00:00+09:00",
        "2026-07-05T10:00:00+09:00",
    ]


def test_a_real_server_raises_missed_for_an_oncalendar_check(tmp_path: Path) -> None:
    """``monitor serve`` on SQLite, real time: an every-2-seconds calendar event, pinged once."""
    port = free_port()
    key = "oncal-e2e-key-0123456789abcdef"
    env = checkout_env(
        MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'monitor.db'}",
        MONITOR_API_KEY=key,
        MONITOR_BASE_URL=f"http://127.0.0.1:{port}",
        MONITOR_EVALUATE_INTERVAL="0.2",
    )
    process = MonitorProcess.serve(port, env=env, cwd=tmp_path, logs=tmp_path, name="serve")
    try:
        process.start()
        process.wait_healthy()
        status, check = curl_api(
            process.base,
            "POST",
            "/api/v3/checks/",
            key,
            {"name": "tick", "schedule": "*:*:0/2", "dialect": "oncalendar", "grace": 1},
        )
        assert status == 201, check
        assert curl_ping(check["ping_url"]) == "OK"

        def missed() -> list[Any] | None:
            _, body = curl_api(process.base, "GET", f"/api/v3/checks/{check['uuid']}/alerts/", key)
            found = [a for a in body["alerts"] if a["kind"] == "missed"]
            return found or None

        [alert] = wait_until(missed, timeout=15, what="a missed alert")
        scheduled = datetime.fromisoformat(alert["scheduled"].replace("Z", "+00:00"))
        assert scheduled.second % 2 == 0
        _, got = curl_api(process.base, "GET", f"/api/v3/checks/{check['uuid']}", key)
        assert got["status"] == "down"
    finally:
        process.close()
