"""The composition root: one Litestar application serving the HTTP edge and the dashboard.

``create_app(settings)`` wires concrete adapters together (the engine, Apprise, the in-process
loops); nothing else does. Its lifespan opens the engine, applies migrations, starts the ingest
writer and, unless told not to, the in-process evaluator, notifier and liveness loops. It sits
above ``monitor.http`` and ``monitor.web`` so that those two never import each other
(docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from litestar import Litestar
from litestar.config.cors import CORSConfig
from litestar.logging.config import LoggingConfig
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import ScalarRenderPlugin

from monitor import __version__
from monitor.domain.clock import Clock, SystemClock
from monitor.edge import Services
from monitor.http import app as http_app
from monitor.http import openapi
from monitor.http.errors import EXCEPTION_HANDLERS
from monitor.http.ping import PingApp
from monitor.notify.apprise import AppriseChannelUrls, AppriseNotifier
from monitor.notify.base import Notifier
from monitor.notify.egress import install_egress_guard
from monitor.services.ingest import BATCHES_IN_FLIGHT, IngestWriter
from monitor.services.retention import run_retention
from monitor.settings import LOG_FORMAT, Settings
from monitor.storage import cluster
from monitor.storage.engine import make_engine, migrate
from monitor.storage.sqlite_batch import runs_in_thread
from monitor.web import auth as web_auth
from monitor.web import badges as web_badges
from monitor.web import setup as web_setup
from monitor.workers.evaluator import run_evaluator
from monitor.workers.ingest_process import IngestProcess
from monitor.workers.liveness import renew_liveness, run_liveness
from monitor.workers.notifier import run_notifier

logger = logging.getLogger(__name__)


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

    Long because it is the composition root: every part of the one app is built and wired
    here, in the order it depends on.
    """
    clock = clock or SystemClock()
    writer_box: dict[str, IngestWriter] = {}

    def writer() -> IngestWriter:
        return writer_box["writer"]

    ping_app = PingApp(settings, clock, writer)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        """Start the in-process loops; stop them when the app shuts down.

        Long because it starts and stops each loop in turn, and a shutdown must undo them in
        reverse.
        """
        # this process sends (the notifier loop, a channel's test-send): guard its connects first
        install_egress_guard()
        engine = make_engine(settings.database_url)
        # a SQLite file's ping writes in a process of their own; it starts while this one migrates
        ingest_process = None
        starting = None
        if settings.ingest_process and runs_in_thread(engine):
            ingest_process = IngestProcess(settings, engine)
            starting = asyncio.ensure_future(ingest_process.start())
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
        app.state.services = Services(
            engine=engine,
            settings=settings,
            clock=clock,
            notifier=own_notifier,
            channel_urls=AppriseChannelUrls(),
        )
        if starting is not None:
            await starting
        ingest = IngestWriter(
            engine, settings, store=ingest_process, in_flight=BATCHES_IN_FLIGHT if ingest_process else None
        )
        await ingest.start()
        writer_box["writer"] = ingest
        smtp_server = None
        if settings.smtp_port is not None:  # email pings, through the same ingest queue
            from monitor.http.smtp import start_smtp

            smtp_server = await start_smtp(settings, clock, writer, engine)
        tasks: list[asyncio.Task[None]] = []
        wake = asyncio.Event()
        roles = ",".join(["http"] + ["evaluator"] * evaluator + ["notifier"] * notify)
        name = f"{socket.gethostname()}:{os.getpid()}"

        async def renew() -> None:
            if await renew_liveness(engine, name, roles, clock, settings):
                wake.set()

        if evaluator:
            # this process serves pings: it renews its liveness row before a sweep at a deadline,
            # so the self-outage guard lets that sweep judge the deadline (DESIGN §6)
            tasks.append(
                asyncio.create_task(
                    run_evaluator(engine, settings, clock, wake=wake, alive=renew if liveness else None),
                    name="evaluator",
                )
            )
            # time-based upkeep runs with the evaluator role: pruning in small batches
            tasks.append(asyncio.create_task(run_retention(engine, settings, clock), name="retention"))
        if notify:
            tasks.append(
                asyncio.create_task(
                    run_notifier(engine, own_notifier, settings, clock, wake=wake), name="notifier"
                )
            )
        if liveness:
            tasks.append(
                asyncio.create_task(
                    run_liveness(engine, settings, clock, name, roles, wake=wake), name="liveness"
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
            if ingest_process is not None:
                await ingest_process.stop()
            if notifier is None and isinstance(own_notifier, AppriseNotifier):
                await own_notifier.aclose()
            await engine.dispose()

    handlers = http_app.route_handlers(ping_app, writer) + web_setup.route_handlers()
    # Healthchecks' v1 and v2 APIs: the same controllers (the dashboard's badges API too)
    handlers += http_app.older_versions({"badges": web_badges.BadgesApiController})
    app = Litestar(
        route_handlers=handlers,
        middleware=[http_app.api_cors],
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
        # Litestar's default reconfigures the root logger at INFO once the app starts, which
        # overrode MONITOR_LOG_LEVEL: it keeps to its own "litestar" logger
        logging_config=LoggingConfig(configure_root_logger=False),
        template_config=web_setup.template_config(),
    )
    # what no handler's types state: the ping API, the error body on every route, X-Api-Key
    openapi.amend(app.openapi_schema)
    # around routing itself (Litestar's middleware runs only for a matched route): an unknown
    # page's 404 also knows who is signed in
    app.asgi_handler = web_auth.load_page_session(app.asgi_handler)
    # outermost: a ping skips the layers above, which do nothing for it (see pings_first)
    app.asgi_handler = http_app.pings_first(ping_app, app.asgi_handler)
    return app


def app_from_env() -> Litestar:
    """Factory for ``uvicorn --factory`` (every worker reads the same ``MONITOR_*`` settings)."""
    settings = Settings.from_env()
    # a worker process of `serve --workers N` starts with logging unconfigured; in the process
    # that ran `monitor` the CLI configured it already (then this only sets the level again)
    logging.basicConfig(level=settings.log_level.upper(), stream=sys.stderr, format=LOG_FORMAT)
    logging.getLogger().setLevel(settings.log_level.upper())
    roles = settings.roles.split(",")
    return create_app(settings, evaluator="evaluator" in roles, notify="notifier" in roles)
