"""The HTTP edge's routes: ping API, management API, cron explain, metrics, health (DESIGN §3, §9).

:func:`route_handlers` lists them; the application that serves them together with the dashboard
and runs the in-process loops is built by :func:`monitor.app.create_app` (the composition root),
so this package never imports ``monitor.web`` or the workers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import msgspec
from litestar import Controller, Request, Response, get
from litestar._asgi.utils import is_valid_host  # the router's own Host check (see _plain_ping)
from litestar.handlers import asgi
from litestar.openapi.datastructures import ResponseSpec

from monitor import __version__
from monitor.http.api.channels import ChannelsController
from monitor.http.api.checks import ChecksController
from monitor.http.api.common import services_of
from monitor.http.api.maintenance import MaintenanceController
from monitor.http.cron import CronController
from monitor.http.metrics import metrics
from monitor.http.ping import PingApp
from monitor.http.sentry import route_handlers as sentry_routes
from monitor.services import status
from monitor.services.ingest import IngestWriter

logger = logging.getLogger(__name__)


class Health(msgspec.Struct, frozen=True):
    status: str
    """Always ``ok``: the process answers."""
    version: str


class Lease(msgspec.Struct, frozen=True):
    name: str
    holder: str | None
    token: int | None
    """The fencing token of the latest grant."""
    expires_at: str | None
    """ISO 8601 UTC (``Z``)."""


class Readiness(msgspec.Struct, frozen=True):
    database: str
    """``ok``."""
    shards: int
    leases: list[Lease]
    evaluator_lag_s: float


class Unready(msgspec.Struct, frozen=True):
    database: str
    """``unreachable: <error type>``."""


@get("/health", summary="Process up", include_in_schema=True, tags=["operations"])
async def health() -> Health:
    return Health(status="ok", version=__version__)


@get(
    "/ready",
    summary="Database reachable; leases",
    include_in_schema=True,
    tags=["operations"],
    responses={
        503: ResponseSpec(Unready, description="The database does not answer", generate_examples=False)
    },
)
async def ready(request: Request[Any, Any, Any]) -> Response[Readiness]:
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
        found = await status.readiness(services.engine)
    except Exception as error:
        unready = Unready(database=f"unreachable: {type(error).__name__}")
        return Response(unready, status_code=503)  # type: ignore[arg-type]
    now = services.clock.now()
    oldest = found.oldest_due
    lag = max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0
    # the count every evaluator uses is the database's, not this process's MONITOR_SHARDS
    stored_shards = found.stored_shards
    return Response(
        Readiness(
            database="ok",
            shards=stored_shards if stored_shards is not None else services.settings.shards,
            leases=msgspec.convert(found.leases, list[Lease]),
            evaluator_lag_s=round(lag, 3),
        )
    )


# Healthchecks' v1 and v2 APIs are its v3 views with small differences (``api_version``): the
# same controllers are served under those prefixes too, left out of the OpenAPI schema.
HEALTHCHECKS_CONTROLLERS: dict[str, type[Controller]] = {
    "checks": ChecksController,
    "channels": ChannelsController,
}


def older_versions(extra: dict[str, type[Controller]] | None = None) -> list[type[Controller]]:
    """The controllers again under ``/api/v1/…`` and ``/api/v2/…`` (``extra``: more resources,
    such as the dashboard's badges API, that the composition root adds)."""
    out: list[type[Controller]] = []
    for version in (1, 2):
        for resource, controller in {**HEALTHCHECKS_CONTROLLERS, **(extra or {})}.items():
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


_INTERNAL_ERROR = msgspec.json.encode({"error": "internal error; it has been logged"})


def pings_first(ping_app: PingApp, app: Any) -> Any:
    """ASGI: a ping goes straight to ``ping_app``; every other request to ``app``.

    A ping answered through the whole application passed Litestar's CORS middleware, exception
    middleware and router, the API's CORS middleware and the dashboard's session middleware: a
    third of the HTTP time of a ping, for nothing a ping uses. The shortcut takes only the
    requests on which those layers do nothing: ``/ping`` or ``/ping/…`` (exactly as the mount
    receives them), no ``Origin`` header (Litestar's CORS answers a browser's preflight and
    adds its headers to a cross-origin answer: those pings still take the whole stack, and
    get the same answers as before), no ``root_path`` and a valid ``Host``. An unexpected error
    is answered as the application's handler answers it (logged, ``500`` and the same JSON).
    """

    async def dispatch(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not _plain_ping(scope):
            if scope["type"] == "http" and _ping_path(scope) and _bad_host(scope):
                # ping answers are plain text (DESIGN §5), this refusal too, not the API's JSON
                await ping_app.refuse(scope, send, 400, "request: invalid host header")
                return
            await app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await ping_app(scope, receive, tracking_send)
        except Exception:
            if started:
                raise
            logger.exception("unhandled error", extra={"action": "unhandled_error", "path": scope["path"]})
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(_INTERNAL_ERROR)).encode()),
            ]
            await send({"type": "http.response.start", "status": 500, "headers": headers})
            await send({"type": "http.response.body", "body": _INTERNAL_ERROR})

    return dispatch


def _ping_path(scope: Any) -> bool:
    path: str = scope["path"]
    return path.startswith("/ping/") or path == "/ping"


def _bad_host(scope: Any) -> bool:
    return any(name == b"host" and not is_valid_host(value) for name, value in scope["headers"])


def _plain_ping(scope: Any) -> bool:
    """A request for the ping mount that no layer before it would change (see :func:`pings_first`)."""
    if not _ping_path(scope) or scope.get("root_path"):
        return False
    for name, value in scope["headers"]:
        if name == b"origin" or (name == b"host" and not is_valid_host(value)):
            return False
    return True


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
        await status.database_answers(services.engine)
    except Exception as error:
        return Response(
            f"database unreachable: {type(error).__name__}", status_code=503, media_type="text/plain"
        )
    return Response("OK", media_type="text/plain")


def route_handlers(ping_app: PingApp, writer: Callable[[], IngestWriter]) -> list[Any]:
    """Every route of the HTTP edge; ``ping_app`` answers ``/ping/…`` (a raw ASGI app, mounted),
    ``writer`` is the process's ingest writer (Sentry check-ins go through it as pings do)."""

    @asgi("/ping", is_mount=True, copy_scope=False)
    async def ping(scope: Any, receive: Any, send: Any) -> None:
        await ping_app(scope, receive, send)

    return [
        ping,
        health,
        ready,
        api_status,
        metrics,
        ChecksController,
        ChannelsController,
        CronController,
        MaintenanceController,
        *sentry_routes(writer),  # Sentry Crons check-ins (envelopes, HTTP check-ins)
    ]
