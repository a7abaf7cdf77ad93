"""Managing checks, channels and users through the dashboard's forms, over the in-process app
(SQLite and PostgreSQL, injected clock): what the forms write goes through the API's services,
every write needs the session's CSRF token, and the list is paged in triage order."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from monitor.domain.errors import ValidationError
from monitor.domain.messages import Message
from monitor.notify.apprise import AppriseNotifier
from monitor.services import users
from monitor.services.evaluator import evaluate_due
from monitor.storage import tables as t
from monitor.web import channel_forms, reasons
from tests.conftest import Api
from tests.support.app import create_check
from tests.support.fixtures import http_receiver
from tests.support.receivers import HttpReceiver
from tests.web.test_dashboard import PASSWORD, csrf_of, log_in

__all__ = ["http_receiver"]  # a fixture, imported for pytest

NOW = datetime(2026, 7, 18, 3, 0, tzinfo=UTC)
ROW = re.compile(r'<tr data-uuid="([0-9a-f-]+)" data-status="([a-z]+)">')


async def admin(api: Api, email: str = "admin@example.com") -> str:
    async with api.engine.begin() as conn:
        await users.create_user(conn, email, PASSWORD, [int(api.project["id"])], api.clock.now(), admin=True)
    assert (await log_in(api, email=email)).status_code == 303
    return csrf_of((await api.client.get("/")).text)


async def test_every_write_needs_the_csrf_token(api: Api) -> None:
    token = await admin(api)
    check = await create_check(api, name="nightly", schedule="0 3 * * *")
    posts = [
        "/checks/new",
        f"/checks/{check['uuid']}/edit",
        f"/checks/{check['uuid']}/delete",
        f"/checks/{check['uuid']}/pause",
        f"/checks/{check['uuid']}/resume",
        "/channels",
        "/users",
        "/users/members",
        "/account",
    ]
    for path in posts:
        refused = await api.client.post(path, data={"name": "x"}, follow_redirects=False)
        assert refused.status_code == 403, path
        wrong = await api.client.post(path, data={"csrf_token": token + "x"}, follow_redirects=False)
        assert wrong.status_code == 403, path
    # a script's fetch may send the token as a header instead
    paused = await api.client.post(
        f"/checks/{check['uuid']}/pause", headers={"X-CSRF-Token": token}, follow_redirects=False
    )
    assert paused.status_code == 303
    # still there: nothing was written by the refused requests
    assert (await api.client.get(f"/api/v3/checks/{check['uuid']}", headers=api.headers)).status_code == 200


async def test_create_and_edit_a_check_through_the_form_as_the_api_would(api: Api) -> None:
    token = await admin(api)
    bad = await api.client.post(
        "/checks/new",
        data={
            "csrf_token": token,
            "project": str(api.project["id"]),
            "name": "backup",
            "kind": "cron",
            "schedule": "61 * * * *",
            "tz": "UTC",
            "grace": "60",
            "max_runtime": "600",
            "failure_threshold": "1",
            "recovery_threshold": "1",
        },
    )
    # the service's own error, naming the field; what was typed is kept
    assert bad.status_code == 400 and "schedule:" in bad.text and ">61 * * * *</textarea>" in bad.text
    made = await api.client.post(
        "/checks/new",
        data={
            "csrf_token": token,
            "project": str(api.project["id"]),
            "name": "backup",
            "tags": "db prod",
            "kind": "cron",
            "schedule": "0 3 * * *",
            "tz": "Europe/Berlin",
            "dialect": "unix",
            "grace": "600",
            "max_runtime": "1800",
            "failure_threshold": "2",
            "recovery_threshold": "1",
            "post_only": "on",
        },
        follow_redirects=False,
    )
    assert made.status_code == 303, made.text
    uuid = made.headers["location"].split("/checks/")[1].split("?")[0]
    body = (await api.client.get(f"/api/v3/checks/{uuid}", headers=api.headers)).json()
    assert body["schedule"] == "0 3 * * *" and body["tz"] == "Europe/Berlin" and body["grace"] == 600
    assert body["failure_threshold"] == 2 and body["methods"] == "POST" and body["tags"] == "db prod"
    edited = await api.client.post(
        f"/checks/{uuid}/edit",
        data={
            "csrf_token": token,
            "name": "backup",
            "kind": "simple",
            "timeout": "3600",
            "grace": "abc",
            "max_runtime": "1800",
            "failure_threshold": "1",
            "recovery_threshold": "1",
        },
    )
    assert edited.status_code == 400 and "grace:" in edited.text
    page = await api.client.get(f"/checks/{uuid}/edit")
    assert page.status_code == 200 and 'value="600"' in page.text


def _version_of(html: str) -> str:
    match = re.search(r'name="version" value="([0-9a-f]{64})"', html)
    assert match, "the edit form carries the version it was loaded with"
    return match.group(1)


async def test_a_second_tab_saving_a_stale_edit_form_is_refused_with_its_input_kept(api: Api) -> None:
    token = await admin(api)
    check = await create_check(api, name="nightly", schedule="0 3 * * *", grace=600)
    uuid = check["uuid"]
    first = _version_of((await api.client.get(f"/checks/{uuid}/edit")).text)
    second = _version_of((await api.client.get(f"/checks/{uuid}/edit")).text)
    assert first == second
    form = {
        "csrf_token": token,
        "kind": "cron",
        "schedule": "0 3 * * *",
        "tz": "UTC",
        "dialect": "unix",
        "max_runtime": "1800",
        "failure_threshold": "1",
        "recovery_threshold": "1",
    }
    saved = await api.client.post(
        f"/checks/{uuid}/edit",
        data={**form, "version": first, "name": "nightly", "grace": "120"},
        follow_redirects=False,
    )
    assert saved.status_code == 303, saved.text

    stale = await api.client.post(
        f"/checks/{uuid}/edit",
        data={**form, "version": second, "name": "nightly-renamed", "grace": "600"},
        follow_redirects=False,
    )
    assert stale.status_code == 409
    assert "this check was changed since you opened the form; review and save again" in stale.text
    assert 'value="nightly-renamed"' in stale.text  # what the second tab typed is kept
    body = (await api.client.get(f"/api/v3/checks/{uuid}", headers=api.headers)).json()
    assert body["grace"] == 120 and body["name"] == "nightly"  # the first save stands

    # the re-rendered form carries the version now stored: saving again after review goes through
    again = await api.client.post(
        f"/checks/{uuid}/edit",
        data={**form, "version": _version_of(stale.text), "name": "nightly-renamed", "grace": "120"},
        follow_redirects=False,
    )
    assert again.status_code == 303, again.text
    body = (await api.client.get(f"/api/v3/checks/{uuid}", headers=api.headers)).json()
    assert body["grace"] == 120 and body["name"] == "nightly-renamed"


async def test_delete_needs_the_typed_name(api: Api) -> None:
    token = await admin(api)
    check = await create_check(api, name="nightly", schedule="0 3 * * *")
    wrong = await api.client.post(
        f"/checks/{check['uuid']}/delete", data={"csrf_token": token, "confirm": "night"}
    )
    assert wrong.status_code == 400 and "type nightly" in wrong.text
    assert (await api.client.get(f"/api/v3/checks/{check['uuid']}", headers=api.headers)).status_code == 200
    done = await api.client.post(
        f"/checks/{check['uuid']}/delete",
        data={"csrf_token": token, "confirm": "nightly"},
        follow_redirects=False,
    )
    assert done.status_code == 303
    assert (await api.client.get(f"/api/v3/checks/{check['uuid']}", headers=api.headers)).status_code == 404


async def test_the_list_is_paged_down_first_with_every_check_once(api: Api) -> None:
    made = [await create_check(api, name=f"job-{i:03d}", schedule="* * * * *", grace=30) for i in range(60)]
    for check in made[:55]:
        assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200
    for check in made[50:53]:
        assert (await api.client.get(f"/ping/{check['uuid']}/fail")).status_code == 200
    await admin(api)
    seen: list[tuple[str, str]] = []
    first = await api.client.get("/")
    assert "(3 down) monitor" in first.text and "Showing 1–50 of 60" in first.text
    for page in (1, 2):
        html = (await api.client.get(f"/fragments/checks?page={page}")).text
        seen += ROW.findall(html)
    assert len(seen) == 60 and len({uuid for uuid, _ in seen}) == 60
    order = [status for _, status in seen]
    assert order == ["down"] * 3 + ["up"] * 52 + ["new"] * 5
    only_down = (await api.client.get("/fragments/checks?status=down")).text
    assert len(ROW.findall(only_down)) == 3 and "Showing 1–3 of 3 matching (60 in all)" in only_down
    tagged = (await api.client.get("/fragments/checks?q=JOB-05")).text
    assert len(ROW.findall(tagged)) == 10


async def test_channel_forms_build_apprise_urls_and_edit_routes_checks(api: Api) -> None:
    token = await admin(api)
    check = await create_check(api, name="nightly", schedule="0 3 * * *")
    added = await api.client.post(
        "/channels",
        data={
            "csrf_token": token,
            "project": str(api.project["id"]),
            "service": "telegram",
            "telegram_token": "123456:ABC-DEF",
            "telegram_chat": "-100123",
            "name": "tg",
        },
        follow_redirects=False,
    )
    assert added.status_code == 303, added.text
    listed = (await api.client.get("/api/v3/channels/", headers=api.headers)).json()["channels"]
    (channel,) = [c for c in listed if c["name"] == "tg"]
    assert channel["url"].startswith("tgram://")
    edit = await api.client.post(
        f"/channels/{channel['id']}/edit",
        data={
            "csrf_token": token,
            "name": "telegram-ops",
            "url": channel["url"],
            "checks": [str(await _id(api, check["uuid"]))],
        },
        follow_redirects=False,
    )
    assert edit.status_code == 303, edit.text
    body = (await api.client.get(f"/api/v3/checks/{check['uuid']}", headers=api.headers)).json()
    assert body["channels"] == channel["id"]
    async with api.engine.connect() as conn:
        stored = (
            await conn.execute(select(t.channels.c.url).where(t.channels.c.id == channel["id"]))
        ).scalar_one()
    assert stored == "tgram://123456:ABC-DEF/-100123"  # the masked URL sent back kept the secret


async def _id(api: Api, uuid: str) -> int:
    async with api.engine.connect() as conn:
        return int((await conn.execute(select(t.checks.c.id).where(t.checks.c.uuid == uuid))).scalar_one())


async def test_error_pages_show_a_signed_in_user_the_usual_navigation(api: Api) -> None:
    await admin(api)
    page = {"Accept": "text/html"}
    for path, status in (
        ("/no-such-page", 404),
        ("/checks/5f1c1f2e-0000-4000-8000-000000000001", 404),
        ("/checks/5f1c1f2e-0000-4000-8000-000000000001/edit", 404),
    ):
        answer = await api.client.get(path, headers=page)
        assert answer.status_code == status, (path, answer.text[:200])
        assert 'href="/account"' in answer.text and "Log out" in answer.text, path
        assert "admin@example.com" in answer.text and 'href="/users"' in answer.text, path
        assert 'href="/login"' not in answer.text, path
    api.client.cookies.clear()
    signed_out = await api.client.get("/no-such-page", headers=page)
    assert signed_out.status_code == 404 and 'href="/login"' in signed_out.text
    assert "Log out" not in signed_out.text


async def test_only_project_admins_manage_users_and_a_project_keeps_an_admin(api: Api) -> None:
    async with api.engine.begin() as conn:
        await users.create_user(
            conn, "plain@example.com", PASSWORD, [int(api.project["id"])], api.clock.now()
        )
    await log_in(api, email="plain@example.com")
    token = csrf_of((await api.client.get("/users")).text)
    refused = await api.client.post(
        "/users",
        data={
            "csrf_token": token,
            "email": "x@example.com",
            "password": PASSWORD,
            "projects": str(api.project["id"]),
        },
    )
    assert refused.status_code == 400 and "project: pick a project you administer" in refused.text
    await api.client.post("/logout", data={"csrf_token": token})
    token = await admin(api)
    members = await api.client.get("/users")
    assert "plain@example.com" in members.text
    async with api.engine.connect() as conn:
        me = await users.user_id_by_email(conn, "admin@example.com")
    last = await api.client.post(
        "/users/members",
        data={"csrf_token": token, "user": str(me), "project": str(api.project["id"]), "action": "member"},
    )
    assert last.status_code == 400 and "last admin" in last.text


async def test_an_unknown_page_is_an_html_page_with_navigation_but_the_api_stays_json(api: Api) -> None:
    page = await api.client.get("/no/such/page", headers={"Accept": "text/html"})
    assert page.status_code == 404 and "text/html" in page.headers["content-type"]
    assert "<h1>Not found</h1>" in page.text and 'href="/channels"' in page.text
    api_answer = await api.client.get("/api/v3/nothing", headers={"Accept": "text/html"})
    assert api_answer.status_code == 404 and api_answer.json() == {
        "error": "path: no such resource /api/v3/nothing"
    }


def test_reasons_say_why_in_words() -> None:
    zone = UTC
    down_missed = {
        "status": "down",
        "kind": "cron",
        "episode": {"kind": "missed", "count": 3, "first_tick": NOW - timedelta(hours=1)},
    }
    assert reasons.reason(down_missed, NOW, zone) == "missed 3 ticks since 02:00"
    failed = {"status": "down", "episode": {"kind": "failed", "count": 1}, "last_exit_status": 2}
    assert reasons.reason(failed, NOW, zone) == "failed: exit 2"
    timed = {"status": "down", "episode": {"kind": "timeout", "count": 1}, "max_runtime": 3600}
    assert reasons.reason(timed, NOW, zone) == "timed out after 1 h"
    grace = {"status": "grace", "pending_tick": NOW - timedelta(minutes=1), "grace": 300}
    assert reasons.reason(grace, NOW, zone) == "late: the 02:59 tick has no ping yet (down at 03:04)"
    assert reasons.reason({"status": "new"}, NOW, zone) == "waiting for the first ping"
    assert reasons.reason({"status": "paused"}, NOW, zone).startswith("paused")
    assert reasons.duration_words(5400) == "1 h 30 min"


async def test_an_episode_counts_bad_ticks_not_runs(api: Api) -> None:
    # one failed run, then 20 missed ticks: 21 bad ticks, not "21 runs in a row"
    await admin(api)
    api.clock.set(NOW)
    check = await create_check(api, name="every-minute", schedule="* * * * *", grace=10)
    assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200
    api.clock.set(NOW + timedelta(minutes=1, seconds=2))
    assert (await api.client.post(f"/ping/{check['uuid']}/2", content=b"disk full\n")).status_code == 200
    for minute in range(2, 22):
        api.clock.set(NOW + timedelta(minutes=minute, seconds=30))
        await evaluate_due(api.engine, api.clock.now(), settings=api.settings)
    page = html.unescape((await api.client.get(f"/checks/{check['uuid']}")).text)
    head = page[page.index('id="check-head"') : page.index('class="actions"')]
    assert "failed: exit 2 (21 bad ticks)" in head
    assert "failed</strong>, 21 bad ticks" in head
    assert "runs in a row" not in head and "× 21" not in head
    assert (
        reasons.reason({"status": "down", "episode": {"kind": "late", "count": 3}}, NOW, UTC)
        == "late (3 bad ticks)"
    )


async def test_after_only_a_start_the_dashboard_says_when_it_started_not_never(api: Api) -> None:
    await admin(api)
    api.clock.set(NOW - timedelta(minutes=1))
    check = await create_check(api, name="backup", schedule="0 3 * * *", grace=600)
    api.clock.set(NOW + timedelta(seconds=5))
    assert (await api.client.get(f"/ping/{check['uuid']}/start")).status_code == 200
    api.clock.set(NOW + timedelta(minutes=2))
    body = (await api.client.get(f"/api/v3/checks/{check['uuid']}", headers=api.headers)).json()
    assert body["last_ping"] is None  # as in Healthchecks: a start is not a run ping
    page = html.unescape((await api.client.get(f"/checks/{check['uuid']}")).text)
    head = page[page.index('id="check-head"') : page.index('class="actions"')]
    last = head.split("<dt>Last ping</dt>")[1].split("</dd>")[0]
    assert "started 03:00:05, no finish yet" in last and "never" not in last
    listed = html.unescape((await api.client.get("/")).text)
    row = listed.split('<span class="label">last ping </span>')[1].split("</td>")[0]
    assert row == "started 03:00:05, no finish yet"


def test_service_forms_spell_apprise_urls_and_name_bad_fields() -> None:
    slack = {"slack_webhook": "https://hooks.slack.com/services/T1/B2/c3"}
    assert channel_forms.apprise_url("slack", slack) == "slack://T1/B2/c3"
    discord = {"discord_webhook": "https://discord.com/api/webhooks/42/tok"}
    assert channel_forms.apprise_url("discord", discord) == "discord://42/tok"
    assert (
        channel_forms.apprise_url("webhook", {"webhook_url": "https://h.example/x?a=1"})
        == "jsons://h.example/x?-a=1"
    )
    assert channel_forms.apprise_url("ntfy", {"ntfy_topic": "alerts"}) == "ntfy://alerts"
    assert (
        channel_forms.apprise_url("ntfy", {"ntfy_topic": "a", "ntfy_server": "https://n.example"})
        == "ntfys://n.example/a"
    )
    email = {
        "email_to": "oncall@example.com",
        "email_host": "127.0.0.1",
        "email_port": "2525",
        "email_security": "none",
    }
    assert (
        channel_forms.apprise_url("email", email)
        == "mailto://127.0.0.1:2525/?to=oncall%40example.com&mode=insecure"
    )
    for service, form, field in (
        ("slack", {"slack_webhook": "https://evil.example/services/a/b/c"}, "slack_webhook"),
        ("telegram", {"telegram_token": "t"}, "telegram_chat"),
        ("email", {"email_to": "a@b.c", "email_host": "h", "email_port": "x"}, "email_port"),
        # str.isdigit() takes Arabic-Indic digits; a port is ASCII digits only
        ("email", {"email_to": "a@b.c", "email_host": "h", "email_port": "\u0662\u0665"}, "email_port"),
    ):
        with pytest.raises(ValidationError, match=f"^{field}:"):
            channel_forms.apprise_url(service, form)


async def test_a_webhook_form_url_keeps_its_query_string_for_the_receiver(
    http_receiver: HttpReceiver,
) -> None:
    # Apprise's json:// reads ?key=value as its own options; only -key=value reaches the target.
    url = channel_forms.apprise_url(
        "webhook", {"webhook_url": f"{http_receiver.http_url}?token=abc123&to=a%26b&empty="}
    )
    async with AppriseNotifier(allow_private_targets=True) as notifier:
        result = await notifier.send(
            url, Message(title="t", body="b", body_markdown="b", json_fields={}), timeout=5
        )
    assert result.ok, result.error
    [request] = await http_receiver.async_wait_for_requests(1)
    assert request.method == "POST"
    assert request.path == "/hook?token=abc123&to=a%26b&empty="


async def test_the_check_page_timeline_speaks_the_users_zone(api: Api) -> None:
    token = await admin(api)
    check = await create_check(api, name="report", schedule="*/2 * * * *", grace=30)
    api.clock.set(NOW)
    assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200

    def axis_minutes(page: str, svg_id: str) -> list[int]:
        drawing = page.split(f'id="{svg_id}"')[1].split("</svg>")[0]
        labels = re.findall(r'text-anchor="(?:start|middle|end)">([0-9: -]+)</text>', drawing)
        return [int(h) * 60 + int(m) for h, m in (re.search(r"(\d\d):(\d\d)", x).groups() for x in labels)]  # type: ignore[union-attr]

    in_utc = (await api.client.get(f"/checks/{check['uuid']}")).text
    saved = await api.client.post("/account", data={"csrf_token": token, "tz": "Asia/Kolkata"})
    assert saved.status_code == 200
    page = (await api.client.get(f"/checks/{check['uuid']}")).text
    for svg_id in ("timeline", "timeline-phone"):
        desc = page.split(f'<desc id="{svg_id}-desc">')[1].split("</desc>")[0]
        assert desc.endswith("Asia/Kolkata"), desc
        utc, local = axis_minutes(in_utc, svg_id), axis_minutes(page, svg_id)
        assert utc and [(k - u) % 1440 for u, k in zip(utc, local, strict=True)] == [330] * len(utc)


async def test_an_early_run_is_described_as_early_and_never_as_the_last_good_run(api: Api) -> None:
    await admin(api)
    api.clock.set(NOW - timedelta(hours=2))
    check = await create_check(api, name="nightly", schedule="0 3 * * *", grace=60)
    uuid = check["uuid"]

    def header(page: str) -> str:
        return html.unescape(page[page.index('id="check-head"') : page.index('class="actions"')])

    api.clock.set(NOW - timedelta(minutes=50))  # 02:10, outside the 60 s early window of 03:00
    assert (await api.client.get(f"/ping/{uuid}/1")).status_code == 200
    page = header((await api.client.get(f"/checks/{uuid}")).text)
    # the first run ping ends new (DESIGN §5), even an early one; it raises nothing
    assert (await api.client.get(f"/api/v3/checks/{uuid}", headers=api.headers)).json()["status"] == "up"
    assert "early run for 03:00 — failed: exit 1" in page and "ok" not in page.split("Since")[0]
    assert "none yet" in page.split("Last good run")[1].split("</dd>")[0]

    api.clock.set(NOW + timedelta(seconds=10))  # the real run of 03:00: the check is up
    assert (await api.client.get(f"/ping/{uuid}")).status_code == 200
    api.clock.set(NOW + timedelta(hours=23))  # 02:00 the next day: an early success for 03:00
    assert (await api.client.get(f"/ping/{uuid}")).status_code == 200
    page = header((await api.client.get(f"/checks/{uuid}")).text)
    good = page.split("Last good run")[1].split("</dd>")[0]
    assert "07-18 03:00" in good, good  # the real run, not the early one of a future tick
    assert "early run for 03:00 — ok" in page
    api.clock.set(NOW + timedelta(hours=23, minutes=5))
    assert (await api.client.get(f"/ping/{uuid}/fail")).status_code == 200
    listed = html.unescape((await api.client.get("/")).text)
    assert "early run for 03:00 — failed" in listed


async def test_check_page_header_says_since_when_and_marks_failing_pings(api: Api) -> None:
    check = await create_check(api, name="report", schedule="*/2 * * * *", grace=30)
    api.clock.set(NOW)
    assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200
    failed_at = NOW + timedelta(minutes=2, seconds=5)
    api.clock.set(failed_at)
    assert (
        await api.client.post(f"/ping/{check['uuid']}/fail", content=b"boom\nSMTP 550\n")
    ).status_code == 200
    api.clock.set(failed_at + timedelta(seconds=10))
    await admin(api)
    page = (await api.client.get(f"/checks/{check['uuid']}")).text
    head = page[page.index('id="check-head"') : page.index('class="actions"')]
    assert "Down since" in head and f"{failed_at:%Y-%m-%d %H:%M:%S} UTC" in head
    assert "Open episode" in head and "failed" in head and "SMTP 550" in head
    assert "Last good run" in head and f"{NOW:%Y-%m-%d %H:%M:%S}" in head
    assert '<tr class="bad" data-kind="fail">' in page and '<tr data-kind="success">' in page
    fragment = (await api.client.get(f"/fragments/checks/{check['uuid']}/header")).text
    assert "Down since" in fragment and "<html" not in fragment


def test_a_wide_window_groups_ticks_into_buckets_of_their_worst_outcome() -> None:
    from monitor.web import svg

    start = NOW - timedelta(days=7)
    ticks = [
        svg.TickMark(scheduled=start + timedelta(minutes=i), outcome="missed" if i == 5000 else "on_time")
        for i in range(0, 7 * 24 * 60, 1)
    ]
    drawn = svg.timeline_svg(ticks[:500], start, NOW, NOW, max_marks=120)
    assert drawn.count('class="tick bucket"') <= 120 and 'class="run"' not in drawn
    drawn = svg.timeline_svg(ticks, start, NOW, NOW, max_marks=40)
    buckets = re.findall(r'class="tick bucket" data-tick="[^"]+" data-outcome="([a-z_]+)"', drawn)
    assert len(buckets) == 40 and buckets.count("missed") == 1 and set(buckets) == {"on_time", "missed"}
    assert "pick a narrower window" in drawn


async def test_a_channel_form_saved_after_another_tabs_save_is_refused_not_applied(api: Api) -> None:
    token = await admin(api)
    created = await api.client.post(
        "/api/v3/channels/", json={"name": "hook", "url": "json://hooks.example.com/x"}, headers=api.headers
    )
    channel = created.json()
    version = re.compile(r'name="version" value="([^"]+)"')
    first = version.search((await api.client.get(f"/channels/{channel['id']}/edit")).text)
    second = version.search((await api.client.get(f"/channels/{channel['id']}/edit")).text)
    assert first is not None and second is not None and first.group(1) == second.group(1)
    form = {"csrf_token": token, "url": channel["url"]}
    saved = await api.client.post(
        f"/channels/{channel['id']}/edit",
        data={**form, "name": "tab A", "kinds": "missed", "version": first.group(1)},
        follow_redirects=False,
    )
    assert saved.status_code == 303, saved.text
    stale = await api.client.post(
        f"/channels/{channel['id']}/edit",
        data={**form, "name": "tab B", "version": second.group(1)},
        follow_redirects=False,
    )
    assert stale.status_code == 409, stale.text[:300]
    assert "changed since you opened the form" in stale.text
    # the refused form shows what is stored now, with its new version: saving it again works
    assert 'value="tab A"' in stale.text
    fresh = version.search(stale.text)
    assert fresh is not None and fresh.group(1) != second.group(1)
    listed = (await api.client.get("/api/v3/channels/", headers=api.headers)).json()["channels"]
    (stored,) = [c for c in listed if c["id"] == channel["id"]]
    assert stored["name"] == "tab A" and stored["kinds"] == ["missed"]
    again = await api.client.post(
        f"/channels/{channel['id']}/edit",
        data={**form, "name": "tab B", "version": fresh.group(1)},
        follow_redirects=False,
    )
    assert again.status_code == 303, again.text[:300]
