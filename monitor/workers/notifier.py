"""The notifier loop: drain the notification outbox (no lease; rows are claimed)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.domain.clock import Clock
from monitor.notify.base import Notifier
from monitor.services.dispatch import deliver_due, next_delivery_at
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
    """Loop forever: deliver what is due, then sleep until woken or the next poll."""
    wake = wake or asyncio.Event()
    while True:
        try:
            sent = await deliver_due(engine, notifier, clock.now(), settings=settings)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("notifier round failed", extra={"action": "notifier_failed"})
            sent = 0
        if sent:
            continue
        wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), await _idle_for(engine, clock))


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
