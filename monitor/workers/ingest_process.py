"""Ping batches stored by a process of their own: the SQLite ingest writer of ``monitor serve``.

One ``monitor serve`` process answers HTTP on its event loop and, by default, stores its ping
batches in a worker thread (:class:`monitor.services.ingest.IngestWriter`). Both hold the one
interpreter lock, so the process never uses more than one core; on SQLite, where more API
processes cannot help (one file, one writer), the second core stayed idle (measured: 0.8 cores
busy of 2 at the most pings per second). Here the batches go to a child process that owns the
SQLite writes (``python -m monitor.workers.ingest_process``): the HTTP process parses and
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
import signal
import struct
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

from monitor.services.ingest import STORAGE_UNAVAILABLE, BatchIngest, PingAnswer, PingRequest
from monitor.settings import LOG_FORMAT, Settings
from monitor.storage import sqlite_batch
from monitor.storage.engine import make_engine

logger = logging.getLogger(__name__)

HEADER = struct.Struct(">I")
START_TIMEOUT = 60.0
"""Seconds the child may take to import and make its engine before it is given up on."""
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
    killed), is started again for the next batch; the batches it held are answered ``503``
    (the client retries: nothing acknowledged is lost, and a batch the child committed before
    dying is stored twice at worst, as when a process dies between its commit and its answer).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._process: asyncio.subprocess.Process | None = None
        self._failed: asyncio.subprocess.Process | None = None
        self._waiting: collections.deque[tuple[asyncio.Future[list[PingAnswer]], int]] = collections.deque()
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
            "monitor.workers.ingest_process",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(_frame(self.settings))
            await process.stdin.drain()
            ready = await asyncio.wait_for(_read_frame(process.stdout), START_TIMEOUT)
            if ready != "ready":
                raise RuntimeError(f"the ingest process did not start: {ready!r}")
        except (Exception, asyncio.CancelledError) as error:
            await _end(process)
            if isinstance(error, asyncio.IncompleteReadError):
                raise RuntimeError("the ingest process exited while starting") from None
            raise
        self._process = process
        self._reader = asyncio.create_task(self._read(process), name="ingest-process-reader")

    async def stop(self) -> None:
        """Close the child's stdin once its batches are answered; wait for it to exit (killed
        after :data:`STOP_TIMEOUT`)."""
        async with self._lock:
            if self._waiting:
                await asyncio.wait([f for f, _ in self._waiting], timeout=STOP_TIMEOUT)
            await self._end()

    async def __call__(
        self, requests: list[PingRequest], on_locked: Callable[[], None] | None = None
    ) -> list[PingAnswer]:
        """Store ``requests`` in the child; their answers, in order (``503`` if it failed)."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[list[PingAnswer]] = loop.create_future()
        async with self._lock:
            try:
                if self._process is None:
                    await self._end()  # the reader of a child that failed, if any
                    await self.start()
                process = self._process
                assert process is not None and process.stdin is not None
                self._waiting.append((answer, len(requests)))
                process.stdin.write(_frame(requests))
                await process.stdin.drain()
            except (OSError, RuntimeError) as error:
                self._fail(error)
                if not answer.done():
                    answer.set_result([STORAGE_UNAVAILABLE] * len(requests))
            else:
                overdue = loop.call_later(BATCH_TIMEOUT, self._overdue, process, answer)
                answer.add_done_callback(lambda _: overdue.cancel())
        if on_locked is not None:
            on_locked()
        return await answer

    async def _end(self) -> None:
        """End the child, if any (or the one that failed), and its reader."""
        for process in (self._process, self._failed):
            if process is not None:
                await _end(process)
        self._process = self._failed = None
        if self._reader is not None:
            await self._reader
            self._reader = None

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        """Answer the batches in flight in order, from the child's frames, until it exits."""
        assert process.stdout is not None
        try:
            while True:
                answers = await _read_frame(process.stdout)
                waiting, _ = self._waiting.popleft()
                if not waiting.done():
                    waiting.set_result(answers)
        except (OSError, EOFError, asyncio.IncompleteReadError) as error:
            if self._waiting:
                self._fail(error)

    def _overdue(self, process: asyncio.subprocess.Process, answer: asyncio.Future[list[PingAnswer]]) -> None:
        if not answer.done() and process.returncode is None:
            logger.error(
                "the ingest process left a batch unanswered for %.0f s: it is killed",
                BATCH_TIMEOUT,
                extra={"action": "ingest_process_stalled"},
            )
            process.kill()  # its reader sees the pipe close and answers its batches 503

    def _fail(self, error: BaseException) -> None:
        """Answer every batch in flight ``503`` and let the next batch start another child:
        this one died, stalled, or could not be reached."""
        logger.error(
            "the ingest process failed (%s); its batches are answered 503 and it is started again",
            str(error) or type(error).__name__,
            extra={"action": "ingest_process_failed"},
        )
        if self._process is not None:
            if self._process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self._process.kill()
            # ended, with its reader, before the next child starts
            self._failed, self._process = self._process, None
        while self._waiting:
            waiting, count = self._waiting.popleft()
            if not waiting.done():
                waiting.set_result([STORAGE_UNAVAILABLE] * count)


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


def main() -> None:
    """``python -m monitor.workers.ingest_process``: the child (started by :class:`IngestProcess`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
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


if __name__ == "__main__":
    main()
