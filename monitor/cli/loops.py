"""The loops run alone: ``evaluate``, ``notify`` and ``scheduler`` (the bundled scheduler)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from monitor.cli.options import add_database_url, or_setting, settings_for
from monitor.settings import Settings

__all__ = ["add_scheduler", "add_workers", "scheduler", "worker"]


def add_workers(sub: Any) -> None:
    """Register ``evaluate`` and ``notify``."""
    evaluate = sub.add_parser("evaluate", help="run only the evaluator")
    add_database_url(evaluate)
    notify = sub.add_parser("notify", help="run only the notifier")
    add_database_url(notify)


def add_scheduler(sub: Any) -> None:
    """Register ``scheduler``."""
    scheduler = sub.add_parser("scheduler", help="run the jobs of a jobs file (the bundled scheduler)")
    add_database_url(scheduler)
    scheduler.add_argument("--jobs", required=True, type=Path, help="the jobs file (TOML [[jobs]] tables)")
    scheduler.add_argument(
        "--check", action="store_true", help="validate the file, print each job's next ticks (JSON), exit"
    )
    scheduler.add_argument("--count", type=int, default=5, help="next ticks shown by --check (1-1000)")
    scheduler.add_argument("--after", help="--check: list ticks after this ISO 8601 instant (default now)")
    scheduler.add_argument(
        "--shutdown-grace",
        type=float,
        help="on SIGTERM, seconds running jobs may take before they are terminated "
        "(env MONITOR_SCHEDULER_SHUTDOWN_GRACE, default 30)",
    )
    scheduler.add_argument(
        "--liveness-interval",
        type=float,
        help="seconds between pings of the scheduler's own liveness check "
        "(env MONITOR_SCHEDULER_LIVENESS_INTERVAL, default 60)",
    )


def worker(args: argparse.Namespace) -> int:
    """``monitor evaluate`` / ``monitor notify``: one loop until SIGTERM (exit 0)."""
    # SIGTERM cancels the worker: leases are released and the engine disposed, then exit 0.
    with contextlib.suppress(asyncio.CancelledError):
        asyncio.run(_worker(settings_for(args), args.command))
    return 0


async def _worker(settings: Settings, role: str) -> None:
    from monitor.domain.clock import SystemClock
    from monitor.notify.apprise import AppriseNotifier
    from monitor.notify.egress import install_egress_guard
    from monitor.storage.engine import make_engine, migrate
    from monitor.workers.evaluator import run_evaluator
    from monitor.workers.notifier import run_notifier

    main_task = asyncio.current_task()
    if main_task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    engine = make_engine(settings.database_url)
    try:
        await migrate(engine)
        # as the app's lifespan: what lives as long as the process stays out of the cyclic
        # collector, whose full passes over it cost a sweep of 10 000 checks a sixth of its time
        gc.collect()
        gc.freeze()
        if role == "evaluate":
            from monitor.services.retention import run_retention

            retention = asyncio.create_task(run_retention(engine, settings, SystemClock()), name="retention")
            try:
                await run_evaluator(engine, settings, SystemClock())
            finally:
                retention.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await retention
        else:
            install_egress_guard()  # this process sends: guard every connect before the first one
            async with AppriseNotifier(
                allow_private_targets=settings.allow_private_targets, max_workers=settings.notify_concurrency
            ) as notifier:
                await run_notifier(engine, notifier, settings, SystemClock())
    finally:
        await engine.dispose()


def scheduler(args: argparse.Namespace) -> int:
    """``monitor scheduler --jobs FILE``: run the jobs (``--check``: print their next ticks, exit)."""
    from monitor import scheduler

    jobs = scheduler.load_jobs(args.jobs)
    if args.check:
        after = datetime.now(UTC)
        if args.after:
            after = scheduler.parse_after(args.after)
        print(json.dumps(scheduler.next_ticks_report(jobs, after, args.count), indent=2))
        problems = scheduler.executable_problems(jobs)
        for problem in problems:
            print(json.dumps({"error": problem}), file=sys.stderr)
        return 1 if problems else 0
    settings = settings_for(args)
    asyncio.run(
        scheduler.serve(
            settings,
            jobs,
            shutdown_grace=or_setting(args.shutdown_grace, settings.scheduler_shutdown_grace),
            liveness_interval=or_setting(args.liveness_interval, settings.scheduler_liveness_interval),
        )
    )
    return 0
