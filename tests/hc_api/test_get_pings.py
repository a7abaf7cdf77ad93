"""GET /api/v3/checks/<uuid>/pings/ (Healthchecks' test_get_pings.py)."""

from __future__ import annotations

import uuid as uuid_module
from typing import Any

from tests.conftest import Api
from tests.hc_api.conftest import make_check, other_project_headers, ping


async def _get(api: Api, uuid: str, headers: dict[str, str] | None = None) -> Any:
    return await api.client.get(f"/api/v1/checks/{uuid}/pings/", headers=headers or api.headers)


async def test_it_works(api: Api) -> None:
    check = await make_check(api, timeout=3600, grace=900)
    await api.client.get(f"/ping/{check['uuid']}", headers={"user-agent": "foo-agent"})
    r = await _get(api, check["uuid"])
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"
    (p,) = r.json()["pings"]
    assert p["n"] == 1
    assert p["type"] == "success"
    assert p["scheme"] == "http"
    assert p["method"] == "GET"
    assert p["ua"] == "foo-agent"
    assert p["remote_addr"]
    assert p["date"] == "2026-07-18T02:00:00Z"


async def test_readonly_key_is_not_allowed(api: Api) -> None:
    check = await make_check(api)
    assert (await _get(api, check["uuid"], api.ro_headers)).status_code == 401


async def test_it_rejects_post(api: Api) -> None:
    check = await make_check(api)
    r = await api.client.post(f"/api/v1/checks/{check['uuid']}/pings/", headers=api.headers)
    assert r.status_code == 405


async def test_it_handles_missing_api_key(api: Api) -> None:
    check = await make_check(api)
    r = await api.client.get(f"/api/v1/checks/{check['uuid']}/pings/")
    assert r.status_code == 401 and "missing" in r.json()["error"]


async def test_it_validates_ownership(api: Api) -> None:
    """DESIGN §9: 404 (Healthchecks: 403)."""
    check = await make_check(api)
    assert (await _get(api, check["uuid"], await other_project_headers(api))).status_code == 404


async def test_it_calculates_overlapping_durations(api: Api) -> None:
    check = await make_check(api, timeout=3600, grace=3600)
    a, b = str(uuid_module.uuid4()), str(uuid_module.uuid4())
    await ping(api, check["uuid"], "start", rid=a)
    api.clock.advance(60)
    await ping(api, check["uuid"], "start", rid=b)
    api.clock.advance(60)
    await ping(api, check["uuid"], rid=a)
    api.clock.advance(240)
    await ping(api, check["uuid"], rid=b)
    pings = (await _get(api, check["uuid"])).json()["pings"]
    assert [p["n"] for p in pings] == [4, 3, 2, 1]  # newest first
    assert pings[0]["duration"] == 300.0
    assert pings[1]["duration"] == 120.0


async def test_it_handles_rid(api: Api) -> None:
    check = await make_check(api)
    rid = str(uuid_module.uuid4())
    await ping(api, check["uuid"], rid=rid)
    assert (await _get(api, check["uuid"])).json()["pings"][0]["rid"] == rid


async def test_it_reports_kinds_and_exit_status(api: Api) -> None:
    check = await make_check(api, timeout=3600, grace=3600)
    for action in ("start", "log", "", "fail", "3"):
        await ping(api, check["uuid"], action)
        api.clock.advance(1)
    pings = (await _get(api, check["uuid"])).json()["pings"]
    assert [p["type"] for p in pings] == ["fail", "fail", "success", "log", "start"]
    assert pings[0]["exit_status"] == 3


async def test_body_url_names_the_body(api: Api) -> None:
    check = await make_check(api)
    await ping(api, check["uuid"], body=b"hello")
    (p,) = (await _get(api, check["uuid"])).json()["pings"]
    assert p["body_url"] == f"{api.settings.base_url}/api/v3/checks/{check['uuid']}/pings/1/body"
