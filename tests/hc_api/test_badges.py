"""Badges: GET /api/v3/badges/ (Healthchecks' test_get_badges.py), the tag badges
(test_badge.py) and a check's badge (test_check_badge.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api
from tests.hc_api.conftest import evaluate, make_check, ping


async def _badges(api: Api, headers: dict[str, str] | None = None) -> Any:
    return await api.client.get("/api/v1/badges/", headers=headers or api.headers)


async def test_badge_list_works(api: Api) -> None:
    await make_check(api, tags="foo bar")
    r = await _badges(api)
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"
    badges = r.json()["badges"]
    assert set(badges) == {"foo", "bar", "*"}
    assert set(badges["foo"]) == {"svg", "svg3", "json", "json3", "shields", "shields3"}
    assert badges["foo"]["svg"].endswith("/foo.svg?states=2")  # two-state
    assert badges["foo"]["svg3"].endswith("/foo.svg")
    assert badges["foo"]["shields"].endswith("/foo.shields?states=2")


async def test_badge_list_readonly_key_works(api: Api) -> None:
    await make_check(api, tags="foo")
    assert (await _badges(api, api.ro_headers)).status_code == 200


async def test_badge_list_rejects_post(api: Api) -> None:
    r = await api.client.post("/api/v1/badges/", headers=api.headers)
    assert r.status_code == 405


async def test_badge_list_handles_missing_api_key(api: Api) -> None:
    r = await api.client.get("/api/v1/badges/")
    assert r.status_code == 401


async def _tag_urls(api: Api, tag: str) -> dict[str, str]:
    urls: dict[str, str] = (await _badges(api)).json()["badges"][tag]
    base = api.settings.base_url
    return {k: v.removeprefix(base) for k, v in urls.items()}


async def test_tag_badge_json_counts(api: Api) -> None:
    up = await make_check(api, name="a", tags="foo", timeout=60, grace=60)
    late = await make_check(api, name="b", tags="foo", timeout=60, grace=3600)
    down = await make_check(api, name="c", tags="foo")
    await make_check(api, name="d", tags="other")
    for check in (up, late, down):
        await ping(api, check["uuid"])
    await ping(api, down["uuid"], "fail")
    api.clock.advance(150)  # "late" is in its grace period; "up" is past it: down too
    await evaluate(api)
    urls = await _tag_urls(api, "foo")
    doc = (await api.client.get(urls["json3"])).json()
    assert (doc["status"], doc["total"], doc["grace"], doc["down"]) == ("down", 3, 1, 2)
    assert doc["schemaVersion"] == 1 and doc["message"] == "down"


async def test_tag_badge_two_states_folds_late_into_up(api: Api) -> None:
    late = await make_check(api, name="b", tags="foo", timeout=60, grace=3600)
    await ping(api, late["uuid"])
    api.clock.advance(90)
    urls = await _tag_urls(api, "foo")
    assert (await api.client.get(urls["json3"])).json()["status"] == "late"
    doc = (await api.client.get(urls["json"])).json()
    assert doc["status"] == "up" and doc["grace"] == 1  # the count still says one is late
    shields = (await api.client.get(urls["shields"])).json()
    assert shields == {"schemaVersion": 1, "label": "foo", "message": "up", "color": "success"}
    assert (await api.client.get(urls["shields3"])).json()["color"] == "important"
    svg = await api.client.get(urls["svg3"])
    assert svg.headers["content-type"].startswith("image/svg+xml") and "late" in svg.text


async def test_tag_badge_of_unknown_tag_is_up_with_no_checks(api: Api) -> None:
    await make_check(api, tags="foo")
    urls = await _tag_urls(api, "*")
    doc = (await api.client.get(urls["json"].replace("*", "nope"))).json()
    assert (doc["status"], doc["total"]) == ("up", 0)


async def _check_badge(api: Api, **fields: Any) -> tuple[dict[str, Any], str]:
    check = await make_check(api, name="backup", **fields)
    badge = check["badge_url"].removeprefix(api.settings.base_url).removesuffix(".svg")
    return check, badge.removeprefix("/b/")


@pytest.mark.parametrize(("status", "grace", "down"), [("up", 0, 0), ("late", 1, 0), ("down", 0, 1)])
async def test_check_badge_json_has_total_grace_down(api: Api, status: str, grace: int, down: int) -> None:
    check, badge = await _check_badge(api, timeout=60, grace=3600)
    await ping(api, check["uuid"])
    if status == "late":
        api.clock.advance(90)
    if status == "down":
        await ping(api, check["uuid"], "fail")
    for path in (f"/b/{badge}.json", f"/b/3/{badge}.json"):
        doc = (await api.client.get(path)).json()
        assert (doc["status"], doc["total"], doc["grace"], doc["down"]) == (status, 1, grace, down)


async def test_check_badge_two_states(api: Api) -> None:
    check, badge = await _check_badge(api, timeout=60, grace=3600)
    await ping(api, check["uuid"])
    api.clock.advance(90)
    for path in (f"/b/2/{badge}.json", f"/b/{badge}.json?states=2"):
        doc = (await api.client.get(path)).json()
        assert (doc["status"], doc["grace"]) == ("up", 1)
    assert "late" not in (await api.client.get(f"/b/2/{badge}.svg")).text
    shields = (await api.client.get(f"/b/2/{badge}.shields")).json()
    assert shields == {"schemaVersion": 1, "label": "backup", "message": "up", "color": "success"}


async def test_check_badge_rejects_bad_states_and_formats(api: Api) -> None:
    _, badge = await _check_badge(api)
    assert (await api.client.get(f"/b/4/{badge}.svg")).status_code == 404
    assert (await api.client.get(f"/b/{badge}.png")).status_code == 404
    assert (await api.client.get("/b/2/00000000-0000-4000-8000-000000000000.svg")).status_code == 404


async def test_check_badge_is_not_the_check_uuid(api: Api) -> None:
    """Badges are public: a check's badge uuid is its own random value, never the ping uuid
    (Healthchecks' ``badge_key`` likewise)."""
    check, badge = await _check_badge(api)
    assert badge != check["uuid"]
    assert (await api.client.get(f"/b/{check['uuid']}.svg")).status_code == 404
