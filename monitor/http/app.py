"""The Litestar application: ping API, management API, health (DESIGN §3, §9).

``create_app(settings)`` wires concrete adapters together; nothing else does. Its lifespan
opens the engine, applies migrations, starts the ingest writer and, unless told not to, the
in-process evaluator, notifier and liveness loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, Request, Response, get
from litestar.config.cors import CORSConfig
from litestar.handlers import asgi
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import ScalarRenderPlugin
from sqlalchemy import select, text

from monitor import __version__
from monitor.domain.clock import Clock, SystemClock
from monitor.http.api.channels import ChannelsController
from monitor.http.api.checks import ChecksController
from monitor.http.api.common import Services, services_of
from monitor.http.api.maintenance import MaintenanceController
from monitor.http.cron import CronController
from monitor.http.errors import EXCEPTION_HANDLERS
from monitor.http.metrics import metrics
from monitor.http.ping import PingApp
from monitor.notify.apprise import AppriseNotifier
from monitor.notify.base import Notifier
from monitor.services.ingest import IngestWriter
from monitor.settings import Settings
from monitor.storage import cluster, leases
from monitor.storage import tables as t
from monitor.storage.engine import make_engine, migrate
from monitor.web import setup as web_setup
from monitor.workers.evaluator import run_evaluator
from monitor.workers.liveness import run_liveness
from monitor.workers.notifier import run_notifier

logger = logging.getLogger(__name__)


@get("/health", summary="Process up", include_in_schema=True)
async def health() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


@get("/ready", summary="Database reachable; leases", include_in_schema=True)
async def ready(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
    """``{"database": "ok", "shards", "leases", "evaluator_lag_s"}`` (DESIGN §6); 503 with
    ``{"database": "unreachable: …"}`` when the database does not answer.

    ``evaluator_lag_s`` (seconds, rounded to ms): now − the oldest ``next_due`` among the
    checks of every shard whose ``next_due`` has passed, else 0. ``next_due`` is the instant
    the evaluator must next judge a check (a watched tick's deadline, a run's max runtime), so
    this is how long the most overdue judgement has waited, whichever replica should make it —
    a sweep that keeps up shows below one ``MONITOR_EVALUATE_INTERVAL``; after a shard holder
    dies it stays below ``2 × MONITOR_EVALUATE_INTERVAL + MONITOR_LEASE_TTL``.
    """
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


def create_app(
    settings: Settings,
    *,
    clock: Clock | None = None,
    notifier: Notifier | None = None,
    evaluator: bool = True,
    notify: bool = True,
    liveness: bool = True,
    migrate_on_start: bool = True,
) -> Litestar:
    """Build the app.

    Args:
        settings: the configuration (tests pass their own; nothing reads globals).
        clock: the clock handlers and loops use (default: the system clock).
        notifier: the delivery adapter (default: Apprise).
        evaluator / notify / liveness: run those loops in this process.
        migrate_on_start: apply pending migrations in the lifespan.
    """
    clock = clock or SystemClock()
    writer_box: dict[str, IngestWriter] = {}

    def writer() -> IngestWriter:
        return writer_box["writer"]

    ping_app = PingApp(settings, clock, writer)

    @asgi("/ping", is_mount=True, copy_scope=False)
    async def ping(scope: Any, receive: Any, send: Any) -> None:
        await ping_app(scope, receive, send)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        engine = make_engine(settings.database_url)
        if migrate_on_start:
            await migrate(engine)
        try:
            # first process on the database records its MONITOR_SHARDS; others warn on a mismatch
            await cluster.adopt_shard_count(engine, settings.shards, clock.now(), process="http")
        except Exception as error:
            logger.warning(
                "could not read the stored shard count: %s",
                error,
                extra={"action": "shard_count_failed"},
            )
        own_notifier = notifier or AppriseNotifier(allow_private_targets=settings.allow_private_targets)
        app.state.services = Services(engine=engine, settings=settings, clock=clock, notifier=own_notifier)
        ingest = IngestWriter(engine, settings)
        await ingest.start()
        writer_box["writer"] = ingest
        tasks: list[asyncio.Task[None]] = []
        wake = asyncio.Event()
        roles = ["http"]
        if evaluator:
            roles.append("evaluator")
            tasks.append(
                asyncio.create_task(run_evaluator(engine, settings, clock, wake=wake), name="evaluator")
            )
        if notify:
            roles.append("notifier")
            tasks.append(
                asyncio.create_task(
                    run_notifier(engine, own_notifier, settings, clock, wake=wake), name="notifier"
                )
            )
        if liveness:
            name = f"{socket.gethostname()}:{os.getpid()}"
            tasks.append(
                asyncio.create_task(
                    run_liveness(engine, settings, clock, name, ",".join(roles), wake=wake), name="liveness"
                )
            )
        # Everything built so far (modules, routes, caches) lives as long as the process: keep
        # it out of the cyclic collector, whose full passes over it stalled the ping path.
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await ingest.stop()
            if notifier is None and isinstance(own_notifier, AppriseNotifier):
                await own_notifier.aclose()
            await engine.dispose()

    handlers: list[Any] = [ping, health, ready, metrics, ChecksController, ChannelsController, CronController]
    handlers += web_setup.route_handlers()  # dashboard, login, badges (issue 9)
    handlers.append(MaintenanceController)  # issue 8
    return Litestar(
        route_handlers=handlers,
        lifespan=[lifespan],
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
        cors_config=CORSConfig(allow_origins=["*"], allow_headers=["*"]),
        openapi_config=OpenAPIConfig(
            title="monitor",
            version=__version__,
            path="/schema",
            render_plugins=[ScalarRenderPlugin()],
        ),
        debug=False,
        template_config=web_setup.template_config(),
    )


def app_from_env() -> Litestar:
    """Factory for ``uvicorn --factory`` (every worker reads the same ``MONITOR_*`` settings)."""
    settings = Settings.from_env()
    roles = os.environ.get("MONITOR_ROLES", "evaluator,notifier").split(",")
    return create_app(settings, evaluator="evaluator" in roles, notify="notifier" in roles)
