"""GET /api/v3/checks/<uuid>/pings/<n>/body (Healthchecks' test_get_ping_body.py)."""

from __future__ import annotations

from tests.conftest import Api
from tests.hc_api.conftest import make_check, other_project_headers, ping


async def _check_with_body(api: Api, body: bytes = b"Foo\nBar\nBaz") -> str:
    check = await make_check(api)
    await ping(api, check["uuid"], body=body)
    return str(check["uuid"])


async def test_it_works(api: Api) -> None:
    uuid = await _check_with_body(api)
    r = await api.client.get(f"/api/v1/checks/{uuid}/pings/1/body", headers=api.headers)
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/plain; charset=utf-8"  # the charset once
    assert r.content == b"Foo\nBar\nBaz"


async def test_it_handles_missing_api_key(api: Api) -> None:
    uuid = await _check_with_body(api)
    r = await api.client.get(f"/api/v1/checks/{uuid}/pings/1/body")
    assert r.status_code == 401 and "missing" in r.json()["error"]


async def test_readonly_key_is_not_allowed(api: Api) -> None:
    uuid = await _check_with_body(api)
    r = await api.client.get(f"/api/v1/checks/{uuid}/pings/1/body", headers=api.ro_headers)
    assert r.status_code == 401


async def test_it_rejects_post(api: Api) -> None:
    uuid = await _check_with_body(api)
    r = await api.client.post(f"/api/v1/checks/{uuid}/pings/1/body", headers=api.headers)
    assert r.status_code == 405


async def test_it_rejects_another_projects_key(api: Api) -> None:
    """DESIGN §9: 404 (Healthchecks: 403)."""
    uuid = await _check_with_body(api)
    r = await api.client.get(f"/api/v1/checks/{uuid}/pings/1/body", headers=await other_project_headers(api))
    assert r.status_code == 404


async def test_it_handles_no_body(api: Api) -> None:
    check = await make_check(api)
    await ping(api, check["uuid"])
    r = await api.client.get(f"/api/v1/checks/{check['uuid']}/pings/1/body", headers=api.headers)
    assert r.status_code == 404


async def test_it_handles_missing_ping(api: Api) -> None:
    uuid = await _check_with_body(api)
    for n in (2, 0, 99999999999):
        r = await api.client.get(f"/api/v1/checks/{uuid}/pings/{n}/body", headers=api.headers)
        assert r.status_code == 404


async def test_it_returns_original_bytes(api: Api) -> None:
    uuid = await _check_with_body(api, b"Hello\x01\x99World")
    r = await api.client.get(f"/api/v1/checks/{uuid}/pings/1/body", headers=api.headers)
    assert r.status_code == 200 and r.content == b"Hello\x01\x99World"
