"""DELETE /api/v3/checks/<uuid> (Healthchecks' test_delete_check.py)."""

from __future__ import annotations

from tests.conftest import Api
from tests.hc_api.conftest import MISSING_UUID, make_check, other_project_headers, ping


async def test_it_works(api: Api) -> None:
    check = await make_check(api, name="Alice 1")
    r = await api.client.delete(f"/api/v1/checks/{check['uuid']}", headers=api.headers)
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"
    assert r.json()["name"] == "Alice 1"  # the deleted check is returned
    assert (await api.client.get(f"/api/v3/checks/{check['uuid']}", headers=api.headers)).status_code == 404
    # and its ping URL is gone
    assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 404


async def test_it_deletes_history(api: Api) -> None:
    check = await make_check(api)
    await ping(api, check["uuid"], "fail", body=b"x")
    assert (
        await api.client.delete(f"/api/v3/checks/{check['uuid']}", headers=api.headers)
    ).status_code == 200
    assert (
        await api.client.get(f"/api/v3/checks/{check['uuid']}/pings/", headers=api.headers)
    ).status_code == 404


async def test_it_handles_missing_check(api: Api) -> None:
    assert (await api.client.delete(f"/api/v1/checks/{MISSING_UUID}", headers=api.headers)).status_code == 404


async def test_it_handles_invalid_uuid(api: Api) -> None:
    assert (await api.client.delete("/api/v1/checks/not-a-uuid", headers=api.headers)).status_code == 404


async def test_it_handles_options(api: Api) -> None:
    check = await make_check(api)
    r = await api.client.options(f"/api/v1/checks/{check['uuid']}")
    assert r.status_code == 204 and "DELETE" in r.headers["access-control-allow-methods"]


async def test_it_validates_ownership(api: Api) -> None:
    """DESIGN §9: 404 (Healthchecks: 403)."""
    check = await make_check(api)
    r = await api.client.delete(f"/api/v1/checks/{check['uuid']}", headers=await other_project_headers(api))
    assert r.status_code == 404
    assert (await api.client.get(f"/api/v3/checks/{check['uuid']}", headers=api.headers)).status_code == 200


async def test_readonly_key_is_refused(api: Api) -> None:
    check = await make_check(api)
    assert (
        await api.client.delete(f"/api/v1/checks/{check['uuid']}", headers=api.ro_headers)
    ).status_code == 403
