"""The scheduler on PostgreSQL after a stall that outlived its sessions (DESIGN §8).

A replica stopped (SIGSTOP, a frozen VM) for longer than its engine's
``idle_in_transaction_session_timeout`` (the lease TTL) while one of its transactions was open
finds, when it runs again, that the server ended that session: the transaction's next
statement or its COMMIT fails (asyncpg ``InternalClientError: cannot switch to state 12;
another operation (2) is in progress`` when the socket's close is not seen yet). The stall is
made here by blocking the scheduler's event loop (``time.sleep``: nothing reads the sockets,
exactly as when the process is stopped) right after the fence check of a run's spawn, so the
fence transaction is the one left open; the run's own process is not stopped.

Real PostgreSQL, real sessions ended by the server, the real :class:`Scheduler`. Also: a
``kill -9``-ed replica whose zombie its supervisor has not reaped yet is dead, not alive.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text

from monitor.domain.clock import SystemClock
from monitor.domain.jobs import parse_job
from monitor.scheduler.runner import Scheduler, holder_dead
from monitor.storage import claims
from monitor.storage.engine import make_engine, session_lost
from tests.integration.test_scheduler_claims import RecordingReporter

TTL = 0.6
STALL = 4 * TTL

POSTGRES = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)


class FenceStaller:
    """Blocks the event loop for ``STALL`` seconds once, right after the fence check of the
    first run spawned after :meth:`arm` (the statement after a ``started`` record that reads
    the lease row ``FOR SHARE``): the loop runs the blocker at the spawn's first await, while
    the fence transaction is open and idle on the server."""

    def __init__(self) -> None:
        self.armed = False
        self.after_start = False
        self.stalled_at: float | None = None

    def arm(self) -> None:
        self.armed = True

    def __call__(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not self.armed:
            return
        if statement.startswith("UPDATE job_claims") and "started_at" in statement:
            self.after_start = True
        elif self.after_start and "FOR SHARE" in statement:
            self.armed = False
            self.stalled_at = time.monotonic()
            asyncio.get_running_loop().call_soon(time.sleep, STALL)


@pytest.fixture
def pg_url(database_url: str) -> Iterator[str]:
    yield database_url


@POSTGRES
async def test_a_stall_that_outlives_the_fence_session_costs_the_lease_cleanly_and_no_run(
    pg_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="monitor")
    out = tmp_path / "runs.txt"
    job = parse_job(
        {
            "name": "stall",
            "schedule": "* * * * * *",
            "dialect": "seconds",
            "command": f'echo "$MONITOR_SCHEDULED_TIME $MONITOR_FENCING_TOKEN" >> {out}',
        },
        0,
    )
    # as monitor.scheduler.serve makes it: the server ends a transaction idle for a TTL
    engine = make_engine(pg_url, pool_size=3, idle_in_transaction_timeout=TTL)
    staller = FenceStaller()
    event.listen(engine.sync_engine, "after_cursor_execute", staller)
    reporter = RecordingReporter()
    scheduler = Scheduler(
        engine, [job], SystemClock(), reporter, lease_ttl=timedelta(seconds=TTL), holder="stall:1"
    )
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop, shutdown_grace=5))

    def runs() -> list[list[str]]:
        return [line.split() for line in out.read_text().splitlines()] if out.exists() else []

    async def until(probe: Any, within: float, what: str) -> Any:
        deadline = time.monotonic() + within
        while not (found := probe()):
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.05)
        return found

    try:
        await until(runs, 10, "a first run")
        staller.arm()
        await until(lambda: staller.stalled_at is not None, 10, "the stall")
        woke = time.monotonic()
        first_token = int(runs()[0][1])
        # it goes on: later ticks run again, under a newer token (the lease was lost and taken
        # again on fresh sessions). The run spawned inside the stalled fence transaction keeps
        # the old token, and its line may be written after the stall, so the newer run is
        # looked for by its token, not taken as the next line.
        later = await until(
            lambda: [r for r in runs() if int(r[1]) != first_token], 10, "a run under a newer token"
        )
        assert int(later[0][1]) > first_token, runs()
        await asyncio.sleep(0.5)
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
        await engine.dispose()
    print(f"first run after the stall {time.monotonic() - woke:.2f}s after waking")
    # the run spawned inside the stalled fence transaction is a run: reported, its end recorded
    stalled_tick = next(e[2] for e in reporter.of("start") if e[2] > reporter.of("start")[0][2])
    assert any(e[2] == stalled_tick for e in reporter.of("finish")), reporter.events
    rows = {c.tick: c for c in await claims_of(pg_url)}
    assert rows[stalled_tick].state is claims.ClaimState.FINISHED, rows[stalled_tick]
    assert not [c for c in rows.values() if c.state is claims.ClaimState.STARTED], rows
    # the lease was lost in one clear line, and nothing was logged with a traceback
    lost = [r for r in caplog.records if getattr(r, "action", None) == "lease_lost"]
    assert lost, caplog.text
    tracebacks = [r for r in caplog.records if r.exc_info and r.name.startswith("monitor")]
    assert not tracebacks, [r.getMessage() for r in tracebacks]


def block(seconds: float) -> None:
    """Hold the event loop's thread, as a stopped process does."""
    time.sleep(seconds)


async def claims_of(url: str) -> list[claims.Claim]:
    engine = make_engine(url)
    try:
        return await claims.list_claims(engine, "stall")
    finally:
        await engine.dispose()


@POSTGRES
async def test_a_transaction_whose_session_the_server_ended_during_a_stall_is_a_lost_session(
    pg_url: str,
) -> None:
    """The storage side alone: the statement after the stall fails, the failure reads as a lost
    session, and the very next checkout (before the loop saw the socket close) works."""
    engine = make_engine(pg_url, pool_size=1, idle_in_transaction_timeout=0.3)
    errors: list[BaseException] = []

    async def holder() -> None:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 2"))  # a prepared statement, as the scheduler's are
            await conn.rollback()
        try:
            async with engine.begin() as conn:
                await conn.execute(text("SELECT 1"))
                await asyncio.sleep(0.2)  # due while the loop is blocked: runs first on waking
                await conn.execute(text("SELECT 2"))
        except Exception as error:
            errors.append(error)
        async with engine.begin() as conn:
            assert (await conn.execute(text("SELECT 3"))).scalar_one() == 3

    async def stall() -> None:
        await asyncio.sleep(0.1)
        block(1.0)  # the process is stopped: nothing reads the socket

    try:
        await asyncio.gather(holder(), stall())
    finally:
        await engine.dispose()
    (error,) = errors
    assert session_lost(error), repr(error)


def test_a_killed_replica_not_reaped_yet_is_dead() -> None:
    """A supervisor that has not waited for a ``kill -9``-ed replica yet leaves its zombie: the
    successor must close its runs at once (they died with it), not count them running."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        holder = f"{socket.gethostname()}:{child.pid}"
        assert not holder_dead(holder)
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "no zombie"
            time.sleep(0.01)
        assert holder_dead(holder)
    finally:
        child.kill()
        child.wait()
