"""The dashboard over the in-process app: login, sessions, CSRF, the pages, badges.

Runs on SQLite and PostgreSQL with an injected clock; browser behaviour (JS refresh, keyboard)
is in ``test_browser.py``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from monitor.app import create_app
from monitor.services import projects, users
from tests.conftest import Api
from tests.support.app import create_check

PASSWORD = "correct horse battery"
START = datetime(2026, 7, 18, 2, 0, tzinfo=UTC)
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


async def make_user(api: Api, email: str = "ops@example.com", project_ids: list[int] | None = None) -> None:
    async with api.engine.begin() as conn:
        await users.create_user(
            conn,
            email,
            PASSWORD,
            project_ids if project_ids is not None else [int(api.project["id"])],
            api.clock.now(),
        )


async def log_in(api: Api, email: str = "ops@example.com", password: str = PASSWORD) -> Any:
    page = await api.client.get("/login")
    assert page.status_code == 200
    token = CSRF.search(page.text)
    assert token is not None
    return await api.client.post(
        "/login",
        data={"email": email, "password": password, "csrf_token": token.group(1), "next": "/"},
        follow_redirects=False,
    )


def csrf_of(html: str) -> str:
    found = CSRF.search(html)
    assert found is not None
    return found.group(1)


async def test_anonymous_visitor_is_redirected_to_login(api: Api) -> None:
    for path in ("/", "/cron", "/channels", "/fragments/checks"):
        answer = await api.client.get(path, follow_redirects=False)
        assert answer.status_code == 303, path
        assert answer.headers["location"].startswith("/login?next=")


async def test_login_sets_a_strict_session_cookie_and_logout_ends_it(api: Api) -> None:
    await make_user(api)
    answer = await log_in(api)
    assert answer.status_code == 303 and answer.headers["location"] == "/"
    cookie = next(v for k, v in answer.headers.multi_items() if k == "set-cookie" and "monitor_session" in v)
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie.replace("Lax", "lax")
    assert "Secure" not in cookie  # http base URL
    page = await api.client.get("/")
    assert page.status_code == 200 and "ops@example.com" in page.text
    assert page.headers["x-frame-options"] == "DENY"
    assert "script-src 'self'" in page.headers["content-security-policy"]
    # logout without the CSRF token is refused; with it the session ends
    assert (await api.client.post("/logout", data={}, follow_redirects=False)).status_code == 403
    out = await api.client.post("/logout", data={"csrf_token": csrf_of(page.text)}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/login"
    api.client.cookies.clear()
    assert (await api.client.get("/", follow_redirects=False)).status_code == 303


async def test_wrong_password_and_throttling(api: Api) -> None:
    await make_user(api)
    for _ in range(users.MAX_FAILED_LOGINS):
        answer = await log_in(api, password="wrong password!")
        assert answer.status_code == 400 and "wrong email or password" in answer.text
    locked = await log_in(api)  # right password, but locked
    assert locked.status_code == 429 and int(locked.headers["retry-after"]) > 0
    api.clock.advance((users.LOCKOUT + timedelta(seconds=1)).total_seconds())
    assert (await log_in(api)).status_code == 303
    api.client.cookies.clear()
    assert (await log_in(api, email="nobody@example.com")).status_code == 400


async def test_login_form_needs_its_csrf_token(api: Api) -> None:
    await make_user(api)
    answer = await api.client.post(
        "/login", data={"email": "ops@example.com", "password": PASSWORD, "csrf_token": "forged"}
    )
    assert answer.status_code == 403


async def test_next_never_leaves_the_site(api: Api) -> None:
    await make_user(api)
    page = await api.client.get("/login")
    answer = await api.client.post(
        "/login",
        data={
            "email": "ops@example.com",
            "password": PASSWORD,
            "csrf_token": csrf_of(page.text),
            "next": "//evil.example/",
        },
        follow_redirects=False,
    )
    assert answer.headers["location"] == "/"


async def test_secure_cookie_when_base_url_is_https(api: Api) -> None:
    settings = api.settings.replace(base_url="https://monitor.example")
    app = create_app(settings, clock=api.clock, evaluator=False, notify=False, liveness=False)
    async with AsyncTestClient(app, base_url="https://testserver.local") as client:
        secure = Api(
            client=client, clock=api.clock, engine=api.engine, settings=settings, project=api.project
        )
        await make_user(secure)
        answer = await log_in(secure)
        cookie = next(
            v for k, v in answer.headers.multi_items() if k == "set-cookie" and "monitor_session" in v
        )
        assert "Secure" in cookie


async def test_checks_page_shows_only_the_users_projects(api: Api) -> None:
    mine = await create_check(api, name="nightly-backup", tags="prod db", schedule="0 3 * * *")
    async with api.engine.begin() as conn:
        other = await projects.create_project(conn, "theirs", api.clock.now(), api_key="other-key-0123456789")
    theirs = await api.client.post(
        "/api/v3/checks/", json={"name": "secret-job"}, headers={"X-Api-Key": "other-key-0123456789"}
    )
    assert theirs.status_code == 201
    await make_user(api)
    await log_in(api)
    page = await api.client.get("/")
    assert "nightly-backup" in page.text and "secret-job" not in page.text
    assert f"/checks/{mine['uuid']}" in page.text
    hidden = await api.client.get(f"/checks/{theirs.json()['uuid']}")
    assert hidden.status_code == 404
    assert int(other["id"]) > 0


async def test_filters_by_tag_status_and_name(api: Api) -> None:
    await create_check(api, name="alpha", tags="prod")
    await create_check(api, name="beta", tags="staging")
    await make_user(api)
    await log_in(api)
    by_tag = (await api.client.get("/fragments/checks", params={"tag": "prod"})).text
    assert "alpha" in by_tag and "beta" not in by_tag
    by_name = (await api.client.get("/fragments/checks", params={"q": "BET"})).text
    assert "beta" in by_name and "alpha" not in by_name
    by_status = (await api.client.get("/fragments/checks", params={"status": "down"})).text
    assert "alpha" not in by_status and "No check matches" in by_status


async def test_a_page_number_past_the_last_page_shows_the_last_page(api: Api) -> None:
    answer = await api.client.post(
        "/api/v3/checks/", json=[{"name": f"job-{i:02d}"} for i in range(51)], headers=api.headers
    )
    assert answer.status_code == 201, answer.text
    await make_user(api)
    await log_in(api)
    second = (await api.client.get("/", params={"page": "2"})).text
    assert "page 2 of 2" in second and second.count('href="/checks/') >= 1
    for path in ("/", "/fragments/checks"):
        past = (await api.client.get(path, params={"page": "99999"})).text
        assert "page 2 of 2" in past, path  # not "page 99999 of 2" and no rows
        assert [line for line in past.splitlines() if "job-" in line] == [
            line for line in second.splitlines() if "job-" in line
        ]


async def test_check_badge_svg_and_shields_json(api: Api) -> None:
    check = await create_check(api, name="backup", tags="prod")
    assert check["badge_url"].startswith(f"{api.settings.base_url}/b/")
    badge_uuid = check["badge_url"].rsplit("/", 1)[1].removesuffix(".svg")
    assert badge_uuid != check["uuid"]
    svg = await api.client.get(f"/b/{badge_uuid}.svg")
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    # a check that never ran is not "up"
    assert ">backup<" in svg.text and ">new<" in svg.text and ">up<" not in svg.text
    await api.client.get(f"/ping/{check['uuid']}")
    shields = (await api.client.get(f"/b/{badge_uuid}.json")).json()
    assert shields == {
        "schemaVersion": 1,
        "label": "backup",
        "message": "up",
        "color": "success",
        "status": "up",
        "total": 1,
        "grace": 0,
        "down": 0,
    }
    await api.client.get(f"/ping/{check['uuid']}/fail")
    assert (await api.client.get(f"/b/{badge_uuid}.json")).json()["message"] == "down"
    assert (await api.client.get("/b/00000000-0000-4000-8000-000000000000.svg")).status_code == 404
    assert (await api.client.get(f"/b/{badge_uuid}.png")).status_code == 404


async def test_badges_of_new_and_paused_checks_never_say_up(api: Api) -> None:
    check = await create_check(api, name="nightly", tags="ops")
    badge_uuid = check["badge_url"].rsplit("/", 1)[1].removesuffix(".svg")
    assert (await api.client.get(f"/b/{badge_uuid}.json")).json()["message"] == "new"
    paused = await api.client.post(f"/api/v3/checks/{check['uuid']}/pause", headers=api.headers)
    assert paused.status_code == 200
    body = (await api.client.get(f"/b/{badge_uuid}.json")).json()
    assert body["message"] == "paused" and body["color"] == "inactive"


async def test_tag_badges_and_badges_api(api: Api) -> None:
    ok = await create_check(api, name="a", tags="prod")
    bad = await create_check(api, name="b", tags="prod web")
    await api.client.get(f"/ping/{ok['uuid']}")
    await api.client.get(f"/ping/{bad['uuid']}/fail")
    listed = await api.client.get("/api/v3/badges/", headers=api.ro_headers)
    assert listed.status_code == 200
    badges = listed.json()["badges"]
    assert set(badges) == {"prod", "web", "*"}
    assert set(badges["prod"]) == {"svg", "svg3", "json", "json3", "shields", "shields3"}
    path = badges["prod"]["json3"].removeprefix(api.settings.base_url)
    body = (await api.client.get(path)).json()
    assert body["message"] == "down" and body["total"] == 2 and body["down"] == 1
    assert body["label"] == "prod" and body["schemaVersion"] == 1
    svg = await api.client.get(badges["*"]["svg3"].removeprefix(api.settings.base_url))
    assert svg.status_code == 200 and ">down<" in svg.text
    assert (await api.client.get("/badge/wrong-key/prod.svg")).status_code == 404
    assert (await api.client.get("/api/v3/badges/")).status_code == 401


@pytest.mark.parametrize("path", ["/cron?schedule=0+3+*+*+1-5&tz=Europe/Berlin", "/channels"])
async def test_pages_render(api: Api, path: str) -> None:
    await make_user(api)
    await log_in(api)
    page = await api.client.get(path)
    assert page.status_code == 200, page.text


async def test_strip_shows_the_newest_thirty_ticks_with_outcomes(api: Api) -> None:
    check = await create_check(api, name="minutely", schedule="* * * * *", grace=30)
    other = await create_check(api, name="quiet", schedule="* * * * *", grace=30)
    await api.client.get(f"/ping/{other['uuid']}")
    for minute in range(35):
        api.clock.set(START + timedelta(minutes=minute, seconds=2))
        kind = "/fail" if minute == 34 else ""
        assert (await api.client.get(f"/ping/{check['uuid']}{kind}")).status_code == 200
    await make_user(api)
    await log_in(api)
    rows = (await api.client.get("/fragments/checks")).text
    mine = rows[rows.index("minutely") :]
    cells = re.findall(r'class="cell" data-outcome="([a-z_]+)"', mine.split("</tr>")[0])
    assert len(cells) == 30 and cells[-1] == "failed" and set(cells[:-1]) == {"on_time"}
    assert 'title="2026-07-18T02:34:00Z: failed"' in mine and "2026-07-18T02:04:00Z" not in mine
