"""A dashboard server with an injected clock, and a scenario that fills it with real pings.

* :class:`ServerThread` serves the real app (``create_app``) with uvicorn on a free loopback
  port in a background thread — a real HTTP server a browser can load, whose clock is a
  :class:`~monitor.domain.clock.FrozenClock` the caller moves.
* :func:`seed` drives real pings over HTTP while moving that clock, so the checks page and a
  check's timeline show every outcome: on time, duplicated (three replicas), overlapped (a run
  lapping the next tick), missed, late, failed; plus a down check and a paused one.

Used by ``tests/web/test_browser.py`` and ``scripts/screenshots.py``.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx
import uvicorn
from litestar import Litestar

from monitor.app import create_app
from monitor.domain.clock import FrozenClock
from monitor.services import projects, users
from monitor.services.evaluator import evaluate_due
from monitor.settings import Settings
from monitor.storage.engine import make_engine, migrate

START = datetime(2026, 7, 18, 2, 0, tzinfo=UTC)
API_KEY = "dashboard-test-key-0123456789"
EMAIL = "oncall@example.com"
PASSWORD = "correct horse battery staple"

T = TypeVar("T")


def run_async(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion on a fresh loop in its own thread (callers may be inside
    pytest-asyncio's running loop, where ``asyncio.run`` is refused)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(factory())
        except BaseException as error:  # re-raised in the caller
            box["error"] = error

    worker = threading.Thread(target=target)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ServerThread:
    """uvicorn serving ``app`` on 127.0.0.1 in a daemon thread; use as a context manager."""

    def __init__(self, app: Litestar) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="dashboard-server", daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the dashboard server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


@dataclass
class Dashboard:
    """A running server, its clock and database, and the checks :func:`seed` made."""

    server: ServerThread
    clock: FrozenClock
    settings: Settings
    checks: dict[str, dict[str, Any]]

    @property
    def base(self) -> str:
        return self.server.base


def prepare(database_url: str) -> None:
    """Migrate, create project ``ops`` (key :data:`API_KEY`) and user :data:`EMAIL`."""

    async def run() -> None:
        engine = make_engine(database_url)
        try:
            await migrate(engine)
            async with engine.begin() as conn:
                project = await projects.create_project(conn, "ops", START, api_key=API_KEY)
                await users.create_user(conn, EMAIL, PASSWORD, [int(str(project["id"]))], START, admin=True)
        finally:
            await engine.dispose()

    run_async(run)


def make_app(settings: Settings, clock: FrozenClock) -> Litestar:
    # No background loops: the scenario evaluates at the instants it chooses (evaluate()).
    return create_app(settings, clock=clock, evaluator=False, notify=False, liveness=False)


def evaluate(settings: Settings, now: datetime) -> None:
    """One evaluator sweep at ``now`` (judges missed ticks and timeouts)."""

    async def run() -> None:
        engine = make_engine(settings.database_url)
        try:
            await evaluate_due(engine, now, settings=settings)
        finally:
            await engine.dispose()

    run_async(run)


def seed(base: str, clock: FrozenClock, settings: Settings) -> dict[str, dict[str, Any]]:
    """Fill the server with checks and real pings (module docstring); returns checks by name."""
    headers = {"X-Api-Key": API_KEY}
    with httpx.Client(base_url=base, timeout=10) as client:

        def create(**fields: Any) -> dict[str, Any]:
            answer = client.post("/api/v3/checks/", json=fields, headers=headers)
            assert answer.status_code == 201, answer.text
            body: dict[str, Any] = answer.json()
            return body

        clock.set(START)
        sync = create(
            name="billing-sync",
            tags="prod billing",
            schedule="* * * * *",
            grace=20,
            max_runtime=600,
            desc="Pushes invoices to the ledger; runs on three replicas.",
        )
        report = create(name="nightly-report", tags="prod reports", schedule="*/2 * * * *", grace=30)
        warmer = create(name="cache-warmer", tags="staging", timeout=600, grace=60)
        archive = create(name="log-archive", tags="staging", schedule="*/5 * * * *", grace=60)

        def ping(
            check: dict[str, Any], at: str, kind: str = "", rid: str | None = None, body: str = ""
        ) -> None:
            clock.set(datetime.fromisoformat(f"2026-07-18T{at}+00:00"))
            path = f"/ping/{check['uuid']}" + (f"/{kind}" if kind else "")
            params = {"rid": rid} if rid else {}
            answer = client.post(path, params=params, content=body.encode())
            assert answer.status_code == 200, answer.text

        ping(sync, "02:00:03", "start", "0a000000-0000-4000-8000-000000000000")
        ping(sync, "02:00:15", "", "0a000000-0000-4000-8000-000000000000", "synced 120 invoices\n")
        ping(warmer, "02:00:20", "", body="warmed 5120 keys\n")
        # three replicas each run the 02:01 tick: two duplicates
        for n, second in enumerate(("01.0", "01.5", "02.0"), 1):
            ping(sync, f"02:01:{second}", "start", f"1a00000{n}-0000-4000-8000-000000000000")
        for n, second in enumerate(("20", "21", "22"), 1):
            ping(
                sync,
                f"02:01:{second}",
                "",
                f"1a00000{n}-0000-4000-8000-000000000000",
                f"replica {n}: synced\n",
            )
        # the 02:02 run laps the 02:03 tick: the 02:03 run overlaps it
        ping(sync, "02:02:02", "start", "2a000000-0000-4000-8000-000000000000")
        ping(report, "02:02:05", "start", "5a000000-0000-4000-8000-000000000000")
        ping(report, "02:02:40", "", "5a000000-0000-4000-8000-000000000000", "report sent to 14 people\n")
        ping(sync, "02:03:01", "start", "3a000000-0000-4000-8000-000000000000")
        ping(sync, "02:03:30", "", "3a000000-0000-4000-8000-000000000000", "synced 3 invoices\n")
        ping(
            sync, "02:03:40", "", "2a000000-0000-4000-8000-000000000000", "synced 98 invoices (slow ledger)\n"
        )
        # 02:04: no run at all (missed once the grace is over)
        clock.set(datetime.fromisoformat("2026-07-18T02:04:25+00:00"))
        evaluate(settings, clock.now())
        # 02:05: first ping 28 s after the tick, grace 20 s: late (nearer to 02:05 than to 02:06,
        # and outside 02:06's 20 s early window)
        ping(sync, "02:05:28", "start", "4a000000-0000-4000-8000-000000000000")
        ping(sync, "02:05:50", "", "4a000000-0000-4000-8000-000000000000", "synced 40 invoices\n")
        # 02:06: fails
        ping(sync, "02:06:02", "start", "6a000000-0000-4000-8000-000000000000")
        # the nightly report's 02:06 run fails: that check is down
        ping(report, "02:06:20", "fail", body="SMTP 550 mailbox unavailable\n")
        ping(
            sync,
            "02:06:30",
            "fail",
            "6a000000-0000-4000-8000-000000000000",
            "Traceback (most recent call last):\n  ledger.push()\nConnectionRefusedError: ledger:5432\n",
        )
        ping(sync, "02:07:01", "start", "7a000000-0000-4000-8000-000000000000")
        ping(sync, "02:07:12", "", "7a000000-0000-4000-8000-000000000000", "synced 61 invoices\n")
        clock.set(datetime.fromisoformat("2026-07-18T02:07:30+00:00"))
        paused = client.post(f"/api/v3/checks/{archive['uuid']}/pause", headers=headers)
        assert paused.status_code == 200, paused.text
        out = {}
        for check in (sync, report, warmer, archive):
            answer = client.get(f"/api/v3/checks/{check['uuid']}", headers=headers)
            out[check["name"]] = answer.json()
        return out
