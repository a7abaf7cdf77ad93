"""Where an ingest batch's time goes: CPU and wall microseconds per ping, per statement.

A diagnostic, not a benchmark: it has no goal and no baseline (``benchmarks/README.md``). It
exists because the figures that matter for ``ping_throughput.py`` are the writer's cost per
ping and per batch, and those are far steadier measured here, in one process, than as
requests per second on a shared host.

What it does: a fresh SQLite file (``--backend postgres``: a throwaway database), ``--checks``
simple checks (timeout 1 h) created through the services, then ``--batches`` batches of
``--batch`` success pings to random checks through
:func:`monitor.services.ingest.ingest_pings` (the service the HTTP writer calls), after 50
untimed batches. It prints wall and process CPU microseconds per ping; ``--statements`` adds
each statement's count and mean time (SQLAlchemy cursor events: the driver's and the
database's time, not the Python around it); ``--cprofile`` adds a cProfile table, with the
SQLite transaction run in the profiled thread instead of its worker thread.

    .venv/bin/python benchmarks/profiling/ingest_cost.py --batch 32 --statements
    .venv/bin/python benchmarks/profiling/ingest_cost.py --backend postgres --cprofile
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import pstats
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sqlalchemy import event
from sqlalchemy.engine import Engine

from benchmarks.databases import scratch_database
from monitor.domain.checks import PingKind
from monitor.services import checks as check_service
from monitor.services import projects
from monitor.services.ingest import PingRequest, ingest_pings
from monitor.settings import Settings
from monitor.storage import sqlite_batch
from monitor.storage import tables as t
from monitor.storage.engine import make_engine, migrate

BODY = b"benchmark ping: job finished\n"


class StatementTimes:
    """Count and total seconds of each statement (its first 100 characters)."""

    def __init__(self) -> None:
        self.totals: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
        self._started: dict[int, float] = {}

    def install(self) -> None:
        event.listen(Engine, "before_cursor_execute", self._before)
        event.listen(Engine, "after_cursor_execute", self._after)

    def _before(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self._started[id(conn)] = time.perf_counter()

    def _after(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        total = self.totals[" ".join(statement.split())[:100]]
        total[0] += 1
        total[1] += time.perf_counter() - self._started.pop(id(conn), time.perf_counter())

    def report(self, batches: int) -> str:
        lines = ["per batch  mean ms  statement"]
        for text, (count, seconds) in sorted(self.totals.items(), key=lambda item: -item[1][1]):
            lines.append(f"{count / batches:9.2f} {1e3 * seconds / count:8.3f}  {text}")
        return "\n".join(lines)


def run_inline() -> None:
    """Run each SQLite transaction in the calling thread, where cProfile sees it."""

    async def inline(engine: Any, work: Any, **_: Any) -> Any:
        return sqlite_batch._transaction(sqlite_batch._sync_engine(engine), work)

    sqlite_batch.run_in_thread = inline  # type: ignore[assignment]


async def measure(url: str, args: argparse.Namespace) -> None:
    engine = make_engine(url)
    await migrate(engine)
    settings = Settings(database_url=url, ping_rate_limit=10**9)
    now = datetime(2026, 7, 18, 2, 0, tzinfo=UTC)
    async with engine.begin() as conn:
        project = await projects.create_project(conn, "profile", now, api_key="profile-api-key-0123456789")
        for first in range(0, args.checks, 1000):  # the API's largest list
            items = [
                {"name": f"s{i}", "timeout": 3600, "channels": ""}
                for i in range(first, min(args.checks, first + 1000))
            ]
            await check_service.create_many(conn, project["id"], items, now, shards=16)
        uuids = [r.uuid for r in await conn.execute(t.checks.select())]
    rng = random.Random(7)
    clock = now + timedelta(seconds=1)

    async def batches(count: int) -> None:
        nonlocal clock
        for _ in range(count):
            batch = []
            for _ in range(args.batch):
                clock += timedelta(milliseconds=1)
                batch.append(
                    PingRequest(
                        kind=PingKind.SUCCESS,
                        received=clock,
                        uuid=rng.choice(uuids),
                        method="POST",
                        body=BODY,
                        body_size=len(BODY),
                        ua="wrk",
                        remote_addr="127.0.0.1",
                    )
                )
            await ingest_pings(engine, batch, settings=settings)

    await batches(50)
    statements = StatementTimes()
    if args.statements:
        statements.install()
    profile = cProfile.Profile() if args.cprofile else None
    cpu, wall = time.process_time(), time.perf_counter()
    if profile is not None:
        profile.enable()
    await batches(args.batches)
    if profile is not None:
        profile.disable()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    pings = args.batches * args.batch
    print(
        f"{args.backend}, batches of {args.batch}: wall {1e6 * wall / pings:.1f} µs/ping, "
        f"CPU {1e6 * cpu / pings:.1f} µs/ping ({pings / wall:.0f} pings/s)"
        + (" — under cProfile" if profile is not None else "")
    )
    if args.statements:
        print(statements.report(args.batches))
    if profile is not None:
        pstats.Stats(profile).sort_stats(args.sort).print_stats(args.top)
    await engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--checks", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=32, help="pings per transaction")
    parser.add_argument("--batches", type=int, default=300, help="timed batches")
    parser.add_argument("--statements", action="store_true", help="each statement's count and time")
    parser.add_argument("--cprofile", action="store_true", help="a cProfile table (SQLite: inline)")
    parser.add_argument("--sort", default="tottime", help="cProfile sort key")
    parser.add_argument("--top", type=int, default=40, help="cProfile rows")
    args = parser.parse_args()
    if args.cprofile:
        run_inline()
    with scratch_database(args.backend, "monitor_profile_ingest") as url:
        asyncio.run(measure(url, args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
