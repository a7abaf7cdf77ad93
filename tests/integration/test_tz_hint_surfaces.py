"""The time-zone hint on every surface: the check's API answer (``hints``), its dashboard page and
``monitor cron explain --check``; SQLite and PostgreSQL, pings through the real ASGI app with the
clock driven.

A Berlin check at 03:00 whose job keeps UTC: every run pings at 03:00 UTC, 05:00 in Berlin in
July, two hours after its tick.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

from sqlalchemy import update

from monitor.storage import tables as t
from tests.conftest import Api
from tests.support.app import create_check, get_check
from tests.support.process import checkout_env
from tests.web.test_dashboard import log_in, make_user

HINT = "runs arrive 2 h after their ticks: is tz right? the job may run in UTC"
FIRST_RUN = datetime(2026, 7, 18, 3, 0, tzinfo=UTC)  # 05:00 CEST, the 03:00 CEST tick + 2 h


async def berlin_check_pinged_in_utc(api: Api, days: int, slug: str = "backup") -> dict[str, object]:
    check = await create_check(
        api, name="backup", slug=slug, schedule="0 3 * * *", tz="Europe/Berlin", grace=10800
    )
    for day in range(days):
        api.clock.set(FIRST_RUN + timedelta(days=day))
        assert (await api.client.get(f"/ping/{check['uuid']}")).text == "OK"
    return check


async def test_check_answer_lists_the_hint_after_five_runs_and_not_before(api: Api) -> None:
    check = await berlin_check_pinged_in_utc(api, days=4)
    assert (await get_check(api, str(check["uuid"])))["hints"] == []
    api.clock.set(FIRST_RUN + timedelta(days=4))
    assert (await api.client.get(f"/ping/{check['uuid']}")).text == "OK"
    assert (await get_check(api, str(check["uuid"])))["hints"] == [HINT]
    listed = (await api.client.get("/api/v3/checks/", headers=api.headers)).json()["checks"]
    assert [c["hints"] for c in listed] == [[HINT]]
    runs = (await api.client.get(f"/api/v3/checks/{check['uuid']}/runs/", headers=api.headers)).json()["runs"]
    assert len(runs) == 5 and all(r["scheduled"].endswith("T01:00:00Z") for r in runs)  # 03:00 CEST ticks


async def test_a_run_on_time_clears_the_hint_and_simple_checks_have_none(api: Api) -> None:
    check = await berlin_check_pinged_in_utc(api, days=5)
    api.clock.set(datetime(2026, 7, 23, 1, 0, 30, tzinfo=UTC))  # tz fixed: 03:00:30 CEST
    assert (await api.client.get(f"/ping/{check['uuid']}")).text == "OK"
    assert (await get_check(api, str(check["uuid"])))["hints"] == []
    simple = await create_check(api, name="simple", timeout=3600)
    assert (await get_check(api, str(simple["uuid"])))["hints"] == []


async def test_dashboard_check_page_shows_the_hint(api: Api) -> None:
    check = await berlin_check_pinged_in_utc(api, days=5)
    await make_user(api)
    assert (await log_in(api)).status_code == 303
    page = await api.client.get(f"/checks/{check['uuid']}")
    assert page.status_code == 200
    assert 'class="hints"' in page.text and HINT in page.text
    async with api.engine.begin() as conn:  # the hint goes with the runs
        await conn.execute(t.runs.delete())
    page = await api.client.get(f"/checks/{check['uuid']}")
    assert page.status_code == 200 and 'class="hints"' not in page.text


def explain_check(database_url: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", "cron", "explain", *args],
        capture_output=True,
        env=checkout_env(MONITOR_DATABASE_URL=database_url),
        timeout=60,
        check=False,
    )


async def test_cron_explain_check_prints_the_explanation_and_the_hint(api: Api, database_url: str) -> None:
    check = await berlin_check_pinged_in_utc(api, days=5, slug="nightly-backup")
    for reference in (str(check["uuid"]), str(check["uuid"]).upper(), "nightly-backup"):
        proc = explain_check(
            database_url, "--check", reference, "--count", "2", "--after", "2026-07-23T00:00:00Z"
        )
        assert proc.returncode == 0, proc.stderr.decode()
        document = json.loads(proc.stdout)
        assert document["hints"] == [HINT]
        assert document["check"] == {"uuid": check["uuid"], "name": "backup", "slug": "nightly-backup"}
        assert (document["schedule"], document["tz"], document["dialect"]) == (
            "0 3 * * *",
            "Europe/Berlin",
            "unix",
        )
        assert document["next"] == [
            {"utc": "2026-07-23T01:00:00Z", "local": "2026-07-23T03:00:00+02:00"},
            {"utc": "2026-07-24T01:00:00Z", "local": "2026-07-24T03:00:00+02:00"},
        ]
        assert {"fields", "description", "warnings"} <= set(document)


async def test_cron_explain_check_errors_name_the_field(api: Api, database_url: str) -> None:
    simple = await create_check(api, name="simple", slug="hourly", timeout=3600)
    missing = explain_check(database_url, "--check", "no-such-check")
    assert missing.returncode == 2 and json.loads(missing.stdout) == {
        "error": "check: no check has the uuid or slug 'no-such-check'"
    }
    not_cron = explain_check(database_url, "--check", str(simple["uuid"]))
    assert not_cron.returncode == 2
    assert json.loads(not_cron.stdout)["error"].startswith("check: ")
    assert "simple check" in json.loads(not_cron.stdout)["error"]
    both = explain_check(database_url, "0 3 * * *", "--check", "hourly")
    neither = explain_check(database_url)
    for proc in (both, neither):
        assert proc.returncode == 2 and json.loads(proc.stdout)["error"].startswith("expression: ")
        assert b"Traceback" not in proc.stderr
    async with api.engine.begin() as conn:  # a check with no runs has no hint, but explains
        await conn.execute(update(t.checks).values(slug=None))
    cron = await create_check(api, name="c", schedule="*/5 * * * *")
    fresh = explain_check(database_url, "--check", str(cron["uuid"]))
    assert fresh.returncode == 0 and json.loads(fresh.stdout)["hints"] == []
