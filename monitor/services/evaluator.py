"""Due work: judge what time has decided for checks whose ``next_due`` has passed (DESIGN §6).

A sweep costs O(due checks) and a handful of statements per batch, not per check. Each batch
is one transaction:

1. the caller's fence (the lease's fencing check; one statement for every shard the sweep
   covers), so a writer whose lease was taken over writes nothing;
2. **one** query selects the batch's due checks (``next_due < now``, oldest deadline first,
   through ``ix_checks_next_due`` / ``ix_checks_shard_next_due``); on PostgreSQL it locks them
   ``FOR UPDATE SKIP LOCKED``, so the sweep never waits on a row a ping's batch holds (that
   check is judged in the next sweep) and concurrent batches take disjoint checks
   (``uow.detection.lock_due``);
3. the outage guard, then the runs and tick marks the rules need (one query per table for the
   whole batch, ``uow.detection.books``);
4. the pure :func:`monitor.domain.detection.evaluate` over those plain values, per check, in
   Python;
5. the transitions written back set-at-a-time (``uow.detection.save_sweep``): the state columns
   that changed, in one ``UPDATE … FROM`` per set of changed columns (a sweep of plain misses
   changes the same few columns of every check), the tick marks, the flips, the timed-out
   runs and the new alerts of the whole batch (:func:`monitor.services.effects.plan_alerts`,
   each check's carrying its shard's token), all in one statement on PostgreSQL; then
   :func:`monitor.services.effects.queue_alerts` (one read of the routes, one insert of the
   notifications).

On a SQLite file a batch runs whole in one worker-thread call (:meth:`UnitOfWork.run`), not a
thread hop per driver call. On PostgreSQL, whenever a batch has locked as many due checks as
it asked for, another transaction starts beside it, up to :data:`PIPELINES` at once, each on
its own connection: one batch's statements run in the server while another is judged in
Python.

Flips and alerts record the fencing token of the shard their check belongs to. The statements
are in :mod:`monitor.storage.detection_stores` (the :class:`~monitor.storage.ports.DetectionStore`
port); this module builds none.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.domain import detection
from monitor.domain.checks import CheckState
from monitor.domain.runs import needed_since
from monitor.services.effects import (
    AlertPlan,
    CheckAlerts,
    CheckIdentity,
    PendingWrites,
    plan_alerts,
    queue_alerts,
)
from monitor.services.outages import load_guard
from monitor.settings import Settings
from monitor.storage import repositories
from monitor.storage.unit_of_work import Connection, Engine, UnitOfWork

logger = logging.getLogger(__name__)

MAX_ROUNDS = 100
"""Batches per call; a sweep that still has work leaves it for the next one."""

BATCH = 500
"""Checks per transaction: large enough that the per-batch statements cost little per check,
small enough that a batch holds its rows' locks (ingest waits on them) for tens of ms."""

PIPELINES = 3
"""PostgreSQL: batches judged at once, each in its own transaction on its own connection: one
batch's statements run in the server while another is judged in Python and a third waits on
its round trip (10 000 due on 2 cores: 171 ms per 1 000 checks with one, 137 with two, 123
with three)."""

Fence = Callable[[Connection], Awaitable[None]]

CHECK_COLUMNS = (
    "id",
    "project_id",
    "uuid",
    "slug",
    "shard",
    *repositories.SPEC_COLUMNS,
    *repositories.STATE_COLUMNS,
)
"""What judging a check reads: its spec, its identity for alert messages, its state."""


