"""Durable pings per second of ``monitor serve --workers 2`` against ``--workers 1`` (goal: never slower).

Method (see ``benchmarks/README.md``):

1. PostgreSQL: two throwaway databases, ``monitor serve --workers 1`` on one and
   ``monitor serve --workers 2`` on the other, both started as shipped (no other flag), each
   with 1 000 simple checks created through the API. Both stay up for the whole run; the idle
   one costs nothing but its evaluator's sweep.
2. ``wrk -t1 -c32 --latency`` POSTing to random ping URLs of each server's checks (the Lua
   script of ``ping_throughput.py``): 3 s warm-up on each, then 1 worker and 2 workers
   alternated ``--rounds`` (3) times, 10 s each. Ping accounting as in ``ping_throughput.py``
   (every 2xx answer is a stored ping).
3. SQLite: ``monitor serve --workers 2`` on a SQLite file must refuse to start, with a message
   naming ``--workers`` (one writer per file: more processes would be slower, so they are
   refused rather than allowed to hurt).

Goal (fixed): the median 2-worker rate ÷ the median 1-worker rate ≥ 1.0 on PostgreSQL (more
workers never slower), and the SQLite refusal. Exit 1 otherwise. On this 2-core machine the
PostgreSQL server, wrk and the workers share the two cores, so the figure says "never slower",
not how far it scales on a bigger machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import ping_throughput as pt
from databases import database

GOAL_RATIO = 1.0
"""Goal: 2 workers serve at least as many durable pings per second as 1 (PostgreSQL)."""


def start(workers: int, url: str, work: Path) -> pt.Server:
    port = pt.free_port()
    server = pt.Server(
        f"monitor-w{workers}",
        [sys.executable, "-m", "monitor", "serve", "--port", str(port), "--workers", str(workers)],
        port,
        pt.child_env(
            MONITOR_DATABASE_URL=url, MONITOR_API_KEY=pt.API_KEY, MONITOR_BASE_URL=f"http://127.0.0.1:{port}"
        ),
        work,
    )
    server.wait_ready("/health")
    return server


def sqlite_refuses(work: Path) -> bool:
    """``--workers 2`` on a SQLite file exits non-zero and names ``--workers``."""
    proc = subprocess.run(
        [sys.executable, "-m", "monitor", "serve", "--port", str(pt.free_port()), "--workers", "2"],
        env=pt.child_env(MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{work / 'refuse.db'}"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    said = (proc.stdout + proc.stderr).strip().splitlines()
    print(f"sqlite --workers 2: exit {proc.returncode}: {said[-1] if said else '(nothing)'}")
    return proc.returncode != 0 and "--workers" in proc.stderr


def measure(args: argparse.Namespace, work: Path) -> dict[int, list[pt.Run]]:
    runs: dict[int, list[pt.Run]] = {1: [], 2: []}
    with (
        database("postgres", work, prefix="monitor_bench_w1") as url1,
        database("postgres", work, prefix="monitor_bench_w2") as url2,
    ):
        servers = {1: start(1, url1, work), 2: start(2, url2, work)}
        try:
            scripts: dict[int, Path] = {}
            wanted: dict[int, set[str]] = {}
            for workers, server in servers.items():
                uuids = asyncio.run(pt.create_checks(server.base, args.checks))
                wanted[workers] = set(uuids)
                scripts[workers] = work / f"pings-w{workers}.lua"
                scripts[workers].write_text(pt.LUA % {"paths": ", ".join(f'"/ping/{u}"' for u in uuids)})
                pt.wrk(server.base, scripts[workers], args.warmup, args.connections)
            for round_ in range(1, args.rounds + 1):
                for workers, server in servers.items():
                    before = pt.settled_pings(server.base, wanted[workers])
                    raw = pt.wrk(server.base, scripts[workers], args.duration, args.connections)
                    run = pt.to_run(f"w{workers}", round_, raw)
                    counted = pt.settled_pings(server.base, wanted[workers]) - before
                    if run.non2xx or not run.ok <= counted <= run.ok + args.connections:
                        raise SystemExit(
                            f"{workers} workers: {run.non2xx} non-2xx, 2xx {run.ok}, stored {counted}"
                        )
                    runs[workers].append(run)
                    print(
                        f"[postgres] round {round_} --workers {workers}: {run.ok_per_s:,.0f} /s, "
                        f"p99 {run.p99_ms:.1f} ms (load {run.load:.2f}/{os.cpu_count()} cores)",
                        flush=True,
                    )
        finally:
            for server in servers.values():
                server.stop()
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--checks", type=int, default=1000)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--duration", type=int, default=10, help="seconds per measured run")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of warm-up per server")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.rounds < 3:
        parser.error("--rounds: at least 3")
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get install -y wrk (Debian package)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="monitor-bench-workers-") as tmp:
        work = Path(tmp)
        refused = sqlite_refuses(work)
        runs = measure(args, work)
    medians = {w: statistics.median(r.ok_per_s for r in rs) for w, rs in runs.items()}
    ratio = medians[2] / medians[1]
    load = statistics.median(r.load for rs in runs.values() for r in rs)
    print()
    print("| workers | rounds (durable pings/s) | median | p99 ms (median) |")
    print("|---:|---|---:|---:|")
    for workers, rs in runs.items():
        figures = ", ".join(f"{r.ok_per_s:,.0f} (load {r.load:.2f})" for r in rs)
        p99 = statistics.median(r.p99_ms for r in rs)
        print(f"| {workers} | {figures} | {medians[workers]:,.0f} | {p99:.1f} |")
    met = ratio >= GOAL_RATIO
    print(
        f"\ngoal postgres: --workers 2 ÷ --workers 1 ≥ {GOAL_RATIO}: {ratio:.3f} "
        f"(load {load:.2f}/{os.cpu_count()} cores): {'met' if met else 'NOT met'}"
    )
    print(
        f"goal sqlite: --workers 2 refused with a message naming --workers: {'met' if refused else 'NOT met'}"
    )
    return 0 if met and refused else 1


if __name__ == "__main__":
    raise SystemExit(main())
