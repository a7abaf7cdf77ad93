"""The ping API (Healthchecks' test_ping.py and test_ping_by_slug.py), the behaviours its
management API shows: statuses, ``last_ping``, ``started``, remote address."""

from __future__ import annotations

import uuid as uuid_module
from pathlib import Path

import pytest

from monitor.domain.clock import FrozenClock
from monitor.settings import Settings
from monitor.storage.engine import make_engine, migrate
from tests.conftest import Api
from tests.hc_api.conftest import make_check
from tests.support.app import open_api


async def _check(api: Api, uuid: str) -> dict[str, object]:
    return dict((await api.client.get(f"/api/v3/checks/{uuid}", headers=api.headers)).json())


async def test_it_works(api: Api) -> None:
    check = await make_check(api)
    r = await api.client.get(f"/ping/{check['uuid']}")
    assert r.status_code == 200 and r.text == "OK"
    assert r.headers["access-control-allow-origin"] == "*"
    assert "ping-body-limit" in r.headers
    doc = await _check(api, check["uuid"])
    assert doc["status"] == "up" and doc["n_pings"] == 1 and doc["last_ping"] == "2026-07-18T02:00:00Z"


async def test_start_does_not_move_last_ping(api: Api) -> None:
    """Healthchecks' /start sets last_start only; last_ping keeps the last finish."""
    check = await make_check(api, timeout=3600, grace=600)
    await api.client.get(f"/ping/{check['uuid']}")
    api.clock.advance(60)
    await api.client.get(f"/ping/{check['uuid']}/start")
    doc = await _check(api, check["uuid"])
    assert doc["last_ping"] == "2026-07-18T02:00:00Z" and doc["started"] is True
    assert doc["n_pings"] == 2
    api.clock.advance(60)
    await api.client.get(f"/ping/{check['uuid']}")
    doc = await _check(api, check["uuid"])
    assert doc["last_ping"] == "2026-07-18T02:02:00Z" and doc["started"] is False


async def test_log_does_not_move_last_ping(api: Api) -> None:
    check = await make_check(api)
    await api.client.get(f"/ping/{check['uuid']}/log")
    doc = await _check(api, check["uuid"])
    assert doc["last_ping"] is None and doc["status"] == "new" and doc["n_pings"] == 1


async def test_fail_goes_down_at_once(api: Api) -> None:
    check = await make_check(api)
    await api.client.get(f"/ping/{check['uuid']}/fail")
    assert (await _check(api, check["uuid"]))["status"] == "down"


@pytest.mark.parametrize(("code", "status"), [("0", "up"), ("1", "down"), ("255", "down")])
async def test_exit_status(api: Api, code: str, status: str) -> None:
    check = await make_check(api)
    assert (await api.client.get(f"/ping/{check['uuid']}/{code}")).status_code == 200
    assert (await _check(api, check["uuid"]))["status"] == status


async def test_exit_status_over_255_is_invalid(api: Api) -> None:
    check = await make_check(api)
    r = await api.client.get(f"/ping/{check['uuid']}/256")
    assert r.status_code == 400 and r.text == "invalid url format"


async def test_it_handles_bad_uuid_and_unknown_check(api: Api) -> None:
    assert (await api.client.get("/ping/not-uuid")).status_code in (400, 404)
    r = await api.client.get(f"/ping/{uuid_module.uuid4()}")
    assert r.status_code == 404 and r.text == "not found"


async def test_it_rejects_bad_rid(api: Api) -> None:
    check = await make_check(api)
    r = await api.client.get(f"/ping/{check['uuid']}", params={"rid": "not-a-uuid"})
    assert r.status_code == 400 and r.text == "invalid uuid format"
    ok = await api.client.get(f"/ping/{check['uuid']}", params={"rid": str(uuid_module.uuid4()).upper()})
    assert ok.status_code == 200


@pytest.mark.parametrize("method", ["GET", "POST", "HEAD"])
async def test_it_accepts_methods(api: Api, method: str) -> None:
    check = await make_check(api)
    assert (await api.client.request(method, f"/ping/{check['uuid']}")).status_code == 200


