"""Every vector in tests/cases/cron/cases.json (DESIGN §4) must pass; none may be skipped."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from monitor.domain.cron.schedules import parse_cron
from monitor.domain.errors import ScheduleError

CASES_DIR = Path(__file__).resolve().parents[2] / "cases" / "cron"
DIALECTS = {"unix5": "unix", "seconds6": "seconds", "quartz": "quartz"}


def _load() -> list[dict[str, Any]]:
    files = sorted(CASES_DIR.glob("*.json"))
    if not files:  # fail loudly: a missing vector set must never look like a pass
        raise RuntimeError(f"no cron vectors found in {CASES_DIR}")
    cases: list[dict[str, Any]] = []
    for path in files:
        cases.extend(json.loads(path.read_text(encoding="utf-8")))
    ids = [c["id"] for c in cases]
    if len(ids) != len(set(ids)):
        raise RuntimeError("duplicate case ids in the cron vectors")
    return cases


CASES = _load()


def test_vectors_present() -> None:
    assert len(CASES) >= 25


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_vector(case: dict[str, Any]) -> None:
    dialect = DIALECTS[case["dialect"]]
    start = datetime.fromisoformat(case["start"])
    if case["expected"] == "never":
        began = time.perf_counter()
        with pytest.raises(ScheduleError, match="never fires"):
            schedule = parse_cron(case["expr"], dialect, case["tz"])
            # should not get here; if it did, asking for ticks must not hang either
            schedule.next_ticks(start, case["count"])
        assert time.perf_counter() - began < 1.0
        return
    schedule = parse_cron(case["expr"], dialect, case["tz"])
    expected = [datetime.fromisoformat(x) for x in case["expected"]]
    if case["direction"] == "next":
        got = schedule.next_ticks(start, case["count"])
    else:
        got = []
        cursor = start
        for _ in range(case["count"]):
            tick = schedule.prev_tick(cursor)
            assert tick is not None
            got.append(tick)
            cursor = tick
    assert got == expected, case["note"]
    for tick in got:
        assert tick.utcoffset() is not None and tick.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
        assert tick.microsecond == 0
        assert schedule.is_tick(tick)
