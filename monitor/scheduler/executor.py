"""Running one tick of a job: a command (argv or ``sh -c``) or an HTTP call (DESIGN §8).

A command runs in a session of its own (``start_new_session``), so terminating a run
(``kill_after``, ``Replace``, shutdown) signals the whole process group — ``sh -c "a; b"``
included: SIGTERM first, SIGKILL after :data:`TERMINATE_GRACE`. Its stdout and stderr are read
as they come into a bounded buffer keeping the last :data:`OUTPUT_TAIL` bytes, which becomes the
finish ping's body (the monitor keeps the first bytes of a body, so the client sends the tail).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import httpx

from monitor.domain import schedules
from monitor.domain.jobs import Job

OUTPUT_TAIL = 100_000
"""Bytes of a run's output kept for the finish ping (the monitor's default body limit)."""
TERMINATE_GRACE = 5.0
"""Seconds between SIGTERM and SIGKILL when a run is terminated."""
HTTP_TIMEOUT = 30.0
"""Seconds an HTTP job may take by default (its ``[jobs.http] timeout``)."""
TIMED_OUT = 124
"""Exit status of a run stopped by ``kill_after``, whatever its own (as ``timeout(1)`` reports)."""
TERMINATED = 128 + signal.SIGTERM
"""Exit status of a run terminated (``Replace``, shutdown) that exited on the SIGTERM by itself;
one killed by a signal reports ``128 + signal``."""
SCRUBBED = ("MONITOR_API_KEY", "MONITOR_DATABASE_URL")
"""The scheduler's own secrets, not passed on to jobs (a job's ``env`` may set them)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunContext:
    """What a run is told about itself (its environment, DESIGN §8)."""

    job: str
    tick: datetime
    run_id: str
    token: int
    attempt: int

    @property
    def idempotency_key(self) -> str:
        """``<job>:<tick>``: the same for every attempt, for the job's own side effects."""
        return f"{self.job}:{schedules.format_utc(self.tick)}"

    def environment(
        self, job_env: Mapping[str, str], base: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The run's environment: ``base`` (default the scheduler's, minus its secrets), the
        job's ``env``, then ``MONITOR_SCHEDULED_TIME``, ``MONITOR_RUN_ID``,
        ``MONITOR_IDEMPOTENCY_KEY``, ``MONITOR_FENCING_TOKEN`` and ``MONITOR_ATTEMPT``."""
        env = {k: v for k, v in (os.environ if base is None else base).items() if k not in SCRUBBED}
        env.update(job_env)
        env.update(
            {
                "MONITOR_SCHEDULED_TIME": schedules.format_utc(self.tick),
                "MONITOR_RUN_ID": self.run_id,
                "MONITOR_IDEMPOTENCY_KEY": self.idempotency_key,
                "MONITOR_FENCING_TOKEN": str(self.token),
                "MONITOR_ATTEMPT": str(self.attempt),
            }
        )
        return env


@dataclass(kw_only=True, slots=True)
class Outcome:
    """How a run ended: ``exit_status`` 0-255 (a signal N is 128 + N, as shells report it),
    the tail of its output, its duration in seconds, and whether it was terminated."""

    exit_status: int
    output: bytes
    duration: float
    terminated: str | None = None


@dataclass(kw_only=True, slots=True, eq=False)
class Execution:
    """A run in progress; :meth:`terminate` ends it early (``Replace``, shutdown)."""

    context: RunContext
    process: asyncio.subprocess.Process | None = None
    task: asyncio.Task[Outcome] | None = None
    terminated: str | None = None
    _tail: bytearray = field(default_factory=bytearray)

    async def terminate(self, reason: str) -> None:
        """SIGTERM the run's process group, SIGKILL after :data:`TERMINATE_GRACE`; cancel an HTTP call."""
        self.terminated = self.terminated or reason
        proc = self.process
        if proc is None:
            if self.task is not None:
                self.task.cancel()
            return
        if proc.returncode is not None:
            return
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), TERMINATE_GRACE)
        except TimeoutError:
            _signal_group(proc.pid, signal.SIGKILL)


