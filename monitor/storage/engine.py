"""Engines and migrations: SQLite (aiosqlite, the embedded default) and PostgreSQL (asyncpg)."""

from __future__ import annotations

import logging
import sqlite3
import time
from importlib import resources
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import event, text
from sqlalchemy.engine import Connection, Engine, ExceptionContext
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

logger = logging.getLogger(__name__)

MIGRATION_LOCK_KEY = 7_245_913_001
"""``pg_advisory_xact_lock`` key under which replicas starting together migrate once."""


SQLITE_FOLD = "monitor_fold"
"""The SQLite function folding a string's case as ``str.lower`` does (SQLite's ``lower()`` only
folds ASCII); the dashboard's name search compares with it."""


def _fold(value: object) -> object:
    return value.lower() if isinstance(value, str) else value


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def make_engine(
    url: str, *, pool_size: int = 10, idle_in_transaction_timeout: float | None = None
) -> AsyncEngine:
    """An async engine for ``url``.

    SQLite: WAL journal, ``synchronous=FULL`` (an acknowledged ping survives a power cut),
    a 30 s busy timeout and foreign keys on. PostgreSQL: an asyncpg pool.

    Args:
        url: SQLAlchemy async URL.
        pool_size: PostgreSQL pool size (and as many overflow connections).
        idle_in_transaction_timeout: PostgreSQL only: the pool's sessions'
            ``idle_in_transaction_session_timeout``, seconds. The evaluator sets it to the
            lease TTL, so the server ends a stalled holder's open (fenced) transaction and a new
            holder is never kept waiting longer (DESIGN §6).

    Raises:
        sqlalchemy.exc.ArgumentError: the URL is not a usable SQLAlchemy async URL.

    Long because the engine's options are set per dialect, each with the reason it needs.
    """
    if is_sqlite(url):
        # A pool keeps connections (and aiosqlite's thread per connection) across transactions:
        # opening one per group-commit batch cost more than the batch's fsync.
        engine = create_async_engine(url, pool_size=5, max_overflow=10)
        sqlite_options(engine.sync_engine)
        return engine
    # instants are timestamptz, bound and read as aware UTC; a session in UTC also reads any
    # timestamp without zone (a cast, a literal) as UTC, whatever the server's own TimeZone
    server_settings = {"TimeZone": "UTC"}
    if idle_in_transaction_timeout is not None:
        server_settings["idle_in_transaction_session_timeout"] = str(
            max(1, round(idle_in_transaction_timeout * 1000))
        )
    connect_args: dict[str, Any] = {"server_settings": server_settings}
    # LIFO: the connection used last is used again, so the few a loop needs keep their prepared
    # statements warm (asyncpg prepares per connection) instead of taking turns through the pool
    engine = create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_use_lifo=True,
        connect_args=connect_args,
    )
    ping_when_idle(engine, PING_IDLE_AFTER)
    event.listen(engine.sync_engine, "handle_error", _lost_sessions_are_disconnects)
    return engine


PING_IDLE_AFTER = 0.1
"""Seconds a pooled PostgreSQL connection may have been idle and still be handed out unpinged.
No server restart fits in this (stopping and starting take longer), so a connection that sat in
the pool through one is always pinged."""


