"""Hostile input to the management API, on SQLite and PostgreSQL: values that parse but that the
database cannot bind (a lone surrogate, NUL, an instant with no UTC equivalent), forged cursors,
and a check deleted between a request's read and its write. Each is a 4xx
``{"error": "<field>: <problem>"}``, never a 500.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from monitor.domain.errors import NotFound
from monitor.services import checks as check_service
from monitor.storage.unit_of_work import UnitOfWork
from tests.conftest import Api
from tests.support.app import create_check


def assert_error(response: Any, status: int, field: str) -> None:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"].startswith(f"{field}: "), body


def forged_cursor(of: str, key: list[Any]) -> str:
    """A cursor as :func:`monitor.http.api.paging.encode_cursor` writes one for the list ``of``,
    for any key."""
    return base64.urlsafe_b64encode(json.dumps([of, *key]).encode()).decode().rstrip("=")


# UTC+14 at the first instant of year 1 and UTC-14 at the last of year 9999: valid ISO 8601,
# but their UTC instants fall outside what a datetime (and the database) can hold
BEYOND_UTC = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"]


@pytest.mark.parametrize("bound", ["from", "to"])
@pytest.mark.parametrize("instant", BEYOND_UTC)
async def test_runs_bound_without_a_utc_instant_is_a_400(api: Api, bound: str, instant: str) -> None:
    check = await create_check(api, name="nightly")
    response = await api.client.get(
        f"/api/v3/checks/{check['uuid']}/runs/", params={bound: instant}, headers=api.headers
    )
    assert_error(response, 400, bound)


STAMP = {"t": "2026-07-18T02:00:00+00:00"}


@pytest.mark.parametrize(
    "key",
    [
        [STAMP, STAMP, "\ud800"],  # a lone surrogate: JSON allows the escape, UTF-8 cannot encode it
        [STAMP, STAMP, "a\u0000b"],  # NUL: PostgreSQL text refuses it
        [{"t": BEYOND_UTC[0]}, STAMP, "x"],
        [STAMP, {"t": BEYOND_UTC[1]}, "x"],
    ],
    ids=["surrogate", "nul", "year-1-east", "year-9999-west"],
)
async def test_forged_runs_cursor_is_a_400(api: Api, key: list[Any]) -> None:
    check = await create_check(api, name="nightly")
    response = await api.client.get(
        f"/api/v3/checks/{check['uuid']}/runs/",
        params={"cursor": forged_cursor("runs", key)},
        headers=api.headers,
    )
    assert_error(response, 400, "cursor")


@pytest.mark.parametrize("resource", ["channels", "maintenance"])
@pytest.mark.parametrize("item", ["\ud800", "a\u0000b"])
async def test_forged_list_cursor_is_a_400(api: Api, resource: str, item: str) -> None:
    response = await api.client.get(
        f"/api/v3/{resource}/",
        params={"cursor": forged_cursor(resource, [item]), "limit": "1"},
        headers=api.headers,
    )
    assert_error(response, 400, "cursor")


async def test_updating_a_check_deleted_after_it_was_read_is_not_found(api: Api) -> None:
    """A delete that commits between an update's read of the row and its lock of it (two
    requests at once on PostgreSQL) leaves the update nothing to change: NotFound, so a 404."""
    check = await create_check(api, name="doomed")
    async with UnitOfWork.read(api.engine) as uow:
        row = await check_service.get_check_row(uow.connection, int(api.project["id"]), check["uuid"])
    response = await api.client.delete(f"/api/v3/checks/{check['uuid']}", headers=api.headers)
    assert response.status_code == 200, response.text
    with pytest.raises(NotFound, match=r"^uuid: "):
        async with UnitOfWork.begin(api.engine) as uow:
            await check_service.update_check(
                uow.connection, int(api.project["id"]), row["id"], {"timeout": 120}, api.clock.now()
            )


async def test_concurrent_updates_and_delete_never_answer_500(api: Api) -> None:
    check = await create_check(api, name="contested")
    path = f"/api/v3/checks/{check['uuid']}"

    async def update(i: int) -> Any:
        return await api.client.post(path, json={"timeout": 100 + i}, headers=api.headers)

    answers = await asyncio.gather(
        *(update(i) for i in range(6)),
        api.client.delete(path, headers=api.headers),
        *(update(i) for i in range(6, 12)),
    )
    assert {a.status_code for a in answers} <= {200, 404}, [(a.status_code, a.text) for a in answers]


@pytest.mark.parametrize("n", [2**31, 2**62, -(2**31) - 1])
async def test_a_pings_cursor_past_the_ping_numbers_range_is_a_400(api: Api, n: int) -> None:
    # a ping number is a 32-bit INTEGER: PostgreSQL refused to bind 2**31 (a 500)
    check = await create_check(api, name="nightly")
    response = await api.client.get(
        f"/api/v3/checks/{check['uuid']}/pings/",
        params={"cursor": forged_cursor("pings", [n]), "limit": "2"},
        headers=api.headers,
    )
    assert_error(response, 400, "cursor")


async def test_a_cursor_works_only_on_the_list_that_issued_it(api: Api) -> None:
    check = await create_check(api, name="nightly")
    for _ in range(3):
        await api.client.get(f"/ping/{check['uuid']}")
    page = await api.client.get(f"/api/v3/checks/{check['uuid']}/pings/?limit=1", headers=api.headers)
    cursor = page.json()["next"].rsplit("cursor=", 1)[1]
    following = await api.client.get(
        f"/api/v3/checks/{check['uuid']}/pings/", params={"limit": "1", "cursor": cursor}, headers=api.headers
    )
    assert following.status_code == 200 and len(following.json()["pings"]) == 1
    for elsewhere in ("/api/v3/checks/", f"/api/v3/checks/{check['uuid']}/flips/", "/api/v3/channels/"):
        response = await api.client.get(
            elsewhere, params={"limit": "1", "cursor": cursor}, headers=api.headers
        )
        assert_error(response, 400, "cursor")
