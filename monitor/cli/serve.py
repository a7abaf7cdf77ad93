"""``monitor serve``: the API, the evaluator and the notifier in one command, on uvicorn (DESIGN §10)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from monitor import __version__
from monitor import settings as settings_module
from monitor.cli.options import add_database_url, settings_for
from monitor.settings import Settings, SettingsError

__all__ = ["SHUTDOWN_LIMIT", "add_serve", "run_uvicorn", "serve"]

logger = logging.getLogger("monitor")


def add_serve(sub: Any) -> None:
    """Register ``serve`` on the ``monitor`` command's subparsers."""
    serve = sub.add_parser("serve", help="run the API, evaluator and notifier")
    add_database_url(serve)
    serve.add_argument("--host", help="address to listen on (env MONITOR_HOST, default 127.0.0.1)")
    serve.add_argument("--port", help="TCP port, 1-65535 (env MONITOR_PORT, default 8000)")
    serve.add_argument("--workers", help="API processes, at least 1 (env MONITOR_WORKERS, default 1)")
    serve.add_argument(
        "--dev", action="store_true", help="allow Apprise targets on private/loopback networks"
    )
    serve.add_argument(
        "--smtp-port",
        help="also listen for email pings on this TCP port (env MONITOR_SMTP_PORT; default: no listener)",
    )
    serve.add_argument("--no-evaluator", action="store_true", help="do not run the evaluator in this process")
    serve.add_argument("--no-notifier", action="store_true", help="do not run the notifier in this process")


async def _bootstrap(settings: Settings) -> dict[str, object] | None:
    """Migrate; with no project yet, create the default one (keys returned once).

    On PostgreSQL the count and the creation run under the migration's advisory lock, so API
    replicas started together (compose, Kubernetes) create one default project, not one each
    (or an ``api_key`` conflict that ends all but one).
    """
    from monitor.services import projects
    from monitor.storage.engine import make_engine, migrate

    engine = make_engine(settings.database_url)
    try:
        await migrate(engine)
        return await projects.ensure_default_project(
            engine, datetime.now(UTC), api_key=settings.api_key, base_url=settings.base_url
        )
    finally:
        await engine.dispose()


def _whole(name: str, raw: object, default: int, low: int, high: int) -> int:
    """``--port`` / ``--workers`` (``default``: their ``MONITOR_*`` setting) as a bounded integer."""
    text = str(raw if raw is not None else default)
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        bound = f"{low}-{high}" if high < 2**31 else f"at least {low}"
        flag = name.replace("_", "-")
        raise SettingsError(
            f"--{flag} (MONITOR_{name.upper()}): must be a whole number {bound}, got {text!r}"
        )
    return value


def _listen_flags(args: argparse.Namespace) -> int | None:
    """Resolve ``--host``, ``--port``, ``--workers`` in ``args`` (flags over ``MONITOR_*``);
    returns the SMTP listener's port, or ``None`` for no listener."""
    configured = Settings.from_env()  # MONITOR_HOST / MONITOR_PORT / MONITOR_WORKERS, under the flags
    args.host = args.host if args.host is not None else configured.host
    args.port = _whole("port", args.port, configured.port, 1, 65535)
    args.workers = _whole("workers", args.workers, configured.workers, 1, 2**31)
    if args.smtp_port is not None or configured.smtp_port is not None:
        return _whole("smtp_port", args.smtp_port, configured.smtp_port or 0, 1, 65535)
    return None


def _shown_host(host: str) -> str:
    """The address a link names for a listening ``host`` (a wildcard address is shown as 127.0.0.1)."""
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def _serve_settings(args: argparse.Namespace) -> Settings:
    """The settings of ``monitor serve``; refuses several workers on one SQLite file."""
    settings = settings_for(args, allow_private_targets=True if args.dev else None)
    if not settings_module.given("base_url"):
        # the default project's Sentry DSN names the address actually served (as ping_url does)
        settings = settings.replace(base_url=f"http://{_shown_host(args.host)}:{args.port}")
    if args.workers > 1 and settings.database_url.startswith("sqlite"):
        # One SQLite file has one writer: more processes only queue behind its lock (measured
        # 439 pings/s with 2 workers against 707 with 1), so refuse rather than run slower.
        raise SettingsError(
            "--workers (MONITOR_WORKERS): more than 1 needs PostgreSQL; a SQLite file has one writer,"
            " so more processes are slower, not faster. Use --workers 1, or"
            " MONITOR_DATABASE_URL=postgresql+asyncpg://..."
        )
    return settings


