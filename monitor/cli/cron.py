"""``monitor cron explain``: a cron expression, or a stored check's schedule, explained as JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime
from typing import Any

from monitor.cli.options import add_database_url, settings_for
from monitor.settings import Settings

__all__ = ["add_cron", "cron_explain"]


def add_cron(sub: Any) -> None:
    """Register ``cron explain``."""
    cron = sub.add_parser("cron", help="cron tools")
    cron_sub = cron.add_subparsers(dest="cron_command", required=True)
    explain = cron_sub.add_parser(
        "explain", help="explain a cron expression, or a stored check's (--check) with its hints; prints JSON"
    )
    add_database_url(explain)
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


def cron_explain(args: argparse.Namespace) -> int:
    """``monitor cron explain``: prints the explain document, or ``{"error": ...}`` with exit 2."""
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
            result = asyncio.run(_explain_check(settings_for(args), args.check, args.count, after))
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
