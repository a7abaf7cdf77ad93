"""Ingest cost of cron checks against simple checks (goal: cron ≥ 0.9× simple).

Method (see ``benchmarks/README.md``): a fresh SQLite file (``--backend postgres``: a throwaway
database), 1000 simple checks (timeout 60 s) and 1000 cron checks (``* * * * *`` in
Europe/Berlin, a zone with offset changes), each pinged once. A round runs ``--minutes`` (3)
simulated minutes of one kind: every check runs once a minute, as its schedule says (one success
ping each, shuffled, just after the minute), through the service the HTTP handler uses
(:func:`monitor.services.ingest.ingest_pings`, batches of 100, one transaction each); no ping is
late, early or a duplicate, so both kinds do the same work but the schedule's. The figure is
pings per second. Rounds alternate simple, cron,
simple, … (``--rounds`` ≥ 3 each); goal: median cron ÷ median simple ≥ 0.9. Exit 1 if not.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from databases import scratch_database
from harness import load_average, verdict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from monitor.domain.checks import PingKind
from monitor.services import checks as check_service
from monitor.services import projects
from monitor.services.ingest import PingRequest, ingest_pings
from monitor.settings import Settings
from monitor.storage import tables as t
from monitor.storage.engine import make_engine, migrate

GOAL = 0.9


async def run(url: str, args: argparse.Namespace) -> dict[str, list[tuple[float, str]]]:
    engine = make_engine(url)
    await migrate(engine)
    settings = Settings(database_url=url, ping_rate_limit=10**6)
    # created on the minute and first pinged a second later: the first ping is the 02:00 tick's run
    # (created at :30 it would bind early to 02:01, and 02:01's own run would be a duplicate)
    now = datetime(2026, 7, 18, 2, 0, 0, tzinfo=UTC)
    async with engine.begin() as conn:
        project = await projects.create_project(conn, "bench", now, api_key="bench-api-key-0123456789")
        kinds = {
            "simple": [
                {"name": f"s{i}", "timeout": 60, "grace": 30, "channels": ""} for i in range(args.checks)
            ],
            "cron": [
                {
                    "name": f"c{i}",
                    "schedule": "* * * * *",
                    "tz": "Europe/Berlin",
                    "grace": 60,
                    "channels": "",
                }
                for i in range(args.checks)
            ],
        }
        uuids: dict[str, list[str]] = {}
        for kind, items in kinds.items():
            ids = await check_service.create_many(conn, project["id"], items, now, shards=16)
            rows = await conn.execute(t.checks.select().where(t.checks.c.id.in_(ids)))
            uuids[kind] = [r.uuid for r in rows]
    clock = now + timedelta(seconds=1)
    for kind in uuids:  # first pings: every check is up
        await ingest_pings(
            engine,
            [PingRequest(kind=PingKind.SUCCESS, received=clock, uuid=u) for u in uuids[kind]],
            settings=settings,
        )
    rng = random.Random(7)
    results: dict[str, list[tuple[float, str]]] = {"simple": [], "cron": []}
    minute = {"simple": 1, "cron": 1}  # each kind's own minutes: no check ever misses a tick
    for round_index in range(args.rounds):
        for kind in ("simple", "cron"):
            # every check runs once a minute, as its schedule says: one ping per check per minute
            started = time.perf_counter()
            sent = 0
            for _ in range(args.minutes):
                at = now.replace(second=1) + timedelta(minutes=minute[kind])
                minute[kind] += 1
                order = list(uuids[kind])
                rng.shuffle(order)
                for first in range(0, len(order), 100):
                    batch = [
                        PingRequest(
                            kind=PingKind.SUCCESS, received=at + timedelta(milliseconds=first + i), uuid=u
                        )
                        for i, u in enumerate(order[first : first + 100])
                    ]
                    answers = await ingest_pings(engine, batch, settings=settings)
                    assert all(a.status == 200 for a in answers), answers[:3]
                    sent += len(batch)
            rate = sent / (time.perf_counter() - started)
            results[kind].append((rate, load_average()))
            print(f"  round {round_index + 1} {kind}: {rate:.0f} pings/s ({load_average()})", file=sys.stderr)
    await engine.dispose()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--checks", type=int, default=1000)
    parser.add_argument(
        "--minutes", type=int, default=3, help="simulated minutes per round (a ping per check each)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.rounds < 3:
        parser.error("--rounds: at least 3")
    with scratch_database(args.backend, "monitor_bench_kinds") as url:
        results = asyncio.run(run(url, args))
    simple = statistics.median(v for v, _ in results["simple"])
    cron = statistics.median(v for v, _ in results["cron"])
    print(f"\n{args.backend}: pings/s through ingest_pings, {args.rounds} alternated rounds")
    print("| kind | rounds | median |")
    print("|---|---|---:|")
    for kind, rows in results.items():
        figures = ", ".join(f"{v:.0f} ({load})" for v, load in rows)
        print(f"| {kind} | {figures} | {statistics.median(v for v, _ in rows):.0f} |")
    ok = verdict(
        f"{args.backend}: cron ÷ simple ingest rate", cron / simple, GOAL, unit="×", lower_is_better=False
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