def ping_when_idle(engine: AsyncEngine, idle_after: float) -> None:
    """Ping a pooled connection at checkout only if it sat idle ``idle_after`` seconds or more
    (monotonic); a dead one is replaced before it is used.

    SQLAlchemy's ``pool_pre_ping`` pings at every checkout: with asyncpg that is three round
    trips (``BEGIN``, ``;``, ``ROLLBACK``) before each transaction, about 0.35 ms on loopback,
    where an ingest batch's transaction is ten. A connection handed back a moment ago has not
    seen its server restart; one that a stall or a restart cost its session while in use fails
    its transaction, which ``handle_error`` turns into a disconnect that replaces the pool's
    connections (:func:`_lost_sessions_are_disconnects`). The pessimistic check on checkout is
    SQLAlchemy's documented pattern: raising ``DisconnectionError`` makes the pool reconnect and
    retry.
    """
    pool = engine.sync_engine.pool

    @event.listens_for(pool, "connect")
    def _fresh(_dbapi_connection: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(pool, "checkin")
    def _idle(_dbapi_connection: Any, record: Any) -> None:
        if record is not None:
            record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(pool, "checkout")
    def _ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get(_IDLE_SINCE)
        if since is not None and time.monotonic() - since < idle_after:
            return
        try:
            dbapi_connection.ping()
        except Exception as error:
            raise DisconnectionError(f"pooled connection is gone: {error}") from error


_IDLE_SINCE = "monitor_idle_since"


TERMINATED_SESSION_STATES = frozenset({"57P01", "57P02", "57P03", "57P05", "25P03"})
"""SQLSTATEs with which the server ends a session: ``admin_shutdown``, ``crash_shutdown``,
``cannot_connect_now``, ``idle_session_timeout``, ``idle_in_transaction_session_timeout``
(class ``08``, connection exceptions, counts too)."""


def _session_gone(error: BaseException | None) -> bool:
    """Whether ``error`` (or what it wraps) says the PostgreSQL session can no longer be used.

    asyncpg's ``InternalClientError`` ("cannot switch to state 12; another operation (2) is in
    progress") is what a connection says when the server ended its session while the process
    could not read (a stall: SIGSTOP, a frozen VM) and the next statement went out before the
    socket's close was seen: the protocol is stuck waiting for a reply that never comes."""
    seen = 0
    while error is not None and seen < 5:
        if isinstance(error, asyncpg.InternalClientError | asyncpg.ConnectionDoesNotExistError):
            return True
        if isinstance(error, asyncpg.InterfaceError) and "connection is closed" in str(error):
            return True
        if isinstance(error, asyncpg.PostgresError):
            state = str(getattr(error, "sqlstate", "") or "")
            if state in TERMINATED_SESSION_STATES or state.startswith("08"):
                return True
        if isinstance(error, ConnectionError):
            return True
        error = error.__cause__
        seen += 1
    return False


def _lost_sessions_are_disconnects(context: ExceptionContext) -> None:
    """``handle_error``: a session the server ended is a disconnect, whatever the socket says
    yet, so SQLAlchemy invalidates the connection (and the pool's older ones, which the same
    stall may have cost their sessions too) instead of checking it back in with its protocol
    out of step."""
    if not context.is_disconnect and _session_gone(context.original_exception):
        context.is_disconnect = True


def session_lost(error: BaseException) -> bool:
    """Whether ``error``, raised by a storage call, means the database session was lost
    (PostgreSQL ended it, the socket closed, the connection was invalidated): the transaction
    did not commit, and the next call gets a fresh connection. ``False`` for SQLite and for any
    other failure."""
    if isinstance(error, DBAPIError) and error.connection_invalidated:
        return True
    return _session_gone(error)


TOO_MANY_CONNECTIONS = "53300"
"""PostgreSQL's ``too_many_connections``: the server is there but takes no more sessions."""

CONCURRENCY_FAILURES = frozenset({"40P01", "40001"})
"""PostgreSQL's ``deadlock_detected`` and ``serialization_failure``: the transaction was rolled
back for another one's sake, and the same request may succeed when retried."""


def concurrency_failure(error: BaseException) -> bool:
    """Whether ``error`` (or what it wraps) is PostgreSQL rolling the transaction back because
    of a concurrent one (:data:`CONCURRENCY_FAILURES`): nothing of it was stored, and a retry
    may succeed. ``False`` for SQLite, whose writers are serialised by ``BEGIN IMMEDIATE``."""
    return any(_sqlstate(seen) in CONCURRENCY_FAILURES for seen in _causes(error))


def _causes(error: BaseException) -> list[BaseException]:
    """``error`` and what it wraps (``__cause__``), at most 5 links."""
    chain: list[BaseException] = []
    seen: BaseException | None = error
    while seen is not None and len(chain) < 5:
        chain.append(seen)
        seen = seen.__cause__
    return chain


def _sqlstate(error: BaseException) -> str:
    """The SQLSTATE of a PostgreSQL error raised by asyncpg; ``""`` for any other error."""
    return str(getattr(error, "sqlstate", "") or "") if isinstance(error, asyncpg.PostgresError) else ""


def storage_unavailable(error: BaseException) -> bool:
    """Whether ``error`` says the database could not be used just then, rather than that the
    request was wrong: the session was lost (:func:`session_lost`), the server refused or
    could not take a connection (restarting, ``too_many_connections``, the socket refused, the
    host not found: asyncpg raises these ``OSError`` unwrapped), or the pool had no connection
    to give within its timeout. A retry may succeed; nothing of the failed transaction was
    stored. (An ``OSError`` is read as the database's: no request path does network I/O of its
    own; deliveries run in the notifier.)"""
    if session_lost(error):
        return True
    return any(
        _sqlstate(seen) == TOO_MANY_CONNECTIONS or isinstance(seen, OSError | PoolTimeout)
        for seen in _causes(error)
    )


def sqlite_options(sync_engine: Engine, *, poll_begin: bool = False) -> None:
    """Install on a SQLite engine (aiosqlite's ``sync_engine``, or a pysqlite engine on the same
    file) what every connection of the file needs: WAL, ``synchronous=FULL`` (an acknowledged
    ping survives a power cut), a 30 s busy timeout, foreign keys, and ``BEGIN IMMEDIATE``.

    ``poll_begin`` (a pysqlite engine used from worker threads only): ``BEGIN IMMEDIATE`` waits
    for another writer by retrying every :data:`BEGIN_POLL` seconds (up to the 30 s busy timeout)
    instead of through SQLite's busy handler, whose sleeps grow to 100 ms: a short transaction
    of another connection then delays the writer by about its length, not by the next step of
    the back-off. Never on the event loop's thread (it sleeps).
    """

    @event.listens_for(sync_engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        # WAL is a property of the file: the first connection to switch it wins, for good.
        # Switching needs an exclusive lock, which a connection opened while another one is
        # migrating the new file may not get: then it runs on, in WAL once the file is.
        cursor.execute("PRAGMA busy_timeout=2000")
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError:
            logger.info(
                "journal mode left to the connection that holds the file",
                extra={"action": "sqlite_wal_busy"},
            )
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()
        dbapi_connection.create_function(SQLITE_FOLD, 1, _fold, deterministic=True)

    @event.listens_for(sync_engine, "begin")
    def _begin_immediate(conn: Connection) -> None:
        # Take SQLite's write lock at BEGIN: a deferred transaction that reads and then
        # writes can fail with SQLITE_BUSY instead of waiting (the busy timeout does not
        # apply to lock upgrades).
        if poll_begin:
            _begin_polling(conn.connection.dbapi_connection)
        else:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    # pysqlite's own transaction handling must be off for BEGIN IMMEDIATE to work.
    @event.listens_for(sync_engine, "connect", insert=True)
    def _no_autobegin(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None


BEGIN_POLL = 0.0005
"""Seconds between two ``BEGIN IMMEDIATE`` attempts of a polling SQLite engine."""


def _begin_polling(dbapi_connection: Any) -> None:
    """``BEGIN IMMEDIATE``, retried every :data:`BEGIN_POLL` s while another connection writes."""
    cursor = dbapi_connection.cursor()
    deadline = time.monotonic() + 30
    cursor.execute("PRAGMA busy_timeout=0")
    try:
        while True:
            try:
                cursor.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as error:
                if getattr(error, "sqlite_errorname", "") != "SQLITE_BUSY" or time.monotonic() > deadline:
                    raise
            time.sleep(BEGIN_POLL)
    finally:
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()


def migrations_dir() -> Path:
    """Where the Alembic scripts are: inside the installed package, else the checkout's top level."""
    packaged = resources.files("monitor") / "_migrations"
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[2] / "migrations"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError("monitor's migrations are missing from the installation")


def _alembic_config(connection: Connection) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.attributes["connection"] = connection
    return config


def _upgrade(connection: Connection) -> None:
    from alembic import command

    command.upgrade(_alembic_config(connection), "head")


def _downgrade(connection: Connection, revision: str) -> None:
    from alembic import command

    command.downgrade(_alembic_config(connection), revision)


async def hold_migration_lock(conn: AsyncConnection) -> None:
    """Hold the migration's lock until ``conn``'s transaction ends: on PostgreSQL
    ``pg_advisory_xact_lock(MIGRATION_LOCK_KEY)``, which serialises replicas that migrate or
    bootstrap together; on SQLite nothing (``BEGIN IMMEDIATE`` already excludes other writers)."""
    if conn.dialect.name == "postgresql":
        await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})


async def migrate(engine: AsyncEngine) -> None:
    """Apply pending migrations (DESIGN §10); on PostgreSQL under ``pg_advisory_xact_lock``."""
    async with engine.begin() as conn:
        await hold_migration_lock(conn)
        await conn.run_sync(_upgrade)


async def downgrade(engine: AsyncEngine, revision: str = "base") -> None:
    """Revert migrations down to ``revision`` (tests use it to round-trip the schema)."""
    async with engine.begin() as conn:
        await conn.run_sync(_downgrade, revision)
