"""Checks created through the API per second (goal: ≥ 500/s), SQLite and PostgreSQL.

Method (see ``benchmarks/README.md``): ``monitor serve`` as shipped on a fresh SQLite file and on
a throwaway PostgreSQL database. Side A: ``POST /api/v3/checks/`` with JSON lists of ``--batch``
(500) cron checks (one transaction per request). Side B, the baseline alternated with A in the
same run: the same number of checks one ``POST`` each, 8 concurrent clients. ``--rounds`` (≥ 3)
rounds per side of ``--checks`` (2000) checks; the medians are compared with the goal, which
side A must meet. Exit status 1 when it does not, or a request fails.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx
from databases import database
from harness import API_KEY, Serve, alternate, load_average, median, verdict

GOAL = 500.0


def _check(round_index: int, i: int) -> dict[str, object]:
    return {
        "name": f"r{round_index}-{i}",
        "schedule": f"{i % 60} * * * *",
        "tz": "Europe/Berlin",
        "grace": 300,
        "tags": "bench",
        "channels": "",
    }


def bulk_round(base: str, round_index: int, checks: int, batch: int) -> float:
    with httpx.Client(base_url=base, headers={"X-Api-Key": API_KEY}, timeout=120) as client:
        started = time.perf_counter()
        for first in range(0, checks, batch):
            body = [_check(round_index, i) for i in range(first, min(checks, first + batch))]
            answer = client.post("/api/v3/checks/", json=body)
            if answer.status_code != 201 or len(answer.json()["checks"]) != len(body):
                raise SystemExit(f"bulk create failed: {answer.status_code} {answer.text[:300]}")
        return checks / (time.perf_counter() - started)


def single_round(base: str, round_index: int, checks: int) -> float:
    async def go() -> float:
        limit = asyncio.Semaphore(8)
        async with httpx.AsyncClient(base_url=base, headers={"X-Api-Key": API_KEY}, timeout=120) as client:

            async def one(i: int) -> None:
                async with limit:
                    answer = await client.post("/api/v3/checks/", json=_check(1000 + round_index, i))
                    if answer.status_code != 201:
                        raise SystemExit(f"create failed: {answer.status_code} {answer.text[:300]}")

            started = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(checks)))
            return checks / (time.perf_counter() - started)

    return asyncio.run(go())


def bench(backend: str, args: argparse.Namespace) -> bool:
    work = Path(tempfile.mkdtemp(prefix="monitor-create-"))
    try:
        with database(backend, work, prefix="monitor_bench_create") as url, Serve(url, work) as serve:
            results = alternate(
                args.rounds,
                {
                    f"lists of {args.batch}": lambda r: bulk_round(serve.base, r, args.checks, args.batch),
                    "one per request": lambda r: single_round(serve.base, r, args.single_checks),
                },
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{backend}: checks created per second, {args.rounds} alternated rounds")
    print("| side | round figures (checks/s) | median |")
    print("|---|---|---:|")
    for name, rows in results.items():
        print(f"| {name} | {', '.join(f'{v:.0f} ({load})' for v, load in rows)} | {median(rows):.0f} |")
    bulk, single = results[f"lists of {args.batch}"], results["one per request"]
    return verdict(
        f"{backend}: checks created per second through the API (one per request: {median(single):.0f}/s)",
        median(bulk),
        GOAL,
        unit="checks/s",
        lower_is_better=False,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--checks", type=int, default=2000, help="checks per bulk round")
    parser.add_argument("--single-checks", type=int, default=300, help="checks per one-at-a-time round")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.rounds < 3:
        parser.error("--rounds: at least 3")
    print(f"start: {load_average()}")
    ok = True
    for backend in args.backends.split(","):
        ok = bench(backend.strip(), args) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
