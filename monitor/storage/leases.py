"""Leases with fencing tokens: one interface, a PostgreSQL and a SQLite implementation (DESIGN §6).

A lease is a named, exclusive hold on work (an evaluator shard ``shard-<n>``, a scheduler job
``job-<name>``). Its row in ``leases`` keeps ``holder`` (``<host>:<pid>``), ``expires_at``
(for ``/ready``) and ``token``, the fencing token, which grows by one on every acquisition and
never decreases. A writer working under a lease calls :func:`check_fence` first in each of its
transactions; a token that is no longer its own raises :class:`StaleLease` and nothing is
written.

* :class:`PostgresLeases`: one dedicated session connection per process (raw asyncpg, outside
  every pool) holds all the process's ``pg_try_advisory_lock`` locks. Its
  ``idle_session_timeout`` and ``idle_in_transaction_session_timeout`` are the TTL (or a
  shorter session timeout, as the scheduler asks for) and it is renewed every TTL/3, so the
  server ends a stalled (SIGSTOPped) holder's session — freeing its locks — within one TTL; a
  SIGKILLed holder's locks go when its socket closes. Taking the row's token runs with a short
  ``lock_timeout``, so a contender never blocks. A dropped session loses every lease at once.
* :class:`SqliteLeases`: the row itself is the lock, taken by a conditional ``UPDATE`` (under
  ``BEGIN IMMEDIATE``, which is how this codebase begins every SQLite transaction) when it is
  free, expired or already ours; renewal extends ``expires_at`` only while holder, token and
  expiry still match.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import bindparam, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from monitor.domain.errors import StaleLease
from monitor.failures import FailureLog
from monitor.storage import repositories
from monitor.storage import tables as t
from monitor.storage.engine import session_lost

logger = logging.getLogger(__name__)

SHUTDOWN_WAIT = 0.5
"""Seconds a shutdown write (giving leases back) waits for a SQLite file another writer holds;
then it gives up and the leases expire within their TTL (the engine's busy timeout is 30 s, and
one wait per lease made a locked file hold shutdown up for minutes)."""
SQLITE_BUSY_TIMEOUT_MS = 30_000
"""The busy timeout of the engine's SQLite connections (``monitor.storage.engine``), restored."""

LOCK_KEY_NAMESPACE = b"monitor.lease:"
"""Prefix hashed with a lease name into its advisory lock key (keeps clear of other apps' keys)."""


HELD_ADVISORY_KEYS = (
    "SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks"
    " WHERE locktype = 'advisory' AND objsubid = 1 AND granted"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)
"""The 64-bit advisory lock keys any session of this database holds: ``pg_locks`` shows a
bigint key's high half in ``classid`` and its low half in ``objid``, with ``objsubid`` 1."""


SESSION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)
"""What a failing lease session raises: refused or reset, timed out, refused by the server,
closed, or out of step with its protocol (``InternalClientError``, after a SIGSTOP). Any of
them means the server may have freed the session's locks."""


