"""``monitor scheduler --jobs FILE``: the bundled scheduler (DESIGN §8).

* :func:`load_jobs` reads and validates a jobs file (TOML ``[[jobs]]`` tables,
  :mod:`monitor.domain.jobs`).
* :func:`next_ticks_report` is what ``--check`` prints.
* :func:`serve` runs the loop of :mod:`monitor.scheduler.runner` until SIGTERM.

The planning rules are pure, in :mod:`monitor.domain.planning`; claims are
:mod:`monitor.storage.claims`; leases are :mod:`monitor.storage.leases` (``job-<name>``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import tomllib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from monitor.domain.clock import SystemClock
from monitor.domain.cron import schedules
from monitor.domain.errors import ValidationError
from monitor.domain.jobs import Job, parse_jobs
from monitor.settings import Settings

logger = logging.getLogger(__name__)


def load_jobs(path: Path) -> list[Job]:
    """Read and validate the jobs file at ``path``.

    Raises:
        ValidationError: the file cannot be read (field ``jobs``), is not TOML (the parser's
            message with line and column), or a job is invalid (``jobs[<i>].<key>: …``).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValidationError("jobs", f"cannot read {path}: {error}") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValidationError("jobs", f"{path} is not valid TOML: {error}") from None
    return parse_jobs(document)


def parse_after(text: str) -> datetime:
    """``--after``: an ISO 8601 instant with a UTC offset or ``Z``, as aware UTC.

    Raises:
        ValidationError: not ISO 8601, or no offset (field ``after``).
    """
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValidationError("after", f"{text!r} is not an ISO 8601 instant") from None
    if parsed.tzinfo is None:
        raise ValidationError("after", "needs a UTC offset or Z (e.g. 2026-03-29T00:00:00Z)")
    return parsed.astimezone(UTC)


def executable_problems(jobs: Sequence[Job], environ: Mapping[str, str] | None = None) -> list[str]:
    """``--check``: why a job's command could not be started, one ``jobs[<i>].command: …`` line
    per job whose program is missing or not executable.

    The program is ``argv[0]`` of an argv command, and the shell (``sh``) of a string command
    (what the string runs is the shell's business); a name without ``/`` is looked up on the
    ``PATH`` the run gets (the job's ``env`` PATH, else the scheduler's), a path must name an
    executable file.
    """
    environ = os.environ if environ is None else environ
    problems = []
    for index, job in enumerate(jobs):
        if job.command is None:
            continue
        program = job.command[0]
        search = job.env.get("PATH", environ.get("PATH", os.defpath))
        if "/" in program:
            if not (os.path.isfile(program) and os.access(program, os.X_OK)):
                what = "is not an executable file" if os.path.exists(program) else "does not exist"
                problems.append(f"jobs[{index}].command: {program} {what}")
        elif shutil.which(program, path=search) is None:
            problems.append(f"jobs[{index}].command: {program!r} is not found on PATH ({search})")
    return problems


MAX_CHECK_COUNT = 1000
"""Most next ticks ``--check --count`` lists per job."""


def next_ticks_report(jobs: Sequence[Job], now: datetime, count: int = 5) -> dict[str, Any]:
    """``--check``: every job with its schedule, run rules and its next ``count`` ticks after
    ``now``, each as ``{"utc": "…Z", "local": "…+02:00"}``, and the warnings ``monitor cron
    explain`` gives for it (DST changes among the listed ticks, the day-of-month OR trap …).

    Raises:
        ValidationError: ``count`` outside 1-:data:`MAX_CHECK_COUNT` (field ``count``).
    """
    if not 1 <= count <= MAX_CHECK_COUNT:
        raise ValidationError("count", f"must be between 1 and {MAX_CHECK_COUNT}, got {count}")
    from monitor.domain.cron.explain import explain

    out = []
    for job in jobs:
        zone = ZoneInfo(job.schedule.tz)
        ticks = job.schedule.next_ticks(now, count)
        warnings = explain(
            job.schedule.expression,
            dialect=job.schedule.dialect,
            tz=job.schedule.tz,
            count=min(count, 100),
            after=now,
        )["warnings"]
        out.append(
            {
                "name": job.name,
                "schedule": job.schedule.expression,
                "dialect": job.schedule.dialect.value,
                "tz": job.schedule.tz,
                "concurrency_policy": job.concurrency_policy.value,
                "catchup": job.catchup.value,
                "max_catchup": job.max_catchup,
                "kill_after": job.kill_after.total_seconds() if job.kill_after else None,
                "starting_deadline": (
                    job.starting_deadline.total_seconds() if job.starting_deadline else None
                ),
                "warnings": warnings,
                "next": [
                    {"utc": schedules.format_utc(t), "local": t.astimezone(zone).isoformat()} for t in ticks
                ],
            }
        )
    return {"jobs": out}