async def evaluate_due(
    engine: Engine,
    now: datetime,
    *,
    settings: Settings,
    batch: int = BATCH,
    token: int | None = None,
    shard: tuple[int, int] | None = None,
    held: Mapping[int, int] | None = None,
    fence: Fence | None = None,
    pipelines: int = PIPELINES,
) -> int:
    """Evaluate every check with ``next_due < now`` (of the given shards).

    Args:
        engine: the database.
        now: the instant to judge at (aware UTC; injected, never read here).
        settings: for ``base_url`` in alert messages and ``lease_ttl`` (outage guard).
        batch: checks per transaction (≥ 1).
        token: fencing token recorded on the flips and alerts written (with ``shard`` or
            neither).
        shard: ``(index, count)``: only checks of shard ``index`` (stored ``checks.shard``,
            ``uuid.int % count``, DESIGN §6).
        held: instead of ``shard`` and ``token``: the shards to sweep together, index →
            fencing token; each check's flips and alerts record its own shard's token.
        fence: awaited first in every transaction (even one that finds nothing due); raises
            to abort it, e.g. :func:`monitor.storage.leases.check_fences` raising
            :class:`~monitor.domain.errors.StaleLease`. It must guard every shard swept.
        pipelines: PostgreSQL: batches in flight at once, each on its own connection (≥ 1;
            SQLite has one writer and judges one batch at a time).

    Returns:
        How many checks were evaluated (a check judged in two batches counts twice).

    Raises:
        StaleLease: from ``fence``; the transaction in progress was rolled back (earlier
            batches stay committed).
        ValueError: ``held`` given together with ``shard`` or ``token``, ``batch < 1`` or
            ``pipelines < 1``.
    """
    if held is not None and (shard is not None or token is not None):
        raise ValueError("held: give either held or shard/token")
    for name, value in (("batch", batch), ("pipelines", pipelines)):
        if value < 1:
            raise ValueError(f"{name}: must be at least 1, got {value}")
    if held is not None and not held:
        return 0
    sweep = _Sweep(
        engine=engine,
        now=now,
        settings=settings,
        batch=batch,
        token=token,
        tokens=held,
        shards=sorted(held) if held is not None else ([shard[0]] if shard is not None else None),
        fence=fence,
    )
    if engine.dialect.name == "postgresql" and pipelines > 1:
        return await _pipelined(sweep, pipelines)
    return await sweep.batches(MAX_ROUNDS)


async def next_deadline(
    engine: Engine, shards: Sequence[int] | None = None, *, after: datetime
) -> datetime | None:
    """The earliest ``next_due`` (aware UTC) later than ``after`` (aware UTC: the instant the
    shards' last sweep judged at) of the checks of ``shards`` (every shard when ``None``);
    ``None`` when no check has one. A sweep just after that instant finds work: an evaluator
    sleeping until its next beat can sweep then instead (DESIGN §6: a sweep selects
    ``next_due < now``). Deadlines at or before ``after`` are left out: a check still due
    after a sweep (the self-outage guard deferred it, or a ping's batch held its row) is the
    beat's, and must not hide the deadlines after it."""
    async with UnitOfWork.read(engine) as uow:
        found = await uow.detection.next_deadline(shards, after)
    return None if found is None else found.astimezone(UTC)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Sweep:
    """One :func:`evaluate_due` call's arguments, and its loop of batches."""

    engine: Engine
    now: datetime
    settings: Settings
    batch: int
    token: int | None
    tokens: Mapping[int, int] | None
    shards: list[int] | None
    fence: Fence | None

    async def batches(
        self, rounds: int, *, on_full: Callable[[], None] | None = None, first: bool = True
    ) -> int:
        """Up to ``rounds`` batches, until one finds fewer due checks than ``batch``; returns
        how many checks they judged. ``on_full`` is called whenever a batch has locked ``batch``
        due checks (more may be due), before they are judged. ``first``: this loop's first
        batch is the sweep's first. Every later batch, and a full first one (a large sweep),
        replans its run book reads (:meth:`~monitor.storage.ports.DetectionStore.books`): the
        batches before it grew the tables they read, and a plan the server cached while they
        were nearly empty reads the whole table once per check. A sweep of fewer due checks
        than a batch (most sweeps) keeps the cached plan."""
        replan = not first

        async def one(uow: UnitOfWork) -> tuple[int, int, int]:
            return await self._one_batch(uow, on_full, replan=replan)

        judged = 0
        for _ in range(rounds):
            found, fetched, changed = await UnitOfWork.run(self.engine, one)
            judged += found
            if fetched < self.batch or changed < found:
                # a check judged without a change is still due and would head the next batch
                # again (a deadline the self-outage guard defers until a liveness renewal
                # after it): one judgment per sweep is all it can have
                break
            replan = True
        return judged

    async def _one_batch(
        self, uow: UnitOfWork, on_full: Callable[[], None] | None, *, replan: bool
    ) -> tuple[int, int, int]:
        """One batch: (checks judged, checks the selection found, checks whose state changed)."""
        if self.fence is not None:
            await self.fence(uow.connection)
        # one statement: the batch whose deadlines passed first, locked (PostgreSQL)
        rows, fetched = await uow.detection.lock_due(self.now, self.shards, self.batch, CHECK_COLUMNS)
        if fetched == self.batch:  # a large sweep: more batches will grow the tables it reads
            replan = True
            if on_full is not None:
                on_full()
        changed = 0
        if rows:
            changed = await _judge(
                uow,
                rows,
                self.now,
                settings=self.settings,
                token=self.token,
                tokens=self.tokens,
                replan=replan,
            )
        return len(rows), fetched, changed


