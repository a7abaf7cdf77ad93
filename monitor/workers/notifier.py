"""The notifier loop: raise time-driven notifications and drain the outbox (no lease; rows are claimed).

Each round first raises the reminders, escalations and maintenance summaries that are due
(:func:`monitor.services.reminders.raise_due`, at most once per :data:`IDLE_POLL`), then claims
due notifications and delivers them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable

from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.domain.clock import Clock
from monitor.failures import FailureLog
from monitor.notify.apprise import target_key
from monitor.notify.base import Notifier
from monitor.services import reminders
from monitor.services.dispatch import Job, claim_due, deliver, next_delivery_at, release_claims
from monitor.settings import Settings

logger = logging.getLogger(__name__)

IDLE_POLL = 1.0
"""Seconds between outbox polls when nothing woke the loop (other processes may add rows)."""


async def run_notifier(
    engine: AsyncEngine,
    notifier: Notifier,
    settings: Settings,
    clock: Clock,
    *,
    wake: asyncio.Event | None = None,
) -> None:
    """Loop forever: keep up to ``settings.notify_concurrency`` deliveries going, at most
    ``settings.notify_per_host`` of them to one target (:func:`~monitor.notify.apprise.target_key`);
    sleep until woken, a delivery ends, or the next poll.

    Rows are claimed in batches of the free slots. A channel whose target is at its limit is
    left out of the next claims, and rows claimed beyond a target's limit are given back at
    once, so a slow target holds only its own slots and never delays other channels.
    """
    wake = wake or asyncio.Event()
    limit = settings.notify_concurrency
    per_host = settings.notify_per_host
    in_flight: set[asyncio.Task[object]] = set()
    busy: Counter[str] = Counter()
    channel_targets: dict[str, str] = {}
    last_sweep = float("-inf")
    reminder_failures = FailureLog(logger, "reminder sweep", action="reminders_failed")
    round_failures = FailureLog(logger, "notifier round", action="notifier_failed")

    def finished(target: str) -> Callable[[asyncio.Task[object]], None]:
        def done(task: asyncio.Task[object]) -> None:
            in_flight.discard(task)
            busy[target] -= 1

        return done

    try:
        while True:
            started = 0
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
                full = {channel for channel, target in channel_targets.items() if busy[target] >= per_host}
                jobs = await claim_due(
                    engine,
                    clock.now(),
                    settings=settings,
                    limit=limit - len(in_flight),
                    skip_channels=full,
                )
                surplus = []
                for job in jobs:
                    target = channel_targets.setdefault(job.channel_id, target_key(job.url))
                    if busy[target] >= per_host:
                        surplus.append(job)
                        continue
                    busy[target] += 1
                    task = asyncio.create_task(_deliver(engine, notifier, job, clock, settings))
                    in_flight.add(task)
                    task.add_done_callback(finished(target))
                    started += 1
                await release_claims(engine, surplus)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                round_failures.failed(error)
            else:
                round_failures.succeeded()
            if started and len(in_flight) < limit:
                continue
            wake.clear()
            waiter = asyncio.create_task(wake.wait())
            try:
                await asyncio.wait(
                    {waiter, *in_flight},
                    timeout=await _idle_for(engine, clock),
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                waiter.cancel()
    finally:
        for task in in_flight:
            task.cancel()
        if in_flight:
            await asyncio.gather(*in_flight, return_exceptions=True)


_RECORD_FAILURES = FailureLog(logger, "delivery recording", action="delivery_record_failed")


async def _deliver(
    engine: AsyncEngine, notifier: Notifier, job: Job, clock: Clock, settings: Settings
) -> object:
    try:
        return await deliver(engine, notifier, job, clock.now, settings=settings)
    except asyncio.CancelledError:
        raise
    except Exception as error:
        # the claim expires and another round retries the row
        _RECORD_FAILURES.failed(error)
        return None


async def _idle_for(engine: AsyncEngine, clock: Clock) -> float:
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
