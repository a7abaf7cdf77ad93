"""The management API of DESIGN §9 over the in-process app, on SQLite and PostgreSQL.

Checks (create, upsert, list, get, update, delete, pause, resume, history lists), auth,
channels (with real deliveries to a loopback receiver), the error contract
(``{"error": "<field>: <problem>"}``, never a 500), ``/schema``, ``/health`` and ``/ready``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from monitor.domain.errors import Conflict
from monitor.services import checks as check_service
from monitor.services.evaluator import evaluate_due
from monitor.services.projects import create_project
from monitor.storage.engine import make_engine
from tests.conftest import Api
from tests.support.app import create_check, get_check, list_of, open_api
from tests.support.fixtures import http_receiver
from tests.support.receivers import HttpReceiver, free_port

COMMON_FIELDS = {
    "uuid",
    "name",
    "slug",
    "tags",
    "desc",
    "kind",
    "grace",
    "max_runtime",
    "failure_threshold",
    "recovery_threshold",
    "early_tolerance",
    "expected_runs",
    "min_runtime",
    "status",
    "started",
    "last_ping",
    "next_ping",
    "n_pings",
    "manual_resume",
    "methods",
    "channels",
    "ping_url",
    "update_url",
    "pause_url",
    "resume_url",
    "badge_url",
}
COMMON_FIELDS |= {"nag_interval", "escalate_after", "escalate_to"}  # reminders, escalation
# Healthchecks' keyword filters (and its deprecated subject/subject_fail views of them)
KEYWORD_FIELDS = {
    "subject": "",
    "subject_fail": "",
    "start_kw": "",
    "success_kw": "",
    "failure_kw": "",
    "filter_subject": False,
    "filter_body": False,
    "filter_http_body": False,
    "filter_default_fail": False,
}
COMMON_FIELDS |= set(KEYWORD_FIELDS)
COMMON_FIELDS |= {"hints"}  # advice from the latest runs (monitor.domain.hints), [] when none
__all__ = ["http_receiver"]  # fixture, imported for pytest

MISSING_UUID = "6f1c5a4e-0000-4000-8000-000000000000"


def assert_error(response: Any, status: int, field: str, *, extra: set[str] | None = None) -> None:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert set(body) == {"error"} | (extra or set()), body
    assert body["error"].startswith(f"{field}: ") or body["error"].startswith(f"{field} "), body


# --------------------------------------------------------------------------- create


async def test_create_simple_check_with_defaults(api: Api) -> None:
    r = await api.client.post("/api/v3/checks/", json={}, headers=api.headers)
    assert r.status_code == 201, r.text
    check = r.json()
    assert set(check) == COMMON_FIELDS | {"timeout"}
    base = api.settings.base_url
    uuid = check["uuid"]
    assert check == {
        "uuid": uuid,
        "name": "",
        "slug": "",
        "tags": "",
        "desc": "",
        "kind": "simple",
        "timeout": 86400,
        "grace": 3600,
        "max_runtime": 1800,
        "failure_threshold": 1,
        "recovery_threshold": 1,
        "early_tolerance": None,
        "expected_runs": 1,
        "min_runtime": None,
        "status": "new",
        "started": False,
        "last_ping": None,
        "next_ping": None,
        "n_pings": 0,
        "manual_resume": False,
        "methods": "",
        "channels": "",
        "ping_url": f"{base}/ping/{uuid}",
        "update_url": f"{base}/api/v3/checks/{uuid}",
        "pause_url": f"{base}/api/v3/checks/{uuid}/pause",
        "resume_url": f"{base}/api/v3/checks/{uuid}/resume",
        "badge_url": check["badge_url"],
        "nag_interval": None,
        "escalate_after": None,
        "escalate_to": "",
        **KEYWORD_FIELDS,
        "hints": [],
    }
    assert not check["ping_url"].endswith("/")
    assert check["badge_url"] is None or check["badge_url"].startswith(f"{base}/b/")
    assert await get_check(api, uuid) == check


async def test_null_resets_the_verdict_settings_to_their_defaults(api: Api) -> None:
    check = await create_check(api, name="fleet", expected_runs=3, min_runtime=60, early_tolerance=30)
    assert (check["expected_runs"], check["min_runtime"], check["early_tolerance"]) == (3, 60, 30)
    r = await api.client.post(
        f"/api/v3/checks/{check['uuid']}",
        json={"expected_runs": None, "min_runtime": None, "early_tolerance": None},
        headers=api.headers,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["expected_runs"], body["min_runtime"], body["early_tolerance"]) == (1, None, None)


async def test_create_cron_check(api: Api) -> None:
    check = await create_check(
        api,
        name="Nightly backup",
        slug="nightly-backup",
        tags="prod  db",
        desc="pg_dump",
        schedule="0 3 * * *",
        tz="Europe/Berlin",
        grace=600,
        max_runtime=7200,
        failure_threshold=2,
        recovery_threshold=3,
        early_tolerance=30,
        manual_resume=True,
        methods="POST",
    )
    assert set(check) == COMMON_FIELDS | {"schedule", "tz", "dialect"}
    assert check["kind"] == "cron"
    assert (check["schedule"], check["tz"], check["dialect"]) == ("0 3 * * *", "Europe/Berlin", "unix")
    assert check["tags"] == "prod db"
    assert (check["grace"], check["max_runtime"]) == (600, 7200)
    assert (check["failure_threshold"], check["recovery_threshold"], check["early_tolerance"]) == (2, 3, 30)
    assert check["manual_resume"] is True and check["methods"] == "POST"
    six = await create_check(api, name="heartbeat", schedule="*/10 * * * * *", dialect="seconds", grace=1)
    assert (six["dialect"], six["grace"]) == ("seconds", 1)


async def test_times_are_iso_z_and_next_ping(api: Api) -> None:
    check = await create_check(api, name="cron", schedule="*/5 * * * *")
    uuid = check["uuid"]
    api.clock.advance(30)
    assert (await api.client.get(f"/ping/{uuid}")).status_code == 200
    check = await get_check(api, uuid)
    assert check["last_ping"] == "2026-07-18T02:00:30Z"
    assert check["next_ping"] == "2026-07-18T02:05:00Z"
    simple = await create_check(api, name="simple", timeout=60)
    await api.client.get(f"/ping/{simple['uuid']}")
    assert (await get_check(api, simple["uuid"]))["next_ping"] == "2026-07-18T02:01:30Z"
    [flip] = await list_of(api, uuid, "flips")
    assert flip["timestamp"] == "2026-07-18T02:00:30Z"


async def test_unique_upsert(api: Api) -> None:
    first = await create_check(api, name="backup", timeout=3600)
    r = await api.client.post(
        "/api/v3/checks/",
        json={"name": "backup", "timeout": 7200, "tags": "x", "unique": ["name"]},
        headers=api.headers,
    )
    assert r.status_code == 200, r.text
    assert r.json()["uuid"] == first["uuid"]
    assert (r.json()["timeout"], r.json()["tags"]) == (7200, "x")
    r = await api.client.post(
        "/api/v3/checks/", json={"name": "other", "unique": ["name"]}, headers=api.headers
    )
    assert r.status_code == 201
    slugged = await create_check(api, name="A", slug="a-job")
    r = await api.client.post(
        "/api/v3/checks/",
        json={"name": "A renamed", "slug": "a-job", "schedule": "0 * * * *", "unique": ["slug"]},
        headers=api.headers,
    )
    assert r.status_code == 200, r.text
    assert r.json()["uuid"] == slugged["uuid"]
    assert (r.json()["name"], r.json()["kind"]) == ("A renamed", "cron")
    listed = (await api.client.get("/api/v3/checks/", headers=api.headers)).json()["checks"]
    assert len(listed) == 3


async def test_list_filters(api: Api) -> None:
    await create_check(api, name="a", tags="prod db")
    await create_check(api, name="b", tags="prod web", slug="b")
    await create_check(api, name="c", tags="dev db")

    async def names(params: Any) -> list[str]:
        r = await api.client.get("/api/v3/checks/", params=params, headers=api.headers)
        assert r.status_code == 200, r.text
        return sorted(c["name"] for c in r.json()["checks"])

    assert await names({}) == ["a", "b", "c"]
    assert await names({"tag": "prod"}) == ["a", "b"]
    assert await names([("tag", "prod"), ("tag", "db")]) == ["a"]
    assert await names([("tag", "prod"), ("tag", "nope")]) == []
    assert await names({"slug": "b"}) == ["b"]
    assert await names({"slug": "zzz"}) == []
    # The read-only key reads too.
    r = await api.client.get("/api/v3/checks/", headers=api.ro_headers)
    assert r.status_code == 200 and len(r.json()["checks"]) == 3


async def test_partial_update_changes_only_given_fields(api: Api) -> None:
    check = await create_check(api, name="job", tags="a b", desc="d", timeout=600, grace=60)
    uuid = check["uuid"]
    r = await api.client.post(f"/api/v3/checks/{uuid}", json={"grace": 120}, headers=api.headers)
    assert r.status_code == 200, r.text
    updated = r.json()
    assert updated == {**check, "grace": 120}
    r = await api.client.post(
        f"/api/v3/checks/{uuid}", json={"schedule": "0 4 * * *", "tz": "Asia/Tokyo"}, headers=api.headers
    )
    assert r.status_code == 200, r.text
    cron = r.json()
    assert (cron["kind"], cron["schedule"], cron["tz"], cron["dialect"]) == (
        "cron",
        "0 4 * * *",
        "Asia/Tokyo",
        "unix",
    )
    assert (cron["name"], cron["tags"], cron["desc"], cron["grace"]) == ("job", "a b", "d", 120)
    r = await api.client.post(f"/api/v3/checks/{uuid}", json={"timeout": 300}, headers=api.headers)
    assert (r.json()["kind"], r.json()["timeout"]) == ("simple", 300)
    r = await api.client.post(f"/api/v3/checks/{uuid}", json={}, headers=api.headers)
    assert r.status_code == 200


async def test_delete(api: Api) -> None:
    check = await create_check(api, name="job")
    uuid = check["uuid"]
    await api.client.get(f"/ping/{uuid}")
    r = await api.client.delete(f"/api/v3/checks/{uuid}", headers=api.headers)
    assert r.status_code == 200 and r.json()["uuid"] == uuid
    assert_error(await api.client.get(f"/api/v3/checks/{uuid}", headers=api.headers), 404, "uuid")
    assert_error(await api.client.delete(f"/api/v3/checks/{uuid}", headers=api.headers), 404, "uuid")
    r = await api.client.get(f"/ping/{uuid}")
    assert (r.status_code, r.text) == (404, "not found")


async def test_pause_and_resume(api: Api) -> None:
    check = await create_check(api, name="job", timeout=60, grace=1)
    uuid = check["uuid"]
    assert_error(await api.client.post(f"/api/v3/checks/{uuid}/resume", headers=api.headers), 409, "status")
    await api.client.get(f"/ping/{uuid}")
    r = await api.client.post(f"/api/v3/checks/{uuid}/pause", headers=api.headers)
    assert r.status_code == 200 and r.json()["status"] == "paused" and r.json()["next_ping"] is None
    # Paused: time passes, nothing is missed.
    api.clock.advance(3600)
    await evaluate_due(api.engine, api.clock.now(), settings=api.settings)
    assert await list_of(api, uuid, "alerts") == []
    r = await api.client.post(f"/api/v3/checks/{uuid}/pause", headers=api.headers)
    assert r.status_code == 200
    r = await api.client.post(f"/api/v3/checks/{uuid}/resume", headers=api.headers)
    assert r.status_code == 200 and r.json()["status"] == "new"
    assert_error(await api.client.post(f"/api/v3/checks/{uuid}/resume", headers=api.headers), 409, "status")
    reasons = [f["reason"] for f in await list_of(api, uuid, "flips")]
    assert reasons[0] == "resumed" and "paused" in reasons


async def test_history_lists_and_limit(api: Api) -> None:
    check = await create_check(api, name="job", timeout=60, grace=10)
    uuid = check["uuid"]
    for _ in range(5):
        api.clock.advance(30)
        assert (await api.client.get(f"/ping/{uuid}")).status_code == 200
    pings = await list_of(api, uuid, "pings")
    assert [p["n"] for p in pings] == [5, 4, 3, 2, 1]
    assert set(pings[0]) >= {
        "n",
        "type",
        "date",
        "scheduled",
        "rid",
        "exit_status",
        "duration",
        "method",
        "remote_addr",
        "ua",
        "body_url",
    }
    assert [p["n"] for p in await list_of(api, uuid, "pings", limit="2")] == [5, 4]
    runs = await list_of(api, uuid, "runs")
    assert len(runs) == 5
    assert set(runs[0]) >= {"rid", "scheduled", "started", "finished", "outcome", "exit_status", "duration"}
    assert len(await list_of(api, uuid, "runs", limit="3")) == 3
    # A missed period gives a flip and an alert.
    api.clock.advance(200)
    await evaluate_due(api.engine, api.clock.now(), settings=api.settings)
    [alert] = await list_of(api, uuid, "alerts")
    assert set(alert) >= {"id", "kind", "scheduled", "rid", "count", "created", "message", "notifications"}
    assert alert["kind"] == "missed" and alert["created"].endswith("Z")
    flips = await list_of(api, uuid, "flips")
    assert [(f["up"], f["reason"]) for f in flips][:1] == [(0, "missed")]
    assert len(await list_of(api, uuid, "flips", limit="1")) == 1
    assert len(await list_of(api, uuid, "alerts", limit="1")) == 1
    assert (await get_check(api, uuid))["status"] == "down"


async def test_runs_from_to(api: Api) -> None:
    check = await create_check(api, name="cron", schedule="*/5 * * * *")
    uuid = check["uuid"]
    for minute in (0, 5, 10):
        api.clock.set(api.clock.now().replace(minute=minute, second=1))
        assert (await api.client.get(f"/ping/{uuid}")).status_code == 200
    runs = await list_of(api, uuid, "runs", **{"from": "2026-07-18T02:05:00Z", "to": "2026-07-18T02:10:00Z"})
    assert sorted(r["scheduled"] for r in runs) == ["2026-07-18T02:05:00Z", "2026-07-18T02:10:00Z"]
    assert_error(
        await api.client.get(f"/api/v3/checks/{uuid}/runs/", params={"from": "soon"}, headers=api.headers),
        400,
        "from",
    )


# --------------------------------------------------------------------------- auth


async def test_auth(api: Api) -> None:
    check = await create_check(api, name="job")
    uuid = check["uuid"]
    for headers in ({}, {"X-Api-Key": "wrong-key-0000000000"}, {"X-Api-Key": ""}):
        r = await api.client.get("/api/v3/checks/", headers=headers)
        assert r.status_code == 401, headers
        assert r.json()["error"].startswith("X-Api-Key: ")
        r = await api.client.post("/api/v3/checks/", json={}, headers=headers)
        assert r.status_code == 401
    # A read-only key reads but never writes, and never reads pings (tests/hc_api pins the rest).
    assert (await api.client.get(f"/api/v3/checks/{uuid}", headers=api.ro_headers)).status_code == 200
    assert (await api.client.get(f"/api/v3/checks/{uuid}/pings/", headers=api.ro_headers)).status_code == 401
    for method, path in [
        ("POST", "/api/v3/checks/"),
        ("POST", f"/api/v3/checks/{uuid}"),
        ("DELETE", f"/api/v3/checks/{uuid}"),
        ("POST", f"/api/v3/checks/{uuid}/pause"),
        ("POST", f"/api/v3/checks/{uuid}/resume"),
        ("POST", "/api/v3/channels/"),
    ]:
        r = await api.client.request(method, path, json={"name": "x"}, headers=api.ro_headers)
        assert r.status_code == 403, (method, path, r.text)
        assert r.json()["error"].startswith("X-Api-Key: ")
    assert (await get_check(api, uuid))["name"] == "job"


async def test_another_projects_check_is_404(api: Api) -> None:
    async with api.engine.begin() as conn:
        other = await create_project(conn, "other", api.clock.now())
    other_headers = {"X-Api-Key": str(other["api_key"])}
    r = await api.client.post("/api/v3/checks/", json={"name": "theirs"}, headers=other_headers)
    assert r.status_code == 201
    theirs = r.json()["uuid"]
    mine = await create_check(api, name="mine")
    for method, path in [
        ("GET", f"/api/v3/checks/{theirs}"),
        ("POST", f"/api/v3/checks/{theirs}"),
        ("DELETE", f"/api/v3/checks/{theirs}"),
        ("POST", f"/api/v3/checks/{theirs}/pause"),
        ("POST", f"/api/v3/checks/{theirs}/resume"),
        ("GET", f"/api/v3/checks/{theirs}/pings/"),
        ("GET", f"/api/v3/checks/{theirs}/flips/"),
        ("GET", f"/api/v3/checks/{theirs}/runs/"),
        ("GET", f"/api/v3/checks/{theirs}/alerts/"),
        ("GET", f"/api/v3/checks/{theirs}/pings/1/body"),
    ]:
        r = await api.client.request(method, path, json={}, headers=api.headers)
        assert r.status_code == 404, (method, path, r.text)
        assert "error" in r.json()
    listed = (await api.client.get("/api/v3/checks/", headers=api.headers)).json()["checks"]
    assert [c["uuid"] for c in listed] == [mine["uuid"]]
    # Channels are project-scoped too.
    r = await api.client.post(
        "/api/v3/channels/", json={"url": "json://127.0.0.1:9/x"}, headers=other_headers
    )
    their_channel = r.json()["id"]
    assert (await api.client.get(f"/api/v3/channels/{their_channel}", headers=api.headers)).status_code == 404
    assert (
        await api.client.delete(f"/api/v3/channels/{their_channel}", headers=api.headers)
    ).status_code == 404
    assert_error(
        await api.client.post(
            "/api/v3/checks/", json={"name": "x", "channels": their_channel}, headers=api.headers
        ),
        400,
        "channels",
    )


# --------------------------------------------------------------------------- channels


async def test_channels_crud_masking_and_test(api: Api, http_receiver: HttpReceiver) -> None:
    secret_url = f"json://alice:s3cr3t-Pa55@127.0.0.1:{http_receiver.port}/hook"
    r = await api.client.post(
        "/api/v3/channels/",
        json={"name": "ops", "url": secret_url, "kinds": ["missed", "failed"]},
        headers=api.headers,
    )
    assert r.status_code == 201, r.text
    channel = r.json()
    assert set(channel) == {"id", "name", "kind", "url", "kinds", "default"}
    assert channel["kinds"] == ["missed", "failed"]
    assert "s3cr3t-Pa55" not in r.text
    plain = await api.client.post(
        "/api/v3/channels/",
        json={"name": "hook", "url": http_receiver.url, "kinds": "late"},
        headers=api.headers,
    )
    assert plain.status_code == 201 and plain.json()["kinds"] == ["late"]
    listed = await api.client.get("/api/v3/channels/", headers=api.headers)
    assert listed.status_code == 200
    assert "s3cr3t-Pa55" not in listed.text
    assert [c["name"] for c in listed.json()["channels"]] == ["ops", "hook"]
    one = await api.client.get(f"/api/v3/channels/{channel['id']}", headers=api.headers)
    assert one.status_code == 200 and "s3cr3t-Pa55" not in one.text
    # as Healthchecks, channels are for read-write keys only
    assert (await api.client.get("/api/v3/channels/", headers=api.ro_headers)).status_code == 401

    # Test delivery: for real, to the receiver.
    r = await api.client.post(f"/api/v3/channels/{plain.json()['id']}/test", headers=api.headers)
    assert r.status_code == 200, r.text
    [request] = await http_receiver.async_wait_for_requests(1)
    assert request.method == "POST"
    assert "test" in request.text

    # Update, then delete.
    r = await api.client.post(f"/api/v3/channels/{channel['id']}", json={"name": "ops2"}, headers=api.headers)
    assert r.status_code == 200 and r.json()["name"] == "ops2" and r.json()["kinds"] == ["missed", "failed"]
    r = await api.client.delete(f"/api/v3/channels/{channel['id']}", headers=api.headers)
    assert r.status_code == 200
    assert [
        c["name"] for c in (await api.client.get("/api/v3/channels/", headers=api.headers)).json()["channels"]
    ] == ["hook"]
    assert (await api.client.get(f"/api/v3/channels/{channel['id']}", headers=api.headers)).status_code == 404


async def test_channel_test_to_dead_target_is_400(api: Api) -> None:
    port = free_port()
    r = await api.client.post(
        "/api/v3/channels/",
        json={"name": "dead", "url": f"json://127.0.0.1:{port}/hook"},
        headers=api.headers,
    )
    assert r.status_code == 201
    r = await api.client.post(f"/api/v3/channels/{r.json()['id']}/test", headers=api.headers)
    assert_error(r, 400, "url", extra={"ok"})
    assert "refused" in r.json()["error"].lower() or "connect" in r.json()["error"].lower(), r.json()


async def test_channels_star_attaches_all(api: Api) -> None:
    ids = []
    for name in ("a", "b", "c"):
        r = await api.client.post(
            "/api/v3/channels/", json={"name": name, "url": f"json://127.0.0.1:9/{name}"}, headers=api.headers
        )
        ids.append(r.json()["id"])
    check = await create_check(api, name="job", channels="*")
    assert sorted(check["channels"].split(",")) == sorted(ids)
    some = await create_check(api, name="some", channels=f"{ids[0]}, {ids[2]}")
    assert sorted(some["channels"].split(",")) == sorted([ids[0], ids[2]])
    r = await api.client.post(f"/api/v3/checks/{some['uuid']}", json={"channels": ""}, headers=api.headers)
    assert r.json()["channels"] == ""
    r = await api.client.post(f"/api/v3/checks/{some['uuid']}", json={"name": "x"}, headers=api.headers)
    assert r.json()["channels"] == ""
    # Deleting a channel detaches it.
    await api.client.delete(f"/api/v3/channels/{ids[1]}", headers=api.headers)
    assert sorted((await get_check(api, check["uuid"]))["channels"].split(",")) == sorted([ids[0], ids[2]])


# --------------------------------------------------------------------------- bad input

BAD_CREATES: list[tuple[Any, int, str]] = [
    ({"min_runtime": 1800}, 400, "min_runtime"),  # not below max_runtime (default 1800 s)
    ({"min_runtime": 60, "max_runtime": 30}, 400, "min_runtime"),
    ({"expected_runs": 0}, 400, "expected_runs"),
    ({"name": 5}, 400, "name"),
    ({"name": "x" * 101}, 400, "name"),
    ({"slug": "Bad Slug"}, 400, "slug"),
    ({"slug": 3}, 400, "slug"),
    ({"tags": ["a"]}, 400, "tags"),
    ({"desc": None}, 400, "desc"),
    ({"timeout": -5}, 400, "timeout"),
    ({"timeout": 0}, 400, "timeout"),
    ({"timeout": "60"}, 400, "timeout"),
    ({"timeout": 1.5}, 400, "timeout"),
    ({"grace": 0}, 400, "grace"),
    ({"grace": "60"}, 400, "grace"),
    ({"grace": True}, 400, "grace"),
    ({"grace": 10**12}, 400, "grace"),
    ({"max_runtime": 0}, 400, "max_runtime"),
    ({"max_runtime": None}, 400, "max_runtime"),
    ({"failure_threshold": 0}, 400, "failure_threshold"),
    ({"recovery_threshold": "1"}, 400, "recovery_threshold"),
    ({"early_tolerance": -1}, 400, "early_tolerance"),
    ({"schedule": "61 * * * *"}, 400, "schedule"),
    ({"schedule": "0 0 30 2 *"}, 400, "schedule"),
    ({"schedule": ""}, 400, "schedule"),
    ({"schedule": 5}, 400, "schedule"),
    ({"schedule": "@reboot"}, 400, "schedule"),
    ({"schedule": "*/10 * * * * *"}, 400, "schedule"),
    ({"schedule": "0 3 * * *", "tz": "Mars/Olympus"}, 400, "tz"),
    ({"schedule": "0 3 * * *", "tz": 1}, 400, "tz"),
    ({"schedule": "0 3 * * *", "tz": "+02:00"}, 400, "tz"),
    ({"schedule": "0 3 * * *", "dialect": "cobol"}, 400, "dialect"),
    ({"schedule": "0 3 * * *", "dialect": None}, 400, "dialect"),
    ({"tz": "Mars/Olympus"}, 400, "tz"),
    ({"dialect": "cobol"}, 400, "dialect"),
    ({"manual_resume": "yes"}, 400, "manual_resume"),
    ({"methods": "GET"}, 400, "methods"),
    ({"channels": 5}, 400, "channels"),
    ({"channels": "6f1c5a4e-0000-4000-8000-000000000000"}, 400, "channels"),
    ({"unique": "name"}, 400, "unique"),
    ({"unique": ["uuid"]}, 400, "unique"),
    ({"unique": ["name"], "name": 7}, 400, "name"),
    ("just a string", 400, "body"),
    (None, 400, "body"),
]


async def test_bad_create_inputs_name_the_field(api: Api) -> None:
    assert len(BAD_CREATES) >= 25
    for body, status, field in BAD_CREATES:
        r = await api.client.post("/api/v3/checks/", content=json.dumps(body), headers=api.headers)
        assert_error(r, status, field)
    # a list creates several checks: the item that is not one is named
    r = await api.client.post("/api/v3/checks/", json=[{"name": "a"}, 2], headers=api.headers)
    assert_error(r, 400, "[1]")
    r = await api.client.post("/api/v3/checks/", json={"schedule": "0 0 30 2 *"}, headers=api.headers)
    assert "never" in r.json()["error"]
    r = await api.client.post("/api/v3/checks/", json={"schedule": "*/10 * * * * *"}, headers=api.headers)
    assert "seconds" in r.json()["error"]
    assert (await api.client.get("/api/v3/checks/", headers=api.headers)).json()["checks"] == []


async def test_bad_update_inputs_name_the_field(api: Api) -> None:
    check = await create_check(api, name="job", schedule="0 3 * * *")
    uuid = check["uuid"]
    for body, status, field in BAD_CREATES:
        if isinstance(body, dict) and "unique" in body:
            continue  # ignored on update
        r = await api.client.post(f"/api/v3/checks/{uuid}", content=json.dumps(body), headers=api.headers)
        assert_error(r, status, field)
    r = await api.client.post(f"/api/v3/checks/{uuid}", json=[1, 2], headers=api.headers)
    assert_error(r, 400, "body")
    assert await get_check(api, uuid) == check


async def test_malformed_json_bodies(api: Api) -> None:
    check = await create_check(api, name="job")
    for raw in [b"{", b"{'name': 1}", b"\xff\xfe", b"[1,", b"nul", b'{"name": "x"} trailing']:
        for path in ("/api/v3/checks/", f"/api/v3/checks/{check['uuid']}", "/api/v3/channels/"):
            r = await api.client.post(
                path, content=raw, headers={**api.headers, "Content-Type": "application/json"}
            )
            assert_error(r, 400, "body")


async def test_bad_paths_and_query_parameters(api: Api) -> None:
    check = await create_check(api, name="job")
    uuid = check["uuid"]
    for path in (
        "/api/v3/checks/not-a-uuid",
        "/api/v3/checks/not-a-uuid/pings/",
        "/api/v3/checks/1234/pause",
    ):
        r = await api.client.request("GET" if "pause" not in path else "POST", path, headers=api.headers)
        assert_error(r, 404, "uuid")  # as Healthchecks: its URL patterns do not match
    assert_error(await api.client.get(f"/api/v3/checks/{MISSING_UUID}", headers=api.headers), 404, "uuid")
    for what in ("pings", "flips", "runs", "alerts"):
        for limit in ("0", "5000", "-1", "ten", "1.5", ""):
            r = await api.client.get(
                f"/api/v3/checks/{uuid}/{what}/", params={"limit": limit}, headers=api.headers
            )
            assert_error(r, 400, "limit")
        r = await api.client.get(
            f"/api/v3/checks/{uuid}/{what}/", params={"limit": "1000"}, headers=api.headers
        )
        assert r.status_code == 200
    r = await api.client.get(f"/api/v3/checks/{uuid}/pings/abc/body", headers=api.headers)
    assert r.status_code in (400, 404) and "error" in r.json()
    r = await api.client.get("/api/v3/channels/nope", headers=api.headers)
    assert_error(r, 404, "id")


BAD_CHANNELS: list[tuple[Any, str]] = [
    ({}, "url"),
    ({"url": ""}, "url"),
    ({"url": 5}, "url"),
    ({"url": "not a url"}, "url"),
    ({"url": "nosuchservice://x"}, "url"),
    ({"url": "json://127.0.0.1:99999/x"}, "url"),
    ({"url": "json://127.0.0.1:9/x", "name": 5}, "name"),
    ({"url": "json://127.0.0.1:9/x", "kinds": ["nope"]}, "kinds"),
    ({"url": "json://127.0.0.1:9/x", "kinds": 5}, "kinds"),
    ([], "body"),
]


async def test_bad_channel_inputs_name_the_field(api: Api) -> None:
    for body, field in BAD_CHANNELS:
        r = await api.client.post("/api/v3/channels/", json=body, headers=api.headers)
        assert_error(r, 400, field)
    assert (await api.client.get("/api/v3/channels/", headers=api.headers)).json()["channels"] == []


async def test_slug_conflict_is_409(api: Api) -> None:
    await create_check(api, name="a", slug="taken")
    assert_error(
        await api.client.post("/api/v3/checks/", json={"slug": "taken"}, headers=api.headers), 409, "slug"
    )
    other = await create_check(api, name="b", slug="free")
    assert_error(
        await api.client.post(f"/api/v3/checks/{other['uuid']}", json={"slug": "taken"}, headers=api.headers),
        409,
        "slug",
    )


async def test_private_targets_refused_without_dev(api: Api) -> None:

    settings = api.settings.replace(allow_private_targets=False)
    async with api.engine.begin() as conn:
        await conn.exec_driver_sql("DELETE FROM api_keys")
    async with open_api(api.engine, api.clock, settings) as strict:
        r = await strict.client.post(
            "/api/v3/channels/", json={"url": "json://127.0.0.1:9/x"}, headers=strict.headers
        )
        assert_error(r, 400, "url")
        assert "127.0.0.1" in r.json()["error"]


# --------------------------------------------------------------------------- schema, health


async def test_schema_health_ready(api: Api) -> None:
    r = await api.client.get("/schema/openapi.json")
    assert r.status_code == 200
    schema = r.json()
    assert schema["openapi"].startswith("3.")
    assert "/api/v3/checks/" in schema["paths"] or "/api/v3/checks" in schema["paths"]
    r = await api.client.get("/health")
    assert r.status_code == 200 and r.json()["status"] == "ok"
    r = await api.client.get("/ready")
    assert r.status_code == 200
    ready = r.json()
    assert set(ready) == {"database", "shards", "leases", "evaluator_lag_s"}
    assert ready["database"] == "ok" and ready["shards"] == api.settings.shards
    assert isinstance(ready["leases"], list) and isinstance(ready["evaluator_lag_s"], (int, float))
    for lease in ready["leases"]:
        assert set(lease) == {"name", "holder", "token", "expires_at"}


@pytest.mark.parametrize("path", ["/api/v3/nope", "/api/v3/checks/x/y/z"])
async def test_unknown_api_route_is_json_404(api: Api, path: str) -> None:
    r = await api.client.get(path, headers=api.headers)
    assert r.status_code == 404
    assert "error" in r.json()


async def test_evaluator_lag_reported(api: Api) -> None:
    check = await create_check(api, name="job", timeout=60, grace=1)
    await api.client.get(f"/ping/{check['uuid']}")
    api.clock.advance(60 + 1 + 10)  # next_due (due + grace) passed 10 s ago
    ready = (await api.client.get("/ready")).json()
    assert ready["evaluator_lag_s"] == pytest.approx(10, abs=0.01)
    await evaluate_due(api.engine, api.clock.now(), settings=api.settings)
    assert (await api.client.get("/ready")).json()["evaluator_lag_s"] == 0


async def test_nul_characters_are_400_not_500(api: Api) -> None:
    """PostgreSQL text cannot hold U+0000; the API must refuse it, not fail."""
    check = await create_check(api, name="job")
    for field in ("name", "desc", "tags"):
        r = await api.client.post("/api/v3/checks/", json={field: "a\x00b"}, headers=api.headers)
        assert_error(r, 400, field)
        r = await api.client.post(
            f"/api/v3/checks/{check['uuid']}", json={field: "a\x00b"}, headers=api.headers
        )
        assert_error(r, 400, field)
    r = await api.client.post(
        "/api/v3/channels/", json={"name": "a\x00", "url": "json://127.0.0.1:9/x"}, headers=api.headers
    )
    assert_error(r, 400, "name")
    r = await api.client.get("/api/v3/checks/", params={"slug": "a\x00"}, headers=api.headers)
    assert r.status_code in (200, 400) and r.status_code != 500
    r = await api.client.get("/api/v3/channels/a%00b", headers=api.headers)
    assert r.status_code in (400, 404), r.text
    r = await api.client.get("/ping/key%00/slug", params={"create": "1"})
    assert r.status_code in (400, 404), r.text
    r = await api.client.get(
        f"/ping/{check['uuid']}", headers={"Idempotency-Key": "é\u00ff".encode("latin-1")}
    )
    assert r.status_code == 200, r.text


async def test_concurrent_upserts_make_one_check(api: Api) -> None:
    """Scheduler replicas starting together upsert the same slug at once (DESIGN §8)."""
    body = {"name": "race", "slug": "race", "timeout": 60, "unique": ["slug"]}
    answers = await asyncio.gather(
        *(api.client.post("/api/v3/checks/", json=body, headers=api.headers) for _ in range(6))
    )
    assert sorted(r.status_code for r in answers) == [200] * 5 + [201], [r.text for r in answers]
    assert len({r.json()["uuid"] for r in answers}) == 1
    answers = await asyncio.gather(
        *(api.client.post("/api/v3/checks/", json={"slug": "plain"}, headers=api.headers) for _ in range(4))
    )
    assert sorted(r.status_code for r in answers) == [201, 409, 409, 409], [r.text for r in answers]
    for r in answers:
        if r.status_code == 409:
            assert_error(r, 409, "slug")
    listed = (await api.client.get("/api/v3/checks/", headers=api.headers)).json()["checks"]
    assert sorted(c["slug"] for c in listed) == ["plain", "race"]


async def test_interleaved_upserts_on_two_connections(api: Api, database_url: str) -> None:
    """Two replicas' transactions upsert one slug; the second must update, not fail."""
    project_id = int(api.project["id"])
    other = make_engine(database_url)
    try:
        async with api.engine.connect() as first, other.connect() as second:
            await first.begin()
            await second.begin() if api.engine.dialect.name == "postgresql" else None
            body = {"name": "race", "slug": "race", "timeout": 60, "unique": ["slug"]}
            one, created_one = await check_service.create_or_upsert(
                first, project_id, body, api.clock.now(), shards=16
            )
            if api.engine.dialect.name == "postgresql":
                racing = asyncio.create_task(
                    check_service.create_or_upsert(
                        second, project_id, {**body, "timeout": 120}, api.clock.now(), shards=16
                    )
                )
                await asyncio.sleep(0.3)
                assert not racing.done()  # waits on the unique index
                await first.commit()
                two, created_two = await racing
                await second.commit()
            else:
                await first.commit()
                await second.begin()
                two, created_two = await check_service.create_or_upsert(
                    second, project_id, {**body, "timeout": 120}, api.clock.now(), shards=16
                )
                await second.commit()
    finally:
        await other.dispose()
    assert (created_one, created_two) == (True, False)
    assert one == two
    [check] = (await api.client.get("/api/v3/checks/", headers=api.headers)).json()["checks"]
    assert check["timeout"] == 120


