"""Cursor paging on the /api/v3 list endpoints: every row exactly once, ``next`` only added."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

from tests.conftest import Api
from tests.support.app import create_check


async def _pages(api: Api, path: str, key: str, **params: str) -> list[list[dict[str, Any]]]:
    """Follow ``next`` links from ``path`` until the last page."""
    pages = []
    url: str | None = path
    query: dict[str, str] | None = params
    while url is not None:
        answer = await api.client.get(url, params=query, headers=api.headers)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert set(body) <= {key, "next"}, body.keys()
        pages.append(body[key])
        if "next" in body:
            parts = urlsplit(body["next"])
            assert body["next"].startswith(api.settings.base_url)
            url, query = f"{parts.path}?{parts.query}", None
            assert len(pages) < 100
        else:
            url = None
    return pages


async def test_every_list_endpoint_pages_with_a_cursor(api: Api) -> None:
    for i in range(3):
        r = await api.client.post(
            "/api/v3/channels/", json={"name": f"c{i}", "url": f"json://127.0.0.1:9/{i}"}, headers=api.headers
        )
        assert r.status_code == 201, r.text
        r = await api.client.post(
            "/api/v3/maintenance/",
            json={"name": f"w{i}", "start": "2030-01-01T00:00:00Z", "end": "2030-01-02T00:00:00Z"},
            headers=api.headers,
        )
        assert r.status_code == 201, r.text
    checks = [await create_check(api, name=f"job-{i}", timeout=60, grace=10, channels="*") for i in range(7)]
    uuid = checks[0]["uuid"]
    for _ in range(5):  # fail, recover: ten pings, ten runs, flips and alerts
        assert (await api.client.get(f"/ping/{uuid}/fail")).status_code == 200
        api.clock.advance(1)
        assert (await api.client.get(f"/ping/{uuid}")).status_code == 200
        api.clock.advance(1)

    pages = await _pages(api, "/api/v3/checks/", "checks", limit="3")
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [c["uuid"] for p in pages for c in p] == [c["uuid"] for c in checks]
    whole = (await api.client.get("/api/v3/checks/", headers=api.headers)).json()
    assert set(whole) == {"checks"} and len(whole["checks"]) == 7  # unpaged: the Healthchecks answer

    for what in ("pings", "runs", "flips", "alerts"):
        everything = (await api.client.get(f"/api/v3/checks/{uuid}/{what}/", headers=api.headers)).json()[
            what
        ]
        assert len(everything) >= 10, (what, everything)
        pages = await _pages(api, f"/api/v3/checks/{uuid}/{what}/", what, limit="4")
        assert all(len(p) == 4 for p in pages[:-1]) and 1 <= len(pages[-1]) <= 4, what
        assert [item for p in pages for item in p] == everything, what

    for path, key in (("/api/v3/channels/", "channels"), ("/api/v3/maintenance/", "maintenance")):
        everything = (await api.client.get(path, headers=api.headers)).json()[key]
        pages = await _pages(api, path, key, limit="2")
        assert [len(p) for p in pages] == [2, 1], key
        assert [item for p in pages for item in p] == everything


async def test_paging_returns_every_check_once_while_checks_are_created(api: Api) -> None:
    before = [await create_check(api, name=f"old-{i}", channels="") for i in range(25)]
    created: list[str] = []

    async def keep_creating() -> None:
        for i in range(40):
            created.append((await create_check(api, name=f"new-{i}", channels=""))["uuid"])
            await asyncio.sleep(0)

    creator = asyncio.create_task(keep_creating())
    seen: list[str] = []
    url: str | None = "/api/v3/checks/?limit=4"
    while url is not None:
        body = (await api.client.get(url, headers=api.headers)).json()
        seen.extend(c["uuid"] for c in body["checks"])
        url = body.get("next", "").removeprefix(api.settings.base_url) or None
        await asyncio.sleep(0)
    await creator
    assert len(seen) == len(set(seen)), "a check was returned twice"
    assert {c["uuid"] for c in before} <= set(seen), "a check that existed before paging was missed"
    assert set(seen) <= {c["uuid"] for c in before} | set(created)
    # the order is the creation order, whatever was added meanwhile
    order = [c["uuid"] for c in before] + created
    assert seen == [u for u in order if u in set(seen)]


async def test_a_bad_cursor_is_a_400_naming_the_field(api: Api) -> None:
    for cursor in ("nonsense", "W10", "eyJ4IjoxfQ", "x" * 600):
        answer = await api.client.get(f"/api/v3/checks/?limit=2&cursor={cursor}", headers=api.headers)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"].startswith("cursor: "), answer.json()
    answer = await api.client.get("/api/v3/channels/?cursor=WyJnb25lIl0", headers=api.headers)
    assert answer.status_code == 400 and answer.json()["error"].startswith("cursor: ")
