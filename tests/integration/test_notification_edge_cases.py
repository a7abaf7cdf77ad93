"""Notification edge cases (maintenance deletes and overlaps, masking, routing, validation).

Real stack as in ``test_notifications.py``: the in-process API, the real outbox and
``AppriseNotifier`` delivering to loopback receivers, the clock injected.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from monitor.domain import maintenance, messages
from monitor.domain.cron import schedules
from monitor.notify.apprise import AppriseNotifier
from monitor.notify.masking import mask_url, url_secrets
from monitor.services import reminders
from monitor.services.dispatch import deliver_due
from monitor.services.evaluator import evaluate_due
from monitor.storage import tables as t
from tests.conftest import Api
from tests.integration.test_dispatch import add_channel, missed_check
from tests.support.app import create_check, list_of, open_api
from tests.support.fixtures import http_receiver, make_http_receiver
from tests.support.receivers import HttpReceiver

__all__ = ["http_receiver", "make_http_receiver"]  # fixtures, imported for pytest

SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@pytest.fixture
async def notifier() -> AsyncIterator[AppriseNotifier]:
    async with AppriseNotifier(allow_private_targets=True) as real:
        yield real


async def deliver_now(api: Api, notifier: AppriseNotifier) -> int:
    return await deliver_due(api.engine, notifier, api.clock.now(), settings=api.settings)


async def raise_now(api: Api) -> int:
    return await reminders.raise_due(api.engine, api.clock.now(), settings=api.settings)


async def notes(api: Api, uuid: str) -> list[tuple[str, str]]:
    alerts = await list_of(api, uuid, "alerts")
    return [(a["kind"], n["status"]) for a in reversed(alerts) for n in a["notifications"]]


async def post_window(api: Api, body: dict[str, Any]) -> Any:
    return await api.client.post("/api/v3/maintenance/", json=body, headers=api.headers)


# --------------------------------------------------------------------------- maintenance


@pytest.mark.parametrize("scope", ["project", "check"])
async def test_deleting_an_active_window_summarises_what_it_held_back(
    api: Api, notifier: AppriseNotifier, http_receiver: HttpReceiver, scope: str
) -> None:
    await add_channel(api, http_receiver.url)
    check = await create_check(api, name="nightly", slug="nightly", timeout=60, grace=10, channels="*")
    body = {"name": "deploy", "start": "2026-07-18T01:00:00Z", "end": "2026-07-18T06:00:00Z"}
    if scope == "check":
        body["check"] = check["uuid"]
    window = (await post_window(api, body)).json()
    assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200
    api.clock.advance(71)  # 02:01:11: missed, inside the window
    await evaluate_due(api.engine, api.clock.now(), settings=api.settings)
    await deliver_now(api, notifier)
    assert await notes(api, check["uuid"]) == [("missed", "suppressed")]
    api.clock.advance(60)
    deleted = await api.client.delete(f"/api/v3/maintenance/{window['id']}", headers=api.headers)
    assert deleted.status_code == 200, deleted.text
    assert await deliver_now(api, notifier) == 1
    [summary] = await http_receiver.async_wait_for_requests(1)
    assert summary.json["kind"] == "maintenance"
    text = summary.json["message"]
    assert "2026-07-18T02:01:11Z nightly: missed — the run due by 02:01 did not report" in text
    assert "Window: 2026-07-18T01:00:00Z – 2026-07-18T02:02:11Z" in text  # ended by the delete
    if scope == "project":
        assert summary.json["title"] == "project test: maintenance — window “deploy” ended, 1 alert held back"
        assert text.startswith(
            "project test: project-wide maintenance window “deploy” ended; 1 alert held back during it."
            " Down now: nightly.\n"
        )
        assert "Status:" not in text and "  now" not in text
    else:
        assert summary.json["title"] == "nightly: maintenance — window “deploy” ended, 1 alert held back"
        assert "The check is down now." in text
    assert await raise_now(api) == 0  # the deleted window owes nothing more


async def test_delete_marks_waiting_notifications_of_the_window_suppressed(
    api: Api, notifier: AppriseNotifier, http_receiver: HttpReceiver
) -> None:
    await add_channel(api, http_receiver.url)
    window = (
        await post_window(api, {"name": "w", "start": "2026-07-18T01:00:00Z", "end": "2026-07-18T06:00:00Z"})
    ).json()
    check = await missed_check(api)  # the missed alert waits in the outbox, not yet prepared
    await api.client.delete(f"/api/v3/maintenance/{window['id']}", headers=api.headers)
    assert await deliver_now(api, notifier) == 1  # only the summary: the alert is in it
    [summary] = await http_receiver.async_wait_for_requests(1)
    assert summary.json["kind"] == "maintenance"
    assert await notes(api, check["uuid"]) == [("missed", "suppressed")]


@SQLITE_ONLY
async def test_overlapping_recurring_windows_are_refused(api: Api) -> None:
    for schedule, dialect, duration, gap in [
        ("*/5 * * * * *", "seconds", 60, 5),  # the tester's window: every occurrence overlapped
        ("*/5 * * * * *", "seconds", 5, 5),  # back to back
        ("0 0,1 * * *", "unix", 3600, 3600),  # irregular: the shortest gap counts
        ("0 2 * * *", "unix", 86400, 86400),
    ]:
        r = await post_window(api, {"schedule": schedule, "dialect": dialect, "duration": duration})
        assert r.status_code == 400, r.text
        assert r.json()["error"].startswith(
            f"duration: must be shorter than the schedule's shortest gap between ticks ({gap} s)"
        )
    ok = await post_window(api, {"schedule": "*/5 * * * * *", "dialect": "seconds", "duration": 4})
    assert ok.status_code == 201, ok.text


async def test_recurring_window_that_held_nothing_sends_nothing(
    api: Api, notifier: AppriseNotifier, http_receiver: HttpReceiver
) -> None:
    await add_channel(api, http_receiver.url)
    r = await post_window(
        api, {"name": "often", "schedule": "*/5 * * * * *", "dialect": "seconds", "duration": 3}
    )
    assert r.status_code == 201, r.text
    for _ in range(6):  # six occurrences end, nothing was held back
        api.clock.advance(5)
        assert await raise_now(api) == 0
    assert await deliver_now(api, notifier) == 0
    await asyncio.sleep(0.1)
    assert http_receiver.requests == []


def test_touching_occurrences_merge_into_one_span() -> None:
    created = datetime(2026, 7, 18, tzinfo=UTC)
    # saved before the gap rule: occurrences of 5 s every 5 s touch, so they are one span
    window = maintenance.Window(
        id="w",
        check_id=None,
        name="",
        created_at=created,
        schedule="*/5 * * * * *",
        dialect="seconds",
        duration=timedelta(seconds=5),
    )
    at = created + timedelta(minutes=10, seconds=2)
    span = maintenance.occurrence_at(window, at)
    assert span is not None
    assert span.end - span.start >= timedelta(seconds=5 * maintenance.MERGE_LIMIT)
    assert span.start < at - timedelta(seconds=60) and span.end > at + timedelta(seconds=60)
    cron = schedules.parse_cron("0 0,1 * * *", "unix", "UTC")
    assert maintenance.shortest_gap(cron, created) == timedelta(hours=1)


@SQLITE_ONLY
async def test_one_off_window_limits(api: Api) -> None:
    for body, field in [
        ({"start": "2026-07-18T00:00:00Z", "end": "2027-07-20T00:00:00Z"}, "end"),  # > 366 days
        ({"start": "9500-01-01T00:00:00Z", "end": "9500-01-02T00:00:00Z"}, "start"),
        ({"start": "1999-12-31T00:00:00Z", "end": "2000-01-02T00:00:00Z"}, "start"),
        ({"start": "0001-01-01T00:00:00+01:00", "end": "2000-01-02T00:00:00Z"}, "start"),
    ]:
        r = await post_window(api, body)
        assert r.status_code == 400 and r.json()["error"].startswith(f"{field}: "), (body, r.text)
    ok = await post_window(api, {"start": "2026-07-18T03:00:00.5+02:00", "end": "2026-07-19T00:00:00Z"})
    assert ok.status_code == 201 and ok.json()["start"] == "2026-07-18T01:00:00Z", ok.text


async def test_project_level_alerts_are_rate_limited(
    engine: Any,
    clock: Any,
    settings_factory: Callable[..., Any],
    notifier: AppriseNotifier,
    http_receiver: HttpReceiver,
) -> None:
    settings = settings_factory(notify_rate_limit=2, notify_rate_window=300)
    async with open_api(engine, clock, settings) as api:
        channel = await add_channel(api, http_receiver.url)
        facts = messages.AlertFacts(
            kind="monitor_unavailable",
            check_name="project test",
            check_uuid="",
            slug=None,
            tz="UTC",
            status="",
            scheduled=None,
            check_url=f"{settings.base_url}/",
        )
        async with api.engine.begin() as conn:
            for i in range(5):
                assert await reminders.insert_alert(
                    conn,
                    project_id=api.project["id"],
                    check_id=None,
                    key=f"flood:{i}",
                    facts=facts,
                    now=api.clock.now(),
                    channels=[channel],
                )
        for _ in range(3):
            await deliver_now(api, notifier)
        await http_receiver.async_wait_for_requests(2)
        await asyncio.sleep(0.2)
        assert len(http_receiver.requests) == 2
        api.clock.advance(301)
        await deliver_now(api, notifier)
        await http_receiver.async_wait_for_requests(3)
        digest = http_receiver.requests[2].json
        assert digest["kind"] == "digest" and digest["count"] == "3"
        async with api.engine.connect() as conn:
            statuses = sorted((await conn.execute(select(t.notifications.c.status))).scalars().all())
        assert statuses == ["coalesced", "coalesced", "sent", "sent", "sent"]


# --------------------------------------------------------------------------- channels


def test_header_and_query_secrets_are_masked() -> None:
    for url, secrets in [
        ("json://h.example.com/?+Authorization=Bearer%20SecretBearer42", ["SecretBearer42"]),
        ("form://u:p4ssword@h.example.com/?-X-Token=SecretToken42", ["SecretToken42", "p4ssword"]),
        (
            "json://h.example.com/p?token=SecretQuery42&apikey=SecretKey42&x=1",
            ["SecretQuery42", "SecretKey42"],
        ),
    ]:
        masked = mask_url(url)
        for secret in secrets:
            assert secret not in masked, masked
            assert any(secret in s for s in url_secrets(url)), url_secrets(url)


@SQLITE_ONLY
async def test_api_masks_header_secrets_and_keeps_them_when_the_masked_url_comes_back(api: Api) -> None:
    url = "json://alice:Hunter2Secret@127.0.0.1:9/hook?+Authorization=Bearer%20SecretBearer42"
    created = await api.client.post("/api/v3/channels/", json={"url": url}, headers=api.headers)
    assert created.status_code == 201, created.text
    channel = created.json()
    assert "Hunter2Secret" not in created.text and "SecretBearer42" not in created.text
    assert channel["name"] == "JSON 127.0.0.1"  # no name given: the service and host
    listed = await api.client.get("/api/v3/channels/", headers=api.headers)
    assert "SecretBearer42" not in listed.text and "Hunter2Secret" not in listed.text
    # a client sends back what it read, renaming the channel: the real secrets stay
    back = await api.client.post(
        f"/api/v3/channels/{channel['id']}", json={"name": "ops", "url": channel["url"]}, headers=api.headers
    )
    assert back.status_code == 200 and back.json()["name"] == "ops", back.text
    async with api.engine.connect() as conn:
        stored = (await conn.execute(select(t.channels.c.url))).scalar_one()
    assert stored == url
    # a changed URL that still holds the mask cannot be completed: refused
    edited = channel["url"].replace("/hook", "/other")
    r = await api.client.post(f"/api/v3/channels/{channel['id']}", json={"url": edited}, headers=api.headers)
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "url: contains masked secrets (****); send the full URL"


@SQLITE_ONLY
async def test_channel_field_rules(api: Api) -> None:
    hook = "json://127.0.0.1:9/hook"
    dup_a = await add_channel(api, hook, name="dup")
    await add_channel(api, hook, name="dup")
    r = await api.client.post("/api/v3/checks/", json={"channels": "dup"}, headers=api.headers)
    assert r.status_code == 400 and r.json()["error"].startswith("channels: channel name 'dup' is ambiguous")
    r = await api.client.post(
        "/api/v3/checks/", json={"escalate_after": 60, "escalate_to": "dup"}, headers=api.headers
    )
    assert r.status_code == 400 and r.json()["error"].startswith(
        "escalate_to: channel name 'dup' is ambiguous"
    )
    by_id = await create_check(api, channels=dup_a, escalate_after=60, escalate_to=dup_a)
    assert by_id["channels"] == dup_a
    r = await api.client.post(
        "/api/v3/channels/", json={"url": hook, "kinds": ["missed", "missed", "late"]}, headers=api.headers
    )
    assert r.status_code == 201 and r.json()["kinds"] == ["missed", "late"], r.text
    r = await api.client.post(
        "/api/v3/channels/", json={"url": hook, "kinds": None, "name": ""}, headers=api.headers
    )
    assert r.status_code == 201 and r.json()["kinds"] == [] and r.json()["name"] == "JSON 127.0.0.1", r.text


async def test_typed_bodies_word_their_errors_as_the_checks_api_does(api: Api) -> None:
    for path, body, error in [
        ("/api/v3/channels/", {"url": 5}, "url: must be a string, got int"),
        (
            "/api/v3/channels/",
            {"url": "json://127.0.0.1:9/x", "default": "yes"},
            "default: must be a boolean, got str",
        ),
        (
            "/api/v3/channels/",
            {"url": "json://127.0.0.1:9/x", "kinds": [5]},
            "kinds: [0] must be a string, got int",
        ),
        ("/api/v3/maintenance/", {"name": ["x"]}, "name: must be a string, got array"),
        ("/api/v3/channels/", [], "body: must be a JSON object"),
    ]:
        r = await api.client.post(path, json=body, headers=api.headers)
        assert r.status_code == 400 and r.json() == {"error": error}, (body, r.text)


# --------------------------------------------------------------------------- routing, messages


async def test_auto_created_check_goes_to_the_default_channels(api: Api) -> None:
    default = await add_channel(api, "json://127.0.0.1:9/a", name="default", default=True)
    await add_channel(api, "json://127.0.0.1:9/b", name="other")
    slug = await api.client.get(f"/ping/{api.project['ping_key']}/made-by-ping?create=1")
    assert slug.status_code == 201, slug.text
    found = await api.client.get("/api/v3/checks/", params={"slug": "made-by-ping"}, headers=api.headers)
    [check] = found.json()["checks"]
    assert check["channels"] == default


async def test_late_that_recovers_reaches_channels_that_take_recovered(
    api: Api, notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    pager = make_http_receiver()
    await add_channel(api, pager.url, kinds=["missed", "recovered"])
    check = await missed_check(api)  # down at 02:01:11
    api.clock.advance(20)
    assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200  # late: recovers
    await deliver_now(api, notifier)
    requests = await pager.async_wait_for_requests(2)
    assert [r.json["kind"] for r in requests] == ["missed", "late"]
    assert (await list_of(api, check["uuid"], "alerts"))[0]["kind"] == "late"


@SQLITE_ONLY
async def test_simple_check_names_its_run_by_the_deadline_and_api_ticks_are_whole_seconds(api: Api) -> None:
    api.clock.advance(0.734042)
    check = await create_check(api, name="job", timeout=60, grace=10, channels="")
    assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200
    api.clock.advance(30)
    assert (await api.client.get(f"/ping/{check['uuid']}/fail")).status_code == 200
    [alert] = await list_of(api, check["uuid"], "alerts")
    assert alert["kind"] == "failed"
    assert alert["scheduled"] == "2026-07-18T02:01:00Z", alert
    assert "the run due by 02:01 UTC reported failure" in alert["message"], alert["message"]
    runs = await list_of(api, check["uuid"], "runs")
    assert all(r["scheduled"] is None or r["scheduled"].endswith(":00Z") for r in runs), runs
