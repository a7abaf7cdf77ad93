"""The unit of work: one transaction of one use case, and the storage ports bound to it.

A service function that is a use case opens one::

    async with UnitOfWork.begin(engine) as uow:    # a write: commits on success
        row = await uow.checks.get(project_id, uuid, lock=True)
        ...

    async with UnitOfWork.read(engine) as uow:     # a read: nothing to commit
        rows = await uow.checks.query(project_id, tags=["prod"])

Leaving the block normally commits (``begin``); an exception rolls the transaction back and
propagates. The services are async (Litestar handlers and the loops await them), so the unit of
work is an async context manager. A service step composed into a larger use case (the Sentry
check-in creating its check, a test seeding rows) joins the caller's transaction with
:meth:`UnitOfWork.joining` instead: it then neither commits nor rolls back.

Handlers never see the connection; services see it only as :attr:`UnitOfWork.connection`, to
hand to the storage modules that take one (``cluster``, ``repositories``, the outbox functions
of :mod:`monitor.storage.outbox`), or to a service step that joins it with :meth:`joining`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeAlias, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from monitor.storage import ports, sqlite_batch
from monitor.storage.dashboard_reads import SqlDashboardReads
from monitor.storage.detection_stores import SqlDetectionStore, SqlReminderStore, SqlShardStore
from monitor.storage.history_reads import SqlHistoryReads
from monitor.storage.maintenance_store import SqlMaintenanceStore
from monitor.storage.outage_store import SqlOutageStore
from monitor.storage.ports import (
    ChannelStore,
    CheckStore,
    DashboardReads,
    DetectionStore,
    MaintenanceStore,
    OutageStore,
    PingStore,
    ProjectStore,
    ReminderStore,
    RunStore,
    ShardStore,
    StatusStore,
    UserStore,
)
from monitor.storage.retention_store import SqlRetentionStore
from monitor.storage.run_stores import SqlPingStore, SqlRunStore
from monitor.storage.sentry_reads import SqlSentryReads
from monitor.storage.stores import (
    SqlChannelStore,
    SqlCheckStore,
    SqlProjectStore,
    SqlStatusStore,
    SqlUserStore,
)

Engine: TypeAlias = AsyncEngine
"""The database handle services take to open units of work (SQLAlchemy's async engine)."""

Connection: TypeAlias = AsyncConnection
"""An open connection inside a transaction, for service steps that join a caller's unit of work."""

T = TypeVar("T")


class UnitOfWork:
    """The ports of one transaction: ``checks``, ``channels``, ``projects``, ``users``, ``status``,
    ``pings``, ``runs``; ``history``, ``retention``, ``sentry``; ``dashboard`` (the dashboard's
    read model) and ``maintenance`` (maintenance windows); ``outages``, ``detection``,
    ``shards``, ``reminders``.

    Construct with :meth:`begin` (write), :meth:`read` or :meth:`joining`; never share one
    across tasks (an ``AsyncConnection`` is not concurrency-safe).
    """

    checks: CheckStore
    channels: ChannelStore
    projects: ProjectStore
    users: UserStore
    status: StatusStore
    # a check's past (the history reads)
    history: ports.HistoryReads
    # bounded storage's batched deletes
    retention: ports.RetentionStore
    # Sentry check-ins' project and check lookups
    sentry: ports.SentryReads
    dashboard: DashboardReads
    maintenance: MaintenanceStore
    pings: PingStore
    runs: RunStore
    # the detection ports: the outage guard, the evaluator's sweep and the ingest's writes,
    # resharding, the time-driven notifications
    outages: OutageStore
    detection: DetectionStore
    shards: ShardStore
    reminders: ReminderStore

    def __init__(self, conn: AsyncConnection) -> None:
        self.connection = conn
        self.checks = SqlCheckStore(conn)
        self.channels = SqlChannelStore(conn)
        self.projects = SqlProjectStore(conn)
        self.users = SqlUserStore(conn)
        self.status = SqlStatusStore(conn)
        self.history = SqlHistoryReads(conn)
        self.retention = SqlRetentionStore(conn)
        self.sentry = SqlSentryReads(conn)
        self.dashboard = SqlDashboardReads(conn)
        self.maintenance = SqlMaintenanceStore(conn)
        self.pings = SqlPingStore(conn)
        self.runs = SqlRunStore(conn)
        self.outages = SqlOutageStore(conn)
        self.detection = SqlDetectionStore(conn)
        self.shards = SqlShardStore(conn)
        self.reminders = SqlReminderStore(conn)

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self.connection.dialect.name

    @classmethod
    @asynccontextmanager
    async def begin(cls, engine: AsyncEngine) -> AsyncIterator[UnitOfWork]:
        """A write transaction (SQLite: ``BEGIN IMMEDIATE``): committed when the block ends
        normally, rolled back when it raises (the exception propagates)."""
        async with engine.begin() as conn:
            yield cls(conn)

    @classmethod
    @asynccontextmanager
    async def read(cls, engine: AsyncEngine) -> AsyncIterator[UnitOfWork]:
        """A read: one connection whose transaction is rolled back at the end (a read-only use
        case writes nothing; one that tries has its writes discarded)."""
        async with engine.connect() as conn:
            yield cls(conn)

    @classmethod
    def joining(cls, conn: AsyncConnection) -> UnitOfWork:
        """The ports over a caller's open transaction, which the caller commits or rolls back."""
        return cls(conn)

    @classmethod
    async def run(cls, engine: AsyncEngine, work: Callable[[UnitOfWork], Awaitable[T]]) -> T:
        """``work(uow)`` in one write transaction, as :meth:`begin`; its result once committed.

        On a SQLite file the whole transaction runs in one worker-thread call on a synchronous
        connection (:mod:`monitor.storage.sqlite_batch`), instead of a thread hop per driver
        call: ``work`` must then await only the ports and the storage functions taking
        ``uow.connection``. Used by the ping ingest, whose batches are short and many.

        Raises:
            sqlalchemy.exc.SQLAlchemyError: the transaction failed (nothing was stored).
            RuntimeError: on SQLite, ``work`` awaited something other than the storage.
        """
        if sqlite_batch.runs_in_thread(engine):
            return await sqlite_batch.run_in_thread(engine, lambda conn: work(cls(conn)))
        async with cls.begin(engine) as uow:
            return await work(uow)
