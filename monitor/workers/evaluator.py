"""The evaluator loop: sharded, leased, fenced (DESIGN §6).

Each round, every ``MONITOR_EVALUATE_INTERVAL`` s:

1. **Rebalance.** Read the shard count recorded in the database (the source of truth, not
   ``MONITOR_SHARDS``: :mod:`monitor.storage.cluster`; ``monitor reshard N`` changes it while
   evaluators run, and each follows within a round, releasing — and deleting the rows of —
   leases of shards that no longer exist). Survey the shard leases nobody holds
   (:meth:`~monitor.storage.leases.Leases.vacancies`); a replica that a vacant lease's row
   still names is dead (its session ended: at once after SIGKILL, within one TTL after a
   stall) and its heartbeat row is removed at once (:func:`monitor.storage.replicas.forget`)
   rather than counted live for another TTL. Announce this replica (``replicas`` heartbeat),
   compute the fair share ``ceil(shards / live evaluators)``, release the extra shard leases
   when others have joined, or take vacant ones up to the share.
2. **Sweep what was just taken**, at once: a new holder judges every due check of a shard it
   took within the round that took it, not an interval later.
3. **Plan** the next sweep: the shard leases held now, with their fencing tokens.
4. **Sleep** until one interval after the previous sweep started (:class:`Cadence`: the
   rebalance's and sweep's own time comes out of the wait, so sweeps start an interval apart
   on a loaded machine too), then **sweep** the plan: one :func:`evaluate_due` per shard, each transaction
   fenced by :func:`monitor.storage.leases.check_fence`. The plan is not re-checked against the
   local view after the sleep: a process that was stalled (GC pause, SIGSTOP) wakes up with
   exactly the stale belief the fence exists for, and the database refuses it
   (``fenced_write_rejected``), after which it steps down from that lease.
   **Early sweeps** (an evaluator in an HTTP process): when a check of the plan has a deadline
   (``next_due``) before the beat, the sleep ends :data:`EARLY_MARGIN` after it and the plan
   is swept then too (at least the cadence's ``min_rest`` after the previous sweep), so an
   alert leaves at its deadline rather than up to an interval after it; the beat's sweep
   still comes (the failover bound below holds). Only deadlines the last sweep did not see
   count (one that passed while it ran is swept at once): a check left due by a sweep is the
   beat's. Such an evaluator renews its process's liveness before every sweep, so the
   self-outage guard judges the deadlines passed before it.

A shard handed back for the fair share is released right after this replica's sweep (step 4
of the previous round, then step 1), and its new holder sweeps it in the round it takes it, so
a hand-back leaves a shard unjudged for at most one interval. After a holder dies, the
evaluator lag (``/ready``'s ``evaluator_lag_s``) therefore stays below
``2 × MONITOR_EVALUATE_INTERVAL + MONITOR_LEASE_TTL``: up to one TTL until the dead holder's
session ends (SIGSTOP; at once after SIGKILL), up to one interval until a survivor's next
round takes and sweeps the shard, plus the sweep itself. (A replica that dies holding nothing —
started, announced, killed before any hand-back reached it — names no lease, so it counts as
live until its heartbeat is one TTL old; shards released for it wait that long, then the
survivors' larger share takes them: the same bound.)

A separate task renews the leases every TTL/3 (PostgreSQL: a statement on the lease session,
which keeps ``idle_session_timeout`` from ending it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import time
import zlib
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta

from monitor.domain.clock import Clock
from monitor.domain.errors import StaleLease
from monitor.domain.shards import LEASE_PREFIX, lease_names
from monitor.failures import FailureLog
from monitor.services import Connection, Engine, sweeps
from monitor.services.evaluator import Fence, evaluate_due, next_deadline
from monitor.settings import Settings
from monitor.storage import cluster, replicas
from monitor.storage import leases as lease_store
from monitor.storage.engine import make_engine
from monitor.workers.cadence import Cadence

logger = logging.getLogger(__name__)

ROLE = "evaluator"

EARLY_MARGIN = 0.1
"""Seconds after a deadline at which an early sweep runs: a sweep judges ``next_due < now``,
and a ping received just before the deadline is given the time to be stored (p99 ping
latency is under 50 ms) before the sweep looks for it."""


def holder_name() -> str:
    """``<host>:<pid>``, how leases and replicas name this process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def fair_share(shards: int, live: int) -> int:
    """Most shards one replica takes: ``ceil(shards / live)`` (``live`` counts this one)."""
    return math.ceil(shards / max(1, live))