def _export_environment(args: argparse.Namespace, settings: Settings, smtp_port: int | None) -> None:
    """Hand the resolved settings to the uvicorn workers, which read ``MONITOR_*`` (app_from_env)."""
    roles = [r for r, off in (("evaluator", args.no_evaluator), ("notifier", args.no_notifier)) if not off]
    os.environ["MONITOR_DATABASE_URL"] = settings.database_url
    os.environ["MONITOR_ALLOW_PRIVATE_TARGETS"] = "1" if settings.allow_private_targets else "0"
    # never empty (an empty variable means "the default", both loops): "http" is always there
    os.environ["MONITOR_ROLES"] = ",".join(["http", *roles])
    if smtp_port is not None:
        os.environ["MONITOR_SMTP_PORT"] = str(smtp_port)
        os.environ.setdefault("MONITOR_SMTP_HOST", args.host)
    if not settings_module.given("ingest_process") and settings.database_url.startswith("sqlite"):
        # the file's one writer in a process of its own, on the second core (monitor.workers.ingest_process)
        os.environ["MONITOR_INGEST_PROCESS"] = "1"
    if not settings_module.given("base_url"):
        # ping_url and links follow the address actually served unless told otherwise
        os.environ["MONITOR_BASE_URL"] = f"http://{_shown_host(args.host)}:{args.port}"


def _listening_line(args: argparse.Namespace, settings: Settings, smtp_port: int | None) -> str:
    """What ``monitor serve`` prints once it accepts connections (never the database password)."""
    from monitor.storage.dburl import safe_url

    shown_url = safe_url(settings.database_url)  # never the password
    listening = f"monitor {__version__} listening on http://{args.host}:{args.port} ({shown_url})"
    if smtp_port is not None:
        domain = Settings.from_env().email_domain
        listening += f"\nemail pings on smtp://{args.host}:{smtp_port} (<uuid>@{domain})"
    return listening


def serve(args: argparse.Namespace) -> int:
    """``monitor serve``: migrate, create the default project if there is none, then run uvicorn.

    Raises:
        SettingsError: a flag or ``MONITOR_*`` value is malformed, or ``--workers`` > 1 on SQLite.
    """
    smtp_port = _listen_flags(args)
    settings = _serve_settings(args)
    created = asyncio.run(_bootstrap(settings))
    if created is not None:
        print("Created the default project. Keep these keys; they are shown only once:", flush=True)
        print(json.dumps(created), flush=True)
    _export_environment(args, settings, smtp_port)
    listening = _listening_line(args, settings, smtp_port)
    if not settings.metrics_key and not args.dev:  # uuids are ping credentials
        from monitor.http.metrics import PUBLIC_CHECK_METRICS_WARNING, PUBLIC_METRICS_WARNING

        warning = PUBLIC_CHECK_METRICS_WARNING if settings.metrics_per_check else PUBLIC_METRICS_WARNING
        logger.warning(warning, extra={"action": "metrics_public"})
    _exit_zero_on_sigterm()
    run_uvicorn(
        "monitor.app:app_from_env",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=settings.log_level.lower(),
        on_listening=lambda: print(listening, flush=True),
    )
    return 0


