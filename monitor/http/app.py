"""The HTTP edge's routes: ping API, management API, cron explain, metrics, health (DESIGN §3, §9).

:func:`route_handlers` lists them; the application that serves them together with the dashboard
and runs the in-process loops is built by :func:`monitor.app.create_app` (the composition root),
so this package never imports ``monitor.web`` or the workers.
"""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response, get
from litestar.handlers import asgi
from sqlalchemy import select, text

from monitor import __version__
from monitor.http.api.channels import ChannelsController
from monitor.http.api.checks import ChecksController
from monitor.http.api.common import services_of
from monitor.http.api.maintenance import MaintenanceController
from monitor.http.cron import CronController
from monitor.http.metrics import metrics
from monitor.http.ping import PingApp
from monitor.storage import cluster, leases
from monitor.storage import tables as t

logger = logging.getLogger(__name__)


@get("/health", summary="Process up", include_in_schema=True)
async def health() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


@get("/ready", summary="Database reachable; leases", include_in_schema=True)
async def ready(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
    services = services_of(request.app.state)
    try:
        async with services.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
            oldest = (
                await conn.execute(
                    select(t.checks.c.next_due)
                    .where(t.checks.c.next_due.is_not(None))
                    .order_by(t.checks.c.next_due)
                    .limit(1)
                )
            ).scalar_one_or_none()
            # the count every evaluator uses is the database's, not this process's MONITOR_SHARDS
            stored_shards = await cluster.stored_shard_count(conn)
        lease_rows = await leases.list_leases(services.engine)
    except Exception as error:
        return Response({"database": f"unreachable: {type(error).__name__}"}, status_code=503)
    now = services.clock.now()
    lag = max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0
    return Response(
        {
            "database": "ok",
            "shards": stored_shards if stored_shards is not None else services.settings.shards,
            "leases": lease_rows,
            "evaluator_lag_s": round(lag, 3),
        }
    )


def route_handlers(ping_app: PingApp) -> list[Any]:
    """Every route of the HTTP edge; ``ping_app`` answers ``/ping/…`` (a raw ASGI app, mounted)."""

    @asgi("/ping", is_mount=True, copy_scope=False)
    async def ping(scope: Any, receive: Any, send: Any) -> None:
        await ping_app(scope, receive, send)

    return [
        ping,
        health,
        ready,
        metrics,
        ChecksController,
        ChannelsController,
        CronController,
        MaintenanceController,
    ]
