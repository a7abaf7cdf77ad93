"""While the database cannot be used, the management API answers 503, not 500.

The app in process, pointed at a PostgreSQL port where nothing listens (a server restarting
looks the same to a new connection: the socket is refused). Every request that reaches the
database fails; the management API says so with ``503`` and ``Retry-After`` (retry later,
nothing was stored), as the ping endpoints and ``/api/v3/status/`` already did, and the client
never sees a traceback.
"""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from monitor.app import create_app
from monitor.domain.clock import FrozenClock
from monitor.settings import Settings
from tests.conftest import API_KEY
from tests.support.receivers import free_port


async def test_the_management_api_answers_503_with_retry_after_while_the_database_refuses(
    clock: FrozenClock,
) -> None:
    settings = Settings(database_url=f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/none")
    app = create_app(
        settings, clock=clock, evaluator=False, notify=False, liveness=False, migrate_on_start=False
    )
    async with AsyncTestClient(app) as client:
        answers: list[Any] = [
            await client.get("/api/v3/checks/", headers={"X-Api-Key": API_KEY}),
            await client.post("/api/v3/checks/", headers={"X-Api-Key": API_KEY}, json={"name": "x"}),
        ]
        ping = await client.get("/ping/2f8a3c1e-0000-4000-8000-000000000000")

    for answer in answers:
        assert answer.status_code == 503, answer.text
        assert answer.headers["retry-after"] == "1"
        assert answer.json() == {"error": "database unavailable; retry"}
    assert ping.status_code == 503
