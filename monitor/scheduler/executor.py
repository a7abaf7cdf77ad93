"""Running one tick of a job: a command (argv or ``sh -c``) or an HTTP call (DESIGN §8).

A run happens in two steps: :func:`spawn` starts the command (nothing for an HTTP job), and
:func:`finish` waits for it (or makes the HTTP call). The scheduler spawns inside a fenced
transaction (its lease re-checked just before), and passes a monotonic *deadline*: the child
checks it between ``fork`` and ``exec`` and refuses to run (:class:`SpawnTooLate`) when the
scheduler was stalled past it, so a replica stopped (SIGSTOP) between its lease check and the
spawn never runs a tick its successor may own by then.

A command runs in a session of its own (``start_new_session``), so terminating a run
(``kill_after``, ``Replace``, shutdown) signals the whole process group — ``sh -c "a; b"``
included: SIGTERM first, SIGKILL after :data:`TERMINATE_GRACE`. A scheduler killed with SIGKILL
takes its running jobs with it — their whole process groups, whatever the command forked —
instead of leaving them running unreported (reparented to PID 1) while its successor starts the
next tick: the run registers its group with the process's guard (:mod:`monitor.scheduler.guard`)
between ``fork`` and ``exec``, and the guard kills the registered groups when the scheduler
dies; on Linux the command's own process also gets a parent-death signal
(``prctl(PR_SET_PDEATHSIG, SIGKILL)``). Its stdout and stderr are read
as they come into a bounded buffer keeping the last :data:`OUTPUT_TAIL` bytes, which becomes the
finish ping's body (the monitor keeps the first bytes of a body, so the client sends the tail).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import httpx

from monitor import parent_death
from monitor.domain.cron import schedules
from monitor.domain.jobs import Job
from monitor.scheduler import guard

OUTPUT_TAIL = 100_000
"""Bytes of a run's output kept for the finish ping (the monitor's default body limit)."""
TERMINATE_GRACE = 5.0
"""Seconds between SIGTERM and SIGKILL when a run is terminated."""
HTTP_TIMEOUT = 30.0
"""Seconds an HTTP job may take by default (its ``[jobs.http] timeout``)."""
TIMED_OUT = 124
"""Exit status of a run stopped by ``kill_after``, whatever its own (as ``timeout(1)`` reports)."""
NOT_FOUND = 127
"""Exit status of a run whose program does not exist (as a shell reports it)."""
CANNOT_EXECUTE = 126
"""Exit status of a run whose program exists but could not be executed (as a shell reports it)."""
TERMINATED = 128 + signal.SIGTERM
"""Exit status of a run terminated (``Replace``, shutdown) that exited on the SIGTERM by itself;
one killed by a signal reports ``128 + signal``."""
SCRUBBED = ("MONITOR_API_KEY", "MONITOR_DATABASE_URL")
"""The scheduler's own secrets, not passed on to jobs (a job's ``env`` may set them)."""


class SpawnTooLate(Exception):
    """The spawn deadline passed before the command could ``exec``: the scheduler was stalled
    between its lease check and the spawn, so the run did not start."""


def child_setup(
    deadline: float | None, parent: int, channel: socket.socket | None = None
) -> Callable[[], None]:
    """The function run in the child between ``fork`` and ``exec`` (``preexec_fn``).

    It asks for SIGKILL when the scheduler (``parent``) dies (Linux; checks the parent did not
    die already), raises when ``time.monotonic()`` is past ``deadline`` (``subprocess`` then
    reports the failure to the parent and nothing is executed), and registers its process group
    with the guard on ``channel`` (:func:`monitor.scheduler.guard.register`).
    """
    # the scheduler died before the signal was armed: the child exits as if it had been sent
    arm = parent_death.at_fork(parent, exit_status=128 + signal.SIGKILL)

    def setup() -> None:
        if arm is not None:
            arm()
        if deadline is not None and time.monotonic() > deadline:
            raise SpawnTooLate
        if channel is not None:
            guard.register(channel)

    return setup


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
    the tail of its output, its duration in seconds, whether it was terminated, and when it
    ended (``ended``, unix seconds; ``None``: when the outcome was made)."""

    exit_status: int
    output: bytes
    duration: float
    terminated: str | None = None
    ended: float | None = None


@dataclass(kw_only=True, slots=True, eq=False)
class Execution:
    """A run in progress; :meth:`terminate` ends it early (``Replace``, shutdown)."""

    context: RunContext
    process: asyncio.subprocess.Process | None = None
    task: asyncio.Task[Outcome] | None = None
    terminated: str | None = None
    started: float = 0.0
    """``time.monotonic()`` when the spawn began."""
    began: float = 0.0
    """``time.time()`` when the spawn began (unix seconds): the run's start a late start ping
    carries as ``started=``."""
    _tail: bytearray = field(default_factory=bytearray)

    async def terminate(self, reason: str) -> None:
        """SIGTERM the run's process group, SIGKILL after :data:`TERMINATE_GRACE`; cancel an HTTP call.

        A process that has already exited, its exit read or not, is left alone and not marked
        terminated: its own exit status stands."""
        proc = self.process
        if proc is None:
            self.terminated = self.terminated or reason
            if self.task is not None:
                self.task.cancel()
            return
        if exited(self):
            return
        self.terminated = self.terminated or reason
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), TERMINATE_GRACE)
        except TimeoutError:
            _signal_group(proc.pid, signal.SIGKILL)


