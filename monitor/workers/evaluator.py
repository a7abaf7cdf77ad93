"""The evaluator loop: every ``MONITOR_EVALUATE_INTERVAL`` s, under the ``evaluator`` lease,
judge due checks."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.domain.clock import Clock
from monitor.services.evaluator import evaluate_due
from monitor.settings import Settings
from monitor.storage import leases

logger = logging.getLogger(__name__)

LEASE_NAME = "evaluator"


def holder_name() -> str:
    """``<host>:<pid>``, how leases name their holder."""
    return f"{socket.gethostname()}:{os.getpid()}"


async def run_evaluator(
    engine: AsyncEngine, settings: Settings, clock: Clock, *, wake: asyncio.Event | None = None
) -> None:
    """Loop forever: renew the lease, then evaluate due checks with its fencing token."""
    holder = holder_name()
    ttl = timedelta(seconds=settings.lease_ttl)
    try:
        while True:
            try:
                token = await leases.acquire(engine, LEASE_NAME, holder, ttl, clock.now())
                if token is not None:
                    count = await evaluate_due(engine, clock.now(), settings=settings, token=token)
                    if count:
                        logger.info(
                            "evaluated", extra={"action": "evaluated", "checks": count, "token": token}
                        )
                        if wake is not None:
                            wake.set()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("evaluator sweep failed", extra={"action": "evaluator_failed"})
            await asyncio.sleep(settings.evaluate_interval)
    finally:
        try:
            await asyncio.shield(leases.release(engine, LEASE_NAME, holder))
        except Exception:
            logger.warning("could not release the evaluator lease", extra={"action": "lease_release_failed"})
