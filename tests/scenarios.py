"""Loading the run-detection scenarios (``tests/cases/runs``, a copy of the shared vectors; FORMAT.txt)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CASES = Path(__file__).resolve().parent / "cases"
RUN_CASES = CASES / "runs"
CRON_CASES = CASES / "cron"


def parse_instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def scenario_files() -> list[Path]:
    """Every scenario file; fails loudly (never skips) when the folder is missing."""
    if not RUN_CASES.is_dir():
        raise FileNotFoundError(f"run scenarios not found at {RUN_CASES}")
    files = sorted(RUN_CASES.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no scenarios in {RUN_CASES}")
    return files


@dataclass(frozen=True)
class Scenario:
    id: str
    check: dict[str, Any]
    created: datetime
    steps: list[dict[str, Any]]
    expect: dict[str, Any]

    @classmethod
    def load(cls, path: Path) -> Scenario:
        data = json.loads(path.read_text())
        return cls(
            id=data.get("id", path.stem),
            check=data["check"],
            created=parse_instant(data["created"]),
            steps=data["steps"],
            expect=data["expect"],
        )

    def expected_alerts(self) -> list[tuple[str, str]]:
        return sorted((a["kind"], a["scheduled"]) for a in self.expect["alerts"])


def ping_kind_and_status(value: Any) -> tuple[str, int | None]:
    """A step's ``ping`` value as (kind, exit_status)."""
    if isinstance(value, int):
        return ("success" if value == 0 else "fail"), value
    return str(value), None
