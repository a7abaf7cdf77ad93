"""Administration commands: ``migrate``, ``project create``, ``user create`` and ``reshard``.

Each applies pending migrations first and prints its result as JSON on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from typing import Any

from monitor.cli.options import add_database_url, settings_for
from monitor.settings import Settings

__all__ = ["add_migrate", "add_project", "add_reshard", "add_user", "migrate", "project", "reshard", "user"]


def add_migrate(sub: Any) -> None:
    """Register ``migrate``."""
    migrate = sub.add_parser("migrate", help="apply pending migrations and exit")
    add_database_url(migrate)


def add_project(sub: Any) -> None:
    """Register ``project create``."""
    project = sub.add_parser("project", help="manage projects")
    project_sub = project.add_subparsers(dest="project_command", required=True)
    create = project_sub.add_parser("create", help="create a project; prints its keys as JSON")
    add_database_url(create)
    create.add_argument("name")
    create.add_argument("--api-key", help="use this read-write key instead of a random one")


def add_reshard(sub: Any) -> None:
    """Register ``reshard``."""
    reshard = sub.add_parser(
        "reshard",
        help="change the evaluator shard count of the whole cluster (safe while evaluators run);"
        " without SHARDS print the stored count",
    )
    add_database_url(reshard)
    reshard.add_argument("shards", type=int, nargs="?", help="the new shard count (1-4096)")


def add_user(sub: Any) -> None:
    """Register ``user create``."""
    user = sub.add_parser("user", help="manage dashboard users")
    user_sub = user.add_subparsers(dest="user_command", required=True)
    user_create = user_sub.add_parser(
        "create",
        help="create a dashboard user; prints it as JSON",
        description="The password comes from --password-stdin (first line of standard input), else "
        "MONITOR_USER_PASSWORD, else an interactive prompt.",
    )
    add_database_url(user_create)
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


def migrate(args: argparse.Namespace) -> int:
    """``monitor migrate``: apply pending migrations; prints ``{"migrated": true}``."""
    asyncio.run(_migrate(settings_for(args)))
    print(json.dumps({"migrated": True}))
    return 0


def project(args: argparse.Namespace) -> int:
    """``monitor project create NAME``: prints the project and its keys (shown once)."""
    result = asyncio.run(_project_create(settings_for(args), args.name, args.api_key))
    print(json.dumps(result))
    return 0


def user(args: argparse.Namespace) -> int:
    """``monitor user create EMAIL``: prints the user (an admin of the projects named)."""
    settings = settings_for(args)
    password = _password(args, settings.user_password)
    result = asyncio.run(_user_create(settings, args.email, args.project, password))
    print(json.dumps(result))
    return 0


def reshard(args: argparse.Namespace) -> int:
    """``monitor reshard [SHARDS]``: prints the stored shard count, or the change made."""
    print(json.dumps(asyncio.run(_reshard(settings_for(args), args.shards))))
    return 0


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
        return await projects.add_project(
            engine, name, datetime.now(UTC), api_key=api_key, base_url=settings.base_url
        )
    finally:
        await engine.dispose()


async def _reshard(settings: Settings, shards: int | None) -> dict[str, object]:
    """``monitor reshard [N]``: migrate, then change the stored shard count (or just show it)."""
    from monitor.services import status
    from monitor.services.shards import reshard
    from monitor.storage.engine import make_engine, migrate

    engine = make_engine(settings.database_url)
    try:
        await migrate(engine)
        if shards is None:
            return {"shards": await status.stored_shard_count(engine)}
        return await reshard(engine, shards, datetime.now(UTC))
    finally:
        await engine.dispose()


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
        return await users.add_admin(engine, email, password, project_names, datetime.now(UTC))
    finally:
        await engine.dispose()
