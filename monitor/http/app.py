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

from litestar import Controller, Litestar, Request, Response, get
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
from monitor.http.sentry import route_handlers as sentry_routes
from monitor.notify.apprise import AppriseNotifier
from monitor.notify.base import Notifier
from monitor.services.ingest import IngestWriter
from monitor.services.retention import run_retention
from monitor.settings import Settings
from monitor.storage import cluster, leases
from monitor.storage import tables as t
from monitor.storage.engine import make_engine, migrate
from monitor.web import badges as web_badges
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


# Healthchecks' v1 and v2 APIs are its v3 views with small differences (``api_version``): the
# same controllers are served under those prefixes too, left out of the OpenAPI schema.
HEALTHCHECKS_CONTROLLERS: dict[str, type[Controller]] = {
    "checks": ChecksController,
    "channels": ChannelsController,
    "badges": web_badges.BadgesApiController,
}


def _older_versions() -> list[type[Controller]]:
    out: list[type[Controller]] = []
    for version in (1, 2):
        for resource, controller in HEALTHCHECKS_CONTROLLERS.items():
            attributes: dict[str, Any] = {
                "path": f"/api/v{version}/{resource}",
                "include_in_schema": False,
            }
            out.append(type(f"{controller.__name__}V{version}", (controller,), attributes))
    return out


def api_cors(app: Any) -> Any:
    """ASGI middleware: every ``/api/`` answer carries ``Access-Control-Allow-Origin: *``, with or
    without an ``Origin`` in the request, as Healthchecks' ``@cors`` views do (Litestar's CORS
    support adds it only to requests that name an origin)."""

    async def middleware(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/api/"):
            await app(scope, receive, send)
            return

        extra = [(b"access-control-allow-origin", b"*")]
        if scope["method"] == "OPTIONS":
            # Healthchecks' preflight answer (204 with its CORS headers), also without an Origin
            extra += [
                (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
                (b"access-control-allow-headers", b"X-Api-Key, Content-Type"),
                (b"access-control-max-age", b"600"),
            ]

        async def send_with_cors(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(name, value) for name, value in extra if name not in present]
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_with_cors)

    return middleware


@get(
    ["/api/v1/status/", "/api/v2/status/", "/api/v3/status/"],
    summary="Healthchecks' status probe: the database answers",
    media_type="text/plain",
    include_in_schema=False,
)
async def api_status(request: Request[Any, Any, Any]) -> Response[str]:
    """``OK`` once ``SELECT 1`` answers (Healthchecks' ``status`` view, for external uptime
    probes); 503 when the database does not. No key. ``/ready`` tells more."""
    services = services_of(request.app.state)
    try:
        async with services.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except Exception as error:
        return Response(
            f"database unreachable: {type(error).__name__}", status_code=503, media_type="text/plain"
        )
    return Response("OK", media_type="text/plain")


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
        own_notifier = notifier or AppriseNotifier(
            allow_private_targets=settings.allow_private_targets, max_workers=settings.notify_concurrency
        )
        app.state.services = Services(engine=engine, settings=settings, clock=clock, notifier=own_notifier)
        ingest = IngestWriter(engine, settings)
        await ingest.start()
        writer_box["writer"] = ingest
        smtp_server = None
        if settings.smtp_port is not None:  # email pings, through the same ingest queue
            from monitor.http.smtp import start_smtp

            smtp_server = await start_smtp(settings, clock, writer, engine)
        tasks: list[asyncio.Task[None]] = []
        wake = asyncio.Event()
        roles = ["http"]
        if evaluator:
            roles.append("evaluator")
            tasks.append(
                asyncio.create_task(run_evaluator(engine, settings, clock, wake=wake), name="evaluator")
            )
            # time-based upkeep runs with the evaluator role: pruning in small batches
            tasks.append(asyncio.create_task(run_retention(engine, settings, clock), name="retention"))
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
            if smtp_server is not None:
                smtp_server.close()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(smtp_server.wait_closed(), 5)
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await ingest.stop()
            if notifier is None and isinstance(own_notifier, AppriseNotifier):
                await own_notifier.aclose()
            await engine.dispose()

    handlers: list[Any] = [
        ping,
        health,
        ready,
        api_status,
        metrics,
        ChecksController,
        ChannelsController,
        CronController,
    ]
    handlers += web_setup.route_handlers()  # dashboard, login, badges (issue 9)
    handlers.append(MaintenanceController)  # issue 8
    handlers += _older_versions()
    handlers += sentry_routes(writer)  # Sentry Crons check-ins (envelopes, HTTP check-ins)
    return Litestar(
        route_handlers=handlers,
        middleware=[api_cors],
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