# PostgreSQL only: SQLite transactions take the write lock at BEGIN, so creates cannot interleave.
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_interleaved_creates_of_one_slug_conflict(api: Api, database_url: str) -> None:
    """Without ``unique`` the second of two racing creates is a 409 (Conflict), never a 500."""
    project_id = int(api.project["id"])
    other = make_engine(database_url)
    try:
        async with api.engine.connect() as first, other.connect() as second:
            await first.begin()
            await second.begin()
            await check_service.create_or_upsert(
                first, project_id, {"slug": "one"}, api.clock.now(), shards=16
            )
            racing = asyncio.create_task(
                check_service.create_or_upsert(
                    second, project_id, {"slug": "one"}, api.clock.now(), shards=16
                )
            )
            await asyncio.sleep(0.3)
            await first.commit()
            with pytest.raises(Conflict, match=r"^slug: "):
                await racing
            # The savepoint kept the second transaction usable.
            await check_service.create_or_upsert(
                second, project_id, {"slug": "two"}, api.clock.now(), shards=16
            )
            await second.commit()
    finally:
        await other.dispose()
    listed = (await api.client.get("/api/v3/checks/", headers=api.headers)).json()["checks"]
    assert sorted(c["slug"] for c in listed) == ["one", "two"]


async def test_dialect_is_case_insensitive(api: Api) -> None:
    """Explain accepts ``dialect=QUARTZ``; so does the check API."""
    r = await api.client.post(
        "/api/v3/checks/", json={"schedule": "*/10 * * * * *", "dialect": "Seconds"}, headers=api.headers
    )
    assert r.status_code == 201, r.text
    assert r.json()["dialect"] == "seconds"


async def test_unknown_routes_and_methods_name_what_is_wrong(api: Api) -> None:
    r = await api.client.get("/api/v3/nothing-here", headers=api.headers)
    assert r.status_code == 404 and r.json()["error"].startswith("path: ")
    r = await api.client.put("/api/v3/checks/", headers=api.headers)
    assert r.status_code == 405 and r.json()["error"].startswith("method: ")


async def test_the_checks_list_honours_and_validates_limit(api: Api) -> None:
    for i in range(3):
        await create_check(api, name=f"c{i}")
    r = await api.client.get("/api/v3/checks/", params={"limit": "2"}, headers=api.headers)
    assert [c["name"] for c in r.json()["checks"]] == ["c0", "c1"]
    r = await api.client.get("/api/v3/checks/", params={"limit": "abc"}, headers=api.headers)
    assert r.status_code == 400 and r.json()["error"].startswith("limit: ")


async def test_a_nul_character_in_a_tag_filter_is_a_400_naming_tag(api: Api) -> None:
    r = await api.client.get("/api/v3/checks/", params={"tag": "a\x00b"}, headers=api.headers)
    assert (r.status_code, r.json()["error"]) == (400, "tag: must not contain NUL characters")
