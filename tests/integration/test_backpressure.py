"""Ingest back-pressure: a full queue answers 503 with Retry-After; nothing acknowledged is lost."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import asyncpg
import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.app import create_app
from monitor.domain.clock import FrozenClock
from monitor.services import projects
from monitor.settings import Settings
from tests.conftest import API_KEY
from tests.support.dashboard import ServerThread


@asynccontextmanager
async def _writer_blocked(database_url: str, uuid: str) -> AsyncIterator[None]:
    """Hold the lock the ingest writer needs: SQLite's write lock, or the check's row on PostgreSQL."""
    if database_url.startswith("sqlite"):
        conn = sqlite3.connect(database_url.split(":///", 1)[1], isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    pg = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        async with pg.transaction():
            await pg.execute("SELECT id FROM checks WHERE uuid = $1 FOR UPDATE", uuid)
            yield
    finally:
        await pg.close()


async def test_a_full_ingest_queue_answers_503_and_loses_nothing_acknowledged(
    engine: AsyncEngine, clock: FrozenClock, settings_factory: Callable[..., Settings], database_url: str
) -> None:
    settings = settings_factory(ingest_queue=5, ingest_batch=2)
    async with engine.begin() as conn:
        await projects.create_project(conn, "test", clock.now(), api_key=API_KEY)
    app = create_app(settings, clock=clock, evaluator=False, notify=False, liveness=False)
    headers = {"X-Api-Key": API_KEY}
    # a real server in its own thread: the pings below must wait in it concurrently
    with ServerThread(app) as server:
        async with httpx.AsyncClient(base_url=server.base, timeout=60) as client:
            made = await client.post(
                "/api/v3/checks/", json={"name": "busy", "channels": ""}, headers=headers
            )
            uuid = made.json()["uuid"]
            async with _writer_blocked(database_url, uuid):
                sends = [
                    asyncio.create_task(client.post(f"/ping/{uuid}", content=f"ping {i}".encode()))
                    for i in range(30)
                ]
                await asyncio.sleep(1.5)
                # while the writer waits, the queue holds at most its limit; the rest were refused
                refused = [t.result() for t in sends if t.done()]
                assert refused and all(r.status_code == 503 for r in refused)
            answers = await asyncio.gather(*sends)
            busy = [a for a in answers if a.status_code == 503]
            stored = [a for a in answers if a.status_code == 200]
            assert len(busy) + len(stored) == 30, [a.status_code for a in answers]
            assert busy and stored
            assert all(a.headers["retry-after"] == "1" for a in busy)
            assert all(a.text.startswith("busy") for a in busy)
            assert len(stored) <= settings.ingest_queue + settings.ingest_batch
            # every acknowledged ping is stored, and only those
            check = (await client.get(f"/api/v3/checks/{uuid}", headers=headers)).json()
            assert check["n_pings"] == len(stored)
            pings = (await client.get(f"/api/v3/checks/{uuid}/pings/", headers=headers)).json()["pings"]
            bodies = set()
            for ping in pings:
                body = await client.get(f"/api/v3/checks/{uuid}/pings/{ping['n']}/body", headers=headers)
                bodies.add(body.text)
            assert bodies == {f"ping {i}" for i, a in enumerate(answers) if a.status_code == 200}
            # once the writer is free again, pings are taken as usual
            assert (await client.get(f"/ping/{uuid}")).status_code == 200
