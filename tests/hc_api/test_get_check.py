"""GET /api/v{1,2,3}/checks/<uuid|unique_key> (Healthchecks' test_get_check.py)."""

from __future__ import annotations

from typing import Any

from monitor.services.checks import unique_key
from tests.conftest import Api
from tests.hc_api.conftest import MISSING_UUID, make_channel, make_check, other_project_headers, ping

HC_FIELDS = {
    "name", "slug", "tags", "desc", "grace", "n_pings", "status", "started", "last_ping",
    "next_ping", "manual_resume", "methods", "badge_url", "uuid", "ping_url", "update_url",
    "pause_url", "resume_url", "channels", "timeout",
}  # fmt: skip
READ_WRITE_ONLY = ("uuid", "ping_url", "update_url", "pause_url", "resume_url", "channels")


async def _alice(api: Api) -> dict[str, Any]:
    channel = await make_channel(api)
    return await make_check(
        api,
        name="Alice 1",
        slug="alice-1-custom-slug",
        timeout=3600,
        grace=900,
        tags="a1-tag a1-additional-tag",
        desc="This is description",
        channels=channel["id"],
    )


async def test_it_works(api: Api) -> None:
    check = await _alice(api)
    r = await api.client.get(f"/api/v1/checks/{check['uuid']}", headers=api.headers)
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"
    doc = r.json()
    assert set(doc) >= HC_FIELDS
    assert doc["slug"] == "alice-1-custom-slug"
    assert doc["timeout"] == 3600 and doc["grace"] == 900
    assert doc["ping_url"] == f"{api.settings.base_url}/ping/{check['uuid']}"
    assert doc["last_ping"] is None and doc["n_pings"] == 0
    assert doc["status"] == "new" and doc["started"] is False
    assert doc["channels"] == check["channels"] != ""
    assert doc["desc"] == "This is description"
    assert doc["manual_resume"] is False and doc["methods"] == ""


async def test_it_handles_invalid_uuid(api: Api) -> None:
    r = await api.client.get("/api/v1/checks/not-an-uuid", headers=api.headers)
    assert r.status_code == 404


async def test_it_handles_missing_check(api: Api) -> None:
    r = await api.client.get(f"/api/v1/checks/{MISSING_UUID}", headers=api.headers)
    assert r.status_code == 404


async def test_it_handles_unique_key(api: Api) -> None:
    check = await _alice(api)
    r = await api.client.get(f"/api/v1/checks/{unique_key(check['uuid'])}", headers=api.headers)
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"
    doc = r.json()
    assert doc["timeout"] == 3600 and doc["grace"] == 900
    assert doc["ping_url"] == check["ping_url"]  # a read-write key sees everything
    assert doc["channels"] == check["channels"]


async def test_it_rejects_post_unique_key(api: Api) -> None:
    check = await _alice(api)
    r = await api.client.post(f"/api/v1/checks/{unique_key(check['uuid'])}", headers=api.headers)
    assert r.status_code == 404  # updates take the uuid only (Healthchecks: 405, no such route)


async def test_readonly_key_works(api: Api) -> None:
    check = await _alice(api)
    r = await api.client.get(f"/api/v1/checks/{check['uuid']}", headers=api.ro_headers)
    assert r.status_code == 200
    # When using read-only keys, the ping URLs are not exposed
    for name in ("ping_url", "update_url", "pause_url", "resume_url"):
        assert name not in r.text
    doc = r.json()
    assert not set(READ_WRITE_ONLY) & set(doc)
    assert check["uuid"] not in r.text
    assert doc["unique_key"] == unique_key(check["uuid"])


async def test_readonly_key_reads_by_unique_key(api: Api) -> None:
    check = await _alice(api)
    key = unique_key(check["uuid"])
    r = await api.client.get(f"/api/v3/checks/{key}", headers=api.ro_headers)
    assert r.status_code == 200 and r.json()["unique_key"] == key
    assert check["uuid"] not in r.text


async def test_unique_key_is_stable_and_healthchecks_rule(api: Api) -> None:
    """SHA-1 of the uuid's first 16 hex digits, as Healthchecks' ``Check.unique_key``."""
    import hashlib

    uuid = "ec73a3ff-2f06-4bc6-b4a4-9a0e8a8c3e2b"
    assert unique_key(uuid) == hashlib.sha1(b"ec73a3ff2f064bc6").hexdigest()
    assert unique_key(uuid.upper()) == unique_key(uuid)


async def test_v1_reports_status_started(api: Api) -> None:
    check = await _alice(api)
    await ping(api, check["uuid"], "start")
    doc = (await api.client.get(f"/api/v1/checks/{check['uuid']}", headers=api.headers)).json()
    assert doc["status"] == "started" and doc["started"] is True


async def test_v2_reports_started_separately(api: Api) -> None:
    """v2/v3 keep ``status`` and ``started`` apart. Healthchecks' check stays ``new`` after a
    first /start; ours is ``up``: DESIGN §2 counts a start as a run ping, and ``new`` means no
    run ping yet."""
    check = await _alice(api)
    await ping(api, check["uuid"], "start")
    for version in (2, 3):
        doc = (await api.client.get(f"/api/v{version}/checks/{check['uuid']}", headers=api.headers)).json()
        assert doc["status"] == "up" and doc["started"] is True


async def test_v1_by_unique_key_reports_status_started(api: Api) -> None:
    check = await _alice(api)
    await ping(api, check["uuid"], "start")
    key = unique_key(check["uuid"])
    doc = (await api.client.get(f"/api/v1/checks/{key}", headers=api.headers)).json()
    assert doc["status"] == "started" and doc["started"] is True
    doc = (await api.client.get(f"/api/v2/checks/{key}", headers=api.headers)).json()
    assert doc["status"] == "up" and doc["started"] is True  # see test_v2_reports_started_separately


async def test_v2_and_v3_give_the_same_fields(api: Api) -> None:
    check = await _alice(api)
    v2 = (await api.client.get(f"/api/v2/checks/{check['uuid']}", headers=api.headers)).json()
    v3 = (await api.client.get(f"/api/v3/checks/{check['uuid']}", headers=api.headers)).json()
    assert v2 == v3


async def test_another_projects_check_is_404(api: Api) -> None:
    """DESIGN §9: 404, not Healthchecks' 403 — a key does not learn that another project's
    check exists."""
    check = await _alice(api)
    bob = await other_project_headers(api)
    r = await api.client.get(f"/api/v3/checks/{check['uuid']}", headers=bob)
    assert r.status_code == 404
    r = await api.client.get(f"/api/v3/checks/{unique_key(check['uuid'])}", headers=bob)
    assert r.status_code == 404


async def test_it_handles_missing_api_key(api: Api) -> None:
    check = await _alice(api)
    r = await api.client.get(f"/api/v3/checks/{check['uuid']}")
    assert r.status_code == 401 and "missing" in r.json()["error"]
