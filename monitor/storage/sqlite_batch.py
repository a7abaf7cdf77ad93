"""A SQLite write transaction run whole in one worker-thread call.

aiosqlite runs every driver call (cursor, execute, fetch, close, begin, commit) in its
connection's thread and hands the result back to the event loop: three or four thread hops per
statement, about a hundred per ingest batch, which cost more than the SQL itself. Here the whole
transaction — ``BEGIN IMMEDIATE``, every statement, ``COMMIT`` — runs in one call to a worker
thread on a synchronous (pysqlite) connection to the same file, with the same connection
options (:func:`monitor.storage.engine.sqlite_options`): the same locking and durability, one
hop.

The work is the same coroutine the asynchronous path awaits: it is handed a connection whose
``execute`` is a coroutine that completes at once, and driven to its end in the thread without
an event loop. It must therefore await nothing but the storage (ports and the storage functions
taking a connection); awaiting anything else raises :class:`RuntimeError` and rolls back.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar, cast

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from monitor.storage.engine import sqlite_options

T = TypeVar("T")

_engines: weakref.WeakKeyDictionary[Engine, Engine] = weakref.WeakKeyDictionary()
_engines_lock = threading.Lock()


def runs_in_thread(engine: AsyncEngine) -> bool:
    """Whether :func:`run_in_thread` applies: a SQLite database in a file (not in memory,
    which a second connection would not see)."""
    url = engine.url
    if url.get_backend_name() != "sqlite":
        return False
    database = url.database or ""
    return database not in ("", ":memory:") and url.query.get("mode") != "memory"


async def run_in_thread(engine: AsyncEngine, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
    """Run ``work(conn)`` in one write transaction in a worker thread; its result once committed.

    Args:
        engine: the async engine of a SQLite file (:func:`runs_in_thread`).
        work: a coroutine function of the transaction's connection that awaits only statements.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: a statement or the commit failed (nothing was stored).
        RuntimeError: ``work`` awaited something that is not a statement.
    """
    sync_engine = _sync_engine(engine)
    if _inline:
        return _transaction(sync_engine, work)
    return await asyncio.to_thread(_transaction, sync_engine, work)


_inline = False


def run_inline() -> None:
    """From now on, :func:`run_in_thread` runs each transaction in the calling thread, blocking
    it: for a process that does nothing but store (``monitor.workers.ingest_process``), where a
    thread hop per transaction buys nothing. Its callers then never suspend."""
    global _inline
    _inline = True


def _transaction(sync_engine: Engine, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
    with sync_engine.begin() as sync:
        # the stores type their connection as AsyncConnection; this one offers what they call
        return _drive(work(cast(AsyncConnection, _AwaitableConnection(sync))))


def _drive(awaitable: Awaitable[T]) -> T:
    """Run a coroutine that never suspends to its end, without an event loop."""
    coro = cast(Coroutine[Any, Any, T], awaitable)
    try:
        coro.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coro.close()
    raise RuntimeError("a threaded SQLite transaction awaited something other than a statement")


def _sync_engine(engine: AsyncEngine) -> Engine:
    """The pysqlite engine on ``engine``'s file, made once and disposed with ``engine``."""
    with _engines_lock:
        found = _engines.get(engine.sync_engine)
        if found is not None:
            return found
        sync = create_engine(
            engine.url.set(drivername="sqlite+pysqlite"),
            pool_size=1,
            max_overflow=4,
            connect_args={"check_same_thread": False},
        )
        sqlite_options(sync, poll_begin=True)
        _engines[engine.sync_engine] = sync

        def _dispose(_engine: Engine) -> None:
            sync.dispose()

        event.listen(engine.sync_engine, "engine_disposed", _dispose)
        return sync


class _AwaitableConnection:
    """A synchronous connection behind the coroutine methods the stores call on a connection."""

    def __init__(self, sync: Connection) -> None:
        self.sync_connection = sync
        self.dialect = sync.dialect

    async def execute(self, statement: Any, parameters: Any = None, **kwargs: Any) -> Any:
        return self.sync_connection.execute(statement, parameters, **kwargs)

    async def exec_driver_sql(self, statement: str, parameters: Any = None, **kwargs: Any) -> Any:
        return self.sync_connection.exec_driver_sql(statement, parameters, **kwargs)

    async def scalar(self, statement: Any, parameters: Any = None, **kwargs: Any) -> Any:
        return self.sync_connection.scalar(statement, parameters, **kwargs)

    @asynccontextmanager
    async def begin_nested(self) -> AsyncIterator[None]:
        with self.sync_connection.begin_nested():
            yield
