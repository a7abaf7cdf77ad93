"""Text the dashboard's forms and filters must take as typed, in process on SQLite and PostgreSQL
(clock injected): a NUL character typed or pasted gets a field error or an empty result, never a
500 (PostgreSQL's ``text`` cannot hold NUL, so such a value must not reach a query), and the name
search ignores case beyond ASCII on both backends (SQLite's own ``lower()`` folds ASCII only).
"""

from __future__ import annotations

from monitor.services import users
from tests.conftest import Api
from tests.support.app import create_check
from tests.web.test_dashboard import PASSWORD, csrf_of, log_in, make_user


async def test_a_nul_in_the_checks_filters_matches_no_check(api: Api) -> None:
    await create_check(api, name="nightly", tags="prod")
    await make_user(api)
    await log_in(api)
    for path in (
        "/?q=night%00ly",
        "/?tag=prod%00",
        "/fragments/checks?q=%00",
        "/fragments/checks?tag=%00&status=down",
    ):
        answer = await api.client.get(path)
        assert answer.status_code == 200, (path, answer.text[:300])
        assert 'href="/checks/' not in answer.text.split("check-rows", 1)[-1], path
    # the same filters without the NUL still find it
    found = await api.client.get("/?q=night&tag=prod")
    assert found.status_code == 200 and ">nightly<" in found.text


async def test_a_search_longer_than_any_name_matches_no_check_and_is_no_error(api: Api) -> None:
    # SQLite refused a LIKE pattern of 50 000 characters ("pattern too complex"): a 500
    await create_check(api, name="a" * 100, tags="prod")
    await make_user(api)
    await log_in(api)
    for params in ({"q": "a" * 50_000}, {"q": "a" * 101}, {"tag": "p" * 50_000}):
        for path in ("/", "/fragments/checks"):
            answer = await api.client.get(path, params=params)
            assert answer.status_code == 200, (path, answer.text[:300])
            assert 'href="/checks/' not in answer.text.split("check-rows", 1)[-1], path
    found = await api.client.get("/", params={"q": "a" * 100})
    assert found.status_code == 200 and 'href="/checks/' in found.text.split("check-rows", 1)[-1]


async def test_an_email_with_a_nul_is_refused_when_creating_adding_or_logging_in(api: Api) -> None:
    async with api.engine.begin() as conn:  # an admin of the project: /users is theirs
        await users.create_user(
            conn, "ops@example.com", PASSWORD, [int(api.project["id"])], api.clock.now(), admin=True
        )
    await log_in(api)
    token = csrf_of((await api.client.get("/users")).text)
    project = str(api.project["id"])
    created = await api.client.post(
        "/users",
        data={
            "csrf_token": token,
            "email": "b\x00@example.com",
            "password": "a long passphrase",
            "projects": project,
        },
    )
    assert created.status_code == 400, created.text[:300]
    assert "email: must look like name@example.com" in created.text
    added = await api.client.post(
        "/users/members",
        data={"csrf_token": token, "action": "add", "email": "b\x00@example.com", "project": project},
    )
    assert added.status_code == 400, added.text[:300]
    assert "email: must look like name@example.com" in added.text
    await api.client.post("/logout", data={"csrf_token": token})
    refused = await log_in(api, email="ops\x00@example.com")
    assert refused.status_code == 400, refused.text[:300]
    assert "wrong email or password" in refused.text


async def test_the_name_search_ignores_the_case_of_letters_beyond_ascii(api: Api) -> None:
    await create_check(api, name="Éclair Übertragung")
    await create_check(api, name="other")
    await make_user(api)
    await log_in(api)
    for typed in ("Éclair", "éclair", "ÉCLAIR", "übertragung", "ÜBERTRAGUNG"):
        answer = await api.client.get("/", params={"q": typed})
        rows = answer.text.split("check-rows", 1)[-1]
        assert answer.status_code == 200 and ">Éclair Übertragung<" in rows, typed
        assert ">other<" not in rows, typed