async def test_other_methods_are_405(api: Api) -> None:
    """DESIGN §5 takes GET, POST and HEAD — the three Healthchecks' docs promise; its Django
    view records any verb. A PUT is answered 405 with ``Allow``, and stores nothing."""
    check = await make_check(api)
    r = await api.client.put(f"/ping/{check['uuid']}")
    assert r.status_code == 405 and r.headers["allow"] == "GET, POST, HEAD"
    assert (await _check(api, check["uuid"]))["n_pings"] == 0


async def test_methods_post_ignores_other_methods(api: Api) -> None:
    check = await make_check(api, methods="POST")
    await api.client.get(f"/ping/{check['uuid']}")
    pings = (await api.client.get(f"/api/v3/checks/{check['uuid']}/pings/", headers=api.headers)).json()
    assert pings["pings"][0]["type"] == "ign"
    assert (await _check(api, check["uuid"]))["status"] == "new"


async def test_manual_resume_ignores_pings_while_paused(api: Api) -> None:
    check = await make_check(api, manual_resume=True)
    await api.client.post(f"/api/v3/checks/{check['uuid']}/pause", headers=api.headers)
    await api.client.get(f"/ping/{check['uuid']}")
    assert (await _check(api, check["uuid"]))["status"] == "paused"


async def test_it_truncates_ua(api: Api) -> None:
    check = await make_check(api)
    await api.client.get(f"/ping/{check['uuid']}", headers={"user-agent": "x" * 300})
    pings = (await api.client.get(f"/api/v3/checks/{check['uuid']}/pings/", headers=api.headers)).json()
    assert pings["pings"][0]["ua"] == "x" * 200


async def test_forwarded_for_is_not_believed_without_trusted_proxies(api: Api) -> None:
    """DESIGN §5: only ``MONITOR_TRUSTED_PROXIES`` are believed (Healthchecks believes any
    ``X-Forwarded-For``, which lets a client write any address into the log)."""
    check = await make_check(api)
    await api.client.get(f"/ping/{check['uuid']}", headers={"x-forwarded-for": "1.1.1.1"})
    pings = (await api.client.get(f"/api/v3/checks/{check['uuid']}/pings/", headers=api.headers)).json()
    assert pings["pings"][0]["remote_addr"] != "1.1.1.1"


async def test_by_slug_works_and_creates(api: Api) -> None:
    key = api.project["ping_key"]
    assert (await api.client.get(f"/ping/{key}/nightly")).status_code == 404
    r = await api.client.get(f"/ping/{key}/nightly", params={"create": "1"})
    assert r.status_code == 201 and r.text == "Created"
    r = await api.client.get(f"/ping/{key}/nightly")
    assert r.status_code == 200 and r.text == "OK"
    (check,) = (await api.client.get("/api/v3/checks/?slug=nightly", headers=api.headers)).json()["checks"]
    assert (check["name"], check["timeout"], check["grace"], check["n_pings"]) == ("nightly", 86400, 3600, 2)


async def test_by_slug_rejects_uppercase(api: Api) -> None:
    r = await api.client.get(f"/ping/{api.project['ping_key']}/Nightly")
    assert r.status_code == 400 and r.text == "invalid url format"


async def test_too_many_pings_get_429_not_silent_200(tmp_path: Path, clock: FrozenClock) -> None:
    """DESIGN §5: past the per-check limit a 429 with Retry-After, where hosted Healthchecks
    answers ``200 OK (rate-limited)`` and drops the ping silently."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'limited.db'}"
    engine = make_engine(url)
    await migrate(engine)
    try:
        settings = Settings(database_url=url, ping_rate_limit=3)
        async with open_api(engine, clock, settings) as limited:
            r = await limited.client.post("/api/v3/checks/", json={"name": "x"}, headers=limited.headers)
            uuid = r.json()["uuid"]
            answers = [await limited.client.get(f"/ping/{uuid}") for _ in range(4)]
            assert [a.status_code for a in answers] == [200, 200, 200, 429]
            assert "retry-after" in answers[-1].headers
    finally:
        await engine.dispose()
