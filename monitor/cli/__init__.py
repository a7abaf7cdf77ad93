"""The ``monitor`` command (DESIGN §3, §10): argument parsing and dispatch to one module per family.

* :mod:`~monitor.cli.serve` — ``serve`` (the API, evaluator and notifier on uvicorn);
* :mod:`~monitor.cli.loops` — ``evaluate``, ``notify``, ``scheduler``;
* :mod:`~monitor.cli.admin` — ``migrate``, ``project create``, ``user create``, ``reshard``;
* :mod:`~monitor.cli.cron` — ``cron explain``; :mod:`~monitor.cli.replay` — ``replay``;
* :mod:`~monitor.cli.crontab_import` — ``import-crontab``;
  :mod:`~monitor.cli.healthchecks_import` — ``import-healthchecks``.

Every command that touches the database applies pending migrations first. Options fall back
to ``MONITOR_*`` environment variables; flags win.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence

from monitor import __version__
from monitor import settings as settings_module
from monitor.cli import admin, cron, crontab_import, healthchecks_import, loops, replay, serve
from monitor.settings import SettingsError

__all__ = ["main"]

logger = logging.getLogger("monitor")

#: the function that carries out each command (``args.command``), returning the exit status
_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": serve.serve,
    "migrate": admin.migrate,
    "project": admin.project,
    "replay": replay.replay,
    "user": admin.user,
    "cron": cron.cron_explain,
    "reshard": admin.reshard,
    # the streams as they are when the command runs (run's defaults are bound at import)
    "import-crontab": lambda args: crontab_import.run(args, sys.stdout, sys.stderr),
    "import-healthchecks": healthchecks_import.import_healthchecks,
    "evaluate": loops.worker,
    "notify": loops.worker,
    "scheduler": loops.scheduler,
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="monitor", description="A dead-man's-switch service for scheduled work."
    )
    parser.add_argument("--version", action="version", version=f"monitor {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve.add_serve(sub)
    admin.add_migrate(sub)
    loops.add_workers(sub)
    admin.add_project(sub)
    replay.add_replay(sub)
    cron.add_cron(sub)
    loops.add_scheduler(sub)
    admin.add_reshard(sub)
    admin.add_user(sub)
    crontab_import.add_parser(sub)
    healthchecks_import.add_import_healthchecks(sub)
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
        format=settings_module.LOG_FORMAT,
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    from monitor.domain.errors import MonitorError, ValidationErrors
    from monitor.storage.ports import DuplicateKey

    try:
        return _COMMANDS[args.command](args)
    except (SettingsError, MonitorError) as error:
        for each in error.errors if isinstance(error, ValidationErrors) else [error]:
            print(f"monitor: {each}", file=sys.stderr)
        return 2
    except DuplicateKey:
        # the only unique value a command takes from its user is an API key
        print("monitor: api_key: already in use (choose another key)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # our reader went away (`monitor scheduler --check | head -1`): not a database
        # failure; end quietly with SIGPIPE's status, as a plain pipeline member does
        _silence_stdout()
        return 141
    except Exception as error:
        from monitor.storage.dburl import connect_problem

        url = getattr(args, "database_url", None) or settings_module.read("database_url")
        problem = connect_problem(error, url)
        if problem is None:
            raise
        print(f"monitor: MONITOR_DATABASE_URL: {problem}", file=sys.stderr)  # exit 1
        return 1


def _silence_stdout() -> None:
    """Point a stdout whose reader is gone at /dev/null, so the interpreter's final flush does
    not print ``Exception ignored … BrokenPipeError``."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass
