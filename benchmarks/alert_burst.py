"""1000 checks missed at once → every notice at a local webhook (goal: < 5 s).

Method (see ``benchmarks/README.md``):

1. ``monitor serve --dev`` (every role in one process, default settings) on a SQLite file and
   on a throwaway PostgreSQL database, with a loopback HTTP receiver as the only channel
   (Apprise ``json://``, kinds ``missed`` and ``monitor_unavailable``).
2. ``--checks`` (1000) checks on one ``0 * * * * *`` seconds schedule (every minute), grace 1 s, created
   through the API. A round: right after a tick P, every check is pinged (its run of P), then
   left silent, so the next tick N + grace is one deadline for all of them; each check gets one
   ``missed`` alert for N, delivered once.
3. Figure A: receipt of the last of those notices − the deadline. Baseline B, alternated with A
   in the same run: the same number of JSON notices sent straight from this process through
   ``AppriseNotifier`` (64 sender threads) to the same receiver — what delivering them costs
   without any database, claiming or recording. Median of ``--rounds`` (≥ 3) rounds each.
4. Goal: A < 5 s on both backends. Exit status 1 when it is not met, or when a check got
   more than one notice (that stops the run). A round in which some check got no notice within
   90 s counts as not met (figure ``inf``) and says whether the monitor declared itself
   unavailable meanwhile (the channel also takes ``monitor_unavailable``): on an overloaded
   machine a process that renews no liveness row for 2 × the lease TTL is an outage, whose
   ticks are ``unknown`` and page nobody (DESIGN §6).
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
from harness import Receiver, Serve, alternate, load_average, median, verdict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from monitor.domain.messages import Message
from monitor.notify.apprise import AppriseNotifier

PERIOD = 60
GRACE = 1
GOAL_S = 5.0


async def _ping_all(base: str, uuids: list[str]) -> None:
    limit = asyncio.Semaphore(32)
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:

        async def one(uuid: str) -> None:
            async with limit:
                answer = await client.get(f"/ping/{uuid}")
                assert answer.status_code == 200, answer.text

        await asyncio.gather(*(one(u) for u in uuids))


def monitor_round(serve: Serve, receiver: Receiver, uuids: list[str]) -> float:
    """One burst: ping every check right after a tick, then wait for the next tick's notices."""
    while not 0.2 <= time.time() % PERIOD < 3:
        time.sleep(0.05)
    tick = time.time() // PERIOD * PERIOD
    asyncio.run(_ping_all(serve.base, uuids))
    if time.time() > tick + PERIOD - 1:
        raise SystemExit("pinging the checks took most of a period; the machine is too busy")
    missed_tick = tick + PERIOD
    deadline = missed_tick + GRACE
    wanted = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(missed_tick))
    wanted_set = set(uuids)
    give_up = deadline + 90
    while True:
        got = [(at, p) for at, p in list(receiver.received) if p.get("scheduled") == wanted]
        if {p.get("check_uuid") for _, p in got} >= wanted_set or time.time() > give_up:
            break
        time.sleep(0.1)
    time.sleep(1.0)  # a doubled delivery would show by now
    got = [(at, p) for at, p in list(receiver.received) if p.get("scheduled") == wanted]
    per_check: dict[str, int] = {}
    for _, payload in got:
        per_check[payload.get("check_uuid", "")] = per_check.get(payload.get("check_uuid", ""), 0) + 1
    missing = [u for u in uuids if u not in per_check]
    doubled = [u for u in uuids if per_check.get(u, 0) > 1]
    if doubled:
        raise SystemExit(f"for {wanted}: {len(doubled)} checks got more than one notice")
    if missing:
        outages = [
            p for at, p in list(receiver.received) if at >= tick and p.get("kind") == "monitor_unavailable"
        ]
        print(
            f"    for {wanted}: {len(missing)} checks got no notice within {give_up - deadline:.0f} s;"
            f" monitor_unavailable notices meanwhile: {len(outages)}; notices for other ticks:"
            f" {sorted({p.get('scheduled', '') for _, p in list(receiver.received)} - {wanted})[-5:]}"
            + (f" ({outages[0].get('title', '')})" if outages else ""),
            file=sys.stderr,
        )
        return float("inf")
    first, last = min(at for at, _ in got), max(at for at, _ in got)
    print(
        f"    {len(got)} notices, first {first - deadline:.2f} s, last {last - deadline:.2f} s after the"
        f" deadline, {len(got) / max(last - first, 1e-3):.0f} deliveries/s",
        file=sys.stderr,
    )
    return last - deadline