class ShardedEvaluator:
    """One process's evaluator: its shard leases, its plan and its sweeps.

    Args:
        engine: the database (heartbeats, the stored shard count; SQLite sweeps).
        settings: ``lease_ttl``, ``evaluate_interval``, ``base_url``; ``shards`` only until
            the first :meth:`rebalance` reads the stored count (or pass ``shards``).
        clock: the clock (every instant written comes from it).
        sweep_engine: where sweeps run; on PostgreSQL a pool whose sessions end a transaction
            idle for one TTL (default ``engine``).
        holder: ``<host>:<pid>`` (default this process's).
    """

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        clock: Clock,
        *,
        sweep_engine: Engine | None = None,
        holder: str | None = None,
        shards: int | None = None,
    ) -> None:
        self.engine = engine
        self.sweep_engine = sweep_engine or engine
        self.settings = settings
        self.clock = clock
        self.holder = holder or holder_name()
        self.ttl = timedelta(seconds=settings.lease_ttl)
        self.leases = lease_store.open_leases(engine, self.holder, self.ttl)
        self.shards = 0
        self._swept_at: dict[str, datetime] = {}
        """Per shard lease name, the instant its last sweep judged at (aware UTC)."""
        self.names: list[str] = []
        self._order: list[str] = []
        self._use_count(shards or settings.shards)
        self.sweep_failures = FailureLog(logger, "evaluator sweep", action="evaluator_failed")
        self.renew_failures = FailureLog(logger, "lease renewal", action="lease_renewal_failed")

    def _use_count(self, shards: int) -> None:
        self.shards = shards
        self.names = lease_names(shards)
        start = zlib.crc32(self.holder.encode()) % shards
        self._order = self.names[start:] + self.names[:start]  # replicas start at different shards

    async def follow_shard_count(self) -> None:
        """Adopt the stored shard count if a reshard changed it; drop leases of shards gone.

        Leases outside the count are released and their rows deleted (when nobody took them
        meanwhile), so ``/ready`` lists only shards that exist.
        """
        async with self.engine.connect() as conn:
            stored = await cluster.stored_shard_count(conn)
        if stored is None:  # start-up could not record it (database down then): record it now
            stored = await cluster.adopt_shard_count(
                self.engine, self.shards, self.clock.now(), process="evaluator"
            )
        if stored != self.shards:
            logger.info(
                "shard_count_changed %d -> %d (resharded): following",
                self.shards,
                stored,
                extra={"action": "shard_count_changed", "before": self.shards, "shards": stored},
            )
            self._use_count(stored)
        gone = [name for name in self.leases.held if name not in self.names]
        for name in gone:
            await self.leases.release(name)
        if gone:
            async with self.engine.begin() as conn:
                await cluster.prune_stale_leases(conn, self.shards, only_free=True)

    async def rebalance(self) -> dict[str, int]:
        """Follow the stored shard count, forget dead replicas, heartbeat, then release extras or
        take vacant shards up to the fair share.

        Returns:
            The shard leases taken in this call: name → fencing token (sweep them at once).
        """
        await self.follow_shard_count()
        now = self.clock.now()
        vacant = await self.leases.vacancies(self._order, now)
        dead = await replicas.forget(self.engine, {v.last_holder for v in vacant if v.last_holder})
        for name in dead:
            orphaned = sorted(v.name for v in vacant if v.last_holder == name)
            logger.warning(
                "replica_lost %s: its leases %s are no longer held",
                name,
                ",".join(orphaned),
                extra={"action": "replica_lost", "replica": name, "leases": orphaned},
            )
        live = await replicas.announce(self.engine, self.holder, ROLE, now, self.ttl)
        share = fair_share(self.shards, live)
        held = self.leases.held
        if len(held) > share:
            # these were swept just before this call (the loop sweeps, then rebalances)
            extras = sorted(held, key=lambda n: int(n.removeprefix(LEASE_PREFIX)), reverse=True)
            for name in extras[: len(held) - share]:
                await self.leases.release(name)
                logger.info(
                    "lease_released %s (fair share %d of %d live)",
                    name,
                    share,
                    live,
                    extra={"action": "lease_released", "lease": name, "token": held[name]},
                )
            return {}
        taken: dict[str, int] = {}
        last_holder = {v.name: v.last_holder for v in vacant}
        for name in last_holder:
            if len(self.leases.held) >= share:
                break
            token = await self.leases.acquire(name, self.clock.now())
            if token is None:
                continue
            taken[name] = token
            logger.info(
                "lease_acquired %s (token %d%s)",
                name,
                token,
                f", from {last_holder[name]}" if last_holder[name] else "",
                extra={
                    "action": "lease_acquired",
                    "lease": name,
                    "token": token,
                    "previous_holder": last_holder[name],
                },
            )
        return taken

    async def sweep(self, plan: Mapping[str, int]) -> int:
        """Evaluate each planned shard under its fencing token; returns checks evaluated.

        The sweep's wall-clock duration (seconds) is recorded for ``/metrics``
        (``monitor_evaluator_sweep_duration_seconds``) whatever the shards' outcome.
        """
        started = time.perf_counter()
        # before the sweep's own instant: a deadline between the two is swept again, never missed
        self._swept_at.update(dict.fromkeys(plan, self.clock.now()))
        try:
            return await self._sweep(plan)
        finally:
            if plan:
                sweeps.record_sweep(time.perf_counter() - started)

    async def _sweep(self, plan: Mapping[str, int]) -> int:
        """Every planned shard in one :func:`evaluate_due` (batches span the shards), each
        transaction fenced on all their leases at once. A lease the database refuses is
        stepped down from and the other shards are swept again without it."""
        remaining = dict(plan)
        while remaining:
            now = self.clock.now()
            held = {int(name.removeprefix(LEASE_PREFIX)): token for name, token in remaining.items()}
            try:
                count = await evaluate_due(
                    self.sweep_engine,
                    now,
                    settings=self.settings,
                    held=held,
                    fence=self._fence(dict(remaining), now),
                )
            except StaleLease as stale:
                logger.warning(
                    "fenced_write_rejected lease=%s token=%d current=%s: %s",
                    stale.lease,
                    stale.token,
                    stale.current,
                    stale,
                    extra={
                        "action": "fenced_write_rejected",
                        "lease": stale.lease,
                        "token": stale.token,
                        "current": stale.current,
                    },
                )
                await self.leases.step_down(stale.lease)
                if remaining.pop(stale.lease, None) is None:
                    return 0  # a lease outside the plan: nothing sensible to retry
                continue
            except asyncio.CancelledError:
                raise
            except Exception as error:
                # e.g. the server ended a stalled transaction, or the database is down (one
                # traceback, then a counted line every 30 s)
                self.sweep_failures.failed(error)
                return 0
            self.sweep_failures.succeeded()
            if count:
                # debug: a check that stays down with a seconds schedule is evaluated every sweep
                logger.debug(
                    "evaluated %d checks of %s",
                    count,
                    ",".join(sorted(remaining)),
                    extra={"action": "evaluated", "checks": count, "leases": sorted(remaining)},
                )
            return count
        return 0

    async def early_sweep_at(self, plan: Mapping[str, int], within: float) -> float | None:
        """When to sweep ``plan`` before the next beat: :data:`EARLY_MARGIN` after the earliest
        deadline (``next_due``) of its shards' checks that their last sweep did not see, as a
        :func:`time.monotonic` instant, if that deadline is at most ``within`` seconds away (at
        once for one that passed while or since the last sweep ran). ``None``: no such deadline,
        or it could not be read (the beat's sweep reports a database in trouble). Deadlines the
        last sweep saw pass are left to the beat (:func:`next_deadline` skips them): a check it
        left due (the self-outage guard deferred it, a ping's batch held its row) must neither
        turn the sleep into a busy loop nor hide the deadlines after it."""
        if not plan:
            return None
        shards = sorted(int(name.removeprefix(LEASE_PREFIX)) for name in plan)
        now = self.clock.now()
        after = min([now, *(self._swept_at[name] for name in plan if name in self._swept_at)])
        try:
            deadline = await next_deadline(
                self.sweep_engine, None if len(shards) >= self.shards else shards, after=after
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            return None
        if deadline is None:
            return None
        seconds = (deadline - now).total_seconds()
        if seconds > within:
            return None
        return time.monotonic() + max(seconds + EARLY_MARGIN, 0.0)

    def _fence(self, tokens: Mapping[str, int], now: datetime) -> Fence:
        async def fence(conn: Connection) -> None:
            await lease_store.check_fences(conn, tokens, self.holder, now)

        return fence

    async def renew_forever(self) -> None:
        """Renew the leases every TTL/3 (losses are logged by the lease implementation)."""
        period = self.ttl.total_seconds() / 3
        while True:
            await asyncio.sleep(period)
            try:
                await self.leases.renew(self.clock.now())
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self.renew_failures.failed(error)
            else:
                self.renew_failures.succeeded()

    async def close(self) -> None:
        """Release every lease and retire the replica row (clean shutdown)."""
        await self.leases.close()
        with contextlib.suppress(Exception):
            await replicas.retire(self.engine, self.holder)


async def _sweep_and_wake(
    evaluator: ShardedEvaluator,
    plan: Mapping[str, int],
    wake: asyncio.Event | None,
    alive: Callable[[], Awaitable[object]] | None,
) -> None:
    """Renew this process's liveness (``alive``, when given), then sweep ``plan``; wake the
    notifier when checks were judged (their alerts may be queued). A failure is counted in the
    sweep's failure log, never raised into the loop."""
    if alive is not None:
        await _renew(alive)
    try:
        if await evaluator.sweep(plan) and wake is not None:
            wake.set()
    except asyncio.CancelledError:
        raise
    except Exception as error:
        evaluator.sweep_failures.failed(error)


async def _renew(alive: Callable[[], Awaitable[object]]) -> None:
    """Renew this process's liveness before a sweep; a failure only leaves the deadlines
    passed since the last renewal to a later sweep (the self-outage guard defers them until a
    renewal after them)."""
    try:
        await alive()
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.debug("liveness renewal before a sweep failed", exc_info=True)


async def run_evaluator(
    engine: Engine,
    settings: Settings,
    clock: Clock,
    *,
    wake: asyncio.Event | None = None,
    alive: Callable[[], Awaitable[object]] | None = None,
) -> None:
    """Loop forever: rebalance the shard leases, sweep those just taken, plan, sleep, sweep the
    plan (fenced); sweep it also just after each deadline that comes before the beat.

    ``alive``: in a process that serves pings, renews its liveness row (DESIGN §6); awaited
    before each sweep, so the self-outage guard, which judges a deadline only once an HTTP
    process has been seen alive after it, lets the sweep judge the deadlines passed before it
    (the one an early sweep woke for, and those a beat finds) instead of deferring them to a
    sweep after the liveness task's next renewal. Without it (``monitor evaluate``, a process
    of its own) there are no early sweeps: the guard would defer their deadlines until another
    process's next renewal.

    Long because the evaluator loop's lease, sweep, backoff and shutdown steps share its state.
    """
    sweep_engine = engine
    own_engine: Engine | None = None
    if engine.dialect.name == "postgresql":
        own_engine = make_engine(
            engine.url.render_as_string(hide_password=False),
            pool_size=2,
            idle_in_transaction_timeout=settings.lease_ttl,
        )
        sweep_engine = own_engine
    shards = settings.shards
    try:
        # the database's count wins over MONITOR_SHARDS (warning shard_count_mismatch)
        shards = await cluster.adopt_shard_count(engine, settings.shards, clock.now(), process="evaluator")
    except Exception:
        logger.exception("could not read the stored shard count", extra={"action": "shard_count_failed"})
    evaluator = ShardedEvaluator(engine, settings, clock, sweep_engine=sweep_engine, shards=shards)
    renewer: asyncio.Task[None] | None = None
    try:
        renewer = asyncio.create_task(evaluator.renew_forever(), name="lease-renewal")
        plan: dict[str, int] = {}
        cadence = Cadence(settings.evaluate_interval)  # sweeps start an interval apart
        cadence.start()
        rebalance_failures = FailureLog(logger, "shard rebalance", action="rebalance_failed")
        while True:
            taken: dict[str, int] = {}
            try:
                taken = await evaluator.rebalance()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                rebalance_failures.failed(error)
            else:
                rebalance_failures.succeeded()
            if taken:
                # a new holder judges its shards' due checks now, not after the sleep
                await _sweep_and_wake(evaluator, taken, wake, alive)
            plan = dict(evaluator.leases.held)
            while True:  # sweep at each deadline that comes before the beat, then at the beat
                early = None
                if alive is not None:  # elsewhere the guard would defer the deadline anyway
                    early = await evaluator.early_sweep_at(plan, settings.evaluate_interval)
                if early is not None:  # sweeps at least min_rest apart, as the cadence's own
                    early = max(early, time.monotonic() + cadence.min_rest)
                beat = await cadence.wait(early)
                await _sweep_and_wake(evaluator, plan, wake, alive)
                if beat:
                    break
    finally:
        if renewer is not None:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await renewer
        try:
            await asyncio.shield(evaluator.close())
        except Exception:
            logger.warning("could not release the evaluator leases", extra={"action": "lease_release_failed"})
        if own_engine is not None:
            await own_engine.dispose()
