"""What a read-only key can do, endpoint by endpoint (Healthchecks' ``authorize_read`` views
versus its ``authorize`` ones): it reads checks, flips, runs and badges, where a check shows a
``unique_key`` instead of its uuid and URLs; pings, ping bodies, alerts and channels answer 401
(the uuid is the ping credential and bodies are job output); every write answers 403 (DESIGN §9).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from monitor.services.checks import unique_key
from tests.conftest import Api
from tests.hc_api.conftest import make_channel, make_check, ping

SECRETS = ("uuid", "ping_url", "update_url", "pause_url", "resume_url", "channels", "escalate_to")


async def _setup(api: Api) -> tuple[dict[str, Any], str]:
    channel = await make_channel(api)
    check = await make_check(api, name="job", tags="nightly", channels=channel["id"])
    uuid = str(check["uuid"])
    await ping(api, uuid, "start")
    await ping(api, uuid, "fail", body=b"job output: password=hunter2")
    return check, uuid


async def test_list_checks_hides_uuid_and_urls(api: Api) -> None:
    _, uuid = await _setup(api)
    r = await api.client.get("/api/v3/checks/", headers=api.ro_headers)
    assert r.status_code == 200
    (doc,) = r.json()["checks"]
    assert not set(SECRETS) & set(doc)
    assert doc["unique_key"] == unique_key(uuid)
    assert uuid not in r.text and "/ping/" not in r.text


async def test_list_checks_by_tag_and_slug_still_filters(api: Api) -> None:
    await _setup(api)
    r = await api.client.get("/api/v3/checks/", params={"tag": "nightly"}, headers=api.ro_headers)
    assert [c["name"] for c in r.json()["checks"]] == ["job"]


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_get_check_hides_uuid_and_urls(api: Api, version: int) -> None:
    _, uuid = await _setup(api)
    for ident in (uuid, unique_key(uuid)):
        r = await api.client.get(f"/api/v{version}/checks/{ident}", headers=api.ro_headers)
        assert r.status_code == 200
        assert not set(SECRETS) & set(r.json())
        assert uuid not in r.text and "/ping/" not in r.text


async def test_pings_are_refused(api: Api) -> None:
    _, uuid = await _setup(api)
    r = await api.client.get(f"/api/v3/checks/{uuid}/pings/", headers=api.ro_headers)
    assert r.status_code == 401 and r.json()["error"].startswith("X-Api-Key: ")


async def test_ping_bodies_are_refused(api: Api) -> None:
    _, uuid = await _setup(api)
    r = await api.client.get(f"/api/v3/checks/{uuid}/pings/2/body", headers=api.ro_headers)
    assert r.status_code == 401 and "hunter2" not in r.text
    ok = await api.client.get(f"/api/v3/checks/{uuid}/pings/2/body", headers=api.headers)
    assert ok.status_code == 200 and b"hunter2" in ok.content


async def test_alerts_are_refused(api: Api) -> None:
    """Alerts are ours; their messages carry the last ping's log tail, so they are kept from
    read-only keys as ping bodies are."""
    _, uuid = await _setup(api)
    r = await api.client.get(f"/api/v3/checks/{uuid}/alerts/", headers=api.ro_headers)
    assert r.status_code == 401
    assert (await api.client.get(f"/api/v3/checks/{uuid}/alerts/", headers=api.headers)).status_code == 200


async def test_flips_are_allowed_by_uuid_and_unique_key(api: Api) -> None:
    _, uuid = await _setup(api)
    for ident in (uuid, unique_key(uuid)):
        r = await api.client.get(f"/api/v3/checks/{ident}/flips/", headers=api.ro_headers)
        assert r.status_code == 200 and r.json()["flips"]


async def test_runs_are_allowed_by_unique_key(api: Api) -> None:
    """Runs are ours: tick, outcome and duration, no body — readable like flips."""
    _, uuid = await _setup(api)
    r = await api.client.get(f"/api/v3/checks/{unique_key(uuid)}/runs/", headers=api.ro_headers)
    assert r.status_code == 200 and len(r.json()["runs"]) == 1


async def test_channels_are_refused(api: Api) -> None:
    check, _ = await _setup(api)
    r = await api.client.get("/api/v3/channels/", headers=api.ro_headers)
    assert r.status_code == 401
    channel = str(check["channels"])
    r = await api.client.get(f"/api/v3/channels/{channel}", headers=api.ro_headers)
    assert r.status_code == 401


async def test_badges_are_allowed(api: Api) -> None:
    await _setup(api)
    r = await api.client.get("/api/v3/badges/", headers=api.ro_headers)
    assert r.status_code == 200 and set(r.json()["badges"]) == {"*", "nightly"}


async def test_maintenance_windows_show_unique_key_not_uuid(api: Api) -> None:
    _, uuid = await _setup(api)
    r = await api.client.post(
        "/api/v3/maintenance/",
        json={"name": "up", "check": uuid, "start": "2026-07-18T03:00:00Z", "end": "2026-07-18T04:00:00Z"},
        headers=api.headers,
    )
    assert r.status_code == 201, r.text
    window = r.json()["id"]
    for path in ("/api/v3/maintenance/", f"/api/v3/maintenance/{window}"):
        r = await api.client.get(path, headers=api.ro_headers)
        assert r.status_code == 200 and uuid not in r.text
        assert unique_key(uuid) in r.text


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/v3/checks/"),
        ("POST", "/api/v3/checks/{uuid}"),
        ("DELETE", "/api/v3/checks/{uuid}"),
        ("POST", "/api/v3/checks/{uuid}/pause"),
        ("POST", "/api/v3/checks/{uuid}/resume"),
        ("POST", "/api/v1/checks/{uuid}/pause"),
        ("POST", "/api/v3/channels/"),
        ("POST", "/api/v3/channels/{channel}"),
        ("DELETE", "/api/v3/channels/{channel}"),
        ("POST", "/api/v3/channels/{channel}/test"),
        ("POST", "/api/v3/maintenance/"),
    ],
)
async def test_writes_are_forbidden(api: Api, method: str, path: str) -> None:
    """DESIGN §9: 403 (Healthchecks answers 401 ``wrong api key``: its write views do not know
    read-only keys at all); the key is valid, it just may not write."""
    check, uuid = await _setup(api)
    r = await api.client.request(
        method,
        path.format(uuid=uuid, channel=check["channels"]),
        content=json.dumps({"name": "x"}),
        headers=api.ro_headers,
    )
    assert r.status_code == 403 and r.json()["error"].startswith("X-Api-Key: ")


async def test_read_only_key_cannot_ping_what_it_cannot_see(api: Api) -> None:
    """The point of it all: nothing a read-only key can read names a ping URL."""
    _, uuid = await _setup(api)
    seen = ""
    key = unique_key(uuid)
    paths = ["/api/v3/checks/", f"/api/v3/checks/{key}", f"/api/v3/checks/{key}/flips/"]
    paths += [f"/api/v3/checks/{key}/runs/", "/api/v3/badges/", "/api/v3/maintenance/"]
    for path in paths:
        seen += (await api.client.get(path, headers=api.ro_headers)).text
    assert uuid not in seen and uuid.replace("-", "") not in seen
