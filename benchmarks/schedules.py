"""µs per next tick: monitor's engine (cached) vs fresh croniter vs reused croniter vs cronsim.

Run: ``python benchmarks/schedules.py``. Issue #3's goals: ours <= 1.5x a reused croniter
iterator; ``ticks_between`` over a year of ``*/5 * * * *`` in Europe/Berlin under 10 s.

croniter does our iteration (``monitor.domain.cron.iteration``): "ours" is croniter plus the
wrapper's translation, filtering, DST rule and iterator reuse, looked up through the parse
cache for every tick as the evaluator does. The first rows are the issue's typical expressions;
the last ones exercise corrections (the OR with a ``#`` token, ``5L``, ``LW``), where croniter
or cronsim may refuse the expression (``n/a``) or answer differently from the contract (so
their time is for another answer). croniter is timed as the issue describes: 5 fields, an aware
start in the zone, ``implement_cron_bug=True``.
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

from monitor.domain.cron.schedules import parse_cron

CASES = [
    ("*/5 * * * *", "UTC"),
    ("0 3 * * *", "UTC"),
    ("0 9 * * 1-5", "Europe/Berlin"),
    ("0 0 13 * 5", "UTC"),
    # corrections
    ("*/5 * * * *", "Europe/Berlin"),
    ("0 0 1 * 5#3", "UTC"),
    ("0 0 * * 5L", "UTC"),
    ("0 0 LW * *", "Europe/Berlin"),
]
N = 3000
START = datetime(2026, 1, 1, tzinfo=UTC)


def per_tick(fn: Callable[[], None], n: int = N) -> float | None:
    """µs per tick, or None when the library refuses the expression."""
    began = time.perf_counter()
    try:
        fn()
    except Exception:  # croniter / cronsim refusing an expression the contract accepts
        return None
    return (time.perf_counter() - began) / n * 1e6


def cell(value: float | None, width: int, digits: int = 1) -> str:
    return f"{'n/a':>{width}}" if value is None else f"{value:{width}.{digits}f}"


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
    vs_reused = None if a is None or c is None else a / c
    vs_sim = None if a is None or d is None else a / d
    print(
        f"{expr:<14} {tz:<14} {cell(a, 8)} {cell(b, 9)} {cell(c, 8)} {cell(d, 8)} "
        f"{cell(vs_reused, 11, 2)} {cell(vs_sim, 12, 2)}"
    )


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
