"""POST /api/v3/checks/<uuid> (Healthchecks' test_update_check.py). Keyword-filter fields are
tested with their feature."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import Api
from tests.hc_api.conftest import MISSING_UUID, make_channel, make_check, other_project_headers


async def _post(
    api: Api, uuid: str, data: Any, version: int = 1, headers: dict[str, str] | None = None
) -> Any:
    return await api.client.post(
        f"/api/v{version}/checks/{uuid}",
        content=data if isinstance(data, str) else json.dumps(data),
        headers={"content-type": "application/json", **(api.headers if headers is None else headers)},
    )


async def test_it_works(api: Api) -> None:
    check = await make_check(api, name="Foo", tags="old")
    r = await _post(api, check["uuid"], {"name": "Foo", "tags": "bar,baz", "timeout": 3600, "grace": 60})
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"
    doc = r.json()
    assert doc["uuid"] == check["uuid"] and "ping_url" in doc
    assert (doc["name"], doc["tags"], doc["timeout"], doc["grace"]) == ("Foo", "bar,baz", 3600, 60)


async def test_it_changes_only_the_given_fields(api: Api) -> None:
    check = await make_check(api, name="Foo", tags="keep", desc="keep too", grace=120)
    doc = (await _post(api, check["uuid"], {"desc": "changed"}, version=3)).json()
    assert (doc["name"], doc["tags"], doc["desc"], doc["grace"]) == ("Foo", "keep", "changed", 120)


async def test_v1_derives_the_slug_from_a_new_name(api: Api) -> None:
    check = await make_check(api, name="Foo")
    assert (await _post(api, check["uuid"], {"name": "Bar Baz"})).json()["slug"] == "bar-baz"
    assert (await _post(api, check["uuid"], {"name": "Qux"}, version=3)).json()["slug"] == "bar-baz"
    doc = (await _post(api, check["uuid"], {"name": "Zap", "slug": "custom"}, version=2)).json()
    assert doc["slug"] == "custom"


async def test_it_handles_options(api: Api) -> None:
    check = await make_check(api)
    r = await api.client.options(f"/api/v1/checks/{check['uuid']}")
    assert r.status_code == 204 and "POST" in r.headers["access-control-allow-methods"]


async def test_it_handles_invalid_uuid(api: Api) -> None:
    assert (await _post(api, "not-an-uuid", {"name": "x"})).status_code == 404


async def test_it_handles_missing_check(api: Api) -> None:
    assert (await _post(api, MISSING_UUID, {"name": "x"})).status_code == 404


async def test_it_validates_ownership(api: Api) -> None:
    """DESIGN §9: 404 (Healthchecks: 403)."""
    check = await make_check(api)
    r = await _post(api, check["uuid"], {"name": "x"}, headers=await other_project_headers(api))
    assert r.status_code == 404


async def test_it_updates_cron_to_simple(api: Api) -> None:
    check = await make_check(api, schedule="5 * * * *", tz="Europe/Riga")
    doc = (await _post(api, check["uuid"], {"timeout": 3600})).json()
    assert doc["timeout"] == 3600 and "schedule" not in doc


async def test_it_updates_simple_to_cron(api: Api) -> None:
    check = await make_check(api, timeout=3600)
    doc = (await _post(api, check["uuid"], {"schedule": "5 * * * *", "tz": "Europe/Kiev"})).json()
    assert (doc["schedule"], doc["tz"]) == ("5 * * * *", "Europe/Kyiv") and "timeout" not in doc


async def test_schedule_wins_over_timeout(api: Api) -> None:
    check = await make_check(api)
    doc = (await _post(api, check["uuid"], {"schedule": "5 * * * *", "timeout": 60})).json()
    assert doc["schedule"] == "5 * * * *" and "timeout" not in doc


async def test_it_sets_and_clears_channels(api: Api) -> None:
    channel = await make_channel(api)
    check = await make_check(api)
    assert (await _post(api, check["uuid"], {"channels": "*"})).json()["channels"] == channel["id"]
    assert (await _post(api, check["uuid"], {"channels": ""})).json()["channels"] == ""
    assert (await _post(api, check["uuid"], {"channels": channel["name"]})).json()["channels"] == channel[
        "id"
    ]
    # without "channels", they stay
    assert (await _post(api, check["uuid"], {"name": "x"})).json()["channels"] == channel["id"]


async def test_it_rejects_bad_channel_identifiers(api: Api) -> None:
    check = await make_check(api)
    for channels, fragment in ((",", "empty channel identifier"), ("abc", "no channel 'abc'")):
        r = await _post(api, check["uuid"], {"channels": channels})
        assert r.status_code == 400 and fragment in r.json()["error"]


async def test_it_rejects_non_dict_body(api: Api) -> None:
    check = await make_check(api)
    r = await _post(api, check["uuid"], "[1]")
    assert r.status_code == 400 and r.json()["error"] == "body: must be a JSON object"


async def test_it_rejects_bad_values(api: Api) -> None:
    check = await make_check(api)
    for data, fragment in (
        ({"timeout": "x"}, "timeout: "),
        ({"grace": 31536001}, "grace: "),
        ({"tz": "not-a-timezone"}, "tz: "),
        ({"schedule": "bad"}, "schedule: "),
        ({"methods": "GET"}, "methods: "),
        ({"manual_resume": 1}, "manual_resume: "),
    ):
        r = await _post(api, check["uuid"], data)
        assert r.status_code == 400 and r.json()["error"].startswith(fragment), (data, r.text)


async def test_it_rejects_readonly_key(api: Api) -> None:
    check = await make_check(api)
    assert (await _post(api, check["uuid"], {"name": "x"}, headers=api.ro_headers)).status_code == 403
