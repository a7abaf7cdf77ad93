"""The ``monitor`` command (DESIGN §3, §10).

Every command that touches the database applies pending migrations first. Options fall back
to ``MONITOR_*`` environment variables; flags win.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from monitor import __version__
from monitor import settings as settings_module
from monitor.settings import Settings, SettingsError

logger = logging.getLogger("monitor")


def _settings(args: argparse.Namespace, **extra: Any) -> Settings:
    from monitor.storage.dburl import url_problem

    settings = Settings.from_env(database_url=getattr(args, "database_url", None), **extra)
    problem = url_problem(settings.database_url)
    if problem is not None:  # one line, exit 2, before any connection
        raise SettingsError(f"MONITOR_DATABASE_URL: {problem}")
    return settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="monitor", description="A dead-man's-switch service for scheduled work."
    )
    parser.add_argument("--version", action="version", version=f"monitor {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def db(p: argparse.ArgumentParser) -> None:
        p.add_argument("--database-url", help="SQLAlchemy async URL (env MONITOR_DATABASE_URL)")

    serve = sub.add_parser("serve", help="run the API, evaluator and notifier")
    db(serve)
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

    migrate = sub.add_parser("migrate", help="apply pending migrations and exit")
    db(migrate)

    evaluate = sub.add_parser("evaluate", help="run only the evaluator")
    db(evaluate)
    notify = sub.add_parser("notify", help="run only the notifier")
    db(notify)

    project = sub.add_parser("project", help="manage projects")
    project_sub = project.add_subparsers(dest="project_command", required=True)
    create = project_sub.add_parser("create", help="create a project; prints its keys as JSON")
    db(create)
    create.add_argument("name")
    create.add_argument("--api-key", help="use this read-write key instead of a random one")

    replay = sub.add_parser(
        "replay",
        help="run a scenario file (format: tests/cases/runs/FORMAT.txt in the repository) on a "
        "temporary database; prints JSON",
    )
    replay.add_argument("file", type=Path)

    cron = sub.add_parser("cron", help="cron tools")
    cron_sub = cron.add_subparsers(dest="cron_command", required=True)
    explain = cron_sub.add_parser(
        "explain", help="explain a cron expression, or a stored check's (--check) with its hints; prints JSON"
    )
    db(explain)
    explain.add_argument("expression", nargs="?")
    explain.add_argument(
        "--check",
        metavar="UUID_OR_SLUG",
        help="explain this check's schedule, zone and dialect, read from the database"
        " (MONITOR_DATABASE_URL), plus its hints",
    )
    explain.add_argument("--tz", default="UTC")
    explain.add_argument("--dialect", default="unix")
    explain.add_argument("--count", type=int, default=5)
    explain.add_argument("--after", help="ISO 8601 instant (default now)")

    scheduler = sub.add_parser("scheduler", help="run the jobs of a jobs file (the bundled scheduler)")
    db(scheduler)
    scheduler.add_argument("--jobs", required=True, type=Path, help="the jobs file (TOML [[jobs]] tables)")
    scheduler.add_argument(
        "--check", action="store_true", help="validate the file, print each job's next ticks (JSON), exit"
    )
    scheduler.add_argument("--count", type=int, default=5, help="next ticks shown by --check (1-1000)")
    scheduler.add_argument("--after", help="--check: list ticks after this ISO 8601 instant (default now)")
    scheduler.add_argument(
        "--shutdown-grace",
        type=float,
        help="on SIGTERM, seconds running jobs may take before they are terminated "
        "(env MONITOR_SCHEDULER_SHUTDOWN_GRACE, default 30)",
    )
    scheduler.add_argument(
        "--liveness-interval",
        type=float,
        help="seconds between pings of the scheduler's own liveness check "
        "(env MONITOR_SCHEDULER_LIVENESS_INTERVAL, default 60)",
    )

    reshard = sub.add_parser(
        "reshard",
        help="change the evaluator shard count of the whole cluster (safe while evaluators run);"
        " without SHARDS print the stored count",
    )
    db(reshard)
    reshard.add_argument("shards", type=int, nargs="?", help="the new shard count (1-4096)")
    user = sub.add_parser("user", help="manage dashboard users")
    user_sub = user.add_subparsers(dest="user_command", required=True)
    user_create = user_sub.add_parser(
        "create",
        help="create a dashboard user; prints it as JSON",
        description="The password comes from --password-stdin (first line of standard input), else "
        "MONITOR_USER_PASSWORD, else an interactive prompt.",
    )
    db(user_create)
    user_create.add_argument("email")
    user_create.add_argument(
        "--project",
        action="append",
        default=[],
        metavar="NAME",
        help="a project the user may see (repeatable; every project of that name)",
    )
    user_create.add_argument(
        "--password-stdin", action="store_true", help="read the password from standard input"
    )

    from monitor import crontab_import

    crontab_import.add_parser(sub)

    hc = sub.add_parser(
        "import-healthchecks",
        help="copy the checks of a Healthchecks project here (idempotent: upserts by slug)",
    )
    hc.add_argument("--url", required=True, help="the Healthchecks instance, e.g. https://healthchecks.io")
    hc.add_argument("--api-key", required=True, help="that project's read-write API key")
    hc.add_argument("--target-url", help="this monitor's address (env MONITOR_BASE_URL)")
    hc.add_argument("--target-api-key", help="read-write key of the project to fill (env MONITOR_API_KEY)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``monitor`` console script."""
    args = _parser().parse_args(argv)
    try:
        log_level = str(settings_module.read("log_level"))
    except SettingsError:
        log_level = "INFO"  # the command's own settings check reports the variable
    logging.basicConfig(
        level=log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    from sqlalchemy.exc import IntegrityError

    from monitor.domain.errors import MonitorError

    try:
        return _dispatch(args)
    except (SettingsError, MonitorError) as error:
        print(f"monitor: {error}", file=sys.stderr)
        return 2
    except IntegrityError:
        # the only unique value a command takes from its user is an API key
        print("monitor: api_key: already in use (choose another key)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        from monitor.storage.dburl import connect_problem

        url = getattr(args, "database_url", None) or settings_module.read("database_url")
        problem = connect_problem(error, url)
        if problem is None:
            raise
        print(f"monitor: MONITOR_DATABASE_URL: {problem}", file=sys.stderr)  # exit 1
        return 1


def _dispatch(args: argparse.Namespace) -> int:
    command = args.command
    if command == "serve":
        return _serve(args)
    if command == "migrate":
        asyncio.run(_migrate(_settings(args)))
        print(json.dumps({"migrated": True}))
        return 0
    if command == "project":
        result = asyncio.run(_project_create(_settings(args), args.name, args.api_key))
        print(json.dumps(result))
        return 0
    if command == "replay":
        return _replay(args.file)
    if command == "user":
        settings = _settings(args)
        password = _password(args, settings.user_password)
        result = asyncio.run(_user_create(settings, args.email, args.project, password))
        print(json.dumps(result))
        return 0
    if command == "cron":
        return _cron_explain(args)
    if command == "reshard":
        print(json.dumps(asyncio.run(_reshard(_settings(args), args.shards))))
        return 0
    if command == "import-crontab":
        from monitor import crontab_import

        return crontab_import.run(args)
    if command == "import-healthchecks":
        return _import_healthchecks(args)
    if command in ("evaluate", "notify"):
        # SIGTERM cancels the worker: leases are released and the engine disposed, then exit 0.
        with contextlib.suppress(asyncio.CancelledError):
            asyncio.run(_worker(_settings(args), command))
        return 0
    if command == "scheduler":
        return _scheduler(args)
    raise AssertionError(command)


async def _migrate(settings: Settings) -> None:
    from monitor.storage import cluster
    from monitor.storage.engine import make_engine, migrate

    engine = make_engine(settings.database_url)
    try:
        await migrate(engine)
        # a migration Job runs first: it records the cluster's shard count (or warns on a mismatch)
        await cluster.adopt_shard_count(engine, settings.shards, datetime.now(UTC), process="migrate")
    finally:
        await engine.dispose()


async def _project_create(settings: Settings, name: str, api_key: str | None) -> dict[str, object]:
    from monitor.services import projects
    from monitor.storage.engine import make_engine, migrate

    engine = make_engine(settings.database_url)
    try:
        await migrate(engine)
        async with engine.begin() as conn:
            return await projects.create_project(
                conn, name, datetime.now(UTC), api_key=api_key, base_url=settings.base_url
            )
    finally:
        await engine.dispose()


async def _bootstrap(settings: Settings) -> dict[str, object] | None:
    """Migrate; with no project yet, create the default one (keys returned once).

    On PostgreSQL the count and the creation run under the migration's advisory lock, so API
    replicas started together (compose, Kubernetes) create one default project, not one each
    (or an ``api_key`` conflict that ends all but one).
    """
    from sqlalchemy import text

    from monitor.services import projects
    from monitor.storage.engine import MIGRATION_LOCK_KEY, make_engine, migrate

    engine = make_engine(settings.database_url)
    try:
        await migrate(engine)
        async with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
            if await projects.count_projects(conn) == 0:
                return await projects.create_project(
                    conn, "default", datetime.now(UTC), api_key=settings.api_key, base_url=settings.base_url
                )
        return None
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


def _serve(args: argparse.Namespace) -> int:
    configured = Settings.from_env()  # MONITOR_HOST / MONITOR_PORT / MONITOR_WORKERS, under the flags
    args.host = args.host if args.host is not None else configured.host
    args.port = _whole("port", args.port, configured.port, 1, 65535)
    args.workers = _whole("workers", args.workers, configured.workers, 1, 2**31)
    smtp_port = None
    if args.smtp_port is not None or configured.smtp_port is not None:
        smtp_port = _whole("smtp_port", args.smtp_port, configured.smtp_port or 0, 1, 65535)
    settings = _settings(args, allow_private_targets=True if args.dev else None)
    if not settings_module.given("base_url"):
        # the default project's Sentry DSN names the address actually served (as ping_url does)
        shown_host = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host
        settings = settings.replace(base_url=f"http://{shown_host}:{args.port}")
    if args.workers > 1 and settings.database_url.startswith("sqlite"):
        # One SQLite file has one writer: more processes only queue behind its lock (measured
        # 439 pings/s with 2 workers against 707 with 1), so refuse rather than run slower.
        raise SettingsError(
            "--workers (MONITOR_WORKERS): more than 1 needs PostgreSQL; a SQLite file has one writer,"
            " so more processes are slower, not faster. Use --workers 1, or"
            " MONITOR_DATABASE_URL=postgresql+asyncpg://..."
        )
    created = asyncio.run(_bootstrap(settings))
    if created is not None:
        print("Created the default project. Keep these keys; they are shown only once:", flush=True)
        print(json.dumps(created), flush=True)
    roles = [r for r, off in (("evaluator", args.no_evaluator), ("notifier", args.no_notifier)) if not off]
    os.environ["MONITOR_DATABASE_URL"] = settings.database_url
    os.environ["MONITOR_ALLOW_PRIVATE_TARGETS"] = "1" if settings.allow_private_targets else "0"
    # never empty (an empty variable means "the default", both loops): "http" is always there
    os.environ["MONITOR_ROLES"] = ",".join(["http", *roles])
    if smtp_port is not None:
        os.environ["MONITOR_SMTP_PORT"] = str(smtp_port)
        os.environ.setdefault("MONITOR_SMTP_HOST", args.host)
    if not settings_module.given("base_url"):
        # ping_url and links follow the address actually served unless told otherwise
        shown = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host
        os.environ["MONITOR_BASE_URL"] = f"http://{shown}:{args.port}"
    from monitor.storage.dburl import safe_url

    shown_url = safe_url(settings.database_url)  # never the password
    listening = f"monitor {__version__} listening on http://{args.host}:{args.port} ({shown_url})"
    if smtp_port is not None:
        domain = Settings.from_env().email_domain
        listening += f"\nemail pings on smtp://{args.host}:{smtp_port} (<uuid>@{domain})"
    if not settings.metrics_key and not args.dev:  # uuids are ping credentials
        from monitor.http.metrics import PUBLIC_METRICS_WARNING

        logger.warning(PUBLIC_METRICS_WARNING, extra={"action": "metrics_public"})
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


def _import_healthchecks(args: argparse.Namespace) -> int:
    """``monitor import-healthchecks``: 0 when everything was carried over, 1 when something
    was not (listed on stdout), 2 when the import could not run."""
    from monitor.services import hc_import

    target_url = args.target_url or str(settings_module.read("base_url"))
    target_key = args.target_api_key or settings_module.read("api_key")
    if not target_key:
        print(
            "monitor import-healthchecks: target api key: set MONITOR_API_KEY or --target-api-key",
            file=sys.stderr,
        )
        return 2
    try:
        report = hc_import.run_import(
            source_url=args.url,
            source_key=args.api_key,
            target_url=target_url,
            target_key=target_key,
            say=lambda line: print(line, flush=True),
        )
    except hc_import.HealthchecksImportError as error:
        print(f"monitor import-healthchecks: {error}", file=sys.stderr)
        return 2
    for line in report.lines():
        print(line)
    return 1 if report.notes or report.skipped else 0


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
    import inspect
    import socket

    import uvicorn
    from uvicorn.supervisors import Multiprocess

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
        return
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


async def _worker(settings: Settings, role: str) -> None:
    from monitor.domain.clock import SystemClock
    from monitor.notify.apprise import AppriseNotifier
    from monitor.notify.egress import install_egress_guard
    from monitor.storage.engine import make_engine, migrate
    from monitor.workers.evaluator import run_evaluator
    from monitor.workers.notifier import run_notifier

    main_task = asyncio.current_task()
    if main_task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    engine = make_engine(settings.database_url)
    try:
        await migrate(engine)
        if role == "evaluate":
            from monitor.services.retention import run_retention

            retention = asyncio.create_task(run_retention(engine, settings, SystemClock()), name="retention")
            try:
                await run_evaluator(engine, settings, SystemClock())
            finally:
                retention.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await retention
        else:
            install_egress_guard()  # this process sends: guard every connect before the first one
            async with AppriseNotifier(
                allow_private_targets=settings.allow_private_targets, max_workers=settings.notify_concurrency
            ) as notifier:
                await run_notifier(engine, notifier, settings, SystemClock())
    finally:
        await engine.dispose()


async def _reshard(settings: Settings, shards: int | None) -> dict[str, object]:
    """``monitor reshard [N]``: migrate, then change the stored shard count (or just show it)."""
    from monitor.services.shards import reshard
    from monitor.storage import cluster
    from monitor.storage.engine import make_engine, migrate

    engine = make_engine(settings.database_url)
    try:
        await migrate(engine)
        if shards is None:
            async with engine.connect() as conn:
                return {"shards": await cluster.stored_shard_count(conn)}
        return await reshard(engine, shards, datetime.now(UTC))
    finally:
        await engine.dispose()


def _replay(path: Path) -> int:
    from monitor.services.replay import load_scenario, replay

    try:
        scenario = load_scenario(path)
    except (OSError, ValueError) as error:
        print(f"monitor replay: cannot read {path}: {error}", file=sys.stderr)
        return 2
    from monitor.domain.errors import MonitorError

    try:
        result = asyncio.run(replay(scenario))
    except (KeyError, TypeError, ValueError, AttributeError, MonitorError) as error:
        detail = f"missing field {error}" if isinstance(error, KeyError) else str(error)
        print(f"monitor replay: {path} is not a valid scenario: {detail}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


async def _explain_check(settings: Settings, reference: str, count: int, after: datetime) -> dict[str, Any]:
    """``monitor cron explain --check``: migrate, then explain the stored check with its hints."""
    from monitor.services.hints import explain_check
    from monitor.storage.engine import make_engine, migrate

    engine = make_engine(settings.database_url)
    try:
        await migrate(engine)
        return await explain_check(engine, reference, count=count, after=after)
    finally:
        await engine.dispose()


def _cron_explain(args: argparse.Namespace) -> int:
    from monitor.domain.cron.explain import explain
    from monitor.domain.errors import NotFound, ScheduleError, ValidationError, ZoneError

    try:
        try:
            after = (
                datetime.fromisoformat(args.after.replace("Z", "+00:00")) if args.after else datetime.now(UTC)
            )
        except ValueError:
            raise ValidationError("after", f"{args.after!r} is not an ISO 8601 instant") from None
        if after.tzinfo is None:
            raise ValidationError("after", "needs a UTC offset or Z")
        if (args.expression is None) == (args.check is None):
            raise ValidationError(
                "expression", "give a cron expression or --check UUID_OR_SLUG (one of them)"
            )
        if args.check is not None:
            result = asyncio.run(_explain_check(_settings(args), args.check, args.count, after))
        else:
            result = explain(args.expression, dialect=args.dialect, tz=args.tz, count=args.count, after=after)
    except NotFound as error:
        print(json.dumps({"error": str(error)}))
        return 2
    except ScheduleError as error:
        print(json.dumps({"error": f"schedule: {error}"}))
        return 2
    except ZoneError as error:
        print(json.dumps({"error": f"tz: {error}"}))
        return 2
    except (ValidationError, ValueError) as error:
        print(json.dumps({"error": str(error)}))
        return 2
    print(json.dumps(result, indent=2))
    return 0


def _scheduler(args: argparse.Namespace) -> int:
    from monitor import scheduler

    jobs = scheduler.load_jobs(args.jobs)
    if args.check:
        after = datetime.now(UTC)
        if args.after:
            after = scheduler.parse_after(args.after)
        print(json.dumps(scheduler.next_ticks_report(jobs, after, args.count), indent=2))
        problems = scheduler.executable_problems(jobs)
        for problem in problems:
            print(json.dumps({"error": problem}), file=sys.stderr)
        return 1 if problems else 0
    settings = _settings(args)
    asyncio.run(
        scheduler.serve(
            settings,
            jobs,
            shutdown_grace=_or(args.shutdown_grace, settings.scheduler_shutdown_grace),
            liveness_interval=_or(args.liveness_interval, settings.scheduler_liveness_interval),
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def _or(flag: float | None, configured: float) -> float:
    """A flag's value, else its setting's."""
    return configured if flag is None else flag


def _password(args: argparse.Namespace, from_env: str | None) -> str:
    """``monitor user create``'s password: stdin, ``from_env`` (MONITOR_USER_PASSWORD) or a prompt."""
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    if from_env:
        return from_env
    if not sys.stdin.isatty():
        from monitor.domain.errors import ValidationError

        raise ValidationError("password", "give it with --password-stdin or MONITOR_USER_PASSWORD")
    import getpass

    return getpass.getpass("Password: ")


async def _user_create(
    settings: Settings, email: str, project_names: list[str], password: str
) -> dict[str, object]:
    from monitor.services import users
    from monitor.storage.engine import make_engine, migrate

    engine = make_engine(settings.database_url)
    try:
        await migrate(engine)
        async with engine.begin() as conn:
            project_ids = await users.project_ids_by_names(conn, project_names)
            # the operator's first users: admins of their projects (they manage the others)
            return await users.create_user(conn, email, password, project_ids, datetime.now(UTC), admin=True)
    finally:
        await engine.dispose()
