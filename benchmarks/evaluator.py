"""Evaluator sweep cost against the number of checks (DESIGN §6: O(due) evaluation).

Method (see ``benchmarks/README.md``):

1. A throwaway PostgreSQL database per size (10k, 100k, 1M checks by default), migrated.
2. One template check is made through the services (simple, timeout 3600 s, grace 60 s, one
   success ping at T0), copied out, and cloned in SQL into N checks with fresh UUIDs and their
   shard (``uuid.int % 16``, the last hex digit). A clone is *due* when its state is the
   template's (deadline T0 + 3660 s); otherwise its state is the template's one day later
   (deadline a day after the sweep instant). ``ANALYZE`` afterwards.
3. A sweep is what one evaluator holding every shard lease does each interval: for each of the
   16 shards, :func:`monitor.services.evaluator.evaluate_due` at T0 + 3661 s, fenced by the
   shard's lease row (``check_fence``, as in production). Every due check goes down: one flip,
   one ``missed`` alert, its state written back.
4. Before each timed sweep the due set is reset (state copied from the template, the sweep's
   flips and alerts deleted); then ``VACUUM ANALYZE``. Three sweeps per setting, median.
5. Two settings per size: 1 % due, and a fixed due count (``--fixed-due``, 100) so sizes can
   be compared at equal due count. Reports time per sweep, per 1 000 due checks, and the ratio
   of the largest size to the 10k run (the goal: ≤ 1.5 at equal due count).

Loopback only. Exit status 1 when a sweep did not evaluate exactly the due checks.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import text

from monitor.domain.checks import PingKind
from monitor.services import checks as check_service
from monitor.services import projects
from monitor.services.evaluator import evaluate_due
from monitor.services.ingest import PingRequest, ingest_pings
from monitor.settings import Settings
from monitor.storage import leases as lease_store
from monitor.storage import tables as t
from monitor.storage.engine import make_engine, migrate

PG_ADMIN_URL = os.environ.get(
    "MONITOR_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)
SHARDS = 16
"""uuid.int % 16 is the UUID's last hex digit, which SQL can compute for a million clones."""
HOLDER = "bench:1"
T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
SWEEP_AT = T0 + timedelta(seconds=3661)
TIME_COLUMNS = [
    c.name for c in t.checks.columns if c.name not in ("id",) and "DateTime" in type(c.type).__name__
]
IDENTITY = {"id", "uuid", "badge_uuid", "name", "slug", "shard"}


def dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