async def _pipelined(sweep: _Sweep, pipelines: int) -> int:
    """PostgreSQL: up to ``pipelines`` loops of batches at once, each transaction on its own
    connection (``lock_due`` skips the rows another batch holds), so one batch's statements run
    in the server while another is judged in Python.

    The first loop starts alone: most sweeps find fewer due checks than a batch holds, and one
    transaction judges them (the other loops' empty transactions, a fence and a select each,
    would only slow them). Whenever a batch has locked as many due checks as it asked for, more
    may be due, and another loop starts (until ``pipelines`` have started): it locks the next
    due checks while the full batch is still being judged, where waiting for the first batch's
    commit left the server idle while it was judged (1 000 due checks: 125 ms before, 97 ms
    after). Each loop runs at most its share of :data:`MAX_ROUNDS` batches.

    The first failure (a refused fence) cancels the other loops, rolling their transactions
    back, and propagates as it is.

    Returns:
        How many checks the loops judged together.
    """
    loops: list[asyncio.Future[int]] = []
    rounds = -(-MAX_ROUNDS // pipelines)

    def another() -> None:
        if len(loops) < pipelines:
            loops.append(asyncio.ensure_future(sweep.batches(rounds, on_full=another, first=not loops)))

    another()
    judged = 0
    ended: set[asyncio.Future[int]] = set()
    try:
        while len(ended) < len(loops):  # a running loop may start another meanwhile
            done, _ = await asyncio.wait(
                [loop for loop in loops if loop not in ended], return_when=asyncio.FIRST_EXCEPTION
            )
            for loop in done:
                ended.add(loop)
                judged += loop.result()
    except BaseException:
        for loop in loops:
            loop.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        raise
    return judged


async def _judge(
    uow: UnitOfWork,
    rows: Sequence[Mapping[str, Any]],
    now: datetime,
    *,
    settings: Settings,
    token: int | None,
    tokens: Mapping[int, int] | None,
    replan: bool = False,
) -> int:
    """Judge ``rows`` (due checks) at ``now`` and write what changed; returns how many of them
    changed state."""
    guard = await load_guard(uow.connection, now, timedelta(seconds=settings.lease_ttl))
    specs = {row["id"]: repositories.spec_of(row) for row in rows}
    states = {row["id"]: repositories.state_of(row) for row in rows}
    books = await uow.detection.books(
        {cid: needed_since(specs[cid], s) for cid, s in states.items()}, replan=replan
    )
    pending = PendingWrites.empty()
    updates: list[dict[str, Any]] = []
    alerting: list[tuple[Mapping[str, Any], detection.Effects, int | None]] = []
    for row in rows:
        cid = row["id"]
        state = states[cid]
        written_token = tokens.get(row["shard"]) if tokens is not None else token
        fx = detection.evaluate(specs[cid], state, books[cid], now, guard=guard)
        pending.add(cid, fx, token=written_token)
        if fx.alerts:
            alerting.append((row, fx, written_token))
        values = repositories.state_changes(row, state)
        if values:
            values["id"] = cid
            updates.append(values)
    # the alerts are inserted with the other writes (one round trip on PostgreSQL), then their
    # notifications are queued
    plan = _alert_plan(alerting, states, now, settings)
    ids = await uow.detection.save_sweep(
        updates,
        marks=pending.marks,
        flips=pending.flips,
        new_runs=pending.new_runs,
        changed_runs=[{**r, "id": r["b_id"]} for r in pending.changed_runs],
        alerts=plan.new,
    )
    if alerting:
        await queue_alerts(uow.connection, plan, ids, now=now)
    return len(updates)


def _alert_plan(
    alerting: Sequence[tuple[Mapping[str, Any], detection.Effects, int | None]],
    states: Mapping[int, CheckState],
    now: datetime,
    settings: Settings,
) -> AlertPlan:
    """The batch's new alerts (one :func:`plan_alerts` for the batch, each check's alerts
    carrying its shard's token ``alerting`` gives: a fixed number of statements per batch
    however many checks and shards alert)."""
    return plan_alerts(
        [
            CheckAlerts(
                check=CheckIdentity.of(row),
                drafts=fx.alerts,
                status=detection.status(states[row["id"]], now),
                token=written_token,
            )
            for row, fx, written_token in alerting
        ],
        now=now,
        base_url=settings.base_url,
    )
