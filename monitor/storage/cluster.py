"""The evaluator shard count, recorded once in the database (DESIGN §6).

Every replica must compute ``shard = uuid.int % shards`` with the same ``shards``, or checks
land in shards no evaluator holds. ``MONITOR_SHARDS`` is a per-process variable, so it cannot
be trusted to agree across replicas (a rolling deploy, one forgotten manifest). The database
is the source of truth instead: the one row of ``cluster_settings`` holds ``shards``.

* The first process on a database records its ``MONITOR_SHARDS`` (:func:`record_shard_count`);
  in the same transaction it re-shards any existing checks to that count and removes lease
  rows no evaluator will take again, so a database upgraded from before the row existed is
  consistent at once.
* A process whose ``MONITOR_SHARDS`` differs adopts the stored count and logs a warning,
  ``shard_count_mismatch`` (:func:`adopt_shard_count`). It does not refuse to start: a
  dead-man's switch that stops evaluating because one replica's environment drifted would be
  the worst outcome, and adopting keeps one keyspace for everyone.
* Changing the count is explicit: ``monitor reshard N``
  (:func:`monitor.services.shards.reshard`).
* Writers that create checks read the stored count ``FOR SHARE`` inside their transaction
  (:func:`shard_count_for_insert`), so a concurrent reshard waits for them and then re-shards
  their rows too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import bindparam, delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from monitor.domain.shards import LEASE_PREFIX, shard_of
from monitor.storage import repositories
from monitor.storage import tables as t

logger = logging.getLogger(__name__)

SETTINGS_ROW = 1
"""The ``id`` of the one ``cluster_settings`` row."""

LEGACY_EVALUATOR_LEASE = "evaluator"
"""The global lease of the evaluator before sharding (revision 0002); never taken any more."""

REWRITE_BATCH = 5000
"""Check rows read per statement while re-sharding."""


async def stored_shard_count(conn: AsyncConnection, *, share: bool = False) -> int | None:
    """The recorded shard count, or ``None`` while no process has recorded one.

    Args:
        conn: an open connection (in a transaction when ``share``).
        share: PostgreSQL: read the row ``FOR SHARE``, so a reshard waits until this
            transaction ends (SQLite's ``BEGIN IMMEDIATE`` already excludes other writers).
    """
    query = select(t.cluster_settings.c.shards).where(t.cluster_settings.c.id == SETTINGS_ROW)
    if share and conn.dialect.name == "postgresql":
        query = query.with_for_update(read=True)
    value = (await conn.execute(query)).scalar_one_or_none()
    return None if value is None else int(value)


async def record_shard_count(conn: AsyncConnection, configured: int, now: datetime) -> tuple[int, bool]:
    """The stored shard count; records ``configured`` first if none is stored yet.

    When this call records the count it also, in the caller's transaction, re-shards every
    check to it (:func:`rewrite_check_shards`; nothing to do on an empty database) and removes
    stale evaluator lease rows (:func:`prune_stale_leases`). Concurrent first processes are
    serialised by the row's primary key: one records, the others read its value.

    Args:
        conn: an open transaction.
        configured: this process's ``MONITOR_SHARDS`` (at least 1).
        now: the current instant (aware UTC), stored as ``changed_at``.

    Returns:
        ``(stored count, whether this call recorded it)``.
    """
    stored = await stored_shard_count(conn, share=True)
    if stored is not None:
        return stored, False
    inserted = await conn.execute(
        repositories.insert_ignoring_conflicts(conn, t.cluster_settings).values(
            id=SETTINGS_ROW, shards=configured, changed_at=now
        )
    )
    if inserted.rowcount == 1:
        await rewrite_check_shards(conn, configured)
        await prune_stale_leases(conn, configured)
        return configured, True
    stored = await stored_shard_count(conn, share=True)
    if stored is None:  # pragma: no cover - the conflicting row was committed before we read
        raise RuntimeError("cluster_settings row vanished")
    return stored, False


async def shard_count_for_insert(conn: AsyncConnection, configured: int, now: datetime) -> int:
    """The count a check created in this transaction must take its shard from (the stored one).

    Args:
        conn: the creating transaction.
        configured: this process's ``MONITOR_SHARDS``, recorded only if the database has none.
        now: the current instant (aware UTC).
    """
    count, _ = await record_shard_count(conn, configured, now)
    return count


async def adopt_shard_count(engine: AsyncEngine, configured: int, now: datetime, *, process: str) -> int:
    """Record or read the shard count at start-up; warn loudly when it differs from ours.

    Args:
        engine: the database (migrated).
        configured: this process's ``MONITOR_SHARDS``.
        now: the current instant (aware UTC).
        process: what is starting (``"evaluator"``, ``"http"``, ``"migrate"``), for the logs.

    Returns:
        The count this process must use: the stored one.
    """
    async with engine.begin() as conn:
        stored, recorded = await record_shard_count(conn, configured, now)
    if recorded:
        logger.info(
            "shard_count_recorded shards=%d",
            stored,
            extra={"action": "shard_count_recorded", "shards": stored, "role": process},
        )
    elif stored != configured:
        logger.warning(
            "shard_count_mismatch: MONITOR_SHARDS=%d but the database records %d shards; using %d."
            " Set MONITOR_SHARDS=%d on every replica, or change the count for all of them with"
            " `monitor reshard N`.",
            configured,
            stored,
            stored,
            stored,
            extra={
                "action": "shard_count_mismatch",
                "configured": configured,
                "stored": stored,
                "role": process,
            },
        )
    return stored


async def rewrite_check_shards(conn: AsyncConnection, count: int, *, batch: int = REWRITE_BATCH) -> int:
    """Make every ``checks.shard`` equal ``uuid.int % count``, in the caller's transaction.

    Reads ``(id, uuid, shard)`` in id order, ``batch`` rows per statement, and rewrites only the
    rows whose stored shard differs.

    Returns:
        How many rows were changed.
    """
    changed = 0
    last = 0
    while True:
        rows = (
            await conn.execute(
                select(t.checks.c.id, t.checks.c.uuid, t.checks.c.shard)
                .where(t.checks.c.id > last)
                .order_by(t.checks.c.id)
                .limit(batch)
            )
        ).all()
        if not rows:
            return changed
        wrong = [
            {"b_id": cid, "b_shard": shard_of(uuid, count)}
            for cid, uuid, stored in rows
            if stored != shard_of(uuid, count)
        ]
        if wrong:
            await conn.execute(
                update(t.checks).where(t.checks.c.id == bindparam("b_id")).values(shard=bindparam("b_shard")),
                wrong,
            )
        changed += len(wrong)
        last = rows[-1][0]


def stale_lease_names(names: Iterable[str], count: int) -> list[str]:
    """Which of ``names`` no evaluator of a ``count``-shard cluster takes: ``shard-<n>`` with
    ``n >= count``, and the legacy ``evaluator`` lease. Other leases (``job-<name>``, …) are
    never stale here."""
    stale = []
    for name in names:
        if name == LEGACY_EVALUATOR_LEASE:
            stale.append(name)
            continue
        index = name.removeprefix(LEASE_PREFIX)
        if name.startswith(LEASE_PREFIX) and index.isdigit() and int(index) >= count:
            stale.append(name)
    return sorted(stale)


async def prune_stale_leases(conn: AsyncConnection, count: int, *, only_free: bool = False) -> list[str]:
    """Delete the lease rows of shards a ``count``-shard cluster does not have (and the legacy
    ``evaluator`` row), in the caller's transaction.

    A holder of a deleted row fails its next fencing check ("no lease row") and steps down.

    Args:
        conn: an open transaction.
        count: the shard count.
        only_free: delete only rows nobody holds (``holder`` null), as an evaluator does after
            releasing its own out-of-range leases.

    Returns:
        The names deleted.
    """
    query = select(t.leases.c.name).where(
        or_(t.leases.c.name.like(f"{LEASE_PREFIX}%"), t.leases.c.name == LEGACY_EVALUATOR_LEASE)
    )
    if only_free:
        query = query.where(t.leases.c.holder.is_(None))
    stale = stale_lease_names((await conn.execute(query)).scalars().all(), count)
    if stale:
        removed = delete(t.leases).where(t.leases.c.name.in_(stale))
        if only_free:
            removed = removed.where(t.leases.c.holder.is_(None))
        await conn.execute(removed)
    return stale
