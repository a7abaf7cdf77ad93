"""Tick claims of the bundled scheduler: one ``job_claims`` row per (job, tick) (DESIGN §8).

A tick is claimed with ``INSERT … ON CONFLICT DO NOTHING`` on the primary key (job, tick), as
procrastinate's periodic defers are, so any number of replicas may try and at most one row
exists. Every claiming write runs in a transaction that first calls
:func:`monitor.storage.leases.check_fence` for the job's lease, so only the lease's current
holder claims, retakes or starts a tick; a stale holder gets
:class:`~monitor.domain.errors.StaleLease` and writes nothing.

States: ``claimed`` (the claimant means to run it) → ``started`` (recorded just before the
process is spawned) → ``finished``; or ``skipped``. A ``claimed`` row whose token is older than
the lease's is an *orphan*: its claimant lost the lease before the start was recorded, and the
new holder runs it again with attempt 2 (:func:`retake`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from monitor.storage import leases, repositories
from monitor.storage import tables as t


class ClaimState(StrEnum):
    """A claim row's state."""

    CLAIMED = "claimed"
    STARTED = "started"
    FINISHED = "finished"
    SKIPPED = "skipped"


@dataclass(frozen=True, kw_only=True, slots=True)
class Claim:
    """One ``job_claims`` row."""

    job: str
    tick: datetime
    attempt: int
    state: ClaimState
    token: int
    holder: str
    run_id: str | None
    reason: str | None
    claimed_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    exit_status: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Fence:
    """The lease a claiming write runs under: ``job-<name>``, its token and holder."""

    lease: str
    token: int
    holder: str


async def claim(
    conn: AsyncConnection,
    fence: Fence,
    job: str,
    tick: datetime,
    *,
    now: datetime,
    run_id: str | None,
    state: ClaimState = ClaimState.CLAIMED,
    reason: str | None = None,
    attempt: int = 1,
) -> bool:
    """Claim ``tick`` of ``job`` (fenced); ``False`` when the row exists already.

    Args:
        conn: an open transaction.
        fence: the job's lease and the caller's token (checked first).
        job: the job's name. tick: the tick (aware UTC).
        now: the current instant (``claimed_at``).
        run_id: the run's id (``None`` for a skip).
        state: ``claimed`` to run it, ``skipped`` to skip it.
        reason: why it is skipped.
        attempt: 1; 0 for a tick handed over unrun to the next holder, whose
            :func:`retake` runs it as attempt 1.

    Raises:
        StaleLease: the caller no longer holds the lease; nothing was written.
    """
    await leases.check_fence(conn, fence.lease, fence.token, fence.holder, now)
    result = await conn.execute(
        repositories.insert_ignoring_conflicts(conn, t.job_claims).values(
            job=job,
            tick=tick,
            attempt=attempt,
            state=state.value,
            token=fence.token,
            holder=fence.holder,
            run_id=run_id,
            reason=reason,
            claimed_at=now,
        )
    )
    return bool(result.rowcount == 1)


async def retake(
    conn: AsyncConnection,
    fence: Fence,
    orphan: Claim,
    *,
    now: datetime,
    run_id: str | None,
    state: ClaimState = ClaimState.CLAIMED,
    reason: str | None = None,
) -> bool:
    """Take over an orphaned ``claimed`` row (fenced) as the next attempt; ``False`` if it moved on.

    Raises:
        StaleLease: the caller no longer holds the lease.
    """
    await leases.check_fence(conn, fence.lease, fence.token, fence.holder, now)
    result = await conn.execute(
        update(t.job_claims)
        .where(t.job_claims.c.job == orphan.job)
        .where(t.job_claims.c.tick == orphan.tick)
        .where(t.job_claims.c.state == ClaimState.CLAIMED.value)
        .where(t.job_claims.c.token == orphan.token)
        .values(
            attempt=orphan.attempt + 1,
            state=state.value,
            token=fence.token,
            holder=fence.holder,
            run_id=run_id,
            reason=reason,
            claimed_at=now,
        )
    )
    return bool(result.rowcount == 1)


async def mark_started(conn: AsyncConnection, fence: Fence, job: str, tick: datetime, now: datetime) -> bool:
    """Record that the claimed run starts now (fenced); ``False`` if the row is not ours to start.

    Raises:
        StaleLease: the caller lost the lease since claiming: the tick stays ``claimed`` and
            the next holder runs it again (attempt 2).
    """
    await leases.check_fence(conn, fence.lease, fence.token, fence.holder, now)
    result = await conn.execute(
        update(t.job_claims)
        .where(t.job_claims.c.job == job)
        .where(t.job_claims.c.tick == tick)
        .where(t.job_claims.c.token == fence.token)
        .where(t.job_claims.c.state == ClaimState.CLAIMED.value)
        .values(state=ClaimState.STARTED.value, started_at=now)
    )
    return bool(result.rowcount == 1)


async def mark_finished(
    engine: AsyncEngine, job: str, tick: datetime, token: int, now: datetime, exit_status: int | None
) -> None:
    """Record a started run's end (not fenced: the run happened whatever the lease does now)."""
    async with engine.begin() as conn:
        await conn.execute(
            update(t.job_claims)
            .where(t.job_claims.c.job == job)
            .where(t.job_claims.c.tick == tick)
            .where(t.job_claims.c.token == token)
            .where(t.job_claims.c.state == ClaimState.STARTED.value)
            .values(state=ClaimState.FINISHED.value, finished_at=now, exit_status=exit_status)
        )


