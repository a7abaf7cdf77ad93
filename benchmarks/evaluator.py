"""Evaluator sweep cost per due check, SQLite and PostgreSQL (DESIGN §6: O(due) evaluation).

Method (see ``benchmarks/README.md``):

1. A throwaway database per backend and size (10k, 100k, 1M checks by default), migrated: a
   SQLite file in a temporary directory, or a new PostgreSQL database dropped afterwards.
2. One template check is made through the services (simple, timeout 3600 s, grace 60 s, one
   success ping at T0), copied out, and cloned in SQL into N checks with fresh UUIDs and their
   shard (``uuid.int % 16``, the last hex digit). A clone is *due* when its state is the
   template's (deadline T0 + 3660 s); otherwise its state is the template's one day later
   (deadline a day after the sweep instant). One liveness row renewed at the sweep instant (an
   HTTP process alive, as in production: the outage guard is read). ``ANALYZE`` afterwards.
3. A sweep is what one evaluator holding every shard lease does each interval: for each of the
   16 shards, an evaluator pass at T0 + 3661 s, every transaction fenced by the shard's lease
   row (``check_fence``, as in production). Every due check goes down: one flip, one ``missed``
   alert, its tick mark, its state written back.
4. Two evaluators, alternated round by round (A, B, A, B, …): ``set`` is
   :func:`monitor.services.evaluator.evaluate_due` (batched loads and writes); the baseline
   ``row-by-row`` is the evaluator before it (:func:`row_by_row`, kept here: per-batch loads,
   but a judgement and its writes per check). Before each timed sweep the due set is reset
   (state copied from the template, the sweep's flips, alerts and marks deleted, ``ANALYZE``).
   One untimed warm-up sweep of each first (an evaluator sweeps every interval: its
   connections, statements and caches are warm); then at least three rounds; medians, with the
   load average beside each. The reset's own residue is cleaned before each timed sweep
   (PostgreSQL ``VACUUM ANALYZE``, SQLite ``ANALYZE`` and a WAL checkpoint).
5. Two settings per size: 1 % due, and a fixed due count (``--fixed-due``, 10 000; all of the
   checks when there are fewer).

Goals (fixed): at most 100 µs per due check, and 10 000 due checks judged in under 1 s (the
fixed setting). Loopback only. Exit status 1 when a goal is not met, or when a sweep did not
evaluate (and alert) exactly the due checks.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import Column, MetaData, Table, delete, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from benchmarks.databases import database
from benchmarks.harness import cpu_probe, load_average
from monitor.domain import detection
from monitor.domain.checks import PingKind
from monitor.domain.runs import needed_since
from monitor.services import checks as check_service
from monitor.services import evaluator as evaluator_service
from monitor.services import projects
from monitor.services.effects import CheckIdentity, PendingWrites, record_alerts
from monitor.services.evaluator import evaluate_due
from monitor.services.ingest import PingRequest, ingest_pings, lock_checks
from monitor.services.outages import load_guard
from monitor.settings import Settings
from monitor.storage import leases as lease_store
from monitor.storage import repositories
from monitor.storage import tables as t
from monitor.storage.engine import make_engine, migrate

SHARDS = 16
"""uuid.int % 16 is the UUID's last hex digit, which SQL can compute for a million clones."""
HOLDER = "bench:1"
T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
SWEEP_AT = T0 + timedelta(seconds=3661)
TIME_COLUMNS = [c.name for c in t.checks.columns if isinstance(c.type, t.UTCDateTime)]
IDENTITY = {"id", "uuid", "badge_uuid", "name", "slug", "shard", "project_id", "created_at"}
T = TypeVar("T")
GOAL_PER_DUE_US = 100.0
GOAL_10K_DUE_S = 1.0


