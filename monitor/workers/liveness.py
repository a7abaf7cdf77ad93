"""Liveness: every HTTP process renews a row each ``MONITOR_EVALUATE_INTERVAL``
(DESIGN §6 self-outage guard)."""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.domain.clock import Clock
from monitor.settings import Settings
from monitor.storage import repositories
from monitor.storage import tables as t

logger = logging.getLogger(__name__)


async def renew_liveness(engine: AsyncEngine, name: str, roles: str, clock: Clock) -> None:
    """Write this process's liveness row at ``clock.now()``."""
    now = clock.now()
    async with engine.begin() as conn:
        result = await conn.execute(
            update(t.liveness).where(t.liveness.c.name == name).values(renewed_at=now, roles=roles)
        )
        if result.rowcount == 0:
            await conn.execute(
                repositories.insert_ignoring_conflicts(conn, t.liveness).values(
                    name=name, roles=roles, renewed_at=now
                )
            )


async def run_liveness(engine: AsyncEngine, settings: Settings, clock: Clock, name: str, roles: str) -> None:
    while True:
        try:
            await renew_liveness(engine, name, roles, clock)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.warning("liveness renewal failed", extra={"action": "liveness_failed"})
        await asyncio.sleep(settings.evaluate_interval)
