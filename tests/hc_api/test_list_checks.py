"""GET /api/v3/checks/ (Healthchecks' test_list_checks.py)."""

from __future__ import annotations

from typing import Any

from tests.conftest import Api
from tests.hc_api.conftest import OTHER_PROJECT_KEY, make_check, other_project_headers, ping


async def _get(api: Api, qs: str = "", headers: dict[str, str] | None = None, version: int = 1) -> Any:
    return await api.client.get(f"/api/v{version}/checks/{qs}", headers=headers or api.headers)


async def _two(api: Api) -> tuple[dict[str, Any], dict[str, Any]]:
    a1 = await make_check(
        api,
        name="Alice 1",
        timeout=3600,
        grace=900,
        tags="a1-tag a1-additional-tag",
        desc="This is description",
    )
    a2 = await make_check(api, name="Alice 2", timeout=86400, grace=3600, tags="a1-tag")
    await ping(api, a1["uuid"])
    await ping(api, a2["uuid"])
    return a1, a2


async def test_it_works(api: Api) -> None:
    a1, a2 = await _two(api)
    r = await _get(api)
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"
    checks = {c["name"]: c for c in r.json()["checks"]}
    assert len(checks) == 2
    one = checks["Alice 1"]
    assert one["timeout"] == 3600 and one["grace"] == 900
    assert one["ping_url"] == a1["ping_url"]
    assert one["status"] == "up" and one["n_pings"] == 1
    assert one["last_ping"] == "2026-07-18T02:00:00Z"
    assert one["next_ping"] == "2026-07-18T03:00:00Z"
    assert one["update_url"].endswith(f"/api/v3/checks/{a1['uuid']}")
    assert one["pause_url"].endswith(f"/api/v3/checks/{a1['uuid']}/pause")
    assert one["resume_url"].endswith(f"/api/v3/checks/{a1['uuid']}/resume")
    assert one["desc"] == "This is description"
    assert checks["Alice 2"]["timeout"] == 86400 and checks["Alice 2"]["ping_url"] == a2["ping_url"]


async def test_it_handles_options(api: Api) -> None:
    r = await api.client.options("/api/v1/checks/")
    assert r.status_code == 204
    assert "GET" in r.headers["access-control-allow-methods"]


async def test_it_shows_only_users_checks(api: Api) -> None:
    await _two(api)
    await other_project_headers(api)
    r = await api.client.post(
        "/api/v3/checks/", json={"name": "Bob 1"}, headers={"X-Api-Key": OTHER_PROJECT_KEY}
    )
    assert r.status_code == 201
    names = [c["name"] for c in (await _get(api)).json()["checks"]]
    assert sorted(names) == ["Alice 1", "Alice 2"]


async def test_it_works_with_tags_param(api: Api) -> None:
    await _two(api)
    r = await _get(api, "?tag=a1-tag&tag=a1-additional-tag")
    assert [c["name"] for c in r.json()["checks"]] == ["Alice 1"]


async def test_it_filters_with_multiple_tags(api: Api) -> None:
    await _two(api)
    r = await _get(api, "?tag=a1-tag")
    assert sorted(c["name"] for c in r.json()["checks"]) == ["Alice 1", "Alice 2"]


async def test_non_existing_tags_filter_returns_empty_result(api: Api) -> None:
    await _two(api)
    assert (await _get(api, "?tag=non_existing_tag_with_no_checks")).json() == {"checks": []}


async def test_tag_matches_whole_tags_only(api: Api) -> None:
    """``?tag=a1`` does not match ``a1-tag`` (Healthchecks: precise, final filtering)."""
    await _two(api)
    assert (await _get(api, "?tag=a1")).json() == {"checks": []}


async def test_it_filters_by_slug(api: Api) -> None:
    await make_check(api, name="Alice 1", slug="alice-1")
    await make_check(api, name="Alice 2", slug="alice-2")
    assert [c["name"] for c in (await _get(api, "?slug=alice-1")).json()["checks"]] == ["Alice 1"]


async def test_readonly_key_works(api: Api) -> None:
    a1, _ = await _two(api)
    r = await _get(api, headers=api.ro_headers)
    assert r.status_code == 200 and len(r.json()["checks"]) == 2
    assert a1["ping_url"] not in r.text and "ping_url" not in r.text


async def test_v1_reports_started_separately_and_in_status(api: Api) -> None:
    a1, _ = await _two(api)
    await ping(api, a1["uuid"], "start")
    v1 = {c["name"]: c for c in (await _get(api)).json()["checks"]}
    v3 = {c["name"]: c for c in (await _get(api, version=3)).json()["checks"]}
    assert v1["Alice 1"]["status"] == "started" and v1["Alice 1"]["started"] is True
    assert v3["Alice 1"]["status"] == "up" and v3["Alice 1"]["started"] is True
    assert v1["Alice 2"]["status"] == v3["Alice 2"]["status"] == "up"


async def test_it_handles_missing_and_wrong_api_key(api: Api) -> None:
    r = await api.client.get("/api/v1/checks/")
    assert r.status_code == 401 and "missing" in r.json()["error"]
    r = await _get(api, headers={"X-Api-Key": "X" * 32})
    assert r.status_code == 401 and "wrong api key" in r.json()["error"]


async def test_it_accepts_api_key_in_the_request_body(api: Api) -> None:
    """Healthchecks' decorators read ``api_key`` from a JSON body when the header is absent."""
    await _two(api)
    r = await api.client.request("GET", "/api/v1/checks/", json={"api_key": "test-api-key-0123456789"})
    assert r.status_code == 200 and len(r.json()["checks"]) == 2
    r = await api.client.request("GET", "/api/v1/checks/", json={"api_key": "wrong-key-000000000000"})
    assert r.status_code == 401 and "wrong api key" in r.json()["error"]
