"""``monitor replay FILE``: a scenario file run on a temporary database, the outcome as JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_replay", "replay"]


def add_replay(sub: Any) -> None:
    """Register ``replay``."""
    replay = sub.add_parser(
        "replay",
        help="run a scenario file (format: tests/cases/runs/FORMAT.txt in the repository) on a "
        "temporary database; prints JSON",
    )
    replay.add_argument("file", type=Path)


def replay(args: argparse.Namespace) -> int:
    """``monitor replay FILE``: 0, or 2 when the file cannot be read or is not a scenario."""
    return _replay(args.file)


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
