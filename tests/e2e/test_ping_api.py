"""The ping API of DESIGN §5 over the in-process app, on SQLite and PostgreSQL.

Every form (`/ping/<uuid>[/action]`, `/ping/<ping_key>/<slug>[/action]`, `?create=1`),
every method (GET, POST, HEAD), `rid`, `scheduled`, `Idempotency-Key`, bodies, the rate
limit and the plain-text answers, with the clock injected.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.app import create_app
from monitor.domain.clock import FrozenClock
from monitor.services.projects import create_project
from monitor.settings import Settings
from monitor.storage import tables as t
from tests.conftest import API_KEY, Api
from tests.support.app import create_check, get_check, list_of, open_api

UNKNOWN = "6f1c5a4e-0000-4000-8000-000000000000"
RID = "5d0e8e58-1111-4222-8333-444455556666"


async def ping(api: Api, path: str, method: str = "GET", **kwargs: Any) -> httpx.Response:
    return await api.client.request(method, f"/ping/{path}", **kwargs)


def assert_ping_headers(response: httpx.Response, limit: int = 100_000) -> None:
    assert response.headers["ping-body-limit"] == str(limit)
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.headers["content-type"].startswith("text/plain")


async def test_every_action_is_stored_with_its_kind(api: Api) -> None:
    check = await create_check(api, name="job")
    uuid = check["uuid"]
    expected = [
        ("", "success", None),
        ("/start", "start", None),
        ("/fail", "fail", None),
        ("/log", "log", None),
        ("/0", "success", 0),
        ("/1", "fail", 1),
        ("/255", "fail", 255),
    ]
    for action, _, _ in expected:
        api.clock.advance(1)
        r = await ping(api, f"{uuid}{action}")
        assert (r.status_code, r.text) == (200, "OK"), action
        assert_ping_headers(r)
    pings = list(reversed(await list_of(api, uuid, "pings")))
    assert [(p["type"], p["exit_status"]) for p in pings] == [(k, s) for _, k, s in expected]
    assert [p["n"] for p in pings] == list(range(1, len(expected) + 1))
    assert all(p["method"] == "GET" for p in pings)


async def test_bad_action_is_invalid_url_format(api: Api) -> None:
    check = await create_check(api, name="job")
    for action in ["256", "1000", "-1", "abc", "success", "0x1", "01234"]:
        r = await ping(api, f"{check['uuid']}/{action}")
        assert (r.status_code, r.text) == (400, "invalid url format"), action
        assert_ping_headers(r)
    assert (await get_check(api, check["uuid"]))["n_pings"] == 0


async def test_unknown_and_malformed_uuids(api: Api) -> None:
    r = await ping(api, UNKNOWN)
    assert (r.status_code, r.text) == (404, "not found")
    assert_ping_headers(r)
    for bad in ("not-a-uuid", "6f1c5a4e00004000800000000000000", "6f1c5a4e-0000-4000-8000-00000000000g"):
        r = await ping(api, bad)
        assert (r.status_code, r.text) == (400, "invalid uuid format"), bad
        assert_ping_headers(r)
    r = await ping(api, f"{UNKNOWN}/start")
    assert (r.status_code, r.text) == (404, "not found")


async def test_uppercase_uuid_is_accepted(api: Api) -> None:
    check = await create_check(api, name="job")
    r = await ping(api, check["uuid"].upper())
    assert (r.status_code, r.text) == (200, "OK")


async def test_bad_rid_is_invalid_uuid_format(api: Api) -> None:
    check = await create_check(api, name="job")
    for rid in ["nope", "1234", RID + "0", "{" + RID + "}"]:
        r = await ping(api, f"{check['uuid']}/start", params={"rid": rid})
        assert (r.status_code, r.text) == (400, "invalid uuid format"), rid
    assert (await get_check(api, check["uuid"]))["n_pings"] == 0


async def test_rid_upper_case_is_normalised(api: Api) -> None:
    check = await create_check(api, name="job")
    r = await ping(api, f"{check['uuid']}/start", params={"rid": RID.upper()})
    assert r.status_code == 200
    assert (await list_of(api, check["uuid"], "pings"))[0]["rid"] == RID


async def test_methods_get_post_head_answer_alike(api: Api) -> None:
    check = await create_check(api, name="job")
    for path, status, text in [
        (check["uuid"], 200, "OK"),
        (UNKNOWN, 404, "not found"),
        ("nope", 400, "invalid uuid format"),
        (f"{check['uuid']}/300", 400, "invalid url format"),
    ]:
        answers = {m: await ping(api, path, m) for m in ("GET", "POST", "HEAD")}
        for method, r in answers.items():
            assert r.status_code == status, (method, path)
            assert_ping_headers(r)
        assert answers["GET"].text == answers["POST"].text == text
        assert answers["HEAD"].content == b""
        assert answers["HEAD"].headers["content-type"] == answers["GET"].headers["content-type"]
    pings = await list_of(api, check["uuid"], "pings")
    assert sorted(p["method"] for p in pings) == ["GET", "HEAD", "POST"]


async def test_options_is_cors_preflight(api: Api) -> None:
    check = await create_check(api, name="job")
    r = await ping(api, check["uuid"], "OPTIONS")
    assert r.status_code == 204
    assert r.headers["access-control-allow-origin"] == "*"
    assert (await get_check(api, check["uuid"]))["n_pings"] == 0


async def test_a_browser_ping_keeps_litestar_cors(api: Api) -> None:
    """Pings skip the application's middlewares (``pings_first``) except a browser's, which
    names an ``Origin``: its preflight and its ping get the application's CORS answers, as
    before the shortcut."""
    check = await create_check(api, name="job")
    origin = {"Origin": "https://example.org"}
    r = await ping(api, check["uuid"], "OPTIONS", headers={**origin, "Access-Control-Request-Method": "POST"})
    assert r.status_code == 204
    assert r.headers["access-control-allow-origin"] == "*"
    assert "PUT" in r.headers["access-control-allow-methods"]  # Litestar's answer, not the ping API's
    r = await ping(api, check["uuid"], "POST", headers=origin)
    assert (r.status_code, r.text) == (200, "OK")
    assert r.headers["access-control-allow-methods"] == "*"
    assert_ping_headers(r)
    assert (await get_check(api, check["uuid"]))["n_pings"] == 1


@pytest.mark.parametrize("host", ["bad host", "a/b", "a?b", "ünï.example".encode()])
async def test_a_ping_with_a_bad_host_is_refused_in_plain_text(api: Api, host: str | bytes) -> None:
    # a ping's answers are plain text with the ping headers (DESIGN §5), this refusal too
    check = await create_check(api, name="job")
    for headers in ({"Host": host}, {"Host": host, "Origin": "https://example.org"}):
        r = await ping(api, check["uuid"], headers=headers)
        assert (r.status_code, r.text) == (400, "request: invalid host header"), headers
        assert_ping_headers(r)
    head = await ping(api, check["uuid"], "HEAD", headers={"Host": host})
    assert (head.status_code, head.content) == (400, b"")
    assert (await get_check(api, check["uuid"]))["n_pings"] == 0
    api_answer = await api.client.get("/api/v3/checks/", headers={**api.headers, "Host": host})
    assert api_answer.json() == {"error": "request: invalid host header"}


async def test_an_unexpected_error_of_a_ping_is_logged_and_answered_500(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    """As the application's handler answers one: a ping reaching an app whose lifespan has not
    started (no ingest writer yet) fails unexpectedly."""
    app = create_app(api.settings, clock=api.clock, evaluator=False, notify=False, liveness=False)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": f"/ping/{UNKNOWN}",
        "raw_path": f"/ping/{UNKNOWN}".encode(),
        "query_string": b"",
        "headers": [(b"host", b"localhost")],
        "client": ("127.0.0.1", 1),
        "scheme": "http",
        "root_path": "",
    }
    with caplog.at_level(logging.ERROR, logger="monitor.http.app"):
        await app(scope, receive, send)  # type: ignore[arg-type]
    assert sent[0]["status"] == 500
    assert json.loads(sent[1]["body"]) == {"error": "internal error; it has been logged"}
    assert any(record.getMessage() == "unhandled error" for record in caplog.records)


async def test_skip_needs_scheduled(api: Api) -> None:
    check = await create_check(api, name="cron", schedule="*/5 * * * *")
    r = await ping(api, f"{check['uuid']}/skip")
    assert r.status_code == 400
    assert r.text.startswith("scheduled: ")
    r = await ping(api, f"{check['uuid']}/skip", params={"scheduled": "2026-07-18T02:00:00Z"})
    assert (r.status_code, r.text) == (200, "OK")
    [stored] = await list_of(api, check["uuid"], "pings")
    assert (stored["type"], stored["scheduled"]) == ("skip", "2026-07-18T02:00:00Z")


async def test_unknown_ends_the_run_as_outcome_unknown_with_no_alert(api: Api) -> None:
    check = await create_check(api, name="lost", schedule="*/5 * * * *", grace=60)
    uuid = check["uuid"]
    params = {"rid": RID, "scheduled": "2026-07-18T02:00:00Z"}
    for action in ("/start", "/unknown"):
        api.clock.advance(1)
        r = await ping(api, f"{uuid}{action}", "POST", params=params, content=b"its runner died")
        assert (r.status_code, r.text) == (200, "OK"), action
    pings = list(reversed(await list_of(api, uuid, "pings")))
    assert [p["type"] for p in pings] == ["start", "unknown"]
    [run] = await list_of(api, uuid, "runs")
    assert (run["outcome"], run["exit_status"], run["scheduled"]) == ("unknown", None, "2026-07-18T02:00:00Z")
    assert (await get_check(api, uuid))["started"] is False


# --------------------------------------------------------------------------- slug URLs


async def test_slug_url_without_create_is_404_and_with_create_is_201(api: Api) -> None:
    key = api.project["ping_key"]
    channel_ids = []
    for name in ("a", "b"):
        r = await api.client.post(
            "/api/v3/channels/",
            json={"name": name, "url": "json://127.0.0.1:9/hook", "default": name == "a"},
            headers=api.headers,
        )
        assert r.status_code == 201, r.text
        channel_ids.append(r.json()["id"])

    r = await ping(api, f"{key}/nightly-backup")
    assert (r.status_code, r.text) == (404, "not found")
    assert_ping_headers(r)
    listed = await api.client.get("/api/v3/checks/", params={"slug": "nightly-backup"}, headers=api.headers)
    assert listed.json()["checks"] == []

    r = await ping(api, f"{key}/nightly-backup", params={"create": "1"})
    assert (r.status_code, r.text) == (201, "Created")
    assert_ping_headers(r)
    [check] = (
        await api.client.get("/api/v3/checks/", params={"slug": "nightly-backup"}, headers=api.headers)
    ).json()["checks"]
    assert check["name"] == "nightly-backup"
    assert check["kind"] == "simple"
    assert (check["timeout"], check["grace"]) == (86400, 3600)
    assert check["n_pings"] == 1
    assert check["status"] == "up"
    # like any check created without a channels field: the project's default channels
    assert check["channels"] == channel_ids[0]

    # Now it exists: a second ping (with or without create) is a plain 200.
    api.clock.advance(10)
    r = await ping(api, f"{key}/nightly-backup", params={"create": "1"})
    assert (r.status_code, r.text) == (200, "OK")
    r = await ping(api, f"{key}/nightly-backup/start")
    assert (r.status_code, r.text) == (200, "OK")
    r = await ping(api, f"{key}/nightly-backup/3")
    assert (r.status_code, r.text) == (200, "OK")
    pings = await list_of(api, check["uuid"], "pings")
    assert [(p["type"], p["exit_status"]) for p in pings] == [
        ("fail", 3),
        ("start", None),
        ("success", None),
        ("success", None),
    ]


async def test_slug_url_other_forms(api: Api) -> None:
    key = api.project["ping_key"]
    await create_check(api, name="Sync", slug="sync")
    assert (await ping(api, f"{key}/sync/fail")).status_code == 200
    assert (await ping(api, f"{key}/sync/log", "POST", content=b"x")).status_code == 200
    r = await ping(api, f"{key}/Sync")
    assert (r.status_code, r.text) == (400, "invalid url format")
    r = await ping(api, f"{key}/sync/256")
    assert (r.status_code, r.text) == (400, "invalid url format")
    r = await ping(api, "wrong-ping-key/sync")
    assert (r.status_code, r.text) == (404, "not found")
    r = await ping(api, "wrong-ping-key/sync", params={"create": "1"})
    assert (r.status_code, r.text) == (404, "not found")
    r = await ping(api, f"{key}/sync/start/extra")
    assert (r.status_code, r.text) == (400, "invalid url format")


async def test_create_only_for_slug_urls(api: Api) -> None:
    r = await ping(api, UNKNOWN, params={"create": "1"})
    assert r.status_code in (400, 404)
    async with api.engine.connect() as conn:
        assert (await conn.execute(select(t.checks.c.id))).all() == []


async def test_slug_of_another_project_is_not_found(api: Api) -> None:
    async with api.engine.begin() as conn:
        other = await create_project(conn, "other", api.clock.now())
    await create_check(api, name="mine", slug="mine")
    r = await ping(api, f"{other['ping_key']}/mine")
    assert (r.status_code, r.text) == (404, "not found")
    r = await ping(api, f"{other['ping_key']}/mine", params={"create": "1"})
    assert (r.status_code, r.text) == (201, "Created")
    # The new check lives in the other project, not in ours.
    mine = (await api.client.get("/api/v3/checks/", params={"slug": "mine"}, headers=api.headers)).json()
    assert len(mine["checks"]) == 1 and mine["checks"][0]["n_pings"] == 0


# --------------------------------------------------------------------------- scheduled


SCHEDULED_FORMS = [
    ("2026-07-18T01:40:00Z", "2026-07-18T01:40:00Z"),
    ("2026-07-18T01:41:30z", "2026-07-18T01:40:00Z"),
    ("2026-07-18T03:45:00+02:00", "2026-07-18T01:45:00Z"),
    ("2026-07-17T21:50:00-04:00", "2026-07-18T01:50:00Z"),
    (str(int(datetime(2026, 7, 18, 1, 55, tzinfo=UTC).timestamp())), "2026-07-18T01:55:00Z"),
    (str(int(datetime(2026, 7, 18, 1, 55, tzinfo=UTC).timestamp()) * 1000), "2026-07-18T01:55:00Z"),
    ("2026-07-18T02:00:59Z", "2026-07-18T02:00:00Z"),
    ("2026-07-18T02:01:00Z", "2026-07-18T02:00:00Z"),  # received + early tolerance exactly
]


async def test_scheduled_forms(api: Api) -> None:
    for raw, tick in SCHEDULED_FORMS:
        check = await create_check(api, name="cron", schedule="*/5 * * * *")
        r = await ping(api, check["uuid"], params={"scheduled": raw})
        assert (r.status_code, r.text) == (200, "OK"), (raw, r.text)
        [stored] = await list_of(api, check["uuid"], "pings")
        assert stored["scheduled"] == tick, raw
        [run] = await list_of(api, check["uuid"], "runs")
        assert run["scheduled"] == tick, raw


async def test_scheduled_offset_with_literal_plus(api: Api) -> None:
    """``curl '…?scheduled=2026-07-18T03:45:00+02:00'`` sends a raw ``+`` (a space once decoded)."""
    check = await create_check(api, name="cron", schedule="*/5 * * * *")
    r = await ping(api, f"{check['uuid']}?scheduled=2026-07-18T03:45:00+02:00")
    assert (r.status_code, r.text) == (200, "OK"), r.text
    [stored] = await list_of(api, check["uuid"], "pings")
    assert stored["scheduled"] == "2026-07-18T01:45:00Z"


BAD_SCHEDULED = [
    "yesterday",
    "2026-07-18T02:00:00",  # no offset
    "2026-13-01T00:00:00Z",
    "1e10",
    "-5",
    "99999999999999999999",
    "2026-07-18T02:05:01Z",  # later than received + the early window (min(grace 3600 s, 5 min))
    "2027-01-01T00:00:00Z",
    str(int(datetime(2027, 1, 1, tzinfo=UTC).timestamp())),
    # the calendar's ends (a 503 or a 500 before)
    "0002-01-01T00:00:00Z",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "1999-12-31T23:59:59Z",
]


async def test_bad_scheduled_is_400(api: Api) -> None:
    check = await create_check(api, name="cron", schedule="*/5 * * * *")
    for raw in BAD_SCHEDULED:
        r = await ping(api, check["uuid"], params={"scheduled": raw})
        assert r.status_code == 400, (raw, r.text)
        assert r.text.startswith("scheduled: "), r.text
        assert_ping_headers(r)
    assert (await get_check(api, check["uuid"]))["n_pings"] == 0


async def test_scheduled_not_matching_rid_is_400(api: Api) -> None:
    check = await create_check(api, name="cron", schedule="*/5 * * * *")
    uuid = check["uuid"]
    r = await ping(api, f"{uuid}/start", params={"rid": RID, "scheduled": "2026-07-18T02:00:00Z"})
    assert r.status_code == 200
    r = await ping(api, uuid, params={"rid": RID, "scheduled": "2026-07-18T01:55:00Z"})
    assert (r.status_code, r.text) == (400, f"scheduled: does not match run {RID}")


# --------------------------------------------------------------------------- runs, rid


async def test_rid_pairs_start_and_finish_with_duration(api: Api) -> None:
    check = await create_check(api, name="cron", schedule="*/5 * * * *")
    uuid = check["uuid"]
    other = "0b6b6c8e-aaaa-4bbb-8ccc-dddddddddddd"
    assert (await ping(api, f"{uuid}/start", params={"rid": RID})).status_code == 200
    api.clock.advance(5)
    assert (await ping(api, f"{uuid}/start", params={"rid": other})).status_code == 200
    assert (await get_check(api, uuid))["started"] is True
    api.clock.advance(25)
    assert (await ping(api, uuid, params={"rid": RID})).status_code == 200
    api.clock.advance(10)
    assert (await ping(api, f"{uuid}/1", params={"rid": other})).status_code == 200
    pings = await list_of(api, uuid, "pings")
    by_n = {p["n"]: p for p in pings}
    assert by_n[3]["duration"] == 30.0 and by_n[3]["rid"] == RID
    assert by_n[4]["duration"] == 35.0 and by_n[4]["rid"] == other and by_n[4]["exit_status"] == 1
    assert by_n[1]["duration"] is None
    runs = await list_of(api, uuid, "runs")
    assert sorted((r["rid"], r["duration"], r["exit_status"]) for r in runs) == sorted(
        [(RID, 30.0, None), (other, 35.0, 1)]
    )
    assert (await get_check(api, uuid))["started"] is False


async def test_retransmitted_rid_finish_changes_nothing(api: Api) -> None:
    check = await create_check(api, name="cron", schedule="*/5 * * * *")
    uuid = check["uuid"]
    for _ in range(3):
        assert (await ping(api, uuid, params={"rid": RID})).status_code == 200
        api.clock.advance(1)
    assert len(await list_of(api, uuid, "runs")) == 1
    assert [a["kind"] for a in await list_of(api, uuid, "alerts")] == []
    assert (await get_check(api, uuid))["n_pings"] == 3


# --------------------------------------------------------------------------- idempotency


async def test_idempotency_key_repeat_stores_nothing(api: Api) -> None:
    check = await create_check(api, name="job")
    uuid = check["uuid"]
    headers = {"Idempotency-Key": "job:2026-07-18T02:00:00Z:1:success"}
    r1 = await ping(api, uuid, headers=headers)
    api.clock.advance(3600)
    r2 = await ping(api, uuid, "POST", headers=headers, content=b"again")
    assert (r1.status_code, r1.text) == (r2.status_code, r2.text) == (200, "OK")
    assert_ping_headers(r2)
    assert (await get_check(api, uuid))["n_pings"] == 1
    # Scope is (check, kind): the same key on /start is a new ping.
    assert (await ping(api, f"{uuid}/start", headers=headers)).status_code == 200
    assert (await get_check(api, uuid))["n_pings"] == 2
    # Remembered 7 days, then forgotten.
    api.clock.advance(8 * 86400)
    assert (await ping(api, uuid, headers=headers)).status_code == 200
    assert (await get_check(api, uuid))["n_pings"] == 3


async def test_idempotency_key_repeat_gets_the_first_answer_201(api: Api) -> None:
    key = api.project["ping_key"]
    headers = {"Idempotency-Key": "provision-1"}
    r1 = await ping(api, f"{key}/auto", params={"create": "1"}, headers=headers)
    r2 = await ping(api, f"{key}/auto", params={"create": "1"}, headers=headers)
    assert (r1.status_code, r1.text) == (r2.status_code, r2.text) == (201, "Created")
    [check] = (await api.client.get("/api/v3/checks/", params={"slug": "auto"}, headers=api.headers)).json()[
        "checks"
    ]
    assert check["n_pings"] == 1


async def test_idempotency_key_in_one_batch(api: Api) -> None:
    """Requests with one key in flight together: one stored, all answered alike."""
    check = await create_check(api, name="job")
    headers = {"Idempotency-Key": "k-1"}
    answers = await asyncio.gather(*(ping(api, check["uuid"], headers=headers) for _ in range(5)))
    assert {(a.status_code, a.text) for a in answers} == {(200, "OK")}
    assert (await get_check(api, check["uuid"]))["n_pings"] == 1


async def test_bad_idempotency_key(api: Api) -> None:
    check = await create_check(api, name="job")
    r = await ping(api, check["uuid"], headers={"Idempotency-Key": "x" * 201})
    assert r.status_code == 400 and r.text.startswith("Idempotency-Key: ")


# --------------------------------------------------------------------------- bodies


async def test_body_is_stored_raw(api: Api) -> None:
    check = await create_check(api, name="job")
    uuid = check["uuid"]
    payload = b"backup done\n\x00\xff\xfe bytes"
    r = await ping(api, f"{uuid}/log", "POST", content=payload)
    assert r.status_code == 200
    [stored] = await list_of(api, uuid, "pings")
    assert stored["body_url"] == f"{api.settings.base_url}/api/v3/checks/{uuid}/pings/1/body"
    body = await api.client.get(f"/api/v3/checks/{uuid}/pings/1/body", headers=api.headers)
    assert body.status_code == 200
    assert body.content == payload
    assert body.headers["content-type"].startswith("text/plain")
    # A ping without a body has no body URL, and asking for it is a JSON 404.
    assert (await ping(api, uuid)).status_code == 200
    assert (await list_of(api, uuid, "pings"))[0]["body_url"] is None
    missing = await api.client.get(f"/api/v3/checks/{uuid}/pings/2/body", headers=api.headers)
    assert missing.status_code == 404 and "error" in missing.json()
    for n in ("99", "0", "-1", "2147483648", "99999999999999999999"):  # beyond the column: no 500
        missing = await api.client.get(f"/api/v3/checks/{uuid}/pings/{n}/body", headers=api.headers)
        assert missing.status_code == 404 and "error" in missing.json(), n


async def test_oversized_body_is_truncated_to_first_bytes(
    engine: AsyncEngine, clock: FrozenClock, settings_factory: Callable[..., Settings]
) -> None:
    async with open_api(engine, clock, settings_factory(ping_body_limit=100)) as api:
        check = await create_check(api, name="job")
        uuid = check["uuid"]
        payload = bytes(range(256)) * 40
        r = await ping(api, f"{uuid}/fail", "POST", content=payload)
        assert (r.status_code, r.text) == (200, "OK")
        assert_ping_headers(r, limit=100)
        body = await api.client.get(f"/api/v3/checks/{uuid}/pings/1/body", headers=api.headers)
        assert body.content == payload[:100]
        [stored] = await list_of(api, uuid, "pings")
        assert stored["type"] == "fail"
        # Every answer carries the configured limit, errors included.
        assert_ping_headers(await ping(api, UNKNOWN), limit=100)
        assert_ping_headers(await ping(api, "bad"), limit=100)


# --------------------------------------------------------------------------- rate limit


async def test_rate_limit_answers_429_with_retry_after(
    engine: AsyncEngine, clock: FrozenClock, settings_factory: Callable[..., Settings]
) -> None:
    async with open_api(engine, clock, settings_factory(ping_rate_limit=3)) as api:
        check = await create_check(api, name="job")
        other = await create_check(api, name="other")
        uuid = check["uuid"]
        for _ in range(3):
            clock.advance(1)
            assert (await ping(api, uuid)).status_code == 200
        r = await ping(api, uuid)
        assert r.status_code == 429
        assert_ping_headers(r)
        retry_after = int(r.headers["retry-after"])
        assert 1 <= retry_after <= 60
        head = await ping(api, uuid, "HEAD")
        assert head.status_code == 429 and head.content == b"" and "retry-after" in head.headers
        assert (await get_check(api, uuid))["n_pings"] == 3
        # Per check: another check is not limited.
        assert (await ping(api, other["uuid"])).status_code == 200
        # After the window the check may ping again.
        clock.advance(retry_after)
        assert (await ping(api, uuid)).status_code == 200
        assert (await get_check(api, uuid))["n_pings"] == 4


# --------------------------------------------------------------------------- methods, pause


async def test_post_only_check_stores_get_as_ign(api: Api) -> None:
    check = await create_check(api, name="job", methods="POST")
    uuid = check["uuid"]
    for method in ("GET", "HEAD"):
        r = await ping(api, uuid, method)
        assert r.status_code == 200
    assert (await get_check(api, uuid))["status"] == "new"
    assert [p["type"] for p in await list_of(api, uuid, "pings")] == ["ign", "ign"]
    assert await list_of(api, uuid, "runs") == []
    assert (await ping(api, uuid, "POST")).status_code == 200
    after = await get_check(api, uuid)
    assert after["status"] == "up"
    assert after["last_ping"] == "2026-07-18T02:00:00Z"
    assert [p["type"] for p in await list_of(api, uuid, "pings")] == ["success", "ign", "ign"]


async def test_an_ign_ping_is_stored_with_the_tick_it_would_bind_to(api: Api) -> None:
    # DESIGN §5: log and ign pings are stored with the tick they would bind to, for display only
    check = await create_check(api, name="nightly", schedule="0 2 * * *", grace=600, methods="POST")
    uuid = check["uuid"]
    api.clock.advance(30)  # 02:00:30, just after the 02:00 tick
    assert (await ping(api, uuid, "GET")).status_code == 200
    assert (await ping(api, f"{uuid}/log", "POST")).status_code == 200
    pings = await list_of(api, uuid, "pings")
    assert [(p["type"], p["scheduled"]) for p in pings] == [
        ("log", "2026-07-18T02:00:00Z"),
        ("ign", "2026-07-18T02:00:00Z"),
    ]
    assert (await get_check(api, uuid))["status"] == "new"
    assert await list_of(api, uuid, "runs") == []


async def test_ping_resumes_a_paused_check(api: Api) -> None:
    check = await create_check(api, name="job")
    uuid = check["uuid"]
    assert (await ping(api, uuid)).status_code == 200
    r = await api.client.post(f"/api/v3/checks/{uuid}/pause", headers=api.headers)
    assert r.json()["status"] == "paused"
    api.clock.advance(60)
    assert (await ping(api, uuid)).status_code == 200
    after = await get_check(api, uuid)
    assert after["status"] == "up"
    assert [p["type"] for p in await list_of(api, uuid, "pings")] == ["success", "success"]
    reasons = [f["reason"] for f in await list_of(api, uuid, "flips")]
    assert "paused" in reasons and "resumed" in reasons


async def test_manual_resume_stores_ping_as_ign(api: Api) -> None:
    check = await create_check(api, name="job", manual_resume=True)
    uuid = check["uuid"]
    assert (await ping(api, uuid)).status_code == 200
    await api.client.post(f"/api/v3/checks/{uuid}/pause", headers=api.headers)
    api.clock.advance(60)
    for action in ("", "/start", "/fail", "/0"):
        assert (await ping(api, f"{uuid}{action}")).status_code == 200
    after = await get_check(api, uuid)
    assert after["status"] == "paused"
    assert [p["type"] for p in await list_of(api, uuid, "pings")] == ["ign"] * 4 + ["success"]
    assert after["n_pings"] == 5
    # A log ping is still a log line.
    assert (await ping(api, f"{uuid}/log")).status_code == 200
    assert (await list_of(api, uuid, "pings"))[0]["type"] == "log"


async def test_n_equals_n_pings_after_each_ping(api: Api) -> None:
    check = await create_check(api, name="job")
    uuid = check["uuid"]
    for i, action in enumerate(["", "/start", "/log", "/fail", "/7", ""], start=1):
        api.clock.advance(2)
        assert (await ping(api, f"{uuid}{action}")).status_code == 200
        n_pings = (await get_check(api, uuid))["n_pings"]
        assert n_pings == i
        assert (await list_of(api, uuid, "pings"))[0]["n"] == n_pings


async def test_ping_records_method_address_and_user_agent(api: Api) -> None:
    check = await create_check(api, name="job")
    uuid = check["uuid"]
    ua = "curl/8.0 " + "x" * 300
    headers = {"User-Agent": ua, "X-Forwarded-For": "1.2.3.4"}
    assert (await ping(api, uuid, "POST", headers=headers)).status_code == 200
    [stored] = await list_of(api, uuid, "pings")
    assert stored["method"] == "POST"
    assert stored["ua"] == ua[:200]
    assert stored["remote_addr"] != "1.2.3.4"  # no trusted proxies configured
    assert stored["date"] == "2026-07-18T02:00:00Z"


async def test_trusted_proxy_forwarded_for(
    engine: AsyncEngine, clock: FrozenClock, settings_factory: Callable[..., Settings]
) -> None:
    async with open_api(engine, clock, settings_factory()) as probe:
        check = await create_check(probe, name="probe")
        await ping(probe, check["uuid"])
        peer = (await list_of(probe, check["uuid"], "pings"))[0]["remote_addr"]
    settings = settings_factory(trusted_proxies=frozenset({peer}))
    app = create_app(settings, clock=clock, evaluator=False, notify=False, liveness=False)
    async with AsyncTestClient(app) as client:
        r = await client.get(f"/ping/{check['uuid']}", headers={"X-Forwarded-For": "203.0.113.9, 10.0.0.1"})
        assert r.status_code == 200
        pings = (
            await client.get(f"/api/v3/checks/{check['uuid']}/pings/", headers={"X-Api-Key": API_KEY})
        ).json()["pings"]
        assert pings[0]["remote_addr"] == "203.0.113.9"


async def test_a_scheduled_date_without_a_time_of_day_says_so(api: Api) -> None:
    # Python's fromisoformat reads "2026-07-18Z" as a naive midnight: the answer said the Z
    # (which was there) was missing
    check = await create_check(api, name="daily", schedule="0 2 * * *")
    for raw in ("2026-07-18Z", "2026-07-18+02:00", "2026-07-18", "20260718Z"):
        r = await ping(api, check["uuid"], params={"scheduled": raw})
        assert r.status_code == 400, (raw, r.text)
        assert r.text.startswith("scheduled: needs a time of day and a UTC offset or Z"), r.text
    assert (await get_check(api, check["uuid"]))["n_pings"] == 0
