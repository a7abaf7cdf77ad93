"""Liveness: every HTTP process renews a row each ``MONITOR_EVALUATE_INTERVAL``, whatever roles
it runs (DESIGN §6 self-outage guard); the first renewal after an outage records it."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from monitor.domain.clock import Clock
from monitor.failures import FailureLog
from monitor.services import Engine, outages
from monitor.settings import Settings

logger = logging.getLogger(__name__)


async def renew_liveness(engine: Engine, name: str, roles: str, clock: Clock, settings: Settings) -> bool:
    """Write this process's liveness row at ``clock.now()``; True if it recorded an outage."""
    return await outages.renew(engine, name, roles, clock.now(), timedelta(seconds=settings.lease_ttl))


async def run_liveness(
    engine: Engine,
    settings: Settings,
    clock: Clock,
    name: str,
    roles: str,
    *,
    wake: asyncio.Event | None = None,
) -> None:
    """Renew forever; wake the notifier when an outage was recorded (its alerts are queued)."""
    failures = FailureLog(logger, "liveness renewal", action="liveness_failed")
    while True:
        try:
            if await renew_liveness(engine, name, roles, clock, settings) and wake is not None:
                wake.set()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            failures.failed(error)
        else:
            failures.succeeded()
        await asyncio.sleep(settings.evaluate_interval)
