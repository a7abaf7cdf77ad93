"""GET /api/v3/status/ (Healthchecks' test_status.py): no key, ``OK`` when the database
answers."""

from __future__ import annotations

import pytest

from tests.conftest import Api
from tests.hc_api.conftest import make_check


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_it_works(api: Api, version: int) -> None:
    r = await api.client.get(f"/api/v{version}/status/")
    assert r.status_code == 200 and r.text == "OK"
    assert r.headers["content-type"].startswith("text/plain")


async def test_api_key_in_post_body_creates_and_pauses(api: Api) -> None:
    """Every write takes ``api_key`` in the body too (Healthchecks' create, pause, resume tests
    send it that way)."""
    r = await api.client.post("/api/v1/checks/", json={"api_key": "test-api-key-0123456789", "name": "Foo"})
    assert r.status_code == 201
    uuid = r.json()["uuid"]
    r = await api.client.post(f"/api/v1/checks/{uuid}/pause", json={"api_key": "test-api-key-0123456789"})
    assert r.status_code == 200 and r.json()["status"] == "paused"
    r = await api.client.post(f"/api/v1/checks/{uuid}/resume", json={"api_key": "test-api-key-0123456789"})
    assert r.status_code == 200 and r.json()["status"] == "new"
    check = await make_check(api, name="Bar")
    r = await api.client.post(
        f"/api/v1/checks/{check['uuid']}", json={"api_key": api.project["api_key_readonly"], "name": "x"}
    )
    assert r.status_code == 403  # a read-only key in the body is still read-only
