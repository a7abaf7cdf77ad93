"""Ping batches stored by a process of their own: the SQLite ingest writer of ``monitor serve``.

One ``monitor serve`` process answers HTTP on its event loop and, by default, stores its ping
batches in a worker thread (:class:`monitor.services.ingest.IngestWriter`). Both hold the one
interpreter lock, so the process never uses more than one core; on SQLite, where more API
processes cannot help (one file, one writer), the second core stayed idle (measured: 0.8 cores
busy of 2 at the most pings per second). Here the batches go to a child process that owns the
SQLite writes (``python -m monitor.workers.ingest_child``): the HTTP process parses and
answers, the child judges and commits, each on a core of its own.

The protocol, over the child's stdin and stdout: frames of a 4-byte big-endian length and a
pickle. The parent sends :class:`~monitor.settings.Settings` once, the child answers ``"ready"``
once its engine is made; then each batch (a list of
:class:`~monitor.services.ingest.PingRequest`) is answered by its list of
:class:`~monitor.services.ingest.PingAnswer`, in order, after its commit. Pickles cross a pipe
between a process and the child it started, running the same code: nothing else writes to it.

The child ignores SIGINT and SIGTERM (a terminal's Ctrl-C reaches the whole process group) and
exits when its stdin closes: once the parent has drained its queue and stopped, or died.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import logging
import os
import pickle
import struct
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

from monitor.services.ingest import OK, BatchIngest, PingAnswer, PingRequest, stored
from monitor.settings import LOG_FORMAT, Settings
from monitor.storage import sqlite_batch
from monitor.storage.engine import make_engine
from monitor.storage.unit_of_work import Engine
from monitor.workers import ingest_child

logger = logging.getLogger(__name__)

HEADER = struct.Struct(">I")
START_TIMEOUT = 60.0
"""Seconds the child may take to import and make its engine before it is given up on."""
CHILD_FAILED = PingAnswer(503, "storage unavailable, retry", retry_after=1)
"""The answer to each ping of a batch the child did not answer (it died or stalled)."""
BATCH_TIMEOUT = 60.0
"""Seconds a batch may wait for its answer before the child is taken for stalled and killed:
twice SQLite's 30 s busy timeout, after which a transaction waiting for the file fails."""
STOP_TIMEOUT = 10.0
"""Seconds the child may take to finish its batch and exit once its stdin is closed."""


