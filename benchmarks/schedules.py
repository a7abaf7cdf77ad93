"""µs per next tick: monitor's engine (cached) vs fresh croniter vs reused croniter vs cronsim.

Run: ``python benchmarks/schedules.py``. Issue #3's goals: ours <= 1.5x a reused croniter
iterator; ``ticks_between`` over a year of ``*/5 * * * *`` in Europe/Berlin under 10 s.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from croniter import croniter
from cronsim import CronSim

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from monitor.domain.schedules import parse_cron

CASES = [
    ("*/5 * * * *", "UTC"),
    ("0 3 * * *", "UTC"),
    ("0 9 * * 1-5", "Europe/Berlin"),
    ("0 0 13 * 5", "UTC"),
]
N = 3000
START = datetime(2026, 1, 1, tzinfo=UTC)


def per_tick(fn: Callable[[], None], n: int = N) -> float:
    began = time.perf_counter()
    fn()
    return (time.perf_counter() - began) / n * 1e6


def bench(expr: str, tz: str) -> None:
    """Print one row: µs per next tick for ``expr`` in ``tz``."""
    zone = ZoneInfo(tz)
    schedule = parse_cron(expr, "unix", tz)

    def ours() -> None:
        t = START
        for _ in range(N):
            # the evaluator's pattern: look the schedule up (cached) and ask for one tick
            nxt = parse_cron(expr, "unix", tz).next_tick(t)
            assert nxt is not None
            t = nxt

    def fresh() -> None:
        t = START.astimezone(zone)
        for _ in range(N):
            t = croniter(expr, t, implement_cron_bug=True).get_next(datetime)

    def reused() -> None:
        it = croniter(expr, START.astimezone(zone), implement_cron_bug=True)
        for _ in range(N):
            it.get_next(datetime)

    def sim() -> None:
        it = CronSim(expr, START.astimezone(zone))
        for _ in range(N):
            next(it)

    schedule.next_tick(START)  # warm the zone cache as a long-running evaluator would
    a, b, c, d = per_tick(ours), per_tick(fresh), per_tick(reused), per_tick(sim)
    print(f"{expr:<14} {tz:<14} {a:8.1f} {b:9.1f} {c:8.1f} {d:8.1f} {a / c:11.2f} {a / d:12.2f}")


def main() -> None:
    print(
        f"{'expression':<14} {'tz':<14} {'ours':>8} {'croniter':>9} {'reused':>8} {'cronsim':>8} "
        f"{'ours/reused':>11} {'ours/cronsim':>12}"
    )
    for expr, tz in CASES:
        bench(expr, tz)

    schedule = parse_cron("*/5 * * * *", "unix", "Europe/Berlin")
    since = datetime(2026, 1, 1, tzinfo=UTC)
    began = time.perf_counter()
    count = sum(1 for _ in schedule.ticks_between(since, since + timedelta(days=365)))
    took = time.perf_counter() - began
    print(
        f"ticks_between a year of '*/5 * * * *' Europe/Berlin: {count} ticks in {took:.2f} s "
        f"({took / count * 1e6:.1f} µs per tick)"
    )


if __name__ == "__main__":
    main()
