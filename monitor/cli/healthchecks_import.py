"""``monitor import-healthchecks``: copy the checks of a Healthchecks project here."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from monitor import settings as settings_module

__all__ = ["add_import_healthchecks", "import_healthchecks"]


def add_import_healthchecks(sub: Any) -> None:
    """Register ``import-healthchecks``."""
    hc = sub.add_parser(
        "import-healthchecks",
        help="copy the checks of a Healthchecks project here (idempotent: upserts by slug)",
    )
    hc.add_argument("--url", required=True, help="the Healthchecks instance, e.g. https://healthchecks.io")
    hc.add_argument("--api-key", required=True, help="that project's read-write API key")
    hc.add_argument("--target-url", help="this monitor's address (env MONITOR_BASE_URL)")
    hc.add_argument("--target-api-key", help="read-write key of the project to fill (env MONITOR_API_KEY)")


def import_healthchecks(args: argparse.Namespace) -> int:
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
