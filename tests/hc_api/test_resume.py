"""POST /api/v3/checks/<uuid>/resume (Healthchecks' test_resume.py)."""

from __future__ import annotations

from typing import Any

from tests.conftest import Api
from tests.hc_api.conftest import MISSING_UUID, make_check, other_project_headers, ping


async def _post(
    api: Api, uuid: str, action: str, body: str = "", headers: dict[str, str] | None = None
) -> Any:
    return await api.client.post(
        f"/api/v1/checks/{uuid}/{action}",
        content=body,
        headers={"content-type": "application/json", **(headers or api.headers)},
    )


async def _paused(api: Api) -> dict[str, Any]:
    check = await make_check(api)
    await ping(api, check["uuid"], "start")
    await ping(api, check["uuid"])
    assert (await _post(api, check["uuid"], "pause")).status_code == 200
    return check


async def test_it_works(api: Api) -> None:
    check = await _paused(api)
    r = await _post(api, check["uuid"], "resume")
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"
    doc = r.json()
    assert doc["status"] == "new"
    assert doc["started"] is False
    assert doc["next_ping"] is None
    flips = (await api.client.get(f"/api/v3/checks/{check['uuid']}/flips/", headers=api.headers)).json()
    assert flips["flips"][0]["reason"] == "resumed"


async def test_last_ping_is_kept_on_resume(api: Api) -> None:
    """Healthchecks clears last_ping on resume; we keep it — it is a fact about the past (the
    ping log still holds it) and the check is ``new`` again either way, so nothing is judged by
    it until the next run ping."""
    check = await _paused(api)
    doc = (await _post(api, check["uuid"], "resume")).json()
    assert doc["status"] == "new" and doc["last_ping"] is not None


async def test_it_handles_not_paused_checks(api: Api) -> None:
    check = await make_check(api)
    r = await _post(api, check["uuid"], "resume")
    assert r.status_code == 409


async def test_it_handles_options(api: Api) -> None:
    check = await make_check(api)
    r = await api.client.options(f"/api/v1/checks/{check['uuid']}/resume")
    assert r.status_code == 204 and "POST" in r.headers["access-control-allow-methods"]


async def test_it_only_allows_post(api: Api) -> None:
    check = await make_check(api)
    assert (
        await api.client.get(f"/api/v1/checks/{check['uuid']}/resume", headers=api.headers)
    ).status_code == 405


async def test_it_validates_ownership(api: Api) -> None:
    """DESIGN §9: 404 (Healthchecks: 403)."""
    check = await _paused(api)
    r = await _post(api, check["uuid"], "resume", headers=await other_project_headers(api))
    assert r.status_code == 404


async def test_it_validates_uuid(api: Api) -> None:
    assert (await _post(api, "not-uuid", "resume")).status_code == 404


async def test_it_handles_missing_check(api: Api) -> None:
    assert (await _post(api, MISSING_UUID, "resume")).status_code == 404


async def test_it_rejects_non_dict_post_body(api: Api) -> None:
    check = await _paused(api)
    r = await _post(api, check["uuid"], "resume", "123")
    assert r.status_code == 400 and r.json()["error"] == "body: must be a JSON object"
