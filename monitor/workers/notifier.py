"""The notifier loop: raise time-driven notifications and drain the outbox (no lease; rows are claimed).

Each round first raises the reminders, escalations and maintenance summaries that are due
(:func:`monitor.services.reminders.raise_due`, at most once per :data:`IDLE_POLL`), then claims
due notifications and delivers them.
"""

from __future__ import annotations

import asyncio
import logging
import time

from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.domain.clock import Clock
from monitor.failures import FailureLog
from monitor.notify.base import Notifier
from monitor.services import reminders
from monitor.services.dispatch import Job, claim_due, deliver, next_delivery_at
from monitor.settings import Settings

logger = logging.getLogger(__name__)

IDLE_POLL = 1.0
"""Seconds between outbox polls when nothing woke the loop (other processes may add rows)."""


IN_FLIGHT = 16
"""Deliveries one notifier process keeps going at once; a hanging target occupies one slot."""


async def run_notifier(
    engine: AsyncEngine,
    notifier: Notifier,
    settings: Settings,
    clock: Clock,
    *,
    wake: asyncio.Event | None = None,
    pre_send_delay: float = 0.0,
) -> None:
    """Loop forever: keep up to :data:`IN_FLIGHT` deliveries going; sleep until woken, a
    delivery ends, or the next poll. ``pre_send_delay``: seconds between claiming and
    re-checking a notification, a test hook (:func:`monitor.services.dispatch.deliver`)."""
    wake = wake or asyncio.Event()
    in_flight: set[asyncio.Task[object]] = set()
    last_sweep = float("-inf")
    reminder_failures = FailureLog(logger, "reminder sweep", action="reminders_failed")
    round_failures = FailureLog(logger, "notifier round", action="notifier_failed")
    try:
        while True:
            claimed = 0
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
                jobs = await claim_due(
                    engine, clock.now(), settings=settings, limit=IN_FLIGHT - len(in_flight)
                )
                claimed = len(jobs)
                for job in jobs:
                    task = asyncio.create_task(
                        _deliver(engine, notifier, job, clock, settings, pre_send_delay)
                    )
                    in_flight.add(task)
                    task.add_done_callback(in_flight.discard)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                round_failures.failed(error)
            else:
                round_failures.succeeded()
            if claimed and len(in_flight) < IN_FLIGHT:
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
    engine: AsyncEngine, notifier: Notifier, job: Job, clock: Clock, settings: Settings, pre_send_delay: float
) -> object:
    try:
        return await deliver(
            engine, notifier, job, clock.now, settings=settings, pre_send_delay=pre_send_delay
        )
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