def exited(execution: Execution) -> bool:
    """Whether the run's process has exited, read or not (``waitid`` with ``WNOWAIT`` leaves
    the exit status to the event loop's child watcher); an HTTP call: whether it is done."""
    proc = execution.process
    if proc is None:
        return execution.task is not None and execution.task.done()
    if proc.returncode is not None:
        return True
    try:
        found = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True  # already reaped
    return found is not None


def _signal_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def _exit_status(returncode: int) -> int:
    return 128 + (-returncode) if returncode < 0 else min(returncode, 255)


def _keep_tail(buffer: bytearray, chunk: bytes) -> None:
    buffer += chunk
    if len(buffer) > OUTPUT_TAIL:
        del buffer[: len(buffer) - OUTPUT_TAIL]


async def spawn_command(
    execution: Execution, argv: tuple[str, ...], env: Mapping[str, str], deadline: float | None = None
) -> Outcome | None:
    """Start ``argv`` (``execution.process``); an :class:`Outcome` when it cannot start.

    A command that cannot be started ends with the error as output and exit status 127
    (missing executable) or 126 (anything else: not executable, arguments past ``ARG_MAX``, a
    NUL in an argument or the environment), as a shell reports it.

    Raises:
        SpawnTooLate: ``time.monotonic()`` passed ``deadline`` before the command could exec.
    """
    runs = guard.shared()
    channel = runs.ready()
    execution.started = time.monotonic()
    execution.began = time.time()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=child_setup(deadline, os.getpid(), channel),
        )
    except subprocess.SubprocessError as error:
        # the only exception our preexec_fn raises is SpawnTooLate (subprocess reports any
        # preexec failure with this one type)
        if deadline is not None and time.monotonic() > deadline:
            raise SpawnTooLate from error
        return Outcome(exit_status=CANNOT_EXECUTE, output=f"{error}\n".encode(), duration=0.0)
    except OSError as error:
        # as a shell reports it: 127 for a program that is not there, 126 for one that is but
        # cannot be executed (permission, E2BIG, bad format …)
        status = NOT_FOUND if error.errno in (errno.ENOENT, errno.ENOTDIR) else CANNOT_EXECUTE
        return Outcome(
            exit_status=status, output=f"{error}\n".encode(), duration=time.monotonic() - execution.started
        )
    except Exception as error:
        # anything else subprocess refuses before the fork (a NUL in argv or env, a bad env
        # name: ValueError): the run still ends, as a failure the monitor hears of, instead of
        # escaping the round and leaving its claim started forever
        return Outcome(
            exit_status=CANNOT_EXECUTE,
            output=f"cannot execute {argv[0]!r}: {type(error).__name__}: {error}\n".encode(),
            duration=time.monotonic() - execution.started,
        )
    runs.spawned(proc.pid)
    execution.process = proc
    return None


async def wait_command(execution: Execution, kill_after: timedelta | None) -> Outcome:
    """Wait for the spawned command's end (or stop it at ``kill_after``); never raises for the
    job's own failure."""
    proc = execution.process
    assert proc is not None
    started = execution.started
    tail = execution._tail

    async def read() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            _keep_tail(tail, chunk)

    reader = asyncio.create_task(read())
    timed_out = False
    ended: tuple[float, float] | None = None
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
        if proc.returncode is not None:
            # the guard saw the exit even if this process was stopped then (SIGSTOP)
            ended = guard.shared().ended(proc.pid, started)
            guard.shared().exited(proc.pid)
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
    if ended is None:
        ended = (time.time(), time.monotonic())
    return Outcome(
        exit_status=status,
        output=output[-OUTPUT_TAIL:],
        duration=ended[1] - started,
        terminated=execution.terminated,
        ended=ended[0],
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


async def spawn(
    execution: Execution, job: Job, base_env: Mapping[str, str] | None = None, deadline: float | None = None
) -> Outcome | None:
    """Start one tick of ``job`` (a command; an HTTP job starts in :func:`finish`).

    Returns:
        ``None`` when started, or the :class:`Outcome` of a command that could not start.

    Raises:
        SpawnTooLate: ``deadline`` (``time.monotonic()``) passed before the command could exec.
    """
    if job.command is None:
        execution.started = time.monotonic()
        execution.began = time.time()
        return None
    env = execution.context.environment(job.env, base_env)
    return await spawn_command(execution, job.command, env, deadline)


async def finish(
    execution: Execution, job: Job, base_env: Mapping[str, str] | None = None, early: Outcome | None = None
) -> Outcome:
    """The end of a tick :func:`spawn` started (``early``: the outcome of a failed spawn)."""
    if early is not None:
        return early
    if job.command is not None:
        return await wait_command(execution, job.kill_after)
    return await run_http(execution, job, execution.context.environment(job.env, base_env))


async def execute(execution: Execution, job: Job, base_env: Mapping[str, str] | None = None) -> Outcome:
    """Run one tick of ``job`` as described by ``execution.context`` (spawn, then finish)."""
    early = await spawn(execution, job, base_env)
    return await finish(execution, job, base_env, early)
