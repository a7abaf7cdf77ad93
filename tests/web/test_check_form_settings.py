"""The check and channel forms over the in-process app (SQLite and PostgreSQL): every setting
the management API takes is settable, every field's error is shown at once next to its field,
and what the forms refuse or offer is what the API refuses or accepts."""

from __future__ import annotations

import html
import re
from typing import Any

from sqlalchemy import update

from monitor.domain.cron import zones
from monitor.storage import tables as t
from tests.conftest import Api
from tests.support.app import create_check
from tests.web.test_management import admin

MULTI_LINE = "Mon..Fri 09:00\nSat 10:30 Europe/Berlin"


def _form(api: Api, token: str, **fields: Any) -> dict[str, Any]:
    base = {
        "csrf_token": token,
        "project": str(api.project["id"]),
        "name": "backup",
        "kind": "cron",
        "schedule": "0 3 * * *",
        "tz": "UTC",
        "dialect": "unix",
        "grace": "600",
        "max_runtime": "1800",
        "failure_threshold": "1",
        "recovery_threshold": "1",
    }
    base.update(fields)
    return base


async def _channel(api: Api, name: str) -> str:
    made = await api.client.post(
        "/api/v3/channels/", json={"name": name, "url": "json://127.0.0.1:9/hook"}, headers=api.headers
    )
    assert made.status_code in (200, 201), made.text
    return str(made.json()["id"])


def _uuid_of(answer: Any) -> str:
    assert answer.status_code == 303, answer.text
    return str(answer.headers["location"].split("/checks/")[1].split("?")[0])


async def test_every_api_setting_of_a_check_round_trips_through_the_form(api: Api) -> None:
    token = await admin(api)
    pager = await _channel(api, "pager")
    boss = await _channel(api, "boss")
    settings = {
        "start_kw": "starting",
        "success_kw": "OK, done",
        "failure_kw": "ERROR,FATAL",
        "filter_subject": "on",
        "filter_body": "on",
        "filter_http_body": "on",
        "filter_default_fail": "on",
        "escalate_after": "900",
        "nag_interval": "3600",
        "min_runtime": "5",
        "early_tolerance": "30",
        "expected_runs": "2",
        "manual_resume": "on",
        "post_only": "on",
        "desc": "nightly dump",
        "slug": "backup",
        "tags": "db prod",
    }
    made = await api.client.post(
        "/checks/new",
        data={**_form(api, token, **settings), "channels": [pager], "escalate_to": [boss]},
        follow_redirects=False,
    )
    uuid = _uuid_of(made)
    body = (await api.client.get(f"/api/v3/checks/{uuid}", headers=api.headers)).json()
    assert (body["start_kw"], body["success_kw"], body["failure_kw"]) == (
        "starting",
        "OK, done",
        "ERROR,FATAL",
    )
    assert body["filter_subject"] and body["filter_body"] and body["filter_http_body"]
    assert body["filter_default_fail"]
    assert body["escalate_after"] == 900 and body["escalate_to"] == boss and body["channels"] == pager
    assert body["nag_interval"] == 3600 and body["min_runtime"] == 5 and body["expected_runs"] == 2
    assert body["manual_resume"] and body["methods"] == "POST" and body["slug"] == "backup"
    # the check page lists them
    shown = html.unescape((await api.client.get(f"/checks/{uuid}")).text)
    assert "after 15 min (900 s) down, to boss" in shown
    assert (
        "HTTP bodies, email subjects, email bodies:" in shown and "failure <code>ERROR,FATAL</code>" in shown
    )
    # the edit form shows each setting, and saving it unchanged changes nothing
    page = (await api.client.get(f"/checks/{uuid}/edit")).text
    for name in ("start_kw", "success_kw", "failure_kw", "escalate_after"):
        assert f'name="{name}" value="{html.escape(settings[name])}"' in page, name
    for name in ("filter_subject", "filter_body", "filter_http_body", "filter_default_fail"):
        assert re.search(rf'name="{name}" checked', page), name
    escalation = page.split('id="escalate_to"')[1].split("</select>")[0]
    assert f'<option value="{boss}" selected>' in escalation
    assert f'<option value="{pager}" >' in escalation
    saved = await api.client.post(
        f"/checks/{uuid}/edit",
        data={**_form(api, token, **settings), "channels": [pager], "escalate_to": [boss]},
        follow_redirects=False,
    )
    assert saved.status_code == 303, saved.text
    again = (await api.client.get(f"/api/v3/checks/{uuid}", headers=api.headers)).json()
    assert {k: v for k, v in again.items() if k != "next_ping"} == {
        k: v for k, v in body.items() if k != "next_ping"
    }
    # unticking the boxes and emptying the fields switches the filters and escalation off
    cleared = await api.client.post(
        f"/checks/{uuid}/edit",
        data=_form(api, token, start_kw="", success_kw="", failure_kw="", escalate_after=""),
        follow_redirects=False,
    )
    assert cleared.status_code == 303, cleared.text
    off = (await api.client.get(f"/api/v3/checks/{uuid}", headers=api.headers)).json()
    assert not (off["filter_subject"] or off["filter_body"] or off["filter_http_body"])
    assert off["escalate_after"] is None and off["escalate_to"] == "" and off["failure_kw"] == ""