def lock_key(name: str) -> int:
    """A stable signed 64-bit advisory lock key for lease ``name`` (BLAKE2b, never ``hash()``)."""
    digest = hashlib.blake2b(LOCK_KEY_NAMESPACE + name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@contextlib.asynccontextmanager
async def brief_transaction(
    engine: AsyncEngine, wait: float = SHUTDOWN_WAIT
) -> AsyncIterator[AsyncConnection]:
    """A transaction whose start waits at most ``wait`` seconds for the SQLite write lock
    (``sqlite3.OperationalError: database is locked`` after that); on PostgreSQL a plain one."""
    async with engine.connect() as conn:
        if engine.dialect.name != "sqlite":
            async with conn.begin():
                yield conn
            return
        driver = (await conn.get_raw_connection()).driver_connection
        assert driver is not None
        await driver.execute(f"PRAGMA busy_timeout={max(1, round(wait * 1000))}")
        try:
            async with conn.begin():
                yield conn
        finally:
            with contextlib.suppress(Exception):
                await driver.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")


def _naive(instant: datetime) -> datetime:
    """Aware UTC → naive UTC, as the ``leases`` columns store instants (raw asyncpg has no
    :class:`~monitor.storage.tables.UTCDateTime` to do it)."""
    offset = instant.utcoffset()
    return (instant - offset if offset else instant).replace(tzinfo=None)


@dataclass(frozen=True)
class Vacancy:
    """A lease nobody holds now, as :meth:`Leases.vacancies` found it.

    Attributes:
        name: the lease.
        last_holder: the other process the lease row still names although it no longer holds
            the lease — its session ended (PostgreSQL: killed, or stalled past the TTL) or its
            expiry passed (SQLite); ``None`` when the lease was released, never held, or last
            held by this process.
    """

    name: str
    last_holder: str | None


class Leases(abc.ABC):
    """One process's leases on one database.

    Implementations keep a local view (:attr:`held`: name → fencing token) that may be stale
    after a stall; the database is the authority, consulted by :func:`check_fence`.

    Args:
        holder: this process's name, ``<host>:<pid>``.
        ttl: lease time to live: a holder that stops renewing loses its leases within it.
    """

    def __init__(self, holder: str, ttl: timedelta) -> None:
        self.holder = holder
        self.ttl = ttl
        self._held: dict[str, int] = {}

    @property
    def held(self) -> Mapping[str, int]:
        """Leases this process believes it holds: name → fencing token (a copy)."""
        return dict(self._held)

    @abc.abstractmethod
    async def acquire(self, name: str, now: datetime) -> int | None:
        """Take lease ``name`` if it is free; never waits for another holder.

        Args:
            name: the lease.
            now: the current instant (aware UTC); the row's ``expires_at`` becomes ``now + ttl``.

        Returns:
            The fencing token (greater than every earlier token of ``name``) if this process
            holds the lease now, else ``None``.
        """

    @abc.abstractmethod
    async def renew(self, now: datetime) -> list[str]:
        """Keep every held lease alive (call every TTL/3).

        Returns:
            Names of the leases found lost (they are no longer in :attr:`held`).
        """

    @abc.abstractmethod
    async def release(self, name: str) -> None:
        """Give lease ``name`` up so another process can take it at once."""

    @abc.abstractmethod
    async def step_down(self, name: str) -> None:
        """Forget lease ``name`` after a fencing check found its token stale."""

    async def hand_over(self, name: str) -> None:
        """Give lease ``name`` up on shutdown so that any replica takes it at once, even one at
        its fair share (this one still counts as live until it stops). By default a
        :meth:`release`."""
        await self.release(name)

    async def free(self, names: Sequence[str], now: datetime) -> list[str]:
        """Which of ``names`` might be free to :meth:`acquire` (a cheap pre-filter)."""
        return [n for n in names if n not in self._held]

    async def vacancies(self, names: Sequence[str], now: datetime) -> list[Vacancy]:
        """Which of ``names`` nobody holds now, and whom each row still names (a snapshot).

        A lease listed may be taken by another process before :meth:`acquire`; one not listed
        is held by a live holder (or by this process). ``last_holder`` tells a lease whose holder
        died or stalled (its row still names it) from one that was released.

        Args:
            names: the leases to look at, in the order wanted back.
            now: the current instant (aware UTC; SQLite compares expiries with it).

        Returns:
            The vacant leases among ``names``, in their order.
        """
        return [Vacancy(name, None) for name in await self.free(names, now)]

    async def close(self) -> None:
        """Release every held lease (clean shutdown) and close what was opened."""
        for name in list(self._held):
            try:
                await self.release(name)
            except Exception:
                logger.warning(
                    "could not release lease", extra={"action": "lease_release_failed", "lease": name}
                )


class PostgresLeases(Leases):
    """Advisory locks on one dedicated session connection; tokens in the ``leases`` rows.

    Args:
        url: the SQLAlchemy URL of the database (``postgresql+asyncpg://…``).
        holder: ``<host>:<pid>``.
        ttl: lease TTL; also the session's ``idle_session_timeout`` and
            ``idle_in_transaction_session_timeout`` unless ``session_timeout`` is given.
        session_timeout: those two timeouts when shorter than the TTL (more than TTL/3, the
            renewal period): a stalled holder's locks are freed that long after its last
            renewal, so a contender polling often takes over within one TTL of the stall.
    """

    def __init__(
        self, url: str, holder: str, ttl: timedelta, session_timeout: timedelta | None = None
    ) -> None:
        super().__init__(holder, ttl)
        self._dsn = url.replace("postgresql+asyncpg://", "postgresql://", 1)
        self._conn: asyncpg.Connection | None = None
        self._lock = asyncio.Lock()
        # a session that cannot be opened or used is never silent, but is not a
        # traceback every round either (F4)
        self._failures = FailureLog(logger, "lease session", action="lease_session_failed")
        ttl_s = ttl.total_seconds()
        idle_s = ttl_s if session_timeout is None else min(ttl_s, session_timeout.total_seconds())
        self._statement_timeout_s = max(ttl_s / 3, 0.05)
        self._settings = {
            "idle_session_timeout": str(max(1, round(idle_s * 1000))),
            "idle_in_transaction_session_timeout": str(max(1, round(idle_s * 1000))),
            # contenders never block on a row another transaction holds (DESIGN §6)
            "lock_timeout": str(max(1, round(min(ttl_s / 10, 1.0) * 1000))),
            "application_name": f"monitor leases {holder}"[:63],
        }

    def _failed(self, error: BaseException) -> None:
        """Count a failure of the session; one the server ended (a stall outlived its timeouts)
        is no fault to trace back: :meth:`_lose` says it in one line and the next call reconnects."""
        if not session_lost(error):
            self._failures.failed(error)

    async def _session(self) -> asyncpg.Connection:
        if self._conn is not None and self._conn.is_closed():
            self._lose("session closed")
        if self._conn is None:
            self._conn = await asyncpg.connect(
                self._dsn, timeout=max(self.ttl.total_seconds(), 1.0), server_settings=self._settings
            )
        return self._conn

    def _lose(self, reason: str) -> list[str]:
        """The session is gone or unusable: every lease is lost at once (step down)."""
        lost = sorted(self._held)
        if lost:
            logger.warning(
                "lease_lost %s: %s",
                ",".join(lost),
                reason,
                extra={"action": "lease_lost", "leases": lost, "holder": self.holder},
            )
        self._held.clear()
        if self._conn is not None:
            self._conn.terminate()  # the server drops the locks with the socket
            self._conn = None
        return lost

    async def acquire(self, name: str, now: datetime) -> int | None:
        async with self._lock:
            if name in self._held:
                return self._held[name]
            try:
                conn = await self._session()
                key = lock_key(name)
                timeout = self._statement_timeout_s
                if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", key, timeout=timeout):
                    return None
                try:
                    async with conn.transaction():
                        await conn.execute(
                            "INSERT INTO leases (name, holder, token, expires_at) VALUES ($1, NULL, 0, NULL)"
                            " ON CONFLICT (name) DO NOTHING",
                            name,
                            timeout=timeout,
                        )
                        token = await conn.fetchval(
                            "UPDATE leases SET token = token + 1, holder = $2, expires_at = $3"
                            " WHERE name = $1 RETURNING token",
                            name,
                            self.holder,
                            _naive(now + self.ttl),
                            timeout=timeout,
                        )
                except asyncpg.LockNotAvailableError:
                    # A fenced transaction of the previous holder still reads the row: try later.
                    await conn.execute("SELECT pg_advisory_unlock($1)", key, timeout=timeout)
                    return None
            except SESSION_ERRORS as error:
                # A client-side timeout leaves the session busy cancelling ("another operation is
                # in progress") and this lock possibly taken: end the session, which frees every
                # lock it holds, rather than hold a lock nobody sweeps for.
                self._failed(error)
                self._lose(f"acquire failed: {type(error).__name__}: {error}")
                return None
            self._failures.succeeded()
            self._held[name] = int(token)
            return int(token)

    async def vacancies(self, names: Sequence[str], now: datetime) -> list[Vacancy]:
        """Leases whose advisory lock no session of this database holds (``pg_locks``).

        The rows are read before and after the locks: a holder is reported as ``last_holder``
        only when both reads name it, so a lease released in between (row cleared, then
        unlocked) never reads as orphaned by its releaser.
        """
        async with self._lock:
            try:
                conn = await self._session()
                timeout = self._statement_timeout_s
                rows = "SELECT name, holder FROM leases WHERE name = ANY($1::text[])"
                before = {r[0]: r[1] for r in await conn.fetch(rows, list(names), timeout=timeout)}
                locked = {int(r[0]) for r in await conn.fetch(HELD_ADVISORY_KEYS, timeout=timeout)}
                after = {r[0]: r[1] for r in await conn.fetch(rows, list(names), timeout=timeout)}
            except SESSION_ERRORS as error:
                self._failed(error)
                self._lose(f"lease survey failed: {type(error).__name__}: {error}")
                return []
            self._failures.succeeded()
            held = set(self._held)
        found = []
        for name in names:
            if name in held or lock_key(name) in locked:
                continue
            holder = before.get(name)
            orphaned = holder is not None and holder != self.holder and after.get(name) == holder
            found.append(Vacancy(name, holder if orphaned else None))
        return found

    async def renew(self, now: datetime) -> list[str]:
        async with self._lock:
            lost = self._lose("session closed") if self._conn is not None and self._conn.is_closed() else []
            try:
                conn = await self._session()
                if self._held:
                    # SKIP LOCKED: a row our own evaluator reads FOR SHARE is renewed next time.
                    await conn.execute(
                        "UPDATE leases SET expires_at = $1 WHERE name IN ("
                        " SELECT name FROM leases WHERE name = ANY($2::text[]) AND holder = $3"
                        " FOR NO KEY UPDATE SKIP LOCKED)",
                        _naive(now + self.ttl),
                        list(self._held),
                        self.holder,
                        timeout=self._statement_timeout_s,
                    )
                else:
                    await conn.execute("SELECT 1", timeout=self._statement_timeout_s)
            except SESSION_ERRORS as error:
                # any failure of the session (InternalClientError: its protocol is out of step after
                # a SIGSTOP) means the server may have freed the locks: step down at once
                self._failed(error)
                return lost + self._lose(f"renewal failed: {type(error).__name__}: {error}")
            self._failures.succeeded()
            return lost

    async def release(self, name: str) -> None:
        async with self._lock:
            token = self._held.pop(name, None)
            if token is not None:
                await self._give_back(name, token, "release")

    async def step_down(self, name: str) -> None:
        async with self._lock:
            if self._held.pop(name, None) is not None:
                await self._give_back(name, None, "step down")

    async def hand_over(self, name: str) -> None:
        """Unlock ``name`` but leave its row naming this process: :meth:`vacancies` then reports
        it with ``last_holder`` set, as a dead holder's, so a replica at its fair share takes it
        over within its next look (TTL/10) instead of after a TTL unheld."""
        async with self._lock:
            if self._held.pop(name, None) is not None:
                await self._give_back(name, None, "hand over")

    async def _give_back(self, name: str, token: int | None, what: str) -> None:
        """Unlock ``name``'s advisory lock on our session (if it is still open); with ``token``
        (a release) first clear the row's holder and expiry when they are still ours. A
        session error ends the session (:meth:`_lose`), which frees its locks anyway."""
        conn = self._conn
        if conn is None or conn.is_closed():
            return
        try:
            if token is not None:
                # on a lock timeout the next holder overwrites holder and expiry anyway
                with contextlib.suppress(asyncpg.LockNotAvailableError, TimeoutError):
                    await conn.execute(
                        "UPDATE leases SET holder = NULL, expires_at = NULL"
                        " WHERE name = $1 AND holder = $2 AND token = $3",
                        name,
                        self.holder,
                        token,
                        timeout=self._statement_timeout_s,
                    )
            await conn.execute(
                "SELECT pg_advisory_unlock($1)", lock_key(name), timeout=self._statement_timeout_s
            )
        except SESSION_ERRORS as error:
            self._lose(f"{what} failed: {type(error).__name__}: {error}")

    async def close(self) -> None:
        await super().close()
        async with self._lock:
            if self._conn is not None:
                try:
                    await asyncio.wait_for(self._conn.close(), timeout=self._statement_timeout_s)
                except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
                    self._conn.terminate()
                self._conn = None


class SqliteLeases(Leases):
    """The lease row is the lock: a conditional ``UPDATE`` with expiry (SQLite, one writer).

    Args:
        engine: the database (its transactions begin with ``BEGIN IMMEDIATE``).
        holder: ``<host>:<pid>``.
        ttl: lease TTL: a holder that stops renewing is taken over after it.
    """

    def __init__(self, engine: AsyncEngine, holder: str, ttl: timedelta) -> None:
        super().__init__(holder, ttl)
        self._engine = engine

    async def _rows(self, names: Sequence[str]) -> list[tuple[str, str | None, datetime | None]]:
        """(name, holder, expires_at) of the lease rows named (a missing row: no tuple)."""
        async with self._engine.connect() as conn:
            result = await conn.execute(
                select(t.leases.c.name, t.leases.c.holder, t.leases.c.expires_at).where(
                    t.leases.c.name.in_(list(names))
                )
            )
            return [(row[0], row[1], row[2]) for row in result.all()]

    async def free(self, names: Sequence[str], now: datetime) -> list[str]:
        rows = await self._rows(names)
        taken = {
            name
            for name, holder, expires_at in rows
            if holder is not None and holder != self.holder and expires_at is not None and expires_at >= now
        }
        return [n for n in names if n not in self._held and n not in taken]

    async def vacancies(self, names: Sequence[str], now: datetime) -> list[Vacancy]:
        """Leases whose row is missing, released or expired; an expired row names its last holder."""
        rows = await self._rows(names)
        state = {name: (holder, expires_at) for name, holder, expires_at in rows}
        found = []
        for name in names:
            if name in self._held:
                continue
            holder, expires_at = state.get(name, (None, None))
            if holder is not None and holder != self.holder and expires_at is not None and expires_at >= now:
                continue  # held, unexpired
            orphaned = holder is not None and holder != self.holder
            found.append(Vacancy(name, holder if orphaned else None))
        return found

    async def acquire(self, name: str, now: datetime) -> int | None:
        if name in self._held:
            return self._held[name]
        async with self._engine.begin() as conn:
            await conn.execute(
                repositories.insert_ignoring_conflicts(conn, t.leases).values(
                    name=name, holder=None, token=0, expires_at=None
                )
            )
            taken = await conn.execute(
                update(t.leases)
                .where(t.leases.c.name == name)
                .where(
                    or_(
                        t.leases.c.holder.is_(None),
                        t.leases.c.expires_at.is_(None),
                        t.leases.c.expires_at < now,
                        # a restarted process with our name: a new holding, a new token
                        t.leases.c.holder == self.holder,
                    )
                )
                .values(holder=self.holder, token=t.leases.c.token + 1, expires_at=now + self.ttl)
            )
            if taken.rowcount != 1:
                return None
            token = int(
                (await conn.execute(select(t.leases.c.token).where(t.leases.c.name == name))).scalar_one()
            )
        self._held[name] = token
        return token

    async def renew(self, now: datetime) -> list[str]:
        if not self._held:
            return []
        lost: list[str] = []
        try:
            async with self._engine.begin() as conn:
                for name, token in sorted(self._held.items()):
                    renewed = await conn.execute(
                        update(t.leases)
                        .where(t.leases.c.name == name)
                        .where(t.leases.c.holder == self.holder)
                        .where(t.leases.c.token == token)
                        .where(t.leases.c.expires_at >= now)
                        .values(expires_at=now + self.ttl)
                    )
                    if renewed.rowcount != 1:
                        lost.append(name)
        except Exception as error:
            # Not renewed is not lost: the fencing check still refuses an expired holder.
            logger.warning(
                "lease renewal failed: %s",
                error,
                extra={"action": "lease_renewal_failed", "holder": self.holder},
            )
            return []
        for name in lost:
            self._held.pop(name, None)
        if lost:
            logger.warning(
                "lease_lost %s: expired or taken over",
                ",".join(lost),
                extra={"action": "lease_lost", "leases": lost, "holder": self.holder},
            )
        return lost

    async def release(self, name: str) -> None:
        token = self._held.pop(name, None)
        if token is None:
            return
        async with self._engine.begin() as conn:
            await conn.execute(
                update(t.leases)
                .where(t.leases.c.name == name)
                .where(t.leases.c.holder == self.holder)
                .where(t.leases.c.token == token)
                .values(expires_at=None, holder=None)
            )

    async def step_down(self, name: str) -> None:
        self._held.pop(name, None)

    async def close(self) -> None:
        """Give every held lease back in one transaction that waits at most
        :data:`SHUTDOWN_WAIT` for the file; a file locked by another writer does not hold the
        shutdown up (the leases then expire within the TTL, and fencing refuses their holder)."""
        held, self._held = dict(self._held), {}
        if not held:
            return
        try:
            async with brief_transaction(self._engine) as conn:
                for name, token in sorted(held.items()):
                    await conn.execute(
                        update(t.leases)
                        .where(t.leases.c.name == name)
                        .where(t.leases.c.holder == self.holder)
                        .where(t.leases.c.token == token)
                        .values(expires_at=None, holder=None)
                    )
        except Exception as error:
            logger.warning(
                "could not release %d leases (%s); they expire within %gs",
                len(held),
                error,
                self.ttl.total_seconds(),
                extra={"action": "lease_release_failed", "leases": sorted(held)},
            )


def open_leases(
    engine: AsyncEngine, holder: str, ttl: timedelta, session_timeout: timedelta | None = None
) -> Leases:
    """The lease implementation for ``engine``'s database (PostgreSQL or SQLite);
    ``session_timeout``: see :class:`PostgresLeases` (SQLite has no session to end)."""
    if engine.dialect.name == "postgresql":
        url = engine.url.render_as_string(hide_password=False)
        return PostgresLeases(url, holder, ttl, session_timeout)
    return SqliteLeases(engine, holder, ttl)


async def check_fence(conn: AsyncConnection, name: str, token: int, holder: str, now: datetime) -> None:
    """Refuse to write under lease ``name`` unless ``token`` is still its token (DESIGN §6).

    Call first in the writer's transaction. PostgreSQL reads the row ``FOR SHARE``, so no
    new holder can raise the token until this transaction ends (a stalled one is ended by
    the server's ``idle_in_transaction_session_timeout``). The holder must match too (tokens
    restart when a reshard deleted the row). SQLite also checks the expiry: the row is the
    lock there, and ``BEGIN IMMEDIATE`` keeps other writers out until
    commit.

    Args:
        conn: the writer's open transaction.
        name: the lease (``shard-3``).
        token: the fencing token the writer holds.
        holder: the writer's ``<host>:<pid>``.
        now: the current instant (aware UTC).

    Raises:
        StaleLease: the lease's token or holder (on SQLite also its expiry) says another
            process holds it now, or the row is gone.
    """
    await check_fences(conn, {name: token}, holder, now)


_FENCES = (
    select(t.leases.c.name, t.leases.c.token, t.leases.c.holder, t.leases.c.expires_at)
    .where(t.leases.c.name.in_(bindparam("names", expanding=True)))
    .order_by(t.leases.c.name)
)
_FENCES_FOR_SHARE = _FENCES.with_for_update(read=True)
""":func:`check_fences`' reads, built once: every sweep transaction runs one."""


async def check_fences(conn: AsyncConnection, tokens: Mapping[str, int], holder: str, now: datetime) -> None:
    """:func:`check_fence` for several leases in one statement (a sweep over several shards).

    The rows are read in name order (PostgreSQL ``FOR SHARE``), so two writers fencing
    overlapping sets never wait on each other in a cycle.

    Args:
        tokens: lease name → the fencing token the writer holds.

    Raises:
        StaleLease: for the first lease, by name, whose row says another process holds it (or
            that is gone); nothing has been written.
    """
    if not tokens:
        return
    query = _FENCES_FOR_SHARE if conn.dialect.name == "postgresql" else _FENCES
    rows = {row[0]: row for row in (await conn.execute(query, {"names": sorted(tokens)})).all()}
    for name in sorted(tokens):
        token = tokens[name]
        row = rows.get(name)
        if row is None:
            raise StaleLease(name, token, None, "no lease row")
        current, current_holder, expires_at = int(row[1]), row[2], row[3]
        if current != token:
            raise StaleLease(name, token, current, f"the lease's token is {current}")
        if current_holder != holder:
            # A row deleted (``monitor reshard`` to fewer shards) and created again restarts its
            # token at 1: the holder's name tells a stalled writer from the new holder then.
            raise StaleLease(name, token, current, f"held by {current_holder}")
        if conn.dialect.name != "postgresql" and (expires_at is None or expires_at < now):
            raise StaleLease(name, token, current, "expired")


async def list_leases(engine: AsyncEngine) -> list[dict[str, Any]]:
    """Every row of the lease table, by name: ``{"name", "holder", "token", "expires_at"}``."""
    async with engine.connect() as conn:
        rows = (await conn.execute(select(t.leases).order_by(t.leases.c.name))).mappings().all()
    return [
        {
            "name": r["name"],
            "holder": r["holder"],
            "token": r["token"],
            "expires_at": r["expires_at"].strftime("%Y-%m-%dT%H:%M:%SZ") if r["expires_at"] else None,
        }
        for r in rows
    ]
