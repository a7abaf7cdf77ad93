"""GET /api/v3/checks/<uuid|unique_key>/flips/ (Healthchecks' test_get_flips.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from monitor.services.checks import unique_key
from tests.conftest import Api
from tests.hc_api.conftest import make_check, other_project_headers, ping


async def _flipped(api: Api) -> dict[str, Any]:
    """A check whose first success (at a clock with microseconds) flipped it up."""
    api.clock.set(datetime(2020, 6, 1, 12, 24, 32, 123000, tzinfo=UTC))
    check = await make_check(api, timeout=3600, grace=900)
    await ping(api, check["uuid"])
    return check


async def _flips(api: Api, ident: str, qs: str = "", headers: dict[str, str] | None = None) -> Any:
    return await api.client.get(f"/api/v1/checks/{ident}/flips/{qs}", headers=headers or api.headers)


async def test_it_works(api: Api) -> None:
    check = await _flipped(api)
    r = await _flips(api, check["uuid"])
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"
    (flip,) = r.json()["flips"]
    # microseconds (123000) are stripped
    assert flip["timestamp"] == "2020-06-01T12:24:32Z"
    assert flip["up"] == 1


async def test_timestamp_form_is_z_not_offset(api: Api) -> None:
    """Healthchecks writes ``+00:00``; we write every instant with ``Z`` (DESIGN §9). Both are
    ISO 8601 / RFC 3339 UTC and parse to the same instant (the healthchecks-io client reads
    either)."""
    check = await _flipped(api)
    (flip,) = (await _flips(api, check["uuid"])).json()["flips"]
    assert datetime.fromisoformat(flip["timestamp"]) == datetime(2020, 6, 1, 12, 24, 32, tzinfo=UTC)


async def test_it_works_with_unique_key(api: Api) -> None:
    check = await _flipped(api)
    r = await _flips(api, unique_key(check["uuid"]))
    assert r.status_code == 200 and len(r.json()["flips"]) == 1


async def test_readonly_key_is_allowed(api: Api) -> None:
    check = await _flipped(api)
    assert (await _flips(api, check["uuid"], headers=api.ro_headers)).status_code == 200


async def test_it_rejects_post(api: Api) -> None:
    check = await _flipped(api)
    r = await api.client.post(f"/api/v1/checks/{check['uuid']}/flips/", headers=api.headers)
    assert r.status_code == 405


@pytest.mark.parametrize(
    ("qs", "name"),
    [
        ("?start=abc", "start"),
        ("?start=-123", "start"),
        ("?start=12345678901234567890", "start"),
        ("?end=abc", "end"),
        ("?end=10000000001", "end"),
        ("?seconds=-123", "seconds"),
        ("?seconds=12345678901234567890", "seconds"),
        ("?seconds=1.5", "seconds"),
        ("?seconds=%D9%A6%D9%A0", "seconds"),  # Arabic-Indic digits are not a UNIX number
    ],
)
async def test_it_rejects_bad_filters_naming_the_parameter(api: Api, qs: str, name: str) -> None:
    check = await _flipped(api)
    r = await _flips(api, check["uuid"], qs)
    assert r.status_code == 400
    assert r.json()["error"].startswith(f"{name}: ")


async def test_it_filters_by_start(api: Api) -> None:
    check = await _flipped(api)
    r = await _flips(api, check["uuid"], "?start=1591014300")  # 2020-06-01 12:25:00
    assert r.status_code == 200 and r.json() == {"flips": []}
    r = await _flips(api, check["uuid"], "?start=1591014272")  # 12:24:32: at or after
    assert len(r.json()["flips"]) == 1


async def test_it_filters_by_end(api: Api) -> None:
    check = await _flipped(api)
    r = await _flips(api, check["uuid"], "?end=1591014180")  # 2020-06-01 12:23:00
    assert r.status_code == 200 and r.json() == {"flips": []}
    r = await _flips(api, check["uuid"], "?end=1591014300")
    assert len(r.json()["flips"]) == 1


async def test_it_filters_by_seconds(api: Api) -> None:
    check = await _flipped(api)
    api.clock.advance(100)
    assert len((await _flips(api, check["uuid"], "?seconds=200")).json()["flips"]) == 1
    assert (await _flips(api, check["uuid"], "?seconds=50")).json() == {"flips": []}
    assert len((await _flips(api, check["uuid"], "?seconds=")).json()["flips"]) == 1  # empty: no filter


async def test_it_handles_missing_api_key(api: Api) -> None:
    check = await _flipped(api)
    r = await api.client.get(f"/api/v1/checks/{check['uuid']}/flips/")
    assert r.status_code == 401 and "missing" in r.json()["error"]


async def test_another_projects_check_is_404(api: Api) -> None:
    """DESIGN §9: 404 where Healthchecks answers 403."""
    check = await _flipped(api)
    r = await _flips(api, check["uuid"], headers=await other_project_headers(api))
    assert r.status_code == 404


async def test_first_fail_records_one_flip(api: Api) -> None:
    """A new check's first /fail is one change (new → down): one flip, not an "up" and a
    "down" at the same instant."""
    check = await make_check(api, timeout=3600, grace=900)
    await ping(api, check["uuid"], "fail")
    flips = (await _flips(api, check["uuid"])).json()["flips"]
    assert [(f["up"], f["reason"]) for f in flips] == [(0, "failed")]


async def test_flips_are_newest_first_with_reasons(api: Api) -> None:
    check = await make_check(api, timeout=3600, grace=900)
    await ping(api, check["uuid"])
    api.clock.advance(5)
    await ping(api, check["uuid"], "fail")
    api.clock.advance(5)
    await ping(api, check["uuid"])
    flips = (await _flips(api, check["uuid"])).json()["flips"]
    assert [f["up"] for f in flips] == [1, 0, 1]
    assert [f["reason"] for f in flips][:2] == ["success", "failed"]