async def test_escalation_without_a_channel_is_the_services_error_next_to_its_field(api: Api) -> None:
    token = await admin(api)
    refused = await api.client.post("/checks/new", data=_form(api, token, escalate_after="600"))
    assert refused.status_code == 400
    assert 'id="escalate_after-error">escalate_after: needs escalate_to' in refused.text
    assert 'name="escalate_after" value="600"' in refused.text


async def test_a_multi_line_oncalendar_schedule_round_trips_exactly(api: Api) -> None:
    token = await admin(api)
    # a browser posts a textarea's line breaks as CRLF
    made = await api.client.post(
        "/checks/new",
        data=_form(api, token, dialect="oncalendar", schedule=MULTI_LINE.replace("\n", "\r\n")),
        follow_redirects=False,
    )
    uuid = _uuid_of(made)
    body = (await api.client.get(f"/api/v3/checks/{uuid}", headers=api.headers)).json()
    assert body["schedule"] == MULTI_LINE and body["dialect"] == "oncalendar"
    page = (await api.client.get(f"/checks/{uuid}/edit")).text
    assert re.search(
        r'<textarea id="schedule" name="schedule"[^>]*>' + re.escape(MULTI_LINE) + "</textarea>", page
    )
    saved = await api.client.post(
        f"/checks/{uuid}/edit",
        data=_form(api, token, dialect="oncalendar", schedule=MULTI_LINE.replace("\n", "\r\n")),
        follow_redirects=False,
    )
    assert saved.status_code == 303, saved.text
    body = (await api.client.get(f"/api/v3/checks/{uuid}", headers=api.headers)).json()
    assert body["schedule"] == MULTI_LINE
    # the cron page explains it too, keeping its lines
    explained = await api.client.get("/cron", params={"schedule": MULTI_LINE, "dialect": "oncalendar"})
    assert explained.status_code == 200 and "Next ticks" in explained.text
    assert f">{MULTI_LINE}</textarea>" in explained.text


async def test_every_fields_error_is_shown_at_once_next_to_it_with_the_input_kept(api: Api) -> None:
    token = await admin(api)
    refused = await api.client.post(
        "/checks/new",
        data=_form(
            api, token, name="x" * 101, grace="abc", max_runtime="0", tz="Mars/Olympus", slug="Bad Slug"
        ),
    )
    assert refused.status_code == 400
    page = refused.text
    for field in ("name", "grace", "max_runtime", "tz", "slug"):
        assert re.search(rf'<p class="error field-error" id="{field}-error">{field}: ', page), field
        assert re.search(rf'id="{field}" name="{field}"[^>]*aria-invalid="true"', page), field
    assert "5 fields to fix" in page
    assert 'value="abc"' in page and 'value="Bad Slug"' in page and 'value="Mars/Olympus"' in page
    # a schedule error comes with the other fields' errors
    both = await api.client.post("/checks/new", data=_form(api, token, schedule="61 * * * *", grace="-1"))
    assert both.status_code == 400
    assert 'id="schedule-error">schedule: ' in both.text and 'id="grace-error">grace: ' in both.text
    assert ">61 * * * *</textarea>" in both.text


async def test_numbers_take_ascii_digits_only_as_the_api_does(api: Api) -> None:
    token = await admin(api)
    arabic = "\u0663\u0660\u0660"  # ٣٠٠: 300 in Arabic-Indic digits
    refused = await api.client.post(
        "/checks/new", data=_form(api, token, grace=arabic, expected_runs="\u0662")
    )
    assert refused.status_code == 400
    assert 'id="grace-error">grace: must be a whole number of seconds' in refused.text
    assert 'id="expected_runs-error">expected_runs: must be an integer' in refused.text
    assert f'value="{arabic}"' in refused.text
    api_answer = await api.client.post(
        "/api/v3/checks/", json={"name": "x", "grace": arabic}, headers=api.headers
    )
    assert api_answer.status_code == 400


async def test_the_zone_list_offers_exactly_real_zones_the_api_accepts(api: Api) -> None:
    await admin(api)
    for path in ("/checks/new", "/cron", "/account"):
        page = (await api.client.get(path)).text
        listed = page.split('<datalist id="zones">')[1].split("</datalist>")[0]
        offered = set(re.findall(r'<option value="([^"]+)">', listed))
        assert {"Europe/Berlin", "UTC", "America/New_York"} <= offered, path
        assert not offered & {"localtime", "Factory", "posixrules", "right/UTC", "posix/UTC"}, path
        assert offered <= zones.zone_names(), path


