"""The bundled scheduler's loop: leases per job, claims per tick, runs, reports (DESIGN §8).

Every round (at most :data:`ROUND` seconds apart, and at each next tick of a held job):

1. For each job whose lease ``job-<name>`` this process does not hold, try to take it
   (never waiting), up to the fair share ``ceil(jobs / live scheduler replicas)`` (replicas
   announce themselves in ``replicas`` every TTL/3, as evaluators do; above its share a replica
   gives up one idle job lease per round). On taking it, read the job's newest claimed
   tick — the new holder runs every unclaimed tick after it, in order, with its original
   time — and its *orphans*
   (``claimed`` rows of an older token: their claimant lost the lease before recording the
   start), which run again as attempt 2.
2. For each held job: the unclaimed ticks up to now (the *backlog*, bounded by
   ``max_catchup``) and the queued ones go through :func:`monitor.domain.planning.plan`;
   skipped ticks are claimed as ``skipped`` and reported with a ``skip`` ping; started ones
   are claimed, marked ``started`` (both fenced by the lease token), spawned, and reported.

A separate task renews the leases every TTL/3; a lease found lost forgets the job's queue
(those ticks are unclaimed, so the next holder runs them). A fenced write refused as stale
steps down from the lease. Runs already started go on and are reported whatever happens to
the lease: their start was recorded, so no one runs them again — while this replica keeps
heartbeating, its successor counts them as running (``Forbid`` waits for them). A replica whose
heartbeat lapsed for a TTL (a stall: SIGSTOP, a frozen VM; or cut off from the database) is not
counted, so its successor may start the job's next tick beside the run (``Replace`` does so
anyway). Every lease renewal (TTL/3) this replica looks at the runs of jobs whose lease it
lost: one that a newer holder's later run has overtaken is terminated (:data:`LEASE_LOST`:
SIGTERM to the group, SIGKILL after :data:`executor.TERMINATE_GRACE`) and reported, unless the
job's policy is ``Allow`` — rather than keep two copies running.

Shutdown (:meth:`Scheduler.run` returns when ``stop`` is set): take no new ticks; release at once
the lease of every job with no run in progress (another replica runs its next tick on time); keep
and renew only those of jobs with runs, each released once its last run has ended and been
recorded; let running jobs finish for up to ``shutdown_grace`` seconds (meanwhile a ``Forbid``
tick due beside the run is skipped, any other left unclaimed for the next holder), terminate the
rest, report them, release the leases left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import time
import uuid
import zlib
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from monitor.domain import planning
from monitor.domain.clock import Clock
from monitor.domain.cron import schedules
from monitor.domain.errors import StaleLease
from monitor.domain.jobs import ConcurrencyPolicy, Job
from monitor.scheduler import executor, guard
from monitor.scheduler.reporter import Reporter
from monitor.services import Engine
from monitor.storage import claims, replicas
from monitor.storage import leases as lease_store
from monitor.storage.engine import session_lost

logger = logging.getLogger(__name__)

ROUND = 0.2
"""Longest sleep between two rounds, seconds (a round also wakes at a held job's next tick)."""
SKIP_REPORT_LIMIT = 1000
"""Ticks older than the newest ``max_catchup`` still reported with a ``skip`` ping (the oldest
beyond this are only logged)."""
CLAIM_RETENTION = timedelta(days=1)
"""Finished and skipped claims older than this are pruned (the monitor keeps the run history)."""
PRUNE_EVERY = timedelta(minutes=10)
"""How often a holder prunes its jobs' old claims."""
STALE_REASON = "lease_lost_before_spawn"
"""The ``reason`` of a tick refused because the lease was lost between its start record and the
spawn (its claim row becomes ``skipped``; the monitor gets a ``skip`` ping)."""
HOLDER_DIED = "holder_died"
"""The ``reason`` recorded on a started run closed by the next holder: the replica that ran it
died (its job died with it, see :mod:`monitor.scheduler.executor`); its outcome is unknown."""
FENCE_WINDOW = 0.9
"""Fraction of the lease TTL after a fence check within which a run may still be spawned
(PostgreSQL; the server may end the checking transaction one TTL after it went idle)."""
LEASE_LOST = "lease lost; the next holder started a later tick"
"""Why a run is terminated when its replica lost the job's lease and was overtaken."""
SESSION_TIMEOUT = 0.75
"""The job lease session's idle timeouts, as a fraction of the TTL (PostgreSQL): the server frees
a stalled replica's job leases 3/4 of a TTL after its last renewal (every TTL/3), so with
:data:`ORPHAN_POLL` a standby takes them over within one TTL of the stall."""
ORPHAN_POLL = 0.1
"""How often, as a fraction of the lease TTL, a replica at its fair share looks for job leases
whose holder died or stalled (so a takeover lands within one TTL)."""
ROLE = "scheduler"
"""The role scheduler replicas announce in the ``replicas`` table (fair share of the jobs)."""


def holder_name() -> str:
    """``<host>:<pid>``, how leases name this process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def holder_dead(holder: str, live: set[str] | None = None) -> bool:
    """Whether the replica ``<host>:<pid>`` is known dead: on this host, no process has that
    pid, or only its zombie (killed, not reaped yet by its parent: a supervisor that has not
    waited for it yet; a stopped process is alive); elsewhere, it is not among the ``live``
    replicas (``None``: unknown, so not dead)."""
    host, _, pid = holder.rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return _zombie(int(pid))
    return live is not None and holder not in live


def _zombie(pid: int) -> bool:
    """Whether process ``pid`` has exited and waits to be reaped (Linux ``/proc``; elsewhere
    ``False``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
    except OSError:
        return False
    return bool(fields) and fields[0] in (b"Z", b"X")


def log_failure(message: str, error: BaseException, action: str, **extra: Any) -> None:
    """Log a failed database call of the loop: a lost session (the server ended it during a
    stall, the connection was invalidated and the next call gets a fresh one) as one warning
    line, anything else with its traceback."""
    if session_lost(error):
        logger.warning(
            "%s: database session lost (%s: %s); going on with a fresh connection",
            message,
            type(error).__name__,
            " ".join(str(error).split())[:300],
            extra={"action": action, "session_lost": True, **extra},
        )
    else:
        logger.exception(message, exc_info=error, extra={"action": action, **extra})


@dataclass(kw_only=True, slots=True)
class Slot:
    """One job's state in this process."""

    job: Job
    rules: planning.Rules
    token: int | None = None
    through: datetime | None = None
    """The newest tick claimed or planned; unclaimed ticks after it are the backlog."""
    queue: list[planning.Due] = field(default_factory=list)
    orphans: dict[datetime, claims.Claim] = field(default_factory=dict)
    stranded: dict[datetime, claims.Claim] = field(default_factory=dict)
    """Runs a previous holder started and has not recorded as finished, until they finish or
    their holder is found dead (then they are closed, :meth:`Scheduler._settle_stranded`)."""
    busy: int = 0
    """How many of :attr:`stranded` count as running (``Forbid`` waits for them): those whose
    holder still heartbeats (it lost the lease, not its life; it reports them itself)."""
    runs: set[executor.Execution] = field(default_factory=set)
    replacing: bool = False
    """A ``Replace`` step is in flight (terminating the runs in progress, then starting
    :attr:`replace_next`): it counts as a run in progress, so a round meanwhile hands its tick to
    that step instead of starting it beside the run the step is about to start."""
    replace_next: planning.Due | None = None
    """The tick the step in flight starts once the runs in progress have ended; a newer tick due
    meanwhile takes its place, and it is skipped as ``replaced`` (Kubernetes' ``Replace``: only
    the newest tick starts)."""
    unrecorded: int = 0
    """Runs of this replica whose end is not recorded yet (a stopping replica keeps the lease)."""
    unheld_since: datetime | None = None
    """When this replica first saw the job's lease unheld (above its share; see :meth:`Scheduler.round`)."""
    sticky: bool = False
    """Taken above the fair share because no replica below its share took it: not given up again
    (its other replicas may not know the job) until the replica count changes."""

    def forget(self) -> None:
        """The lease is gone: forget what only a holder may act on."""
        self.token = None
        self.through = None
        self.queue.clear()
        self.orphans.clear()
        self.stranded.clear()
        self.busy = 0


class Scheduler:
    """One process's scheduler.

    Args:
        engine: the database of claims and leases (on PostgreSQL, one whose sessions end a
            transaction idle for a TTL, as :func:`monitor.scheduler.serve` makes).
        jobs: the jobs.
        clock: the clock (every instant planned with comes from it).
        reporter: where runs are reported.
        lease_ttl: lease TTL; the handover window is two TTLs.
        holder: ``<host>:<pid>`` (default this process's).
        base_env: the environment runs inherit (default the scheduler's own).
        pre_spawn_delay: testing aid: seconds to wait between recording a run's start and
            spawning it (a window in which a test stalls the process).
    """

    def __init__(
        self,
        engine: Engine,
        jobs: Sequence[Job],
        clock: Clock,
        reporter: Reporter,
        *,
        lease_ttl: timedelta,
        holder: str | None = None,
        base_env: Mapping[str, str] | None = None,
        pre_spawn_delay: float = 0.0,
    ) -> None:
        self.engine = engine
        self.pre_spawn_delay = pre_spawn_delay
        self.clock = clock
        self.reporter = reporter
        self.ttl = lease_ttl
        self.handover_window = 2 * lease_ttl
        self.holder = holder or holder_name()
        self.base_env = base_env
        self.leases = lease_store.open_leases(engine, self.holder, lease_ttl, lease_ttl * SESSION_TIMEOUT)
        slots = [Slot(job=job, rules=planning.Rules.of(job)) for job in jobs]
        start = zlib.crc32(self.holder.encode()) % max(1, len(slots))
        self.slots = slots[start:] + slots[:start]  # replicas try the jobs in different orders
        self._tasks: set[asyncio.Task[None]] = set()
        self.live = 1
        """Live scheduler replicas (this one included), from the last heartbeat."""
        self._pruned_at: datetime | None = None
        self.started = clock.now()
        """The floor of a never-claimed job's ticks (its registration with this replica)."""
        self.stopping = False
        self._stop: asyncio.Event | None = None
        self._unheld_checked: datetime | None = None

    # ------------------------------------------------------------------ leases

    def _fence(self, slot: Slot) -> claims.Fence:
        assert slot.token is not None
        return claims.Fence(lease=slot.job.lease_name, token=slot.token, holder=self.holder)

    async def _take(self, slot: Slot) -> None:
        name = slot.job.lease_name
        free = await self.leases.free([name], self.clock.now())
        if not free:
            return
        now = self.clock.now()
        token = await self.leases.acquire(name, now)
        if token is None:
            return
        async with self.engine.connect() as conn:
            last = await claims.last_claimed(conn, slot.job.name)
            orphans = await claims.orphans(conn, slot.job.name, token)
            stranded = await claims.stranded(conn, slot.job.name, token)
        slot.token = token
        slot.stranded = {c.tick: c for c in stranded}
        # never claimed: its ticks count from when this replica started knowing the job, so a
        # lease handed over during the first rebalance does not lose the first tick
        slot.through = last if last is not None else min(self.started, now)
        slot.unheld_since = None
        slot.queue.clear()
        slot.orphans = {o.tick: o for o in orphans}
        logger.info(
            "lease_acquired %s (token %d, last claimed tick %s, %d orphaned)",
            name,
            token,
            schedules.format_utc(last) if last else "none",
            len(orphans),
            extra={"action": "lease_acquired", "lease": name, "token": token},
        )

    async def _step_down(self, slot: Slot, error: StaleLease) -> None:
        logger.warning(
            "fenced_write_rejected %s: %s",
            slot.job.lease_name,
            error,
            extra={"action": "fenced_write_rejected", "lease": slot.job.lease_name, "token": error.token},
        )
        slot.forget()
        await self.leases.step_down(slot.job.lease_name)

    async def _session_lost(self, slot: Slot, error: BaseException) -> None:
        """A write of this job's lost its database session (the server ended it, most likely
        during a stall that also cost the lease): whether it committed is unknown, so step down
        rather than go on from a view of the claims that may be wrong. The next holder (maybe
        this replica again) re-reads them: an unclaimed tick runs, a claimed one runs as an
        orphan (attempt 2)."""
        name = slot.job.lease_name
        logger.warning(
            "lease_stepped_down %s: database session lost (%s); the next holder re-reads its claims",
            name,
            type(error).__name__,
            extra={"action": "lease_stepped_down", "lease": name, "session_lost": True},
        )
        slot.forget()
        try:
            await self.leases.step_down(name)
        except asyncio.CancelledError:
            raise
        except Exception as failure:
            log_failure("could not step down from a job lease", failure, "lease_release_failed")

    @property
    def share(self) -> int:
        """Most job leases this replica takes: ``ceil(jobs / live replicas)``."""
        return math.ceil(len(self.slots) / max(1, self.live))

    async def announce(self) -> None:
        """Heartbeat in ``replicas``; learn how many scheduler replicas are live."""
        try:
            live = await replicas.announce(self.engine, self.holder, ROLE, self.clock.now(), self.ttl)
            if live != self.live:  # new replicas may know the jobs taken above the share
                for slot in self.slots:
                    slot.sticky = False
            self.live = live
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log_failure("replica heartbeat failed", error, "replica_heartbeat_failed")

    async def _release_extra(self) -> None:
        """Above the fair share (replicas joined): give up one idle job lease per round."""
        # leases taken above the share (no other replica took them) do not count: giving one
        # back would only make it wait a TTL unheld again
        held = [s for s in self.slots if s.token is not None and not s.sticky]
        if len(held) <= self.share:
            return
        idle = [s for s in held if not s.runs and not s.queue]
        if not idle:
            return
        slot = idle[-1]
        name = slot.job.lease_name
        slot.forget()
        await self.leases.release(name)
        logger.info(
            "lease_released %s (fair share %d of %d live)",
            name,
            self.share,
            self.live,
            extra={"action": "lease_released", "lease": name},
        )

    async def renew_forever(self) -> None:
        """Renew the held leases every TTL/3; a lost lease forgets its job's queue."""
        period = self.ttl.total_seconds() / 3
        while True:
            await asyncio.sleep(period)
            await self.announce()
            try:
                lost = await self.leases.renew(self.clock.now())
            except asyncio.CancelledError:
                raise
            except Exception as error:
                log_failure("lease renewal failed", error, "lease_renewal_failed")
                await self._end_overtaken_runs()
                continue
            held = self.leases.held
            for slot in self.slots:
                if slot.token is not None and (
                    slot.job.lease_name in lost or slot.job.lease_name not in held
                ):
                    slot.forget()
            await self._end_overtaken_runs()

    async def _end_overtaken_runs(self) -> None:
        """Terminate the runs of a job whose lease this replica lost once a newer holder started
        a later tick (see the module docstring); a run that already ended (its exit not read
        yet) is left to report, and ``Allow`` jobs may overlap."""
        for slot in self.slots:
            if slot.job.concurrency_policy is ConcurrencyPolicy.ALLOW:
                continue
            for execution in list(slot.runs):
                context = execution.context
                if execution.terminated or context.token == slot.token or executor.exited(execution):
                    continue
                try:
                    async with self.engine.connect() as conn:
                        overtaken = await claims.overtaken(conn, context.job, context.tick, context.token)
                except asyncio.CancelledError:
                    raise
                except Exception as error:
                    log_failure("could not read claims", error, "claims_read_failed")
                    return
                if not overtaken:
                    continue
                logger.warning(
                    "run_terminated %s %s (token %d): %s",
                    slot.job.name,
                    schedules.format_utc(execution.context.tick),
                    execution.context.token,
                    LEASE_LOST,
                    extra={"action": "run_terminated", "job": slot.job.name, "rid": execution.context.run_id},
                )
                self._spawn(execution.terminate(LEASE_LOST))

    # ------------------------------------------------------------------ one round

    async def _orphaned(self) -> set[str]:
        """Jobs of this replica whose lease to take above the fair share (checked every
        :data:`ORPHAN_POLL` of a TTL): one whose holder died or stalled past the TTL (PostgreSQL:
        no session holds its lock any more, the database's own view; SQLite: its row expired),
        taken at once, and one left unheld for a TTL.

        Replicas may run different jobs files (a rolling deploy adding a job): a job only this
        replica knows must run even above its fair share, so a lease no replica below its share
        took within a TTL is taken anyway (and kept, see :attr:`Slot.sticky`).
        """
        now = self.clock.now()
        if self._unheld_checked is not None and now - self._unheld_checked < self.ttl * ORPHAN_POLL:
            return set()
        self._unheld_checked = now
        unheld = [s for s in self.slots if s.token is None]
        if not unheld:
            return set()
        vacant = {v.name: v for v in await self.leases.vacancies([s.job.lease_name for s in unheld], now)}
        out: set[str] = set()
        for slot in unheld:
            vacancy = vacant.get(slot.job.lease_name)
            if vacancy is None:  # a live holder has it
                slot.unheld_since = None
                continue
            if vacancy.last_holder is not None:
                # its holder died (SIGKILL, crash) or stalled without releasing it: take it over
                # now, above the share (the dead replica still counts as live for up to a TTL)
                out.add(slot.job.name)
                continue
            slot.unheld_since = slot.unheld_since or now
            if now - slot.unheld_since >= self.ttl:
                out.add(slot.job.name)
        return out

    async def round(self) -> None:
        """Take free job leases (up to the fair share, and beyond it a lease left unheld for a
        TTL), then plan and act for every held job."""
        orphaned: set[str] = set()
        if self.stopping or (self._stop is not None and self._stop.is_set()):
            return
        if sum(s.token is not None for s in self.slots) >= self.share:
            try:
                orphaned = await self._orphaned()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                log_failure("could not read the job leases", error, "lease_read_failed")
        for slot in self.slots:
            try:
                if slot.token is None and sum(s.token is not None for s in self.slots) < self.share:
                    await self._take(slot)
                elif slot.token is None and slot.job.name in orphaned:
                    await self._take(slot)
                    slot.sticky = slot.token is not None
                if slot.token is not None:
                    await self._step(slot)
            except StaleLease as error:
                await self._step_down(slot, error)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if session_lost(error):
                    await self._session_lost(slot, error)
                    continue
                logger.exception(
                    "scheduler round failed for %s",
                    slot.job.name,
                    extra={"action": "scheduler_failed", "job": slot.job.name},
                )
        await self._prune()
        try:
            await self._release_extra()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log_failure("could not release a job lease", error, "lease_release_failed")

    async def _prune(self) -> None:
        now = self.clock.now()
        if self._pruned_at is not None and now - self._pruned_at < PRUNE_EVERY:
            return
        self._pruned_at = now
        for slot in self.slots:
            if slot.token is None:
                continue
            try:
                removed = await claims.prune(self.engine, slot.job.name, now - CLAIM_RETENTION)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                log_failure("claim pruning failed", error, "claims_prune_failed")
                continue
            if removed:
                logger.info(
                    "pruned %d old claims of %s",
                    removed,
                    slot.job.name,
                    extra={"action": "claims_pruned", "job": slot.job.name, "count": removed},
                )

    def next_wake(self, now: datetime) -> float:
        """Seconds to sleep before the next round (at most :data:`ROUND`)."""
        wake = ROUND
        for slot in self.slots:
            if slot.token is None:
                continue
            tick = slot.job.schedule.next_tick(now)
            if tick is not None:
                wake = min(wake, max(0.0, (tick - now).total_seconds()))
        return wake

    async def _step(self, slot: Slot) -> None:
        job = slot.job
        now = self.clock.now()
        assert slot.through is not None
        # ticks beyond max_catchup are skipped by the plan (each gets a skip ping), up to
        # SKIP_REPORT_LIMIT of them; older ones still are only logged
        ticks, more = planning.overdue_ticks(
            job.schedule, slot.through, now, job.max_catchup + SKIP_REPORT_LIMIT
        )
        if more:
            logger.warning(
                "%s: more than max_catchup=%d + %d ticks were missed; the oldest are not reported",
                job.name,
                job.max_catchup,
                SKIP_REPORT_LIMIT,
                extra={"action": "catchup_capped", "job": job.name},
            )
        backlog = [planning.Due(tick=o.tick, attempt=o.attempt + 1) for o in slot.orphans.values()]
        backlog += [planning.Due(tick=tick) for tick in ticks]
        self._reap(slot)
        if slot.stranded:
            await self._settle_stranded(slot)
            if slot.token is None:
                return  # the lease was lost meanwhile (Slot.forget): nothing left to plan
        if not backlog and not slot.queue:
            return
        plan = planning.plan(
            slot.rules,
            running=len(slot.runs) + slot.busy + int(slot.replacing),
            queued=slot.queue,
            backlog=backlog,
            now=now,
            handover_window=self.handover_window,
        )
        if ticks:
            slot.through = max(slot.through, ticks[-1])
        slot.queue = list(plan.queue)
        for due, reason in plan.skip:
            await self._skip(slot, due, reason, now)
        if plan.terminate_running and (slot.runs or slot.replacing):
            # terminating may take TERMINATE_GRACE seconds: never on the loop's own time
            for due in plan.start:
                await self._replace_with(slot, due, now)
            if not slot.replacing:
                slot.replacing = True
                self._spawn(self._replace(slot))
            return
        for due in plan.start:
            await self._start(slot, due)

    async def _settle_stranded(self, slot: Slot) -> None:
        """Forget a previous holder's runs that finished meanwhile; close those whose holder is
        dead: claim ``finished`` with no exit status (outcome unknown, reason
        :data:`HOLDER_DIED`) and an ``unknown`` ping (the run died with its scheduler, nobody can
        tell how it ended: outcome ``unknown``, no failure alert; the dead scheduler is an alert
        of its own, through its liveness check), so the monitor does not keep it in progress
        until ``max_runtime`` and flag every later run ``overlapped``."""
        async with self.engine.connect() as conn:
            current = await claims.states(conn, slot.job.name, list(slot.stranded))
            live = await replicas.live(conn, ROLE, self.clock.now(), self.ttl)
        slot.busy = 0
        for tick, claim in list(slot.stranded.items()):
            if current.get(tick) is not claims.ClaimState.STARTED:
                slot.stranded.pop(tick, None)
                continue
            if not holder_dead(claim.holder, live):
                # a stalled holder (no heartbeat) neither counts nor is closed: it may come
                # back and report the run itself, and it must not block the job meanwhile
                slot.busy += claim.holder in live
                continue
            slot.stranded.pop(tick, None)
            if not await claims.close_stranded(self.engine, claim, self.clock.now(), HOLDER_DIED):
                continue
            logger.warning(
                "run_closed %s %s: its scheduler %s died (token %d); outcome unknown",
                slot.job.name,
                schedules.format_utc(tick),
                claim.holder,
                claim.token,
                extra={"action": "run_closed", "job": slot.job.name, "rid": claim.run_id},
            )
            if claim.run_id is not None:
                self.reporter.lost(
                    slot.job,
                    tick,
                    claim.attempt,
                    claim.run_id,
                    (
                        f"[monitor scheduler: the scheduler running this job ({claim.holder}, "
                        f"token {claim.token}) died; the run was killed with it; its outcome is "
                        "unknown]\n"
                    ).encode(),
                )

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _replace_with(self, slot: Slot, due: planning.Due, now: datetime) -> None:
        """Make ``due`` the tick the ``Replace`` step starts; the one it was to start is skipped
        as ``replaced`` (claimed and reported now)."""
        superseded, slot.replace_next = slot.replace_next, due
        if superseded is not None and superseded.tick != due.tick:
            await self._skip(slot, superseded, planning.SkipReason.REPLACED, now)

    async def _replace(self, slot: Slot) -> None:
        """``Replace``: terminate the runs in progress, then (still holding the lease and not
        stopping) start :attr:`Slot.replace_next`; until it is claimed the tick stays unclaimed.

        One step at a time per job, for as long as rounds hand it ticks: each pass terminates
        the runs in progress when it begins, and starts only the newest tick handed to it
        meanwhile (the others were skipped as ``replaced``), unless that tick is past the job's
        ``starting_deadline`` (then skipped as such): a run slow to end on SIGTERM delays the
        next run, never more and more of them."""
        try:
            while (due := slot.replace_next) is not None:
                if self.stopping or slot.token is None:
                    return
                self._reap(slot)
                reason = f"replaced by the tick {schedules.format_utc(due.tick)}"
                ending = [run.terminate(reason) for run in list(slot.runs)]
                await asyncio.gather(*ending, return_exceptions=True)
                due, slot.replace_next = slot.replace_next, None  # the newest, handed over meanwhile
                if due is None or self.stopping or slot.token is None:
                    return
                if not await self._start_replacement(slot, due):
                    return
        finally:
            slot.replacing = False
            slot.replace_next = None
            await self._release_if_done(slot)  # stopping: the lease waited for this step

    async def _start_replacement(self, slot: Slot, due: planning.Due) -> bool:
        """Start ``due``, or skip it: as ``replaced`` when a newer tick is due already (its own
        round starts it), past the starting deadline as such; ``False``: the lease or the
        database session was lost, the step ends."""
        now = self.clock.now()
        deadline = slot.rules.starting_deadline
        newest = slot.job.schedule.tick_at_or_before(now)
        try:
            if newest is not None and newest > due.tick:
                # a newer tick came due while the run was ending and its round has yet to come:
                # that round starts it (nothing runs now), this one would be killed at once
                await self._skip(slot, due, planning.SkipReason.REPLACED, now)
            elif deadline is not None and now - due.tick > deadline:
                await self._skip(slot, due, planning.SkipReason.STARTING_DEADLINE, now)
            else:
                await self._start(slot, due)
        except StaleLease as error:
            await self._step_down(slot, error)
            return False
        except Exception as error:
            if session_lost(error):
                await self._session_lost(slot, error)
                return False
            logger.exception(
                "could not start %s",
                slot.job.name,
                extra={"action": "scheduler_failed", "job": slot.job.name},
            )
        return True

    def _reap(self, slot: Slot) -> None:
        slot.runs = {r for r in slot.runs if r.task is None or not r.task.done()}

    async def _skip(self, slot: Slot, due: planning.Due, reason: planning.SkipReason, now: datetime) -> None:
        fence = self._fence(slot)
        orphan = slot.orphans.pop(due.tick, None)
        async with self.engine.begin() as conn:
            if orphan is not None:
                done = await claims.retake(
                    conn, fence, orphan, now=now, run_id=None, state=claims.ClaimState.SKIPPED, reason=reason
                )
            else:
                done = await claims.claim(
                    conn,
                    fence,
                    slot.job.name,
                    due.tick,
                    now=now,
                    run_id=None,
                    state=claims.ClaimState.SKIPPED,
                    reason=reason.value,
                )
        if not done:
            return
        logger.info(
            "tick_skipped %s %s (%s)",
            slot.job.name,
            schedules.format_utc(due.tick),
            reason,
            extra={"action": "tick_skipped", "job": slot.job.name, "reason": reason.value},
        )
        self.reporter.skip(slot.job, due.tick, due.attempt, reason.value)

    async def _start(self, slot: Slot, due: planning.Due) -> None:
        job = slot.job
        if self.stopping or (self._stop is not None and self._stop.is_set()):
            return  # stopping: the tick stays unclaimed for the next holder
        fence = self._fence(slot)
        rid = str(uuid.uuid4())
        orphan = slot.orphans.pop(due.tick, None)
        now = self.clock.now()
        async with self.engine.begin() as conn:
            if orphan is not None:
                taken = await claims.retake(conn, fence, orphan, now=now, run_id=rid)
            else:
                taken = await claims.claim(conn, fence, job.name, due.tick, now=now, run_id=rid)
        if not taken:
            return
        # A second transaction on purpose: a holder that loses the lease between the claim and
        # this write leaves the tick ``claimed`` for the next holder to run (attempt 2).
        now = self.clock.now()
        async with self.engine.begin() as conn:
            if not await claims.mark_started(conn, fence, job.name, due.tick, now):
                return
        attempt = orphan.attempt + 1 if orphan is not None else due.attempt
        context = executor.RunContext(
            job=job.name, tick=due.tick, run_id=rid, token=fence.token, attempt=attempt
        )
        execution = executor.Execution(context=context)
        if self.pre_spawn_delay:
            await asyncio.sleep(self.pre_spawn_delay)  # testing aid: a window to SIGSTOP us in
        try:
            early = await self._fenced_spawn(fence, execution)
        except (StaleLease, executor.SpawnTooLate) as error:
            await self._refuse_stale(slot, context, error)
            if isinstance(error, StaleLease):
                raise
            return
        execution.task = asyncio.create_task(executor.finish(execution, job, self.base_env, early))
        slot.runs.add(execution)
        logger.info(
            "run_started %s %s attempt %d token %d",
            job.name,
            schedules.format_utc(due.tick),
            attempt,
            fence.token,
            extra={"action": "run_started", "job": job.name, "rid": rid, "token": fence.token},
        )
        self.reporter.start(job, due.tick, attempt, rid, began=execution.began or None)
        slot.unrecorded += 1  # until _finish has recorded its end
        self._spawn(self._finish(slot, execution))

    async def _fenced_spawn(
        self, fence: claims.Fence, execution: executor.Execution
    ) -> executor.Outcome | None:
        """Spawn the run inside a transaction that re-checked the lease first.

        The fence check keeps the lease row share-locked (PostgreSQL) or the database
        write-locked (SQLite, ``BEGIN IMMEDIATE``) until the spawn is done, so no successor can
        raise the token in between. PostgreSQL ends a transaction left idle for a TTL (the
        engine's ``idle_in_transaction_session_timeout``): past 0.9 TTL after the check began
        the lock may be gone, so the child refuses to exec then (a stall, e.g. SIGSTOP).

        Raises:
            StaleLease: the token is no longer ours. SpawnTooLate: the deadline passed.
        """
        began = time.monotonic()
        job = next(s.job for s in self.slots if s.job.name == execution.context.job)
        spawned = False
        early: executor.Outcome | None = None
        try:
            async with self.engine.begin() as conn:
                await lease_store.check_fence(conn, fence.lease, fence.token, fence.holder, self.clock.now())
                deadline = None
                if conn.dialect.name == "postgresql":
                    deadline = began + FENCE_WINDOW * self.ttl.total_seconds()
                    if time.monotonic() > deadline:
                        raise executor.SpawnTooLate
                early = await executor.spawn(execution, job, self.base_env, deadline)
                spawned = True
        except Exception as error:
            if not spawned:
                if not session_lost(error):
                    raise
                # the fence's session ended before the spawn (a stall): its lock may be gone
                raise executor.SpawnTooLate from error
            # the spawn was fenced in time; only the end of the read-only transaction failed
            # (its session lost in a stall, most likely): the run exists, so it is tracked
            logger.info(
                "fence transaction failed after the spawn of %s (%s): the run goes on",
                execution.context.job,
                type(error).__name__,
                extra={"action": "fence_session_lost", "job": execution.context.job},
            )
        return early

    async def _refuse_stale(
        self, slot: Slot, context: executor.RunContext, error: StaleLease | executor.SpawnTooLate
    ) -> None:
        """A tick marked started but not spawned because the lease may be lost: record it as
        skipped (unfenced: only our own started row) and report a ``skip`` — never run it late,
        out of order, with a stale token."""
        reason = STALE_REASON
        logger.warning(
            "tick_refused %s %s (token %d): the lease was lost before the spawn (%s)",
            context.job,
            schedules.format_utc(context.tick),
            context.token,
            type(error).__name__ if isinstance(error, executor.SpawnTooLate) else error,
            extra={"action": "tick_refused", "job": context.job, "token": context.token},
        )
        try:
            await claims.abandon(
                self.engine, context.job, context.tick, context.token, self.clock.now(), reason
            )
        except Exception as error:
            log_failure("could not record a refused tick", error, "claim_refuse_failed")
        self.reporter.skip(slot.job, context.tick, context.attempt, reason)

    async def _drain(self, grace: float) -> None:
        """Shutdown: hand over every job lease whose job has nothing running at once, keep (and
        renew) only those of jobs with runs in progress, each until its last run has ended and
        been recorded (:meth:`_finish` releases it), for up to ``grace`` seconds. Meanwhile a
        ``Forbid`` tick that comes due beside the run is skipped as it would be on any holder;
        every other tick stays unclaimed for the next holder."""
        for slot in self.slots:
            await self._release_if_done(slot)
        deadline = time.monotonic() + grace
        while self._tasks and (left := deadline - time.monotonic()) > 0:
            await asyncio.wait(set(self._tasks), timeout=min(ROUND, left))
            for slot in self.slots:
                if slot.token is None:
                    continue
                try:
                    await self._skip_beside_run(slot)
                except StaleLease as error:
                    await self._step_down(slot, error)
                except asyncio.CancelledError:
                    raise
                except Exception as error:
                    log_failure("could not plan a job while stopping", error, "scheduler_failed")
                await self._release_if_done(slot)

    async def _skip_beside_run(self, slot: Slot) -> None:
        """Stopping, the lease kept for a run in progress: claim as skipped the ticks the plan
        skips when it would start or queue none (``Forbid``: a tick due beside a run); a plan
        that would start, queue or replace leaves every tick unclaimed for the next holder."""
        self._reap(slot)
        if not slot.runs or slot.through is None:
            return
        now = self.clock.now()
        ticks, _ = planning.overdue_ticks(slot.job.schedule, slot.through, now, slot.job.max_catchup)
        if not ticks or slot.orphans:
            return
        plan = planning.plan(
            slot.rules,
            running=len(slot.runs) + slot.busy + int(slot.replacing),
            queued=(),
            backlog=[planning.Due(tick=tick) for tick in ticks],
            now=now,
            handover_window=self.handover_window,
        )
        if plan.start or plan.queue or plan.terminate_running:
            return
        slot.through = ticks[-1]
        for due, reason in plan.skip:
            await self._skip(slot, due, reason, now)

    async def _release_if_done(self, slot: Slot) -> None:
        """Stopping: release the job's lease once none of its runs is in progress or unrecorded
        and no ``Replace`` step is in flight (so another replica takes the job over at once)."""
        self._reap(slot)
        if not self.stopping or slot.token is None or slot.runs or slot.unrecorded or slot.replacing:
            return
        name = slot.job.lease_name
        await self._hand_over_queue(slot)
        slot.forget()
        try:
            await self.leases.hand_over(name)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log_failure("could not release a job lease", error, "lease_release_failed")
            return
        logger.info("lease_released %s (stopping)", name, extra={"action": "lease_released", "lease": name})

    async def _hand_over_queue(self, slot: Slot) -> None:
        """Stopping: claim the ticks still buffered (``BufferOne`` / ``BufferAll``) for the next
        holder, which runs them as orphans (attempt 1, their original times). Left unclaimed
        behind a later claimed tick (a ``buffer_full`` skip), the next holder, which resumes
        after the newest claimed tick, would never run them: a false ``missed``."""
        if not slot.queue:
            return
        fence = self._fence(slot)
        now = self.clock.now()
        try:
            async with self.engine.begin() as conn:
                for due in slot.queue:
                    await claims.claim(
                        conn, fence, slot.job.name, due.tick, now=now, run_id=None, attempt=due.attempt - 1
                    )
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log_failure("could not hand the buffered ticks over", error, "queue_handover_failed")
            return
        logger.info(
            "queue_handed_over %s: %d buffered ticks",
            slot.job.name,
            len(slot.queue),
            extra={"action": "queue_handed_over", "job": slot.job.name},
        )

    async def _finish(self, slot: Slot, execution: executor.Execution) -> None:
        try:
            await self._record(slot, execution)
        finally:
            slot.unrecorded -= 1
            await self._release_if_done(slot)

    async def _record(self, slot: Slot, execution: executor.Execution) -> None:
        context = execution.context
        assert execution.task is not None
        try:
            outcome = await execution.task
        except asyncio.CancelledError:
            raise
        except Exception as error:
            logger.exception("run failed to execute", extra={"action": "run_error", "job": context.job})
            outcome = executor.Outcome(exit_status=1, output=f"{error}\n".encode(), duration=0.0)
        slot.runs.discard(execution)
        logger.info(
            "run_finished %s %s exit %d in %.2fs",
            context.job,
            schedules.format_utc(context.tick),
            outcome.exit_status,
            outcome.duration,
            extra={"action": "run_finished", "job": context.job, "rid": context.run_id},
        )
        self.reporter.finish(
            slot.job,
            context.tick,
            context.attempt,
            context.run_id,
            outcome.exit_status,
            outcome.output,
            outcome.ended,
        )
        for attempt in (1, 2):
            try:
                now = self.clock.now()
                await claims.mark_finished(
                    self.engine, context.job, context.tick, context.token, now, outcome.exit_status
                )
                return
            except asyncio.CancelledError:
                raise
            except Exception as error:
                # a session lost during a stall is replaced by a fresh one: record the end on it,
                # or the successor counts the run as running for as long as we heartbeat
                if attempt == 1 and session_lost(error):
                    continue
                log_failure("could not record a run's end", error, "claim_finish_failed", job=context.job)

    # ------------------------------------------------------------------ the loop

    @property
    def running(self) -> int:
        """Runs in progress, all jobs."""
        return sum(len(s.runs) for s in self.slots)

    async def run(self, stop: asyncio.Event, *, shutdown_grace: float = 30.0) -> None:
        """Rounds until ``stop`` is set, then the clean shutdown of the module docstring."""
        self._stop = stop
        guard.shared().acquire()
        try:
            await self._run(stop, shutdown_grace)
        finally:
            # the last scheduler of the process stops the guard (its runs are over or get
            # SIGKILLed with their groups) rather than leave it to the interpreter's exit
            await asyncio.to_thread(guard.shared().release)

    async def _run(self, stop: asyncio.Event, shutdown_grace: float) -> None:
        await self.announce()
        renewer = asyncio.create_task(self.renew_forever(), name="job-lease-renewal")
        try:
            while not stop.is_set():
                await self.round()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.next_wake(self.clock.now()))
            self.stopping = True
            logger.info(
                "scheduler stopping: %d runs in progress",
                self.running,
                extra={"action": "scheduler_stopping", "running": self.running},
            )
            await self._drain(shutdown_grace)
            await asyncio.gather(
                *(e.terminate("scheduler shutting down") for s in self.slots for e in list(s.runs)),
                return_exceptions=True,
            )
            if self._tasks:
                await asyncio.wait(set(self._tasks), timeout=executor.TERMINATE_GRACE + 1)
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await renewer
            await self.leases.close()
            with contextlib.suppress(Exception):
                await replicas.retire(self.engine, self.holder)
