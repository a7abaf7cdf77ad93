"""POST /api/v3/checks/ (Healthchecks' test_create_check.py). The keyword-filter fields
(``start_kw``, ``filter_subject`` …) are tested with their feature, not here."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import Api
from tests.hc_api.conftest import make_channel


async def _post(api: Api, data: Any, version: int = 1, headers: dict[str, str] | None = None) -> Any:
    return await api.client.post(
        f"/api/v{version}/checks/",
        content=data if isinstance(data, str) else json.dumps(data),
        headers={"content-type": "application/json", **(api.headers if headers is None else headers)},
    )


async def _error(api: Api, data: Any, fragment: str) -> None:
    r = await _post(api, data)
    assert r.status_code == 400, r.text
    assert fragment in r.json()["error"], r.json()


async def _count(api: Api) -> int:
    return len((await api.client.get("/api/v3/checks/", headers=api.headers)).json()["checks"])


async def test_it_works(api: Api) -> None:
    r = await _post(
        api, {"name": "Foo", "tags": "bar,baz", "desc": "description goes here", "timeout": 3600, "grace": 60}
    )
    assert r.status_code == 201
    assert r.headers["access-control-allow-origin"] == "*"
    doc = r.json()
    assert "ping_url" in doc
    assert doc["name"] == "Foo"
    assert doc["slug"] == "foo"  # v1 derives the slug from the name
    assert doc["tags"] == "bar,baz"
    assert doc["desc"] == "description goes here"
    assert doc["last_ping"] is None and doc["n_pings"] == 0
    assert doc["methods"] == ""
    assert doc["timeout"] == 3600 and doc["grace"] == 60
    assert "schedule" not in doc and "tz" not in doc


async def test_v3_does_not_derive_the_slug(api: Api) -> None:
    doc = (await _post(api, {"name": "Foo Bar"}, version=3)).json()
    assert doc["slug"] == ""
    doc = (await _post(api, {"name": "Ünïcode  name -- x!"}, version=2)).json()
    assert doc["slug"] == "unicode-name-x"


@pytest.mark.parametrize("field", ["channels", "timeout", "grace", "name", "schedule", "unique"])
async def test_it_rejects_null_values(api: Api, field: str) -> None:
    await _error(api, {field: None}, f"{field}: ")


async def test_it_handles_options(api: Api) -> None:
    r = await api.client.options("/api/v1/checks/")
    assert r.status_code == 204 and "POST" in r.headers["access-control-allow-methods"]


async def test_30_days_works(api: Api) -> None:
    r = await _post(api, {"name": "Foo", "timeout": 2592000, "grace": 2592000})
    assert r.status_code == 201 and r.json()["timeout"] == r.json()["grace"] == 2592000


async def test_it_assigns_channels(api: Api) -> None:
    channel = await make_channel(api)
    r = await _post(api, {"channels": "*"})
    assert r.status_code == 201 and r.json()["channels"] == channel["id"]


async def test_it_sets_channel_by_name(api: Api) -> None:
    channel = await make_channel(api, name="alerts")
    r = await _post(api, {"channels": "alerts"})
    assert r.status_code == 201 and r.json()["channels"] == channel["id"]


async def test_it_sets_channel_by_name_formatted_as_uuid(api: Api) -> None:
    name = "102eaa82-a274-4b15-a499-c1bb6bbcd7b6"
    channel = await make_channel(api, name=name)
    r = await _post(api, {"channels": name})
    assert r.status_code == 201 and r.json()["channels"] == channel["id"]


async def test_it_handles_channel_lookup_by_name_with_no_results(api: Api) -> None:
    await _error(api, {"channels": "abc"}, "channels: no channel 'abc'")
    assert await _count(api) == 0  # nothing saved


async def test_it_handles_channel_lookup_by_name_with_multiple_results(api: Api) -> None:
    await make_channel(api, name="foo")
    await make_channel(api, name="foo")
    await _error(api, {"channels": "foo"}, "ambiguous")
    assert await _count(api) == 0


@pytest.mark.parametrize("channels", [",", "a,", ",a", "a,,b"])
async def test_it_rejects_empty_channel_identifiers(api: Api, channels: str) -> None:
    await make_channel(api, name="a")
    await make_channel(api, name="b")
    await _error(api, {"channels": channels}, "channels: empty channel identifier")
    assert await _count(api) == 0


async def test_it_rejects_non_string_channels_key(api: Api) -> None:
    await _error(api, {"channels": 123}, "channels: must be a string")


async def test_it_supports_unique_name(api: Api) -> None:
    first = (await _post(api, {"name": "Foo"})).json()
    r = await _post(api, {"name": "Foo", "tags": "bar", "unique": ["name"]})
    assert r.status_code == 200  # found and updated, not created
    assert r.json()["uuid"] == first["uuid"] and r.json()["tags"] == "bar"
    assert await _count(api) == 1


@pytest.mark.parametrize("field", ["name", "slug", "tags", "timeout", "grace"])
async def test_it_creates_new_check_if_unique_references_absent_field(api: Api, field: str) -> None:
    await _post(api, {}, version=3)
    r = await _post(api, {"unique": [field]}, version=3)
    assert r.status_code == 201


@pytest.mark.parametrize(
    ("existing", "given"),
    [
        ({"slug": "foo"}, {"slug": "foo", "tags": "bar", "unique": ["slug"]}),
        ({"tags": "foo"}, {"tags": "foo", "unique": ["tags"]}),
        ({"timeout": 123}, {"timeout": 123, "unique": ["timeout"]}),
        ({"grace": 123}, {"grace": 123, "unique": ["grace"]}),
    ],
)
async def test_it_supports_unique_fields(api: Api, existing: dict[str, Any], given: dict[str, Any]) -> None:
    await _post(api, existing, version=3)
    assert (await _post(api, given, version=3)).status_code == 200
    assert await _count(api) == 1


async def test_it_handles_empty_unique_parameter(api: Api) -> None:
    await _post(api, {}, version=3)
    r = await _post(api, {"name": "Hello", "unique": []})
    assert r.status_code == 201
    names = sorted(
        c["name"] for c in (await api.client.get("/api/v3/checks/", headers=api.headers)).json()["checks"]
    )
    assert names == ["", "Hello"]


async def test_it_handles_missing_api_key(api: Api) -> None:
    r = await _post(api, "", headers={})
    assert r.status_code == 401 and "missing" in r.json()["error"]


async def test_it_handles_invalid_json(api: Api) -> None:
    await _error(api, "this is not json", "body: invalid JSON")


async def test_it_handles_non_dict_json(api: Api) -> None:
    await _error(api, "[1,2,3]", "body: must be a JSON object")


async def test_it_rejects_wrong_api_key(api: Api) -> None:
    assert (await _post(api, {}, headers={"X-Api-Key": "Y" * 32})).status_code == 401


async def test_it_rejects_small_timeout(api: Api) -> None:
    await _error(api, {"timeout": 0}, "timeout: must be between 1 and")


async def test_sub_minute_timeout_and_grace_are_accepted(api: Api) -> None:
    """DESIGN §9: whole seconds ≥ 1 (Healthchecks' minimum is 60 s): sub-minute schedules
    are first-class."""
    r = await _post(api, {"timeout": 5, "grace": 1})
    assert r.status_code == 201 and (r.json()["timeout"], r.json()["grace"]) == (5, 1)


async def test_it_rejects_large_timeout(api: Api) -> None:
    await _error(api, {"timeout": 31536001}, "timeout: must be between")


async def test_a_whole_number_written_with_a_fraction_is_that_integer(api: Api) -> None:
    r = await _post(api, {"timeout": 60.0, "grace": 5.0, "failure_threshold": 2.0})
    assert r.status_code == 201, r.text
    assert (r.json()["timeout"], r.json()["grace"], r.json()["failure_threshold"]) == (60, 5, 2)
    await _error(api, {"timeout": 60.5}, "timeout: must be a whole number")


async def test_it_rejects_non_number_timeout(api: Api) -> None:
    await _error(api, {"timeout": "oops"}, "timeout: must be a whole number")


async def test_it_rejects_non_string_name(api: Api) -> None:
    await _error(api, {"name": False}, "name: must be a string")


async def test_it_rejects_long_name(api: Api) -> None:
    await _error(api, {"name": "01234567890" * 20}, "name: must be at most 100 characters")


async def test_unique_accepts_only_specific_values(api: Api) -> None:
    await _error(api, {"name": "Foo", "unique": ["status"]}, "unique: 'status' is not one of")


async def test_it_rejects_bad_unique_values(api: Api) -> None:
    await _error(api, {"name": "Foo", "unique": "not a list"}, "unique: must be a list")


async def test_it_supports_cron_syntax(api: Api) -> None:
    r = await _post(api, {"schedule": "5 * * * *", "tz": "Europe/Riga", "grace": 60})
    assert r.status_code == 201
    doc = r.json()
    assert (doc["schedule"], doc["tz"], doc["grace"]) == ("5 * * * *", "Europe/Riga", 60)
    assert "timeout" not in doc


async def test_it_validates_cron_expression(api: Api) -> None:
    await _error(api, {"schedule": "bad-expression", "tz": "Europe/Riga", "grace": 60}, "schedule: ")


async def test_it_rejects_long_cron_expression(api: Api) -> None:
    await _error(
        api, {"schedule": "1," * 100 + "1 * * * *", "tz": "Europe/Riga"}, "schedule: must be at most"
    )


async def test_it_validates_timezone(api: Api) -> None:
    await _error(api, {"schedule": "* * * * *", "tz": "not-a-timezone", "grace": 60}, "tz: unknown time zone")


@pytest.mark.parametrize(
    ("legacy", "canonical"),
    [
        ("Europe/Kiev", "Europe/Kyiv"),
        ("UCT", "UTC"),
        ("CET", "Europe/Brussels"),
        ("US/Eastern", "America/New_York"),
        ("Asia/Calcutta", "Asia/Kolkata"),
    ],
)
async def test_it_normalises_legacy_timezones(api: Api, legacy: str, canonical: str) -> None:
    r = await _post(api, {"schedule": "5 * * * *", "tz": legacy})
    assert r.status_code == 201 and r.json()["tz"] == canonical


async def test_it_sets_default_timeout(api: Api) -> None:
    r = await _post(api, {})
    assert r.status_code == 201 and r.json()["timeout"] == 86400 and r.json()["grace"] == 3600


async def test_it_rejects_readonly_key(api: Api) -> None:
    """DESIGN §9: 403 (Healthchecks: 401)."""
    assert (await _post(api, {"name": "Foo"}, headers=api.ro_headers)).status_code == 403


async def test_it_sets_manual_resume(api: Api) -> None:
    r = await _post(api, {"manual_resume": True})
    assert r.status_code == 201 and r.json()["manual_resume"] is True


async def test_it_rejects_non_boolean_manual_resume(api: Api) -> None:
    await _error(api, {"manual_resume": "surprise"}, "manual_resume: must be true or false")


async def test_it_sets_methods(api: Api) -> None:
    r = await _post(api, {"methods": "POST"})
    assert r.status_code == 201 and r.json()["methods"] == "POST"


async def test_it_rejects_bad_methods_value(api: Api) -> None:
    await _error(api, {"methods": "bad-value"}, "methods: ")


async def test_six_field_cron_needs_the_seconds_dialect(api: Api) -> None:
    """Healthchecks reads a 6-field line as OnCalendar and refuses it; we name the dialects
    that take it (DESIGN §4)."""
    await _error(api, {"schedule": "*/5 * * * * *"}, "schedule: ")
    r = await _post(api, {"schedule": "*/5 * * * * *", "dialect": "seconds"})
    assert r.status_code == 201


async def test_an_out_of_range_number_is_named_as_sent(api: Api) -> None:
    # 1e308 is a whole number: its integer, 309 digits long, is not what the client sent
    r = await _post(api, {"timeout": 1e308})
    assert r.status_code == 400
    assert r.json()["error"] == "timeout: must be between 1 and 31536000, got 1e+308"