async def row_by_row(
    engine: AsyncEngine,
    now: datetime,
    *,
    settings: Settings,
    batch: int = 200,
    token: int | None = None,
    shard: tuple[int, int] | None = None,
    fence: Callable[[AsyncConnection], Awaitable[None]] | None = None,
) -> int:
    """The baseline: the evaluator as it was before set operations (same contract as
    :func:`evaluate_due`): per batch, the ids, the rows locked, the books loaded; then per check
    a judgement, its alerts recorded and its state gathered."""
    total = 0
    for _ in range(100):
        async with engine.begin() as conn:
            if fence is not None:
                await fence(conn)
            query = select(t.checks.c.id).where(t.checks.c.next_due < now)
            if shard is not None:
                query = query.where(t.checks.c.shard == shard[0])
            ids = (await conn.execute(query.order_by(t.checks.c.next_due).limit(batch))).scalars().all()
            if not ids:
                return total
            rows = {
                cid: row for cid, row in (await lock_checks(conn, ids)).items() if row["next_due"] is not None
            }
            rows = {cid: row for cid, row in rows.items() if row["next_due"] < now}
            guard = await load_guard(conn, now, timedelta(seconds=settings.lease_ttl))
            specs = {cid: repositories.spec_of(row) for cid, row in rows.items()}
            states = {cid: repositories.state_of(row) for cid, row in rows.items()}
            cutoffs = {cid: needed_since(specs[cid], s) for cid, s in states.items()}
            books = await repositories.load_books(conn, cutoffs)
            pending = PendingWrites.empty()
            updates = []
            for cid, row in rows.items():
                state = states[cid]
                fx = detection.evaluate(specs[cid], state, books[cid], now, guard=guard)
                pending.add(cid, fx, token=token)
                if fx.alerts:
                    await record_alerts(
                        conn,
                        CheckIdentity.of(row),
                        fx.alerts,
                        now=now,
                        status=detection.status(state, now),
                        base_url=settings.base_url,
                        token=token,
                    )
                values = repositories.state_values(state)
                values["b_id"] = cid
                updates.append(values)
            await pending.write(conn)
            await repositories.save_state(conn, updates)
        total += len(rows)
        if len(ids) < batch:
            return total
    return total


def clone_table(name: str) -> Table:
    """A Core table with the columns of ``checks`` under another name (no constraints)."""
    return Table(name, MetaData(), *[Column(c.name, c.type) for c in t.checks.columns])


async def analyze(engine: AsyncEngine, *tables: str) -> None:
    if engine.dialect.name == "postgresql":
        async with engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            for name in tables:
                await conn.execute(text(f"VACUUM ANALYZE {name}"))
    else:
        async with engine.begin() as conn:
            await conn.execute(text("ANALYZE"))
        # the set-up's writes leave the WAL, as VACUUM leaves PostgreSQL clean: else the timed
        # sweep's commit pays the auto-checkpoint of the reset's ten thousand row updates
        with sqlite3.connect(str(engine.url.database), timeout=30) as direct:
            busy, _, _ = direct.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0, "the WAL checkpoint was blocked"


