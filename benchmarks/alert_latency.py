"""Alert latency of a real ``monitor serve``: deadline → alert row → delivery.

Method (see ``benchmarks/README.md``):

1. ``monitor serve --dev`` (every role in one process, default settings but
   ``MONITOR_EVALUATE_INTERVAL`` from ``--interval``) on a throwaway PostgreSQL database (and,
   with ``--backends postgres,sqlite``, on a SQLite file), plus a loopback HTTP receiver as
   the only channel (Apprise ``json://``), recording the wall-clock instant of each request.
2. ``--checks`` checks on ``seconds`` schedules ticking every 5 s at staggered offsets
   (``k/5 * * * * *``), grace 1 s, each pinged once and then left silent: each one's next
   deadline (tick + grace) passes and it gets one ``missed`` alert, delivered once.
3. Per check, from the database row and the receiver: *alert* = ``alerts.created_at`` −
   deadline (deadline = the alert's ``scheduled`` + grace); *delivery* = receipt at the
   receiver − deadline; *send* = receipt − ``created_at``. p50, p99 and max of each.
4. ``--rounds`` (≥ 3) such runs, each on a fresh server, alternated with a baseline round: the
   same number of notices sent straight through Apprise (``alert_burst.apprise_round``).
5. The goal is fixed: the median of the rounds' delivery p99 < 5 s. Exit status 1
   when it is not met, or a check got no alert or no delivery, or more than one.

Loopback only; bounded (about 30 s per round).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from alert_burst import apprise_round
from databases import database
from harness import Receiver, alternate, free_port, load_average, median, verdict

REPO_ROOT = Path(__file__).resolve().parent.parent
API_KEY = "latency-benchmark-key-0123456789"
GRACE = 1
GOAL_S = 5.0
"""Goal: every notice delivered < 5 s after its deadline."""


def alert_rows(url: str) -> list[tuple[str, datetime, datetime, int]]:
    """(check uuid, scheduled, created_at, grace) of every missed alert, instants aware UTC."""
    sql = (
        "SELECT c.uuid, a.scheduled, a.created_at, c.grace FROM alerts a"
        " JOIN checks c ON c.id = a.check_id WHERE a.kind = 'missed'"
    )
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite+aiosqlite:///"), timeout=30)
        try:
            raw = conn.execute(sql).fetchall()
        finally:
            conn.close()

        def parse(value: Any) -> datetime:
            return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)

        return [(u, parse(s), parse(c), int(g)) for u, s, c, g in raw]

    async def go() -> list[Any]:
        conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"), timeout=10)
        try:
            return list(await conn.fetch(sql))
        finally:
            await conn.close()

    return [(r[0], r[1].replace(tzinfo=UTC), r[2].replace(tzinfo=UTC), int(r[3])) for r in asyncio.run(go())]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def bench(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="monitor-latency-"))
    port = free_port()
    process: subprocess.Popen[bytes] | None = None
    try:
        with database(backend, work, prefix="monitor_bench_latency") as url, Receiver() as receiver:
            env = {k: v for k, v in os.environ.items() if not k.startswith("MONITOR_")}
            env.update(
                PYTHONPATH=str(REPO_ROOT),
                MONITOR_DATABASE_URL=url,
                MONITOR_API_KEY=API_KEY,
                MONITOR_EVALUATE_INTERVAL=str(args.interval),
                MONITOR_LOG_LEVEL="WARNING",
            )
            log = (work / "serve.log").open("wb")
            process = subprocess.Popen(
                [sys.executable, "-m", "monitor", "serve", "--dev", "--port", str(port)],
                env=env,
                cwd=work,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"monitor serve did not start:\n{(work / 'serve.log').read_text()}")
                time.sleep(0.1)
            with httpx.Client(base_url=base, headers={"X-Api-Key": API_KEY}, timeout=30) as client:
                assert client.post("/api/v3/channels/", json={"name": "hook", "url": receiver.url}).is_success
                answer = client.post(
                    "/api/v3/checks/",
                    json=[
                        {
                            "name": f"latency-{i}",
                            "schedule": f"{i % 5}/5 * * * * *",
                            "dialect": "seconds",
                            "grace": GRACE,
                            "early_tolerance": 0,
                            "channels": "*",
                        }
                        for i in range(args.checks)
                    ],
                )
                assert answer.status_code == 201, answer.text
                uuids = [c["uuid"] for c in answer.json()["checks"]]
                for u in uuids:
                    assert client.get(f"/ping/{u}").status_code == 200
            wanted = set(uuids)
            wait_until = time.monotonic() + 30
            while time.monotonic() < wait_until:
                got = {p.get("check_uuid") for _, p in list(receiver.received) if p.get("kind") == "missed"}
                if wanted <= got:
                    break
                time.sleep(0.2)
            time.sleep(1.5)  # a doubled alert or delivery would show by now
            rows = alert_rows(url)
            received = [(at, p) for at, p in list(receiver.received) if p.get("kind") == "missed"]
    finally:
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(work, ignore_errors=True)
    per_check = {u: [r for r in rows if r[0] == u] for u in uuids}
    deliveries: dict[str, list[float]] = {u: [] for u in uuids}
    for at, payload in received:
        if payload.get("check_uuid") in deliveries:
            deliveries[payload["check_uuid"]].append(at)
    bad = [u for u in uuids if len(per_check[u]) != 1 or len(deliveries[u]) != 1]
    alert_s, delivery_s, send_s = [], [], []
    for u in uuids:
        if u in bad:
            continue
        _, scheduled, created, grace = per_check[u][0]
        due = (scheduled + timedelta(seconds=grace)).timestamp()
        alert_s.append(created.timestamp() - due)
        delivery_s.append(deliveries[u][0] - due)
        send_s.append(deliveries[u][0] - created.timestamp())
    return {"backend": backend, "bad": bad, "alert": alert_s, "delivery": delivery_s, "send": send_s}


def report(result: dict[str, Any], interval: float) -> bool:
    """Print one round's percentiles; False when a check got no alert or delivery, or more than one."""
    print(
        f"\n{result['backend']}: {len(result['alert'])} checks, evaluate interval {interval} s"
        f" ({load_average()})",
        file=sys.stderr,
    )
    for key, label in (
        ("alert", "deadline → alert row"),
        ("delivery", "deadline → delivery at receiver"),
        ("send", "alert row → delivery"),
    ):
        values = result[key]
        if values:
            p50, p99, top = statistics.median(values), percentile(values, 99), max(values)
            print(
                f"  {label}: p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {top * 1000:.0f} ms",
                file=sys.stderr,
            )
    if result["bad"]:
        print(f"{len(result['bad'])} checks without exactly one alert and one delivery: {result['bad'][:5]}")
    return not result["bad"] and bool(result["delivery"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--backends", default="sqlite,postgres", help="postgres, sqlite or both, comma-separated"
    )
    parser.add_argument("--checks", type=int, default=300)
    parser.add_argument("--interval", type=float, default=1.0, help="MONITOR_EVALUATE_INTERVAL, seconds")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.rounds < 3:
        parser.error("--rounds: at least 3 (the figure is a median of alternated rounds)")
    print(f"start: {load_average()}")
    ok = True
    for backend in args.backends.split(","):
        backend = backend.strip()
        complete = True

        def monitor_round(_: int, backend: str = backend) -> float:
            nonlocal complete
            result = bench(backend, args)
            complete = report(result, args.interval) and complete
            return percentile(result["delivery"], 99) if result["delivery"] else float("inf")

        def baseline_round(_: int) -> float:
            with Receiver() as receiver:
                return apprise_round(receiver, args.checks)

        results = alternate(args.rounds, {"monitor": monitor_round, "apprise-only": baseline_round})
        print(
            f"\n{backend}: {args.checks} checks on staggered 5 s schedules, {args.rounds} alternated rounds"
        )
        print("| side | figure per round (s) | median (s) |")
        print("|---|---|---:|")
        print(
            "| monitor: deadline → delivery p99 | "
            + ", ".join(f"{v:.2f} ({load})" for v, load in results["monitor"])
            + f" | {median(results['monitor']):.2f} |"
        )
        print(
            f"| apprise-only: {args.checks} sends | "
            + ", ".join(f"{v:.2f} ({load})" for v, load in results["apprise-only"])
            + f" | {median(results['apprise-only']):.2f} |"
        )
        met = verdict(
            f"{backend}: deadline → delivery p99 (median)", median(results["monitor"]), GOAL_S, unit="s"
        )
        ok = ok and met and complete
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