async def admin(sql: str) -> None:
    conn = await asyncpg.connect(dsn(PG_ADMIN_URL), timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def build(url: str, size: int, due_max: int) -> None:
    """Migrate, make the template, clone it ``size`` times (rows 1..due_max due-able)."""
    settings = Settings(database_url=url, shards=SHARDS)
    engine = make_engine(url)
    try:
        await migrate(engine)
        async with engine.begin() as conn:
            project = await projects.create_project(conn, "bench", T0, api_key="benchmark-key-0123456789")
            check_id, _ = await check_service.create_or_upsert(
                conn,
                int(project["id"]),
                {"name": "template", "timeout": 3600, "grace": 60},
                T0,
                shards=SHARDS,
            )
            template_uuid = (
                await conn.execute(text("SELECT uuid FROM checks WHERE id = :id"), {"id": check_id})
            ).scalar_one()
        answers = await ingest_pings(
            engine, [PingRequest(kind=PingKind.SUCCESS, received=T0, uuid=template_uuid)], settings=settings
        )
        assert answers[0].status == 200, answers
    finally:
        await engine.dispose()
    conn = await asyncpg.connect(dsn(url), timeout=30)
    try:
        await conn.execute(
            f"CREATE TABLE bench_template AS SELECT * FROM checks WHERE uuid = '{template_uuid}'"
        )
        await conn.execute("DELETE FROM checks")
        columns = [c.name for c in t.checks.columns if c.name != "id"]

        def expression(name: str) -> str:
            if name == "uuid":
                return "x.u"
            if name == "badge_uuid":
                return "gen_random_uuid()::text"
            if name == "name":
                return "'bench-' || x.g"
            if name == "slug":
                return "NULL"
            if name == "shard":
                return "('x' || right(x.u, 1))::bit(4)::int"
            if name in TIME_COLUMNS and name != "created_at":
                return f"CASE WHEN x.g <= {due_max} THEN b.{name} ELSE b.{name} + interval '1 day' END"
            return f'b."{name}"'

        quoted = ", ".join(f'"{c}"' for c in columns)
        chunk = 100_000
        for start in range(1, size + 1, chunk):
            stop = min(size, start + chunk - 1)
            await conn.execute(
                f"INSERT INTO checks ({quoted}) SELECT {', '.join(expression(c) for c in columns)}"
                f" FROM (SELECT g, gen_random_uuid()::text AS u FROM generate_series({start}, {stop}) g) x,"
                " bench_template b ORDER BY x.g",
                timeout=600,
            )
        await conn.execute("VACUUM ANALYZE checks")
        for shard in range(SHARDS):
            await conn.execute(
                "INSERT INTO leases (name, holder, token, expires_at) VALUES ($1, $2, 1, $3)",
                f"shard-{shard}",
                HOLDER,
                (T0 + timedelta(days=365)).replace(tzinfo=None),
            )
    finally:
        await conn.close()


async def reset(url: str, due: int, due_max: int) -> None:
    """Rows 1..due due, rows due+1..due_max not due; the previous sweep's effects removed."""
    conn = await asyncpg.connect(dsn(url), timeout=30)
    try:
        first = await conn.fetchval("SELECT min(id) FROM checks")
        state = [c.name for c in t.checks.columns if c.name not in IDENTITY]
        assignments = ", ".join(
            f'"{c}" = CASE WHEN checks.id < {first + due} THEN b."{c}" ELSE b."{c}" + interval \'1 day\' END'
            if c in TIME_COLUMNS and c != "created_at"
            else f'"{c}" = b."{c}"'
            for c in state
        )
        await conn.execute(
            f"UPDATE checks SET {assignments} FROM bench_template b WHERE checks.id < {first + due_max}",
            timeout=600,
        )
        await conn.execute("DELETE FROM alerts")
        await conn.execute("DELETE FROM flips")
        await conn.execute("DELETE FROM tick_marks")
        await conn.execute("VACUUM ANALYZE checks")
        await conn.execute("VACUUM ANALYZE alerts")
        await conn.execute("VACUUM ANALYZE flips")
        overdue = await conn.fetchval(
            "SELECT count(*) FROM checks WHERE next_due < $1", SWEEP_AT.replace(tzinfo=None)
        )
        assert overdue == due, (overdue, due)
    finally:
        await conn.close()


async def sweep(url: str) -> tuple[float, int, int]:
    """One sweep over every shard, fenced; returns (seconds, checks evaluated, alerts written)."""
    settings = Settings(database_url=url, shards=SHARDS)
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:  # warm the pool: connection setup is not the sweep
            await conn.execute(text("SELECT 1"))
        evaluated = 0
        began = time.perf_counter()
        for shard in range(SHARDS):
            name = f"shard-{shard}"

            async def fence(conn: Any, name: str = name) -> None:
                await lease_store.check_fence(conn, name, 1, HOLDER, SWEEP_AT)

            evaluated += await evaluate_due(
                engine, SWEEP_AT, settings=settings, token=1, shard=(shard, SHARDS), fence=fence
            )
        elapsed = time.perf_counter() - began
        async with engine.connect() as conn:
            alerts = int((await conn.execute(text("SELECT count(*) FROM alerts"))).scalar_one())
    finally:
        await engine.dispose()
    return elapsed, evaluated, alerts


async def run_size(size: int, fixed_due: int, repeats: int) -> list[dict[str, Any]]:
    name = f"monitor_bench_eval_{uuid.uuid4().hex[:10]}"
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    await admin(f'CREATE DATABASE "{name}"')
    rows = []
    try:
        one_percent = max(1, size // 100)
        due_max = max(one_percent, fixed_due)
        began = time.perf_counter()
        await build(url, size, due_max)
        print(f"  {size:>9,} checks built in {time.perf_counter() - began:.1f}s", file=sys.stderr, flush=True)
        for label, due in (("1%", one_percent), (f"fixed {fixed_due}", fixed_due)):
            times = []
            for _ in range(repeats):
                await reset(url, due, due_max)
                elapsed, evaluated, alerts = await sweep(url)
                if evaluated != due or alerts != due:
                    raise SystemExit(f"size {size}: evaluated {evaluated}, alerts {alerts}, expected {due}")
                times.append(elapsed)
            median = statistics.median(times)
            rows.append(
                {
                    "size": size,
                    "setting": label,
                    "due": due,
                    "sweep_s": median,
                    "per_1k_due_s": median / due * 1000,
                }
            )
            print(f"  {size:>9,} {label:>10}: {median * 1000:.0f} ms per sweep", file=sys.stderr, flush=True)
    finally:
        await admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| checks | due | sweep (median of runs) | per 1k due | sweep / 10k sweep (same setting) |",
        "|---:|---:|---:|---:|---:|",
    ]
    base = {r["setting"]: r["sweep_s"] for r in rows if r["size"] == min(x["size"] for x in rows)}
    for r in rows:
        lines.append(
            f"| {r['size']:,} | {r['due']:,} ({r['setting']}) | {r['sweep_s'] * 1000:.0f} ms"
            f" | {r['per_1k_due_s'] * 1000:.0f} ms | {r['sweep_s'] / base[r['setting']]:.2f} |"
        )
    return "\n".join(lines)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated check counts")
    parser.add_argument("--fixed-due", type=int, default=100, help="due checks of the equal-due setting")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows: list[dict[str, Any]] = []
    for size in sizes:
        rows += await run_size(size, args.fixed_due, args.repeats)
    print(f"PostgreSQL, {SHARDS} shards, one evaluator holding every shard, batch 200, fenced\n")
    print(table(rows))
    largest, smallest = max(sizes), min(sizes)
    for setting in sorted({r["setting"] for r in rows}):
        big = next(r for r in rows if r["size"] == largest and r["setting"] == setting)
        small = next(r for r in rows if r["size"] == smallest and r["setting"] == setting)
        sweep_ratio = big["sweep_s"] / small["sweep_s"]
        due_ratio = big["per_1k_due_s"] / small["per_1k_due_s"]
        print(
            f"\n{setting}: {largest:,} vs {smallest:,} checks: sweep ratio {sweep_ratio:.2f},"
            f" per-1k-due ratio {due_ratio:.2f}"
        )
    # Fixed goals: at most 100 µs per due check (1 % due), and 10 000 due checks
    # (the 1 % setting at 1M checks) judged in under 1 s.
    ok = True
    load = f"load {os.getloadavg()[0]:.2f}/{os.cpu_count()} cores"
    for r in rows:
        if r["setting"] != "1%":
            continue
        per_due_us = r["sweep_s"] / r["due"] * 1e6
        met = per_due_us <= GOAL_PER_DUE_US and (r["due"] < 10_000 or r["sweep_s"] < 1.0)
        ok = ok and met
        print(
            f"goal {r['size']:,} checks, {r['due']:,} due: {per_due_us:.0f} µs per due check"
            f" (≤ {GOAL_PER_DUE_US:.0f} µs; 10 000 due < 1 s), sweep {r['sweep_s']:.2f} s ({load}):"
            f" {'met' if met else 'NOT met'}"
        )
    return 0 if ok else 1


GOAL_PER_DUE_US = 100.0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
