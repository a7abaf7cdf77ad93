"""Keyword filters over the in-process app (SQLite and PostgreSQL): the v3 API fields and what
HTTP ping bodies become under ``filter_http_body`` (Healthchecks' rules)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api
from tests.support.app import create_check, get_check, list_of

FILTER_FIELDS = {
    "filter_subject": False,
    "filter_body": False,
    "filter_http_body": False,
    "filter_default_fail": False,
    "start_kw": "",
    "success_kw": "",
    "failure_kw": "",
    "subject": "",
    "subject_fail": "",
}


def _filters(check: dict[str, Any]) -> dict[str, Any]:
    return {k: check[k] for k in FILTER_FIELDS}


async def test_a_new_check_has_filters_off(api: Api) -> None:
    check = await create_check(api, name="job")
    assert _filters(check) == FILTER_FIELDS


async def test_filter_fields_are_stored_on_create_and_read_back(api: Api) -> None:
    fields = {
        "filter_subject": True,
        "filter_body": True,
        "filter_http_body": True,
        "filter_default_fail": True,
        "start_kw": "BEGIN",
        "success_kw": "OK, DONE",
        "failure_kw": "FAIL,ERROR",
    }
    check = await create_check(api, name="job", **fields)
    expected = {**FILTER_FIELDS, **fields, "subject": "OK, DONE", "subject_fail": "FAIL,ERROR"}
    assert _filters(check) == expected
    assert _filters(await get_check(api, check["uuid"])) == expected


async def test_a_partial_update_changes_only_the_given_filter_fields(api: Api) -> None:
    check = await create_check(api, name="job", failure_kw="FAIL", filter_http_body=True)
    r = await api.client.post(
        f"/api/v3/checks/{check['uuid']}", json={"success_kw": "OK"}, headers=api.headers
    )
    assert r.status_code == 200, r.text
    got = _filters(r.json())
    assert (got["failure_kw"], got["success_kw"], got["filter_http_body"]) == ("FAIL", "OK", True)
    r = await api.client.post(
        f"/api/v3/checks/{check['uuid']}", json={"filter_http_body": False}, headers=api.headers
    )
    assert _filters(r.json())["filter_http_body"] is False
    assert _filters(r.json())["failure_kw"] == "FAIL"


async def test_deprecated_subject_fields_map_onto_keywords_and_filter_subject(api: Api) -> None:
    check = await create_check(api, name="job", subject="SUCCESS", subject_fail="FAILURE")
    got = _filters(check)
    assert (got["success_kw"], got["failure_kw"], got["filter_subject"]) == ("SUCCESS", "FAILURE", True)
    assert (got["subject"], got["subject_fail"]) == ("SUCCESS", "FAILURE")
    uuid = check["uuid"]
    r = await api.client.post(
        f"/api/v3/checks/{uuid}", json={"subject": "", "subject_fail": ""}, headers=api.headers
    )
    got = _filters(r.json())
    assert (got["success_kw"], got["failure_kw"], got["filter_subject"]) == ("", "", False)
    assert (got["subject"], got["subject_fail"]) == ("", "")


async def test_subject_is_empty_while_filter_subject_is_off(api: Api) -> None:
    check = await create_check(api, name="job", success_kw="OK", filter_http_body=True)
    assert (check["subject"], check["subject_fail"]) == ("", "")


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        pytest.param("filter_http_body", "yes", "filter_http_body: must be true or false", id="flag-string"),
        pytest.param("filter_default_fail", 1, "filter_default_fail: must be true or false", id="flag-int"),
        pytest.param("filter_subject", None, "filter_subject: must be true or false", id="flag-null"),
        pytest.param("failure_kw", 5, "failure_kw: must be a string", id="keywords-int"),
        pytest.param("start_kw", "x" * 201, "start_kw: must be at most 200 characters", id="keywords-long"),
        pytest.param("subject", ["a"], "subject: must be a string", id="legacy-list"),
        pytest.param("subject_fail", "x" * 201, "subject_fail: must be at most 200", id="legacy-long"),
    ],
)
async def test_bad_filter_fields_are_refused_naming_the_field(
    api: Api, field: str, value: Any, error: str
) -> None:
    r = await api.client.post("/api/v3/checks/", json={"name": "job", field: value}, headers=api.headers)
    assert r.status_code == 400
    assert r.json()["error"].startswith(error)
    listed = await api.client.get("/api/v3/checks/", headers=api.headers)
    assert listed.json()["checks"] == []  # nothing was created
    check = await create_check(api, name="other")
    r = await api.client.post(f"/api/v3/checks/{check['uuid']}", json={field: value}, headers=api.headers)
    assert r.status_code == 400
    assert r.json()["error"].startswith(error)


async def _ping(api: Api, path: str, body: bytes | None = None) -> None:
    api.clock.advance(1)
    if body is None:
        r = await api.client.get(f"/ping/{path}")
    else:
        r = await api.client.post(f"/ping/{path}", content=body)
    assert (r.status_code, r.text) == (200, "OK")


async def test_a_body_reporting_fail_records_a_failure_and_the_check_goes_down(api: Api) -> None:
    check = await create_check(api, name="job", filter_http_body=True, success_kw="OK", failure_kw="FAIL")
    uuid = check["uuid"]
    await _ping(api, uuid, b"backup OK")
    assert (await get_check(api, uuid))["status"] == "up"
    await _ping(api, uuid, b"backup: FAIL (disk full)")
    assert (await get_check(api, uuid))["status"] == "down"
    pings = await list_of(api, uuid, "pings")
    assert [p["type"] for p in pings] == ["fail", "success"]
    alerts = await list_of(api, uuid, "alerts")
    assert [a["kind"] for a in alerts] == ["failed"]


async def test_a_body_matching_no_keyword_is_ignored_or_failed_by_default(api: Api) -> None:
    check = await create_check(api, name="job", filter_http_body=True, success_kw="OK")
    uuid = check["uuid"]
    await _ping(api, uuid, b"something else")
    await _ping(api, uuid)  # GET: no body at all
    got = await get_check(api, uuid)
    assert (got["status"], got["last_ping"]) == ("new", None)  # ign: stored, no effect
    assert [p["type"] for p in await list_of(api, uuid, "pings")] == ["ign", "ign"]
    await api.client.post(f"/api/v3/checks/{uuid}", json={"filter_default_fail": True}, headers=api.headers)
    await _ping(api, uuid, b"something else")
    assert (await get_check(api, uuid))["status"] == "down"
    assert (await list_of(api, uuid, "pings"))[0]["type"] == "fail"


async def test_a_start_keyword_starts_a_run(api: Api) -> None:
    check = await create_check(api, name="job", filter_http_body=True, start_kw="starting", success_kw="done")
    uuid = check["uuid"]
    await _ping(api, uuid, b"starting backup")
    assert (await get_check(api, uuid))["started"] is True
    await _ping(api, uuid, b"backup done")
    got = await get_check(api, uuid)
    assert (got["started"], got["status"]) == (False, "up")
    runs = await list_of(api, uuid, "runs")
    assert len(runs) == 1 and runs[0]["duration"] == 1


async def test_explicit_actions_and_exit_statuses_are_not_filtered(api: Api) -> None:
    check = await create_check(api, name="job", filter_http_body=True, failure_kw="FAIL", success_kw="OK")
    uuid = check["uuid"]
    await _ping(api, f"{uuid}/start", b"FAIL")
    await _ping(api, f"{uuid}/0", b"FAIL")
    await _ping(api, f"{uuid}/log", b"OK")
    await _ping(api, f"{uuid}/fail", b"OK")
    types = [(p["type"], p["exit_status"]) for p in reversed(await list_of(api, uuid, "pings"))]
    assert types == [("start", None), ("success", 0), ("log", None), ("fail", None)]


async def test_without_filter_http_body_a_fail_body_is_a_success(api: Api) -> None:
    check = await create_check(api, name="job", failure_kw="FAIL")
    await _ping(api, check["uuid"], b"FAIL")
    assert (await get_check(api, check["uuid"]))["status"] == "up"


async def test_post_only_checks_ignore_gets_before_keywords(api: Api) -> None:
    check = await create_check(
        api, name="job", methods="POST", filter_http_body=True, filter_default_fail=True, success_kw="OK"
    )
    uuid = check["uuid"]
    await _ping(api, uuid)  # a GET would be "fail" by default-fail, but methods=POST wins: ign
    assert (await get_check(api, uuid))["status"] == "new"
    assert (await list_of(api, uuid, "pings"))[0]["type"] == "ign"


async def test_keywords_apply_to_slug_urls_and_http_pings_record_their_scheme(api: Api) -> None:
    check = await create_check(api, name="job", slug="nightly", filter_http_body=True, failure_kw="FAIL")
    ping_key = api.project["ping_key"]
    await _ping(api, f"{ping_key}/nightly", b"FAIL")
    pings = await list_of(api, check["uuid"], "pings")
    assert [(p["type"], p["scheme"]) for p in pings] == [("fail", "http")]