async def build(engine: AsyncEngine, url: str, size: int, due_max: int) -> dict[str, dict[str, Any]]:
    """Migrate, make the template, clone it ``size`` times (rows 1..due_max due-able).

    Returns:
        ``{"due": state columns, "later": the same a day later}``, the values :func:`reset`
        writes.
    """
    settings = Settings(database_url=url, shards=SHARDS)
    await migrate(engine)
    async with engine.begin() as conn:
        project = await projects.create_project(conn, "bench", T0, api_key="benchmark-key-0123456789")
        check_id, _ = await check_service.create_or_upsert(
            conn, int(project["id"]), {"name": "template", "timeout": 3600, "grace": 60}, T0, shards=SHARDS
        )
        template_uuid = (
            await conn.execute(select(t.checks.c.uuid).where(t.checks.c.id == check_id))
        ).scalar_one()
    answers = await ingest_pings(
        engine, [PingRequest(kind=PingKind.SUCCESS, received=T0, uuid=template_uuid)], settings=settings
    )
    assert answers[0].status == 200, answers
    postgres = engine.dialect.name == "postgresql"
    async with engine.begin() as conn:
        template = dict(
            (await conn.execute(select(t.checks).where(t.checks.c.id == check_id))).mappings().one()
        )
        for name in ("bench_due", "bench_later"):
            await conn.execute(text(f"CREATE TABLE {name} AS SELECT * FROM checks WHERE id = {check_id}"))
        later = {
            c: template[c] + timedelta(days=1) for c in TIME_COLUMNS if c != "created_at" and template[c]
        }
        await conn.execute(update(clone_table("bench_later")).values(later))
        await conn.execute(delete(t.checks))
    columns = [c.name for c in t.checks.columns if c.name != "id"]

    def expression(name: str) -> str:
        if name == "uuid":
            return "x.u"
        if name == "badge_uuid":
            return "x.b"
        if name == "name":
            return "'bench-' || x.g"
        if name == "slug":
            return "NULL"
        if name == "shard":
            if postgres:
                return "('x' || right(x.u, 1))::bit(4)::int"
            return "instr('0123456789abcdef', substr(x.u, 36, 1)) - 1"
        if name in TIME_COLUMNS and name != "created_at":
            return f'CASE WHEN x.g <= {due_max} THEN d."{name}" ELSE l."{name}" END'
        return f'd."{name}"'

    quoted = ", ".join(f'"{c}"' for c in columns)
    chunk = 100_000
    for start in range(1, size + 1, chunk):
        stop = min(size, start + chunk - 1)
        async with engine.begin() as conn:
            if postgres:
                source = (
                    "(SELECT g, gen_random_uuid()::text AS u, gen_random_uuid()::text AS b"
                    f" FROM generate_series({start}, {stop}) g) x"
                )
            else:
                # materialised first: SQLite would evaluate randomblob() once per reference
                await conn.execute(text("DROP TABLE IF EXISTS bench_ids"))
                await conn.execute(
                    text(
                        "CREATE TEMP TABLE bench_ids AS WITH RECURSIVE s(g) AS"
                        f" (SELECT {start} UNION ALL SELECT g + 1 FROM s WHERE g < {stop})"
                        " SELECT g, lower(hex(randomblob(16))) AS h, lower(hex(randomblob(16))) AS hb FROM s"
                    )
                )
                source = (
                    "(SELECT g,"
                    " substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-4' || substr(h, 14, 3) || '-8'"
                    " || substr(h, 18, 3) || '-' || substr(h, 21, 12) AS u,"
                    " substr(hb, 1, 8) || '-' || substr(hb, 9, 4) || '-4' || substr(hb, 14, 3) || '-8'"
                    " || substr(hb, 18, 3) || '-' || substr(hb, 21, 12) AS b FROM bench_ids) x"
                )
            await conn.execute(
                text(
                    f"INSERT INTO checks ({quoted}) SELECT {', '.join(expression(c) for c in columns)}"
                    f" FROM {source}, bench_due d, bench_later l ORDER BY x.g"
                )
            )
    async with engine.begin() as conn:
        for shard in range(SHARDS):
            await conn.execute(
                t.leases.insert().values(
                    name=f"shard-{shard}", holder=HOLDER, token=1, expires_at=T0 + timedelta(days=365)
                )
            )
        # an HTTP process alive at the sweep, as in production: the outage guard reads its
        # renewal (and the outages since), and no deadline waits for a renewal after it
        await conn.execute(t.liveness.insert().values(name="bench:api", roles="api", renewed_at=SWEEP_AT))
        if not postgres:
            await conn.execute(text("DROP TABLE IF EXISTS bench_ids"))
    await analyze(engine, "checks")
    state = [c.name for c in t.checks.columns if c.name not in IDENTITY]
    due_values = {c: template[c] for c in state}
    return {"due": due_values, "later": {**due_values, **later}}


async def reset(engine: AsyncEngine, values: dict[str, dict[str, Any]], due: int, due_max: int) -> None:
    """Rows 1..due due, rows due+1..due_max not due; the previous sweep's effects removed."""
    async with engine.begin() as conn:
        first = (await conn.execute(select(func.min(t.checks.c.id)))).scalar_one()
        await conn.execute(update(t.checks).where(t.checks.c.id < first + due).values(values["due"]))
        await conn.execute(
            update(t.checks)
            .where(t.checks.c.id >= first + due)
            .where(t.checks.c.id < first + due_max)
            .values(values["later"])
        )
        for table in (t.notifications, t.alerts, t.flips, t.tick_marks):
            await conn.execute(delete(table))
    await analyze(engine, "checks", "alerts", "flips", "tick_marks")
    async with engine.connect() as conn:
        overdue = (
            await conn.execute(
                select(func.count()).select_from(t.checks).where(t.checks.c.next_due < SWEEP_AT)
            )
        ).scalar_one()
    assert overdue == due, (overdue, due)