def _signal_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def _exit_status(returncode: int) -> int:
    return 128 + (-returncode) if returncode < 0 else min(returncode, 255)


def _keep_tail(buffer: bytearray, chunk: bytes) -> None:
    buffer += chunk
    if len(buffer) > OUTPUT_TAIL:
        del buffer[: len(buffer) - OUTPUT_TAIL]


async def run_command(
    execution: Execution, argv: tuple[str, ...], env: Mapping[str, str], kill_after: timedelta | None
) -> Outcome:
    """Run ``argv`` to its end (or until ``kill_after``); never raises for the job's own failure.

    A command that cannot be started (missing executable) ends with exit status 127 and the
    error as output, as a shell reports it.
    """
    started = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as error:
        return Outcome(exit_status=127, output=f"{error}\n".encode(), duration=time.monotonic() - started)
    execution.process = proc
    tail = execution._tail

    async def read() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            _keep_tail(tail, chunk)

    reader = asyncio.create_task(read())
    timed_out = False
    try:
        if kill_after is None:
            await proc.wait()
        else:
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), kill_after.total_seconds())
            except TimeoutError:
                timed_out = True
                await execution.terminate(f"kill_after {kill_after.total_seconds():g}s")
                await proc.wait()
    except asyncio.CancelledError:
        # the scheduler is going away hard: do not leave the job running unreported
        _signal_group(proc.pid, signal.SIGKILL)
        raise
    finally:
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            # a grandchild may hold the pipe open after the group leader exits
            await asyncio.wait_for(reader, 1.0)
        if not reader.done():
            reader.cancel()
    output = bytes(tail)
    if execution.terminated:
        output += f"\n[monitor scheduler: terminated: {execution.terminated}]\n".encode()
    assert proc.returncode is not None
    status = _exit_status(proc.returncode)
    if timed_out:
        status = TIMED_OUT  # whatever the job made of the SIGTERM: it did not finish in time
    elif execution.terminated and proc.returncode >= 0:
        status = TERMINATED  # it exited on our SIGTERM: its work was cut short
    return Outcome(
        exit_status=status,
        output=output[-OUTPUT_TAIL:],
        duration=time.monotonic() - started,
        terminated=execution.terminated,
    )


async def run_http(execution: Execution, job: Job, env: Mapping[str, str]) -> Outcome:
    """Make the job's HTTP call; 2xx is exit status 0, anything else (or an error) 1.

    The request carries ``Idempotency-Key: <job>:<tick>`` and ``X-Monitor-Fencing-Token``
    unless the job's headers set them.
    """
    assert job.http is not None
    call = job.http
    started = time.monotonic()
    headers = {
        "Idempotency-Key": execution.context.idempotency_key,
        "X-Monitor-Fencing-Token": str(execution.context.token),
        **call.headers,
    }
    timeout = min(call.timeout, job.kill_after.total_seconds()) if job.kill_after else call.timeout
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.request(call.method, call.url, headers=headers, content=call.body)
        body = f"HTTP {response.status_code}\n".encode() + response.content[-OUTPUT_TAIL:]
        status = 0 if response.is_success else 1
    except httpx.HTTPError as error:
        body, status = f"{type(error).__name__}: {error}\n".encode(), 1
    except asyncio.CancelledError:
        if execution.terminated is None:
            raise
        body, status = f"[monitor scheduler: terminated: {execution.terminated}]\n".encode(), 143
    return Outcome(
        exit_status=status,
        output=body[-OUTPUT_TAIL:],
        duration=time.monotonic() - started,
        terminated=execution.terminated,
    )


async def execute(execution: Execution, job: Job, base_env: Mapping[str, str] | None = None) -> Outcome:
    """Run one tick of ``job`` as described by ``execution.context``."""
    env = execution.context.environment(job.env, base_env)
    if job.command is not None:
        return await run_command(execution, job.command, env, job.kill_after)
    return await run_http(execution, job, env)
