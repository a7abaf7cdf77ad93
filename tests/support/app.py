"""Helpers for in-process API tests that need their own settings (body limit, rate limit, …)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from litestar.testing import AsyncTestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.app import create_app
from monitor.domain.clock import FrozenClock
from monitor.services import projects
from monitor.settings import Settings
from tests.conftest import API_KEY, Api


@asynccontextmanager
async def open_api(engine: AsyncEngine, clock: FrozenClock, settings: Settings) -> AsyncIterator[Api]:
    """Like the ``api`` fixture, but with the given settings."""
    async with engine.begin() as conn:
        project = await projects.create_project(conn, "test", clock.now(), api_key=API_KEY)
    app = create_app(
        settings, clock=clock, evaluator=False, notify=False, liveness=False, migrate_on_start=False
    )
    async with AsyncTestClient(app) as client:
        yield Api(client=client, clock=clock, engine=engine, settings=settings, project=project)


async def create_check(api: Api, **fields: Any) -> dict[str, Any]:
    """POST /api/v3/checks/ and return the check JSON (asserting 201)."""
    response = await api.client.post("/api/v3/checks/", json=fields, headers=api.headers)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def get_check(api: Api, uuid: str) -> dict[str, Any]:
    response = await api.client.get(f"/api/v3/checks/{uuid}", headers=api.headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def list_of(api: Api, uuid: str, what: str, **params: str) -> list[dict[str, Any]]:
    """GET /api/v3/checks/<uuid>/<what>/ → the list under key ``what``."""
    response = await api.client.get(f"/api/v3/checks/{uuid}/{what}/", params=params, headers=api.headers)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()[what]
    return items