class IngestProcess:
    """The parent's side: a :data:`~monitor.services.ingest.BatchStore` backed by the child.

    Batches are written to the child in the order they are handed over and stored by it in
    that order, one transaction each (SQLite has one writer), so a batch counts as holding its
    checks (``on_locked``) once it is written: a later batch cannot overtake it. Several may be
    in flight, which keeps both processes busy: the child stores one while this process
    answers the one before and collects the next.

    A child that dies, or leaves a batch unanswered for :data:`BATCH_TIMEOUT` (it is then
    killed), is started again for the next batch. Each batch it held may or may not have
    committed: once the child has exited, the database says which of its pings are stored
    (:func:`monitor.services.ingest.stored`); those are answered ``200``, the others ``503``
    with ``Retry-After: 1`` (nothing of them is stored: the client's retry loses nothing and
    stores nothing twice).
    """

    def __init__(self, settings: Settings, engine: Engine) -> None:
        self.settings = settings
        self.engine = engine
        self._process: asyncio.subprocess.Process | None = None
        self._failed: asyncio.subprocess.Process | None = None
        self._waiting: collections.deque[asyncio.Future[list[PingAnswer] | None]] = collections.deque()
        self._reader: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    @property
    def pid(self) -> int | None:
        """The child's process id (``None`` before :meth:`start`, after :meth:`stop`, and once
        it failed, until the next batch starts another)."""
        return self._process.pid if self._process is not None else None

    async def start(self) -> None:
        """Start the child and wait until it is ready.

        Raises:
            RuntimeError: the child exited or did not get ready within :data:`START_TIMEOUT`.
        """
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "monitor.workers.ingest_child",
            str(os.getpid()),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            preexec_fn=ingest_child.armed_at_fork(os.getpid()),
        )
        try:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(_frame(self.settings))
            await asyncio.wait_for(process.stdin.drain(), START_TIMEOUT)
            ready = await asyncio.wait_for(_read_frame(process.stdout), START_TIMEOUT)
            if ready != "ready":
                raise RuntimeError(f"the ingest process did not start: {ready!r}")
        except (Exception, asyncio.CancelledError) as error:
            await _end(process)
            if isinstance(error, asyncio.IncompleteReadError):
                raise RuntimeError("the ingest process exited while starting") from None
            raise
        self._process = process
        # each child's batches in a queue of their own: its reader never answers another's
        self._waiting = collections.deque()
        self._reader = asyncio.create_task(self._read(process, self._waiting), name="ingest-process-reader")

    async def stop(self) -> None:
        """Close the child's stdin once its batches are answered; wait for it to exit (killed
        after :data:`STOP_TIMEOUT`)."""
        async with self._lock:
            if self._waiting:
                await asyncio.wait(list(self._waiting), timeout=STOP_TIMEOUT)
            await self._end()

    async def __call__(
        self, requests: list[PingRequest], on_locked: Callable[[], None] | None = None
    ) -> list[PingAnswer]:
        """Store ``requests`` in the child; their answers, in order (``503`` if it failed)."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[list[PingAnswer] | None] = loop.create_future()
        async with self._lock:
            try:
                if self._process is None:
                    await self._end()  # the child that failed, if any, and its reader
                    await self.start()
                process = self._process
                assert process is not None and process.stdin is not None
                self._waiting.append(answer)
                # armed before the write: a child that stopped reading also blocks the write
                overdue = loop.call_later(BATCH_TIMEOUT, self._overdue, process, answer)
                answer.add_done_callback(lambda _: overdue.cancel())
                process.stdin.write(_frame(requests))
                await process.stdin.drain()
            except (OSError, RuntimeError) as error:
                if self._process is not None:
                    self._fail(error)
                elif not self._failed:  # not a child failed meanwhile (stalled, or died): none started
                    logger.error(
                        "the ingest process could not be started: %s",
                        error,
                        extra={"action": "ingest_process_failed"},
                    )
                if not answer.done():
                    answer.set_result(None)
        if on_locked is not None:
            on_locked()
        answers = await answer
        return answers if answers is not None else await self._in_doubt(requests)

    async def _in_doubt(self, requests: list[PingRequest]) -> list[PingAnswer]:
        """The answers to a batch the child failed to answer: ``200`` for its pings the
        database holds (the child committed them before it ended), ``503`` for the others."""
        async with self._lock:  # the next child starts after the failed one was ended
            await self._end_failed()
        try:
            found = await stored(self.engine, requests)
        except Exception as error:  # the database cannot say: a retry may store a ping twice
            logger.error(
                "could not tell which pings of a failed batch are stored: %s",
                error,
                extra={"action": "ingest_process_in_doubt"},
            )
            return [CHILD_FAILED] * len(requests)
        return [OK if was_stored else CHILD_FAILED for was_stored in found]

    async def _end(self) -> None:
        """End the child, if any (and the one that failed), and its reader."""
        process, self._process = self._process, None
        if process is not None:
            await _end(process)
        await self._end_failed()

    async def _end_failed(self) -> None:
        """End the child that failed, if any (it was killed), and its reader."""
        process, self._failed = self._failed, None
        if process is not None:
            await _end(process)
        if self._reader is not None and (self._process is None or self._reader.done()):
            await self._reader
            self._reader = None

    async def _read(
        self,
        process: asyncio.subprocess.Process,
        waiting: collections.deque[asyncio.Future[list[PingAnswer] | None]],
    ) -> None:
        """Answer ``process``'s batches in order, from its frames, until it exits; a child that
        exits unasked (nothing in flight) is started again for the next batch, not failed."""
        assert process.stdout is not None
        try:
            while True:
                answers = await _read_frame(process.stdout)
                if not waiting:
                    return  # its batches were failed already: a stale answer, the child is ending
                future = waiting.popleft()
                if not future.done():
                    future.set_result(answers)
        except (OSError, EOFError, asyncio.IncompleteReadError) as error:
            if process is not self._process:
                return  # stopped, or failed already
            in_flight = bool(waiting)
            if in_flight:
                self._fail(error, log=False)
            else:
                self._failed, self._process = process, None
            # at once, so no batch is written to it meanwhile; then its exit status, for the log
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(process.wait()), 1.0)
            if in_flight:
                _log_failure(process, error)
            else:
                logger.warning(
                    "the ingest process exited (%s); another starts with the next batch",
                    _exit_of(process),
                    extra={"action": "ingest_process_exited"},
                )

    def _overdue(
        self, process: asyncio.subprocess.Process, answer: asyncio.Future[list[PingAnswer] | None]
    ) -> None:
        if not answer.done() and process.returncode is None and process is self._process:
            logger.error(
                "the ingest process left a batch unanswered for %.0f s: it is killed",
                BATCH_TIMEOUT,
                extra={"action": "ingest_process_stalled"},
            )
            self._fail(TimeoutError("stalled"))

    def _fail(self, error: BaseException, *, log: bool = True) -> None:
        """Mark every batch in flight in doubt (:meth:`_in_doubt` answers them) and let the
        next batch start another child: this one died, stalled, or could not be reached."""
        process = self._process
        if log:
            _log_failure(process, error)
        if process is not None:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()  # a stopped process too: its reader then sees the pipe close
            # ended, with its reader, before the next child starts
            self._failed, self._process = process, None
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():
                future.set_result(None)


def _log_failure(process: asyncio.subprocess.Process | None, error: BaseException) -> None:
    how = (
        _exit_of(process) if process is not None and process.returncode is not None else type(error).__name__
    )
    logger.error(
        "the ingest process failed (%s); its batches are answered from the database and another"
        " starts with the next",
        how,
        extra={"action": "ingest_process_failed"},
    )


def _exit_of(process: asyncio.subprocess.Process) -> str:
    code = process.returncode
    if code is None:
        return "still running"
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


def _frame(value: Any) -> bytes:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


async def _read_frame(stream: asyncio.StreamReader) -> Any:
    (size,) = HEADER.unpack(await stream.readexactly(HEADER.size))
    return pickle.loads(await stream.readexactly(size))


async def _end(process: asyncio.subprocess.Process) -> None:
    if process.stdin is not None:
        process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


def _read_blocking(stream: BinaryIO) -> Any:
    """The next frame of ``stream``, waiting for it.

    Raises:
        EOFError: the stream closed first.
    """
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        raise EOFError
    (size,) = HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


async def _serve(settings: Settings, requests: BinaryIO, answers: BinaryIO) -> None:
    """The child's loop: each batch read from ``requests`` is stored in its own transaction,
    then answered. (Storing the batches already waiting in one transaction measured slower:
    it ends the overlap of this process's work with the parent's.)"""
    # nothing else runs on this loop: each transaction runs in this thread, each read blocks it
    sqlite_batch.run_inline()
    engine = make_engine(settings.database_url)
    store = BatchIngest(engine, settings)
    gc.collect()
    gc.freeze()
    answers.write(_frame("ready"))
    answers.flush()
    try:
        while True:
            try:
                batch = _read_blocking(requests)
            except EOFError:
                return
            try:
                answers.write(_frame(await store(batch)))
                answers.flush()
            except BrokenPipeError:  # the API process is gone: nobody waits for the answers
                return
    finally:
        await engine.dispose()


def run_child() -> None:
    """The child's work, once :mod:`monitor.workers.ingest_child` has set it up: the settings
    from stdin, then batches until stdin closes."""
    requests = sys.stdin.buffer
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # nothing printed may reach the answers' pipe
    os.dup2(sys.stderr.fileno(), 1)
    try:
        settings = _read_blocking(requests)
    except EOFError:
        return
    logging.basicConfig(level=settings.log_level.upper(), stream=sys.stderr, format=LOG_FORMAT)
    asyncio.run(_serve(settings, requests, answers))
