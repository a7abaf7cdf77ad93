"""A dense check's timeline page: size, time and event-loop stalls.

Method:

1. A fresh SQLite file (``--backend postgres``: a throwaway PostgreSQL database), migrated; the
   app (``create_app``, injected clock, no background loops) served by uvicorn on loopback in
   this process's event loop, one user logged in through ``/login``.
2. One cron check ``* * * * * *`` (seconds dialect) and ``--pings`` success pings, one per
   second, written through :func:`monitor.services.ingest.ingest_pings` in batches of 500 (the
   same code path as ``/ping``). The tester's report: 8000 pings, ``?window=6h`` took 11.5 s and
   7.75 MB, and stalled pings for up to 7.58 s.
3. Each window (``auto``, ``15m``, ``1h``, ``6h``, ``24h``, ``7d``, and ``?around=`` an old
   tick) is fetched three times; printed: median time, page size, ticks rows in the page, and
   the longest event-loop stall seen meanwhile by a task that sleeps 5 ms in a loop (the
   server's loop is this loop: how long a ping would have waited), and the slowest ``/health``
   answered while the page was being built (polled back to back).

Goal: every window < 0.5 s, < 1 MB, stall ≪ 0.5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg
import httpx
import uvicorn

from monitor.app import create_app
from monitor.domain.checks import PingKind
from monitor.domain.clock import FrozenClock
from monitor.services import projects, users
from monitor.services.ingest import PingRequest, ingest_pings
from monitor.settings import Settings
from monitor.storage.engine import make_engine, migrate

PG_ADMIN_URL = os.environ.get(
    "MONITOR_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)
T0 = datetime(2026, 7, 18, 2, 0, tzinfo=UTC)
API_KEY = "bench-key-0123456789abcdef"
PASSWORD = "correct horse battery"
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


async def _stall_watch(stop: asyncio.Event, worst: list[float]) -> None:
    while not stop.is_set():
        before = time.perf_counter()
        await asyncio.sleep(0.005)
        worst[0] = max(worst[0], time.perf_counter() - before - 0.005)


async def _health_poll(client: httpx.AsyncClient, stop: asyncio.Event, worst: list[float]) -> None:
    while not stop.is_set():
        before = time.perf_counter()
        assert (await client.get("/health")).status_code == 200
        worst[0] = max(worst[0], time.perf_counter() - before)


async def run(database_url: str, pings: int) -> None:
    engine = make_engine(database_url)
    await migrate(engine)
    clock = FrozenClock(T0)
    settings = Settings(database_url=database_url, allow_private_targets=True)
    async with engine.begin() as conn:
        project = await projects.create_project(conn, "bench", clock.now(), api_key=API_KEY)
    app = create_app(settings, clock=clock, evaluator=False, notify=False, liveness=False)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn offers no event)
        await asyncio.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    async with (
        httpx.AsyncClient(base_url=base, timeout=60) as client,
        httpx.AsyncClient(base_url=base, timeout=60) as prober,
    ):
        made = await client.post(
            "/api/v3/checks/",
            json={"name": "dense", "schedule": "* * * * * *", "dialect": "seconds", "grace": 5},
            headers={"X-Api-Key": API_KEY},
        )
        assert made.status_code == 201, made.text
        check = made.json()["uuid"]
        started = time.perf_counter()
        for first in range(0, pings, 500):
            batch = [
                PingRequest(
                    kind=PingKind.SUCCESS, received=T0 + timedelta(seconds=i, milliseconds=200), uuid=check
                )
                for i in range(first, min(pings, first + 500))
            ]
            await ingest_pings(engine, batch, settings=settings)
        print(f"{pings} pings stored in {time.perf_counter() - started:.1f} s", flush=True)
        clock.set(T0 + timedelta(seconds=pings + 1))
        async with engine.begin() as conn:
            await users.create_user(conn, "bench@example.com", PASSWORD, [int(project["id"])], clock.now())
        page = await client.get("/login")
        token = CSRF.search(page.text)
        assert token is not None
        await client.post(
            "/login",
            data={"email": "bench@example.com", "password": PASSWORD, "csrf_token": token.group(1)},
        )
        old = (T0 + timedelta(seconds=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
        queries = [f"window={w}" for w in ("auto", "15m", "1h", "6h", "24h", "7d")] + [
            f"window=7d&around={old}"
        ]
        print(
            f"{'query':<38} {'median s':>8} {'max s':>6} {'KB':>5} {'rows':>5} {'stall s':>7} {'health s':>8}"
        )
        for query in queries:
            times, stalls, healths = [], [], []
            size = rows = 0
            for _ in range(3):
                stop, worst, health = asyncio.Event(), [0.0], [0.0]
                watcher = asyncio.create_task(_stall_watch(stop, worst))
                poller = asyncio.create_task(_health_poll(prober, stop, health))
                await asyncio.sleep(0.02)
                begin = time.perf_counter()
                answer = await client.get(f"/checks/{check}?{query}")
                times.append(time.perf_counter() - begin)
                stop.set()
                await watcher
                await poller
                stalls.append(worst[0])
                healths.append(health[0])
                assert answer.status_code == 200, answer.text[:300]
                size = len(answer.content)
                rows = answer.text.count('<tr id="tick-')
            print(
                f"{query:<38} {statistics.median(times):>8.3f} {max(times):>6.3f} "
                f"{size / 1024:>5.0f} {rows:>5} {max(stalls):>7.3f} {max(healths):>8.3f}",
                flush=True,
            )
    server.should_exit = True
    await serving
    await engine.dispose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--pings", type=int, default=8000)
    args = parser.parse_args()
    if args.backend == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            await run(f"sqlite+aiosqlite:///{tmp}/bench.db", args.pings)
        return
    name = f"bench_dash_{uuid.uuid4().hex[:8]}"
    admin = PG_ADMIN_URL.replace("postgresql+asyncpg", "postgresql")
    conn = await asyncpg.connect(admin)
    await conn.execute(f'CREATE DATABASE "{name}"')
    try:
        await run(PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}", args.pings)
    finally:
        await conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await conn.close()


if __name__ == "__main__":
    asyncio.run(main())
