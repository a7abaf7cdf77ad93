"""GET /api/v3/channels/ (Healthchecks' test_list_channels.py)."""

from __future__ import annotations

import pytest

from monitor.services.channels import healthchecks_kind
from tests.conftest import Api
from tests.hc_api.conftest import OTHER_PROJECT_KEY, make_channel, other_project_headers


async def test_it_works(api: Api) -> None:
    channel = await make_channel(api, name="Email to Alice", url="mailto://alice@example.org")
    r = await api.client.get("/api/v1/channels/", headers=api.headers)
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"
    (c,) = r.json()["channels"]
    assert c["id"] == channel["id"]
    assert c["kind"] == "email"
    assert c["name"] == "Email to Alice"


async def test_it_handles_options(api: Api) -> None:
    r = await api.client.options("/api/v1/channels/")
    assert r.status_code == 204
    assert "GET" in r.headers["access-control-allow-methods"]


async def test_it_shows_only_users_channels(api: Api) -> None:
    await make_channel(api)
    await other_project_headers(api)
    r = await api.client.post(
        "/api/v3/channels/",
        json={"name": "Bob", "url": "mailto://bob@example.org"},
        headers={"X-Api-Key": OTHER_PROJECT_KEY},
    )
    assert r.status_code == 201
    names = [
        c["name"] for c in (await api.client.get("/api/v1/channels/", headers=api.headers)).json()["channels"]
    ]
    assert names == ["Email to Alice"]


async def test_it_handles_missing_api_key(api: Api) -> None:
    r = await api.client.get("/api/v1/channels/")
    assert r.status_code == 401 and "missing" in r.json()["error"]


async def test_readonly_key_is_refused(api: Api) -> None:
    """Healthchecks' channels view takes read-write keys only (``@authorize``)."""
    await make_channel(api)
    assert (await api.client.get("/api/v3/channels/", headers=api.ro_headers)).status_code == 401


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("mailtos://u:p@smtp.example.org?to=a@example.org", "email"),
        ("json://hooks.example.org/x", "webhook"),
        ("slack://T000/B000/XXXX", "slack"),
        ("discord://1234/abcd", "discord"),
        ("tgram://123:abc/456", "telegram"),
        ("ntfy://ntfy.example.org/topic", "ntfy"),
        ("pagerduty://key@token", "pd"),
        ("windows://", "apprise"),
    ],
)
def test_kind_is_healthchecks_integration_kind(url: str, kind: str) -> None:
    """Apprise schemes map onto Healthchecks' integration kinds; schemes Healthchecks has no
    integration of its own for are its ``apprise`` kind."""
    assert healthchecks_kind(url) == kind
