"""What the ``monitor`` commands share: the ``--database-url`` option and the settings it feeds."""

from __future__ import annotations

import argparse
from typing import Any

from monitor.settings import Settings, SettingsError

__all__ = ["add_database_url", "or_setting", "settings_for"]


def add_database_url(parser: argparse.ArgumentParser) -> None:
    """Give a command the ``--database-url`` option (falls back to ``MONITOR_DATABASE_URL``)."""
    parser.add_argument("--database-url", help="SQLAlchemy async URL (env MONITOR_DATABASE_URL)")


def settings_for(args: argparse.Namespace, **extra: Any) -> Settings:
    """The command's :class:`~monitor.settings.Settings`: ``MONITOR_*`` under its flags.

    Raises:
        SettingsError: a setting is malformed, or ``MONITOR_DATABASE_URL`` is unusable (one
            line, exit 2, before any connection).
    """
    from monitor.storage.dburl import url_problem

    settings = Settings.from_env(database_url=getattr(args, "database_url", None), **extra)
    problem = url_problem(settings.database_url)
    if problem is not None:  # one line, exit 2, before any connection
        raise SettingsError(f"MONITOR_DATABASE_URL: {problem}")
    return settings


def or_setting(flag: float | None, configured: float) -> float:
    """A flag's value, else its setting's."""
    return configured if flag is None else flag