async def last_claimed(conn: AsyncConnection, job: str) -> datetime | None:
    """The newest claimed tick of ``job`` (any state), or ``None`` if it never claimed one."""
    value: datetime | None = (
        await conn.execute(select(func.max(t.job_claims.c.tick)).where(t.job_claims.c.job == job))
    ).scalar_one_or_none()
    if value is not None and value.tzinfo is None:  # func.max loses the column's type on SQLite
        value = t.UTCDateTime().process_result_value(value, conn.dialect)
    return value


def _claim(row: object) -> Claim:
    m = row._mapping  # type: ignore[attr-defined]
    return Claim(
        job=m["job"],
        tick=m["tick"],
        attempt=int(m["attempt"]),
        state=ClaimState(m["state"]),
        token=int(m["token"]),
        holder=m["holder"],
        run_id=m["run_id"],
        reason=m["reason"],
        claimed_at=m["claimed_at"],
        started_at=m["started_at"],
        finished_at=m["finished_at"],
        exit_status=m["exit_status"],
    )


async def orphans(conn: AsyncConnection, job: str, token: int) -> list[Claim]:
    """``claimed`` rows of ``job`` whose claimant's token is older than ``token``, oldest first."""
    rows = await conn.execute(
        select(t.job_claims)
        .where(t.job_claims.c.job == job)
        .where(t.job_claims.c.state == ClaimState.CLAIMED.value)
        .where(t.job_claims.c.token < token)
        .order_by(t.job_claims.c.tick)
    )
    return [_claim(r) for r in rows.all()]


async def list_claims(engine: AsyncEngine, job: str | None = None) -> list[Claim]:
    """Every claim (of ``job``), by job and tick (for tests and diagnostics)."""
    query = select(t.job_claims).order_by(t.job_claims.c.job, t.job_claims.c.tick)
    if job is not None:
        query = query.where(t.job_claims.c.job == job)
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [_claim(r) for r in rows]


async def prune(engine: AsyncEngine, job: str, before: datetime) -> int:
    """Delete ``job``'s finished and skipped claims of ticks before ``before``; returns how many.

    The newest claim of the job is always kept (it is where the next holder resumes), and
    ``claimed`` / ``started`` rows are kept (an orphan still has to run; a started run has to end).
    """
    async with engine.begin() as conn:
        newest = await last_claimed(conn, job)
        if newest is None:
            return 0
        result = await conn.execute(
            delete(t.job_claims)
            .where(t.job_claims.c.job == job)
            .where(t.job_claims.c.tick < min(before, newest))
            .where(t.job_claims.c.state.in_([ClaimState.FINISHED.value, ClaimState.SKIPPED.value]))
        )
    return int(result.rowcount or 0)


async def abandon(
    engine: AsyncEngine, job: str, tick: datetime, token: int, now: datetime, reason: str
) -> bool:
    """Turn our own ``started`` row of a run that was never spawned into ``skipped`` with
    ``reason`` (not fenced: the lease may be lost; only the row of ``token`` changes).

    Returns:
        Whether the row changed.
    """
    async with engine.begin() as conn:
        result = await conn.execute(
            update(t.job_claims)
            .where(t.job_claims.c.job == job)
            .where(t.job_claims.c.tick == tick)
            .where(t.job_claims.c.token == token)
            .where(t.job_claims.c.state == ClaimState.STARTED.value)
            .values(state=ClaimState.SKIPPED.value, reason=reason, finished_at=now)
        )
    return bool(result.rowcount == 1)


async def stranded(conn: AsyncConnection, job: str, token: int) -> list[Claim]:
    """``started`` rows of ``job`` claimed under a token older than ``token`` (a previous
    holder's runs not recorded as finished), oldest first."""
    rows = await conn.execute(
        select(t.job_claims)
        .where(t.job_claims.c.job == job)
        .where(t.job_claims.c.state == ClaimState.STARTED.value)
        .where(t.job_claims.c.token < token)
        .order_by(t.job_claims.c.tick)
    )
    return [_claim(r) for r in rows.all()]


async def overtaken(conn: AsyncConnection, job: str, tick: datetime, token: int) -> bool:
    """Whether a holder with a newer token than ``token`` claimed a later tick of ``job`` than
    ``tick`` to run it (``claimed``, ``started`` or ``finished``; not ``skipped``)."""
    row = (
        await conn.execute(
            select(t.job_claims.c.tick)
            .where(t.job_claims.c.job == job)
            .where(t.job_claims.c.tick > tick)
            .where(t.job_claims.c.token > token)
            .where(t.job_claims.c.state != ClaimState.SKIPPED.value)
            .limit(1)
        )
    ).first()
    return row is not None


async def close_stranded(engine: AsyncEngine, claim: Claim, now: datetime, reason: str) -> bool:
    """Record a dead holder's run as ``finished`` with no exit status and ``reason`` (outcome
    unknown); ``False`` when its holder recorded the end meanwhile."""
    async with engine.begin() as conn:
        result = await conn.execute(
            update(t.job_claims)
            .where(t.job_claims.c.job == claim.job)
            .where(t.job_claims.c.tick == claim.tick)
            .where(t.job_claims.c.token == claim.token)
            .where(t.job_claims.c.state == ClaimState.STARTED.value)
            .values(state=ClaimState.FINISHED.value, finished_at=now, exit_status=None, reason=reason)
        )
    return bool(result.rowcount == 1)


async def states(conn: AsyncConnection, job: str, ticks: list[datetime]) -> dict[datetime, ClaimState]:
    """The current state of ``job``'s claims of ``ticks``."""
    if not ticks:
        return {}
    rows = await conn.execute(
        select(t.job_claims.c.tick, t.job_claims.c.state)
        .where(t.job_claims.c.job == job)
        .where(t.job_claims.c.tick.in_(ticks))
    )
    return {tick: ClaimState(state) for tick, state in rows.all()}