async def test_an_ntfy_topic_with_a_space_or_slash_is_refused_naming_the_field(api: Api) -> None:
    token = await admin(api)
    for topic in ("my alerts", "ops/alerts"):
        refused = await api.client.post(
            "/channels",
            data={
                "csrf_token": token,
                "project": str(api.project["id"]),
                "service": "ntfy",
                "ntfy_topic": topic,
                "name": "phone",
            },
        )
        assert refused.status_code == 400, topic
        assert 'id="ntfy_topic-error">ntfy_topic: may contain only letters' in refused.text
        assert 'id="channel-error">ntfy_topic: ' in refused.text
        assert f'value="{html.escape(topic)}"' in refused.text and 'value="phone"' in refused.text
    listed = (await api.client.get("/api/v3/channels/", headers=api.headers)).json()["channels"]
    assert [c for c in listed if c["name"] == "phone"] == []


async def test_resuming_a_check_that_is_not_paused_says_what_the_api_says(api: Api) -> None:
    token = await admin(api)
    check = await create_check(api, name="nightly", schedule="0 3 * * *")
    by_api = await api.client.post(f"/api/v3/checks/{check['uuid']}/resume", headers=api.headers)
    assert by_api.status_code == 409
    refused = await api.client.post(
        f"/checks/{check['uuid']}/resume", data={"csrf_token": token}, follow_redirects=False
    )
    assert refused.status_code == 409
    assert html.escape(by_api.json()["error"]) in refused.text
    assert "Check resumed" not in refused.text


async def test_the_check_page_shows_a_sentry_snippet_when_the_project_has_a_key(api: Api) -> None:
    await admin(api)
    check = await create_check(api, name="nightly", slug="nightly", schedule="0 3 * * *", grace=300)
    project = (await api.client.get("/api/v3/project", headers=api.headers)).json()
    assert project["sentry_dsn"]
    page = html.unescape((await api.client.get(f"/checks/{check['uuid']}")).text)
    assert "Sentry SDK" in page
    assert f'sentry_sdk.init(dsn="{project["sentry_dsn"]}")' in page
    assert '@monitor(monitor_slug="nightly", monitor_config=monitor_config)' in page
    assert '"value": "0 3 * * *"' in page and '"checkin_margin": 5' in page
    # a check without a slug: a check-in could not find it, so no snippet
    unslugged = await create_check(api, name="adhoc", schedule="0 4 * * *")
    assert "Sentry SDK" not in (await api.client.get(f"/checks/{unslugged['uuid']}")).text
    async with api.engine.begin() as conn:
        await conn.execute(
            update(t.projects).where(t.projects.c.id == api.project["id"]).values(sentry_key=None)
        )
    without = (await api.client.get(f"/checks/{check['uuid']}")).text
    assert "Sentry SDK" not in without and "sentry_sdk" not in without


async def test_the_account_zone_is_judged_as_a_check_zone_and_empty_means_utc(api: Api) -> None:
    token = await admin(api)
    for typed, problem in (
        ("x" * 5000, "tz: must be at most 64 characters, got 5000"),
        ("Mars/Olympus", "tz: unknown time zone 'Mars/Olympus'"),
        ("+02:00", "is a fixed UTC offset"),
    ):
        refused = await api.client.post("/account", data={"csrf_token": token, "tz": typed})
        assert refused.status_code == 400, typed[:20]
        assert problem in html.unescape(refused.text), typed[:20]
        assert 'aria-invalid="true" aria-describedby="account-error"' in refused.text
        assert f'value="{html.escape(typed)}"' in refused.text  # what was typed is kept
        check_form = await api.client.post("/checks/new", data=_form(api, token, tz=typed))
        assert check_form.status_code == 400 and problem in html.unescape(check_form.text), typed[:20]

    saved = await api.client.post("/account", data={"csrf_token": token, "tz": "Asia/Kolkata"})
    assert saved.status_code == 200 and "Time zone saved." in saved.text
    assert 'value="Asia/Kolkata"' in saved.text
    cleared = await api.client.post("/account", data={"csrf_token": token, "tz": "  "})
    assert cleared.status_code == 200
    assert (
        "Time zone saved: the default, UTC (an empty field means UTC)." in cleared.text
        and 'id="tz" name="tz" value="UTC"' in cleared.text
    )


async def test_negative_numbers_are_told_their_bound_and_blank_oncalendar_lines_are_spacing(api: Api) -> None:
    token = await admin(api)
    refused = await api.client.post(
        "/checks/new",
        data=_form(api, token, expected_runs="-1", failure_threshold="-1", nag_interval="-1"),
    )
    assert refused.status_code == 400
    text = html.unescape(refused.text)
    assert "expected_runs: must be between 1 and 1000, got -1" in text
    assert "failure_threshold: must be between 1 and 1000, got -1" in text
    assert "nag_interval: must be between 0 and 31536000, got -1" in text
    assert "must be an integer" not in text
    made = await api.client.post(
        "/checks/new",
        data=_form(
            api,
            token,
            dialect="oncalendar",
            schedule="Mon..Fri 09:00\r\n\r\n  \r\nSat 10:30 Europe/Berlin\r\n",
        ),
        follow_redirects=False,
    )
    uuid = _uuid_of(made)
    body = (await api.client.get(f"/api/v3/checks/{uuid}", headers=api.headers)).json()
    assert body["schedule"] == MULTI_LINE