def run_uvicorn(
    app: str,
    *,
    factory: bool,
    host: str,
    port: int,
    workers: int,
    log_level: str,
    on_listening: Callable[[], None] | None = None,
) -> None:
    """Serve the ASGI ``app`` (an import string) with uvicorn, on ``workers`` processes.

    ``on_listening`` is called once the port accepts connections: with one worker after the
    application started and the socket listens; with several as soon as the shared socket is
    bound and listening (the kernel queues connections until a worker takes them).

    With one worker this is ``uvicorn.run``. With several, uvicorn binds the listening socket
    itself as ``socket.socket(family)``, whose ``proto`` is 0; asyncio then skips
    ``TCP_NODELAY`` on every accepted connection (it sets it only when ``proto`` is TCP), and a
    keep-alive client waits for the 40 ms delayed ACK on every response (measured: 44 ms p50
    and 720 requests/s for a no-op app at 32 connections instead of about 5 000). So the
    socket is bound here, with ``IPPROTO_TCP``, and handed to uvicorn's process supervisor.
    """
    options: dict[str, Any] = {
        "factory": factory,
        "host": host,
        "port": port,
        "workers": workers,
        "log_level": log_level,
        "access_log": False,
        "lifespan": "on",
        # uvicorn's proxy-headers middleware would rewrite the client address from
        # X-Forwarded-For for any peer in forwarded_allow_ips (127.0.0.1 by default), so a local
        # client could write any address into the ping log: we read the header ourselves, only
        # from MONITOR_TRUSTED_PROXIES (DESIGN §5).
        "proxy_headers": False,
        "forwarded_allow_ips": "",
    }
    if workers <= 1:
        _run_one_worker(app, options, on_listening)
    else:
        _run_workers(app, options, on_listening)


def _run_one_worker(app: str, options: dict[str, Any], on_listening: Callable[[], None] | None) -> None:
    """uvicorn in this process; a signal starts the :data:`SHUTDOWN_LIMIT` countdown."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started and on_listening is not None:
                on_listening()

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            _exit_after(SHUTDOWN_LIMIT)

    server = Server(uvicorn.Config(app, **options))
    server.run()
    if not server.started:  # as uvicorn.run: the application failed to start
        sys.exit(3)


def _run_workers(app: str, options: dict[str, Any], on_listening: Callable[[], None] | None) -> None:
    """uvicorn's process supervisor on a listening socket bound here with ``IPPROTO_TCP``."""
    import inspect
    import socket

    import uvicorn
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config(app, **options)
    plain = config.bind_socket()
    if on_listening is not None:
        on_listening()
    if plain.family in (socket.AF_INET, socket.AF_INET6) and plain.proto != socket.IPPROTO_TCP:
        sock = socket.socket(plain.family, plain.type, socket.IPPROTO_TCP, plain.detach())
    else:
        sock = plain
    supervisor_options: dict[str, Any] = {"sockets": [sock]}
    if "target" in inspect.signature(Multiprocess).parameters:  # uvicorn < 0.36
        supervisor_options["target"] = uvicorn.Server(config).run
    try:
        Multiprocess(config, **supervisor_options).run()
    finally:
        sock.close()


SHUTDOWN_LIMIT = 1.5
"""Seconds ``monitor serve`` (one worker) takes at most to stop after SIGTERM/SIGINT. A graceful
shutdown normally takes a fraction of it; one stuck behind a SQLite file another writer holds
(each write waits up to the 30 s busy timeout) is cut short: nothing acknowledged is lost (a
ping is answered only after its commit; an open transaction is rolled back by SQLite) and the
leases expire within their TTL."""


def _exit_after(seconds: float) -> None:
    """End the process ``seconds`` from now unless it ended by itself (a daemon timer)."""
    import threading

    def cut_short() -> None:
        logger.warning(
            "shutdown took longer than %gs: exiting now (leases expire within their TTL)",
            seconds,
            extra={"action": "shutdown_cut_short"},
        )
        logging.shutdown()
        os._exit(0)

    timer = threading.Timer(seconds, cut_short)
    timer.daemon = True
    timer.start()


def _exit_zero_on_sigterm() -> None:
    """Make a SIGTERM that uvicorn has already handled end the process with status 0.

    uvicorn shuts down gracefully on SIGTERM and then re-raises the signal with the handler
    that was installed before it started; with the default handler the process would end
    "killed by SIGTERM" (status -15 / 143) although it stopped cleanly. A SIGTERM before
    uvicorn installs its own handlers also exits 0: nothing is open yet.
    """

    def handler(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, handler)
