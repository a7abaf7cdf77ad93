"""The notifier loop: raise time-driven notifications and drain the outbox (no lease; rows are claimed).

Each round first raises the reminders, escalations and maintenance summaries that are due
(:func:`monitor.services.reminders.raise_due`, at most once per :data:`IDLE_POLL`), then claims
due notifications and delivers them.

Throughput comes from batching the database work around concurrent sends: one transaction
claims a batch (as many rows as there are free slots), one re-checks the claims of the whole
batch (:func:`~monitor.services.dispatch.prepare_many`), the sends run concurrently, and a
recorder commits finished attempts together (group commit, as ingest does). Every row is still
re-checked under its own claim token before its send and recorded only under it (DESIGN §6).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter

from monitor.domain.clock import Clock
from monitor.failures import FailureLog
from monitor.notify.base import DeliveryResult, Notifier
from monitor.notify.urls import target_key
from monitor.services import Engine, reminders
from monitor.services.dispatch import (
    Attempt,
    Delivery,
    claim_due,
    next_delivery_at,
    prepare_many,
    record_many,
)
from monitor.settings import Settings

logger = logging.getLogger(__name__)

IDLE_POLL = 1.0
"""Seconds between outbox polls when nothing woke the loop (other processes may add rows)."""

RECORD_BATCH = 256
"""Most attempts the recorder commits in one transaction."""

CLAIM_RECHECK = 0.1
"""Seconds after an empty claim before the loop claims again with nothing new to go on."""

SEND_DRAIN = 1.0
"""Seconds a stopping notifier waits for the sends under way to end before cutting them off
(within ``monitor serve``'s 1.5 s shutdown limit); a send cut off is retried after its claim
lapses, so its target may see it twice."""

DRAIN_TIMEOUT = 5.0
"""Seconds a stopping notifier spends recording attempts whose sends have ended."""

_RECORD_FAILURES = FailureLog(logger, "delivery recording", action="delivery_record_failed")


START_ALLOWANCE = 4
"""Deliveries a target may have in flight until a delivery to it has been seen to end in time
(at most ``MONITOR_NOTIFY_PER_HOST``): see :class:`_Slots`."""


class _Slots:
    """Deliveries in flight: in all, and per target (:func:`~monitor.notify.urls.target_key`),
    and how many each target may have (its *allowance*).

    A target's allowance starts at :data:`START_ALLOWANCE`; a delivery to it that ends within
    half the send timeout raises it to ``per_host``, and each one that takes longer halves it
    (down to 1). A target that accepts connections but never answers (a dead host behind a
    firewall, a hung webhook) so holds a few slots, not ``per_host``: several such targets at
    once cannot take every slot of the process and hold the alerts to targets that answer for a
    send timeout each round."""

    def __init__(self, per_host: int, slow_after: float) -> None:
        self.count = 0
        self.busy: Counter[str] = Counter()
        self.freed = asyncio.Event()
        self.per_host = per_host
        self.slow_after = slow_after
        self.allowances: dict[str, int] = {}

    def allowance(self, target: str) -> int:
        """Deliveries ``target`` may have in flight now (1 to ``per_host``)."""
        return self.allowances.get(target, min(START_ALLOWANCE, self.per_host))

    def take(self, target: str) -> None:
        self.count += 1
        self.busy[target] += 1

    def give(self, target: str, took: float | None = None) -> None:
        """A delivery to ``target`` is no longer in flight; ``took``: the seconds its send
        took (``None``: it was not sent, which says nothing of the target)."""
        self.count -= 1
        self.busy[target] -= 1
        if took is not None:
            allowance = self.allowance(target)
            if took < self.slow_after:
                self.allowances[target] = self.per_host
            else:
                self.allowances[target] = max(1, allowance // 2)
        self.freed.set()


def _full_channels(channel_targets: dict[str, str], slots: _Slots) -> set[str]:
    """Channels not to claim for now: their target has fewer than a quarter of its allowance
    free (at least one slot). Waiting for a few slots to free up claims a busy target's rows
    several at a time instead of one claim transaction per delivery."""
    full = set()
    for channel, target in channel_targets.items():
        allowance = slots.allowance(target)
        if slots.busy[target] > allowance - max(1, allowance // 4):
            full.add(channel)
    return full


class _Room:
    """The ``keep`` test of :func:`~monitor.services.dispatch.claim_due`: a claimed row is
    kept while its target has room in its allowance, counting the rows kept before it in this
    claim."""

    def __init__(self, channel_targets: dict[str, str], slots: _Slots) -> None:
        self.channel_targets = channel_targets
        self.slots = slots
        self.planned: Counter[str] = Counter()
        self.seen = 0

    def __call__(self, channel_id: str, url: str) -> bool:
        self.seen += 1
        target = self.channel_targets.setdefault(channel_id, target_key(url))
        if self.slots.busy[target] + self.planned[target] >= self.slots.allowance(target):
            return False
        self.planned[target] += 1
        return True


class _ClaimPacing:
    """Skips claims that cannot find anything: after a claim found no row, another one is
    pointless until the set of skipped channels changes, the loop is woken (new rows) or its
    poll times out, or :data:`CLAIM_RECHECK` has passed. A delivery ending within that window
    does not claim at once (a burst to one target used to cost an empty claim per delivery) but
    once the window has passed: it may have released the next notice of its check and
    channel."""

    def __init__(self) -> None:
        self.idle_skip: frozenset[str] | None = None
        self.at = float("-inf")
        self.poll_at: float | None = None

    def worth_claiming(self, full: set[str]) -> bool:
        return not (
            self.idle_skip is not None
            and self.idle_skip == full
            and time.monotonic() - self.at < CLAIM_RECHECK
        )

    def recheck_in(self) -> float:
        """Seconds until :data:`CLAIM_RECHECK` has passed since the last claim (0 once it has)."""
        return max(0.0, self.at + CLAIM_RECHECK - time.monotonic())

    def claimed(self, full: set[str], *, found: int) -> None:
        self.idle_skip = frozenset(full) if found == 0 else None
        self.at = time.monotonic()

    def news(self) -> None:
        self.idle_skip = None
        self.poll_at = None

    async def idle_for(self, engine: Engine, clock: Clock) -> float:
        """Seconds to wait (:func:`_idle_for`); while claims are skipped, the poll instant found
        for the last empty claim stands (not one more query per delivery ended)."""
        if self.idle_skip is not None and self.poll_at is not None:
            return max(0.0, self.poll_at - time.monotonic())
        wait = await _idle_for(engine, clock)
        self.poll_at = time.monotonic() + wait
        return wait


class _Recorder:
    """Commits finished attempts in batches; :meth:`record` returns once its attempt is committed."""

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings
        self.queue: asyncio.Queue[tuple[Attempt, asyncio.Future[None]] | None] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name="notification-recorder")

    async def record(self, attempt: Attempt) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.queue.put_nowait((attempt, done))
        await done

    async def stop(self) -> None:
        """Record what is queued (sends that ended), then stop; a stuck database is given up on
        after :data:`DRAIN_TIMEOUT` (those rows' claims expire and another round retries them)."""
        if self.task is None:
            return
        self.queue.put_nowait(None)
        try:
            await asyncio.wait_for(asyncio.shield(self.task), DRAIN_TIMEOUT)
        except (TimeoutError, asyncio.CancelledError):
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task

    async def _run(self) -> None:
        while True:
            item = await self.queue.get()
            stop = item is None
            batch = [] if item is None else [item]
            while len(batch) < RECORD_BATCH and not self.queue.empty():
                more = self.queue.get_nowait()
                if more is None:
                    stop = True
                    continue
                batch.append(more)
            if batch:
                await self._commit(batch)
            if stop and self.queue.empty():
                return

    async def _commit(self, batch: list[tuple[Attempt, asyncio.Future[None]]]) -> None:
        try:
            await record_many(self.engine, [attempt for attempt, _ in batch], settings=self.settings)
        except asyncio.CancelledError:
            raise
        except Exception:
            # one bad row must not lose the others: record them one by one
            for attempt, done in batch:
                try:
                    await record_many(self.engine, [attempt], settings=self.settings)
                except asyncio.CancelledError:
                    raise
                except Exception as error:
                    # the claim expires and another round retries the row
                    _RECORD_FAILURES.failed(error)
                else:
                    _RECORD_FAILURES.succeeded()
                if not done.done():
                    done.set_result(None)
            return
        _RECORD_FAILURES.succeeded()
        for _, done in batch:
            if not done.done():
                done.set_result(None)


async def run_notifier(
    engine: Engine,
    notifier: Notifier,
    settings: Settings,
    clock: Clock,
    *,
    wake: asyncio.Event | None = None,
    pre_send_delay: float = 0.0,
) -> None:
    """Loop forever: keep up to ``settings.notify_concurrency`` deliveries going, at most
    ``settings.notify_per_host`` of them to one target (fewer to a target whose sends time out:
    :class:`_Slots`); sleep until woken, a delivery ends, or the next poll.

    A channel whose target is at its limit is left out of the next claims, and rows claimed
    beyond a target's limit are given back at once, so a slow target holds only its own slots
    and never delays other channels.

    Long because the notifier loop's claims, sends, records and shutdown share its in-flight state.
    """
    wake = wake or asyncio.Event()
    limit = settings.notify_concurrency
    slots = _Slots(settings.notify_per_host, settings.notify_timeout / 2)
    batches: set[asyncio.Task[None]] = set()
    channel_targets: dict[str, str] = {}
    recorder = _Recorder(engine, settings)
    recorder.start()
    claims = _ClaimPacing()
    last_sweep = float("-inf")
    reminder_failures = FailureLog(logger, "reminder sweep", action="reminders_failed")
    round_failures = FailureLog(logger, "notifier round", action="notifier_failed")
    try:
        while True:
            started = 0
            paced = False  # this round's claim was skipped as not worth it (_ClaimPacing)
            slots.freed.clear()  # before claiming: a slot freed from here on wakes the wait below
            if time.monotonic() - last_sweep >= IDLE_POLL:
                last_sweep = time.monotonic()
                try:
                    await reminders.raise_due(engine, clock.now(), settings=settings)
                except asyncio.CancelledError:
                    raise
                except Exception as error:
                    reminder_failures.failed(error)
                else:
                    reminder_failures.succeeded()
            try:
                full = _full_channels(channel_targets, slots)
                accepted: list[tuple[Delivery, str]] = []
                paced = not claims.worth_claiming(full)
                if not paced:
                    keep = _Room(channel_targets, slots)
                    jobs = await claim_due(
                        engine,
                        clock.now(),
                        settings=settings,
                        limit=limit - slots.count,
                        skip_channels=full,
                        keep=keep,
                    )
                    claims.claimed(full, found=keep.seen)
                    for job in jobs:
                        target = channel_targets[job.channel_id]
                        slots.take(target)
                        accepted.append((job, target))
                if accepted:
                    task = asyncio.create_task(
                        _batch(engine, notifier, accepted, clock, settings, slots, recorder, pre_send_delay)
                    )
                    batches.add(task)
                    task.add_done_callback(batches.discard)
                    started = len(accepted)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                round_failures.failed(error)
            else:
                round_failures.succeeded()
            if started and slots.count < limit:
                claims.news()
                continue
            wake.clear()
            timeout = await claims.idle_for(engine, clock)
            if paced:
                # a delivery ended just after a claim that found nothing: the next notification
                # of its check and channel (held back until this one was recorded) is claimable
                # now, so claim once the pacing window has passed, not at the next poll (a
                # backlog for one check went out one a second)
                timeout = min(timeout, claims.recheck_in())
            waiters = {asyncio.create_task(wake.wait()), asyncio.create_task(slots.freed.wait())}
            try:
                await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
            if wake.is_set() or not slots.freed.is_set():
                claims.news()  # woken (new rows) or the poll timed out (due retries, other processes)
    finally:
        # sends already under way finish and are recorded: cut off, a send the target has
        # received would be sent again once its claim lapsed (SIGTERM in a rolling deploy)
        if batches:
            await asyncio.wait(set(batches), timeout=SEND_DRAIN)
        for task in batches:
            task.cancel()
        if batches:
            await asyncio.gather(*batches, return_exceptions=True)
        await recorder.stop()


async def _batch(
    engine: Engine,
    notifier: Notifier,
    jobs: list[tuple[Delivery, str]],
    clock: Clock,
    settings: Settings,
    slots: _Slots,
    recorder: _Recorder,
    pre_send_delay: float = 0.0,
) -> None:
    """Re-check a claimed batch in one transaction, then send each job and record it.

    ``pre_send_delay``: seconds between the claim and its re-check, a test hook (a test stalls
    a sender inside that gap)."""
    try:
        if pre_send_delay > 0:
            await asyncio.sleep(pre_send_delay)
        ready = await prepare_many(engine, [job for job, _ in jobs], clock.now(), settings=settings)
    except asyncio.CancelledError:
        for _, target in jobs:
            slots.give(target)
        raise
    except Exception as error:
        # the claims expire and another round retries the rows
        _RECORD_FAILURES.failed(error)
        for _, target in jobs:
            slots.give(target)
        return
    sends = []
    for (_, target), prepared in zip(jobs, ready, strict=True):
        if prepared is None:
            slots.give(target)
        else:
            sends.append(_send(notifier, prepared, target, clock, settings, slots, recorder))
    await asyncio.gather(*sends)


async def _send(
    notifier: Notifier,
    job: Delivery,
    target: str,
    clock: Clock,
    settings: Settings,
    slots: _Slots,
    recorder: _Recorder,
) -> None:
    took: float | None = None
    try:
        began = time.monotonic()
        try:
            result = await notifier.send(job.url, job.message, timeout=settings.notify_timeout)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # an adapter bug must not lose the row: record it as a failure
            result = DeliveryResult(ok=False, error=f"{type(error).__name__}: {error}")
        took = time.monotonic() - began
        await recorder.record(Attempt(job, result, clock.now()))
    finally:
        slots.give(target, took)


async def _idle_for(engine: Engine, clock: Clock) -> float:
    """Seconds to sleep: until the earliest pending retry is due, at most :data:`IDLE_POLL`."""
    try:
        due = await next_delivery_at(engine)
    except asyncio.CancelledError:
        raise
    except Exception:
        return IDLE_POLL
    wait = (due - clock.now()).total_seconds() if due is not None else IDLE_POLL
    # A due row that deliver_due() did not take is claimed by another notifier: poll as usual.
    return min(IDLE_POLL, wait) if wait > 0 else IDLE_POLL