def apprise_round(receiver: Receiver, count: int) -> float:
    """The baseline: ``count`` notices sent straight through Apprise, 64 at a time."""

    async def go() -> float:
        message = Message(
            title="baseline: missed", body="b", body_markdown="b", json_fields={"kind": "baseline"}
        )
        before = len(receiver.received)
        started = time.time()
        async with AppriseNotifier(allow_private_targets=True, max_workers=64) as notifier:
            limit = asyncio.Semaphore(64)

            async def one() -> None:
                async with limit:
                    result = await notifier.send(receiver.url, message, timeout=30)
                    assert result.ok, result.error

            await asyncio.gather(*(one() for _ in range(count)))
        assert len(receiver.received) - before == count
        return max(at for at, _ in receiver.received[before:]) - started

    return asyncio.run(go())


def bench(backend: str, args: argparse.Namespace) -> bool:
    work = Path(tempfile.mkdtemp(prefix="monitor-burst-"))
    try:
        with (
            database(backend, work, prefix="monitor_bench_burst") as url,
            Receiver() as receiver,
            Serve(url, work, extra=("--dev",)) as serve,
            serve.client() as client,
        ):
            answer = client.post(
                "/api/v3/channels/",
                json={"name": "hook", "url": receiver.url, "kinds": "missed,monitor_unavailable"},
            )
            assert answer.is_success, answer.text
            started = time.monotonic()
            uuids: list[str] = []
            for first in range(0, args.checks, 500):
                answer = client.post(
                    "/api/v3/checks/",
                    json=[
                        {
                            "name": f"burst-{i}",
                            "schedule": "0 * * * * *",
                            "dialect": "seconds",
                            "grace": GRACE,
                            "early_tolerance": 0,
                            "channels": "*",
                        }
                        for i in range(first, min(args.checks, first + 500))
                    ],
                )
                assert answer.status_code == 201, answer.text
                uuids.extend(c["uuid"] for c in answer.json()["checks"])
            print(
                f"  {backend}: {args.checks} checks created in {time.monotonic() - started:.1f} s",
                file=sys.stderr,
            )
            results = alternate(
                args.rounds,
                {
                    "monitor": lambda _: monitor_round(serve, receiver, uuids),
                    "apprise-only": lambda _: apprise_round(receiver, args.checks),
                },
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{backend}: {args.checks} checks missed at once, {args.rounds} alternated rounds")
    print("| side | round figures (s) | median (s) |")
    print("|---|---|---:|")
    for name, rows in results.items():
        figures = ", ".join(f"{v:.2f} ({load})" for v, load in rows)
        print(f"| {name} | {figures} | {median(rows):.2f} |")
    return verdict(
        f"{backend}: last notice − deadline (median; Apprise alone {median(results['apprise-only']):.2f} s)",
        median(results["monitor"]),
        GOAL_S,
        unit="s",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--backends", default="sqlite,postgres", help="sqlite, postgres or both, comma-separated"
    )
    parser.add_argument("--checks", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.rounds < 3:
        parser.error("--rounds: at least 3 (the figure is a median of alternated rounds)")
    print(f"start: {load_average()}")
    ok = True
    for backend in args.backends.split(","):
        ok = bench(backend.strip(), args) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