class AlertTimer:
    """Wall-clock time spent on alerts during a sweep, so the rest of the sweep can be read
    apart: the baseline's ``record_alerts`` (per alerting check); the set evaluator's
    ``plan_alerts`` and ``queue_alerts`` (its alert insert rides in the batch's one write
    statement, :meth:`~monitor.storage.ports.DetectionStore.save_sweep`, and is not in it)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def wrap(self, function: Callable[..., Awaitable[list[int]]]) -> Callable[..., Awaitable[list[int]]]:
        async def timed(*args: Any, **kwargs: Any) -> list[int]:
            began = time.perf_counter()
            try:
                return await function(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - began
                self.calls += 1

        return timed

    def wrap_plain(self, function: Callable[..., T]) -> Callable[..., T]:
        def timed(*args: Any, **kwargs: Any) -> T:
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - began

        return timed


TIMER = AlertTimer()
# each evaluator's own alert work goes through the timer: the set evaluator plans and queues
# once per batch, the baseline calls record_alerts once per alerting check
evaluator_service.plan_alerts = TIMER.wrap_plain(evaluator_service.plan_alerts)  # type: ignore[assignment]
evaluator_service.queue_alerts = TIMER.wrap(evaluator_service.queue_alerts)  # type: ignore[assignment]
record_alerts = TIMER.wrap(record_alerts)  # type: ignore[assignment]


async def sweep_row_by_row(engine: AsyncEngine, settings: Settings) -> int:
    """The baseline's sweep: shard after shard, each transaction fenced on its shard's lease."""
    evaluated = 0
    for shard in range(SHARDS):
        name = f"shard-{shard}"

        async def fence(conn: AsyncConnection, name: str = name) -> None:
            await lease_store.check_fence(conn, name, 1, HOLDER, SWEEP_AT)

        evaluated += await row_by_row(
            engine, SWEEP_AT, settings=settings, token=1, shard=(shard, SHARDS), fence=fence
        )
    return evaluated


async def sweep_set(engine: AsyncEngine, settings: Settings) -> int:
    """The evaluator worker's sweep (``ShardedEvaluator._sweep``): every held shard in one
    :func:`evaluate_due`, each transaction fenced on all the leases at once."""
    tokens = {f"shard-{shard}": 1 for shard in range(SHARDS)}

    async def fence(conn: AsyncConnection) -> None:
        await lease_store.check_fences(conn, tokens, HOLDER, SWEEP_AT)

    return await evaluate_due(
        engine, SWEEP_AT, settings=settings, held=dict.fromkeys(range(SHARDS), 1), fence=fence
    )


IMPLEMENTATIONS: dict[str, Callable[[AsyncEngine, Settings], Awaitable[int]]] = {
    "row-by-row": sweep_row_by_row,
    "set": sweep_set,
}


async def sweep(engine: AsyncEngine, url: str, name: str) -> tuple[float, int, int, float]:
    """One sweep over every shard, fenced; returns (seconds, checks evaluated, alerts written,
    seconds of it spent on alerts, :class:`AlertTimer`)."""
    settings = Settings(database_url=url, shards=SHARDS)
    async with engine.connect() as conn:  # warm the pool: connection setup is not the sweep
        await conn.execute(text("SELECT 1"))
    TIMER.seconds, TIMER.calls = 0.0, 0
    began = time.perf_counter()
    evaluated = await IMPLEMENTATIONS[name](engine, settings)
    elapsed = time.perf_counter() - began
    async with engine.connect() as conn:
        alerts = int((await conn.execute(select(func.count()).select_from(t.alerts))).scalar_one())
    return elapsed, evaluated, alerts, TIMER.seconds


async def run_size(
    backend: str, url: str, size: int, fixed_due: int, repeats: int, implementations: list[str]
) -> list[dict[str, Any]]:
    rows = []
    engine = make_engine(url)
    try:
        one_percent = max(1, size // 100)
        fixed = min(size, fixed_due)
        due_max = max(one_percent, fixed)
        began = time.perf_counter()
        values = await build(engine, url, size, due_max)
        # as the evaluator's process does once started (the app's lifespan, `monitor evaluate`)
        gc.collect()
        gc.freeze()
        print(
            f"  {backend} {size:>9,} checks built in {time.perf_counter() - began:.1f}s",
            file=sys.stderr,
            flush=True,
        )
        settings = [("1%", one_percent)] + ([(f"{fixed:,} due", fixed)] if fixed != one_percent else [])
        for label, due in settings:
            times: dict[str, list[float]] = {name: [] for name in implementations}
            alert_times: dict[str, list[float]] = {name: [] for name in implementations}
            loads: dict[str, list[float]] = {name: [] for name in implementations}
            probes: dict[str, list[float]] = {name: [] for name in implementations}
            for name in implementations:  # warm-up, not timed: an evaluator sweeps every interval
                await reset(engine, values, due, due_max)
                await sweep(engine, url, name)
            for _ in range(repeats):
                for name in implementations:
                    await reset(engine, values, due, due_max)
                    elapsed, evaluated, alerts, in_alerts = await sweep(engine, url, name)
                    if evaluated != due or alerts != due:
                        raise SystemExit(
                            f"{backend} {size} {name}: evaluated {evaluated}, alerts {alerts}, expected {due}"
                        )
                    times[name].append(elapsed)
                    alert_times[name].append(in_alerts)
                    loads[name].append(os.getloadavg()[0])
                    probes[name].append(cpu_probe())
            for name in implementations:
                median = statistics.median(times[name])
                rows.append(
                    {
                        "backend": backend,
                        "size": size,
                        "setting": label,
                        "due": due,
                        "implementation": name,
                        "sweep_s": median,
                        "per_due_us": median / due * 1e6,
                        "alerts_s": statistics.median(alert_times[name]),
                        "load": statistics.median(loads[name]),
                        "probe_ms": statistics.median(probes[name]),
                        "rounds": len(times[name]),
                    }
                )
                print(
                    f"  {backend} {size:>9,} {label:>11} {name:>10}: {median * 1000:.0f} ms per sweep"
                    f" ({median / due * 1e6:.0f} µs per due check, of which alerts"
                    f" {statistics.median(alert_times[name]) / due * 1e6:.0f} µs; {load_average()})",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        await engine.dispose()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| backend | checks | due | evaluator | sweep (median) | per due check | of which alerts"
        " | vs row-by-row | load (1 min) | CPU probe |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        base = next(
            (
                b["sweep_s"]
                for b in rows
                if b["implementation"] == "row-by-row"
                and (b["backend"], b["size"], b["setting"]) == (r["backend"], r["size"], r["setting"])
            ),
            None,
        )
        ratio = f"{base / r['sweep_s']:.1f}× faster" if base and r["implementation"] != "row-by-row" else "—"
        lines.append(
            f"| {r['backend']} | {r['size']:,} | {r['due']:,} ({r['setting']}) | {r['implementation']}"
            f" | {r['sweep_s'] * 1000:.0f} ms | {r['per_due_us']:.0f} µs"
            f" | {r['alerts_s'] / r['due'] * 1e6:.0f} µs"
            f" | {ratio} | {r['load']:.2f} | {r['probe_ms']:.0f} ms |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    parser.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated check counts")
    parser.add_argument("--fixed-due", type=int, default=10_000, help="due checks of the fixed setting")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per setting (at least 3)")
    parser.add_argument(
        "--no-baseline", action="store_true", help="skip the row-by-row evaluator (quicker, no ratio)"
    )
    args = parser.parse_args()
    if args.repeats < 3:
        parser.error("--repeats: at least 3 rounds (the medians are of three or more)")
    implementations = ["set"] if args.no_baseline else ["row-by-row", "set"]
    sizes = [int(s) for s in args.sizes.split(",")]
    rows: list[dict[str, Any]] = []
    for backend in args.backends.split(","):
        for size in sizes:
            with (
                tempfile.TemporaryDirectory(prefix="monitor-bench-eval-") as work,
                database(backend, Path(work), prefix="monitor_bench_eval") as url,
            ):
                rows += asyncio.run(
                    run_size(backend, url, size, args.fixed_due, args.repeats, implementations)
                )
    print(
        f"\n{SHARDS} shards, one evaluator holding every shard, fenced; medians of {args.repeats} rounds,"
        " evaluators alternated\n"
    )
    print(table(rows))
    print()
    ok = True
    for r in rows:
        if r["implementation"] != "set":
            continue
        per_due_met = r["per_due_us"] <= GOAL_PER_DUE_US
        goals = [f"{r['per_due_us']:.0f} µs per due check (goal ≤ {GOAL_PER_DUE_US:.0f} µs)"]
        met = per_due_met
        if r["due"] >= 10_000:
            met = met and r["sweep_s"] < GOAL_10K_DUE_S
            goals.append(f"{r['due']:,} due judged in {r['sweep_s']:.2f} s (goal < {GOAL_10K_DUE_S:.0f} s)")
        ok = ok and met
        print(
            f"goal {r['backend']} {r['size']:,} checks, {r['setting']}: {'; '.join(goals)}"
            f" (load {r['load']:.2f}/{os.cpu_count()} cores): {'met' if met else 'NOT met'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
