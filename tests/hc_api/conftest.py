"""Healthchecks' own API tests (hc/api/tests), ported: one module per endpoint, through the real
ASGI app (in process, SQLite file and PostgreSQL, injected clock).

Where the monitor differs on purpose (DESIGN §9), the test asserts our behaviour and its
docstring says why. ``HC`` helpers keep the ported tests close to the originals.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Api, fresh_sqlite_url


@pytest.fixture
def database_url(tmp_path: Path, sqlite_template: Path) -> Iterator[str]:
    """SQLite only: these pin HTTP behaviour that no SQL differs in, and the management API's
    own tests (tests/e2e/test_management_api.py) run every endpoint on PostgreSQL too."""
    yield fresh_sqlite_url(sqlite_template, tmp_path)


OTHER_PROJECT_KEY = "bobs-project-api-key-0123456789"
MISSING_UUID = "07c2f548-9850-4b27-af5d-6c9dc157ec02"


async def make_check(api: Api, **fields: Any) -> dict[str, Any]:
    """Create a check through the API (as Healthchecks' tests create model rows)."""
    fields.setdefault("name", "Alice 1")
    response = await api.client.post("/api/v3/checks/", json=fields, headers=api.headers)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def ping(api: Api, uuid: str, action: str = "", body: bytes | None = None, **params: str) -> Any:
    path = f"/ping/{uuid}" + (f"/{action}" if action else "")
    if body is None:
        response = await api.client.get(path, params=params)
    else:
        response = await api.client.post(path, params=params, content=body)
    assert response.status_code in (200, 201), (response.status_code, response.text)
    return response


async def other_project_headers(api: Api) -> dict[str, str]:
    """A second project's read-write key (Healthchecks' "Bob")."""
    from monitor.services.projects import create_project

    async with api.engine.begin() as conn:
        await create_project(conn, "bob", api.clock.now(), api_key=OTHER_PROJECT_KEY)
    return {"X-Api-Key": OTHER_PROJECT_KEY}


async def make_channel(api: Api, name: str = "Email to Alice", url: str = "mailto://a@example.org") -> Any:
    fields = {"name": name, "url": url}
    response = await api.client.post("/api/v3/channels/", json=fields, headers=api.headers)
    assert response.status_code == 201, response.text
    return response.json()


async def evaluate(api: Api) -> None:
    """Run the evaluator once at the clock's instant (missed ticks open down episodes)."""
    from monitor.services.evaluator import evaluate_due

    await evaluate_due(api.engine, api.clock.now(), settings=api.settings)
