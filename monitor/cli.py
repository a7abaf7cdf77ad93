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
from collections.abc import Sequence
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
    if problem is not None:  # QA F3: one line, exit 2, before any connection
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
    explain = cron_sub.add_parser("explain", help="explain a cron expression; prints JSON")
    explain.add_argument("expression")
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

    from monitor import crontab_import  # issue 7

    crontab_import.add_parser(sub)
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
        print(f"monitor: MONITOR_DATABASE_URL: {problem}", file=sys.stderr)  # QA F3: exit 1
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
            return await projects.create_project(conn, name, datetime.now(UTC), api_key=api_key)
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
                    conn, "default", datetime.now(UTC), api_key=settings.api_key
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
        raise SettingsError(
            f"--{name} (MONITOR_{name.upper()}): must be a whole number {bound}, got {text!r}"
        )
    return value


def _serve(args: argparse.Namespace) -> int:
    configured = Settings.from_env()  # MONITOR_HOST / MONITOR_PORT / MONITOR_WORKERS, under the flags
    args.host = args.host if args.host is not None else configured.host
    args.port = _whole("port", args.port, configured.port, 1, 65535)
    args.workers = _whole("workers", args.workers, configured.workers, 1, 2**31)
    settings = _settings(args, allow_private_targets=True if args.dev else None)
    created = asyncio.run(_bootstrap(settings))
    if created is not None:
        print("Created the default project. Keep these keys; they are shown only once:", flush=True)
        print(json.dumps(created), flush=True)
    roles = [r for r, off in (("evaluator", args.no_evaluator), ("notifier", args.no_notifier)) if not off]
    os.environ["MONITOR_DATABASE_URL"] = settings.database_url
    os.environ["MONITOR_ALLOW_PRIVATE_TARGETS"] = "1" if settings.allow_private_targets else "0"
    # never empty (an empty variable means "the default", both loops): "http" is always there
    os.environ["MONITOR_ROLES"] = ",".join(["http", *roles])
    if not settings_module.given("base_url"):
        # ping_url and links follow the address actually served unless told otherwise
        shown = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host
        os.environ["MONITOR_BASE_URL"] = f"http://{shown}:{args.port}"
    from monitor.storage.dburl import safe_url

    shown_url = safe_url(settings.database_url)  # never the password
    print(f"monitor {__version__} listening on http://{args.host}:{args.port} ({shown_url})", flush=True)
    if not settings.metrics_key and not args.dev:  # issue 9: uuids are ping credentials
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
    )
    return 0


def run_uvicorn(app: str, *, factory: bool, host: str, port: int, workers: int, log_level: str) -> None:
    """Serve the ASGI ``app`` (an import string) with uvicorn, on ``workers`` processes.

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
    }
    if workers <= 1:
        uvicorn.run(app, **options)
        return
    config = uvicorn.Config(app, **options)
    plain = config.bind_socket()
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
    from monitor.notify.apprise import AppriseNotifier, install_egress_guard
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
            await run_evaluator(engine, settings, SystemClock())
        else:
            install_egress_guard()  # this process sends: guard every connect before the first one
            async with AppriseNotifier(allow_private_targets=settings.allow_private_targets) as notifier:
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


def _cron_explain(args: argparse.Namespace) -> int:
    from monitor.domain.errors import ScheduleError, ValidationError, ZoneError
    from monitor.domain.explain import explain

    try:
        try:
            after = (
                datetime.fromisoformat(args.after.replace("Z", "+00:00")) if args.after else datetime.now(UTC)
            )
        except ValueError:
            raise ValidationError("after", f"{args.after!r} is not an ISO 8601 instant") from None
        if after.tzinfo is None:
            raise ValidationError("after", "needs a UTC offset or Z")
        result = explain(args.expression, dialect=args.dialect, tz=args.tz, count=args.count, after=after)
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
        return 0
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
            return await users.create_user(conn, email, password, project_ids, datetime.now(UTC))
    finally:
        await engine.dispose()