async def serve(
    settings: Settings,
    jobs: Sequence[Job],
    *,
    shutdown_grace: float = 30.0,
    liveness_interval: float = 60.0,
    stop: asyncio.Event | None = None,
    pre_spawn_delay: float = 0.0,
) -> None:
    """Run the scheduler until SIGTERM/SIGINT (or ``stop``), then shut down cleanly.

    Reads ``settings.database_url`` (claims, leases), ``settings.base_url`` and
    ``settings.api_key`` (checks and pings; without a key runs are not reported) and
    ``settings.lease_ttl``.

    ``pre_spawn_delay`` (seconds, testing aid; no setting or flag sets it) is passed to
    :class:`~monitor.scheduler.runner.Scheduler`: the failover tests run the scheduler through
    ``tests/support/stalling_scheduler.py`` to stall a replica between a run's start record and
    its spawn.

    Long because the scheduler's start, run and clean shutdown are one sequence whose steps share its state.
    """
    from monitor.scheduler.reporter import HttpReporter, NullReporter, Reporter
    from monitor.scheduler.runner import Scheduler
    from monitor.storage.engine import make_engine, migrate

    stop = stop or asyncio.Event()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per ping otherwise
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        # no signal handlers off the main thread (RuntimeError: tests run the scheduler in a
        # thread and set ``stop`` themselves) or on platforms without them (NotImplementedError)
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    engine = make_engine(settings.database_url)
    try:
        await migrate(engine)
    finally:
        await engine.dispose()
    # On PostgreSQL the server ends a fenced transaction left idle for a TTL (a stalled holder),
    # so a new holder is never kept waiting longer (as the evaluator's sweep engine, DESIGN §6).
    engine = make_engine(settings.database_url, pool_size=3, idle_in_transaction_timeout=settings.lease_ttl)
    reporter: Reporter
    if settings.api_key:
        reporter = HttpReporter(
            settings.base_url, settings.api_key, jobs, liveness_interval=liveness_interval
        )
    else:
        logger.warning(
            "MONITOR_API_KEY is not set: runs are not reported to the monitor",
            extra={"action": "reporting_disabled"},
        )
        reporter = NullReporter()
    scheduler = Scheduler(
        engine,
        jobs,
        SystemClock(),
        reporter,
        lease_ttl=timedelta(seconds=settings.lease_ttl),
        pre_spawn_delay=pre_spawn_delay,
    )

    async def liveness() -> None:
        while True:
            reporter.liveness()
            await asyncio.sleep(liveness_interval)

    pinger = asyncio.create_task(liveness(), name="scheduler-liveness")
    logger.info(
        "scheduler started: %d jobs, holder %s",
        len(jobs),
        scheduler.holder,
        extra={"action": "scheduler_started", "jobs": [j.name for j in jobs]},
    )
    try:
        await scheduler.run(stop, shutdown_grace=shutdown_grace)
    finally:
        pinger.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pinger
        await asyncio.to_thread(reporter.close, 10.0)
        await engine.dispose()
        logger.info("scheduler stopped", extra={"action": "scheduler_stopped"})
