"""Where an evaluator sweep's time goes: its statements in order, and the Python between them.

A diagnostic, not a benchmark: no goal, no baseline (``benchmarks/README.md``). It builds the
database ``benchmarks/evaluator.py`` builds (``--checks`` clones of one simple check, ``--due``
of them due), then runs ``--sweeps`` sweeps exactly as that benchmark's ``set`` evaluator does
(every shard held, every transaction fenced), resetting the due checks before each. It prints
each sweep's milliseconds and their median, then the last sweep's timeline: for each statement
the milliseconds since the previous one ended (``gap``: Python, and the commit before a new
transaction) and its own (``sql``: the driver's and the database's time, from SQLAlchemy's
cursor events).

    .venv/bin/python benchmarks/profiling/sweep_statements.py                  # PostgreSQL, 10 000 / 100 due
    .venv/bin/python benchmarks/profiling/sweep_statements.py --backend sqlite --due 1000
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sqlalchemy import event, text
from sqlalchemy.engine import Engine

from benchmarks import evaluator as bench
from benchmarks.databases import scratch_database
from monitor.settings import Settings
from monitor.storage.engine import make_engine


async def measure(url: str, args: argparse.Namespace) -> None:
    engine = make_engine(url)
    values = await bench.build(engine, url, args.checks, args.due)
    gc.collect()
    gc.freeze()
    timeline: list[tuple[float, float, str]] = []
    started: dict[int, float] = {}

    def before(conn: Any, *_: Any) -> None:
        started[id(conn)] = time.perf_counter()

    def after(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        timeline.append((started.pop(id(conn)), time.perf_counter(), " ".join(statement.split())[:100]))

    # on every engine: a SQLite sweep runs its transactions on a synchronous engine of its own
    # (monitor.storage.sqlite_batch), in a worker thread
    event.listen(Engine, "before_cursor_execute", before)
    event.listen(Engine, "after_cursor_execute", after)
    settings = Settings(database_url=url, shards=bench.SHARDS)
    seconds: list[float] = []
    began = ended = 0.0
    for _ in range(args.sweeps):
        await bench.reset(engine, values, args.due, args.due)
        async with engine.connect() as conn:  # a warm connection, as the benchmark's sweep
            await conn.execute(text("SELECT 1"))
        timeline.clear()
        began = time.perf_counter()
        judged = await bench.sweep_set(engine, settings)
        ended = time.perf_counter()
        if judged != args.due:
            raise SystemExit(f"judged {judged} checks, expected {args.due}")
        seconds.append(ended - began)
    print(
        f"{args.backend}, {args.checks:,} checks, {args.due:,} due: sweeps "
        + " ".join(f"{1e3 * s:.1f}" for s in seconds)
        + f" ms; median {1e3 * statistics.median(seconds):.1f} ms"
        f" ({1e6 * statistics.median(seconds) / args.due:.0f} µs per due check)"
    )
    print("last sweep:   gap ms   sql ms  statement")
    previous, in_sql = began, 0.0
    for start, end, statement in timeline:
        print(f"          {1e3 * (start - previous):8.2f} {1e3 * (end - start):8.2f}  {statement}")
        previous, in_sql = end, in_sql + end - start
    print(
        f"          tail {1e3 * (ended - previous):.2f} ms; {len(timeline)} statements, "
        f"{1e3 * in_sql:.2f} ms of {1e3 * (ended - began):.2f} ms in them"
    )
    await engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="postgres", choices=["sqlite", "postgres"])
    parser.add_argument("--checks", type=int, default=10_000)
    parser.add_argument("--due", type=int, default=100)
    parser.add_argument("--sweeps", type=int, default=7)
    args = parser.parse_args()
    with scratch_database(args.backend, "monitor_profile_sweep") as url:
        asyncio.run(measure(url, args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
