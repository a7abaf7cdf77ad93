"""POST /api/v3/checks/<uuid>/pause (Healthchecks' test_pause.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api
from tests.hc_api.conftest import MISSING_UUID, make_check, other_project_headers, ping


async def _pause(api: Api, uuid: str, body: str = "", headers: dict[str, str] | None = None) -> Any:
    return await api.client.post(
        f"/api/v1/checks/{uuid}/pause",
        content=body,
        headers={"content-type": "application/json", **(headers or api.headers)},
    )


async def test_it_works(api: Api) -> None:
    check = await make_check(api)
    await ping(api, check["uuid"])
    r = await _pause(api, check["uuid"])
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"
    assert r.json()["status"] == "paused"
    assert r.json()["next_ping"] is None  # Healthchecks clears alert_after
    flips = (await api.client.get(f"/api/v3/checks/{check['uuid']}/flips/", headers=api.headers)).json()
    assert flips["flips"][0]["reason"] == "paused" and flips["flips"][0]["up"] == 0


async def test_it_handles_options(api: Api) -> None:
    check = await make_check(api)
    r = await api.client.options(f"/api/v1/checks/{check['uuid']}/pause")
    assert r.status_code == 204
    assert "POST" in r.headers["access-control-allow-methods"]


async def test_it_only_allows_post(api: Api) -> None:
    check = await make_check(api)
    r = await api.client.get(f"/api/v1/checks/{check['uuid']}/pause", headers=api.headers)
    assert r.status_code == 405


async def test_it_validates_ownership(api: Api) -> None:
    """DESIGN §9: 404 (Healthchecks: 403)."""
    check = await make_check(api)
    r = await _pause(api, check["uuid"], headers=await other_project_headers(api))
    assert r.status_code == 404


async def test_it_validates_uuid(api: Api) -> None:
    assert (await _pause(api, "not-uuid")).status_code == 404


async def test_it_handles_missing_check(api: Api) -> None:
    assert (await _pause(api, MISSING_UUID)).status_code == 404


async def test_it_clears_started(api: Api) -> None:
    """Healthchecks clears last_start on pause: the run in progress is forgotten."""
    check = await make_check(api)
    await ping(api, check["uuid"], "start")
    assert (await api.client.get(f"/api/v3/checks/{check['uuid']}", headers=api.headers)).json()["started"]
    api.clock.advance(1)
    r = await _pause(api, check["uuid"])
    assert r.json()["started"] is False
    # and a new /start is started again (Healthchecks sets last_start; ours also resumes the
    # check, as any run ping on a paused check without manual_resume does)
    api.clock.advance(1)
    await ping(api, check["uuid"], "start")
    assert (await api.client.get(f"/api/v3/checks/{check['uuid']}", headers=api.headers)).json()["started"]


async def test_it_is_a_no_op_when_already_paused(api: Api) -> None:
    check = await make_check(api)
    await _pause(api, check["uuid"])
    r = await _pause(api, check["uuid"])
    assert r.status_code == 200 and r.json()["status"] == "paused"
    flips = (await api.client.get(f"/api/v3/checks/{check['uuid']}/flips/", headers=api.headers)).json()
    assert [f["reason"] for f in flips["flips"]] == ["paused"]


@pytest.mark.parametrize("body", ["123", "[]", '"x"', "null"])
async def test_it_rejects_non_dict_post_body(api: Api, body: str) -> None:
    check = await make_check(api)
    r = await _pause(api, check["uuid"], body)
    assert r.status_code == 400
    assert r.json()["error"] == "body: must be a JSON object"


async def test_it_takes_an_empty_object_and_an_empty_form(api: Api) -> None:
    """``{}`` and an empty body (what the healthchecks-io client sends: ``data={}``)."""
    check = await make_check(api)
    assert (await _pause(api, check["uuid"], "{}")).status_code == 200
    r = await api.client.post(f"/api/v3/checks/{check['uuid']}/pause", headers=api.headers)
    assert r.status_code == 200


async def test_readonly_key_is_refused(api: Api) -> None:
    """DESIGN §9: a read-only key writing is 403 (Healthchecks: 401)."""
    check = await make_check(api)
    assert (await _pause(api, check["uuid"], headers=api.ro_headers)).status_code == 403
