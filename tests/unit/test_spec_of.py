"""A check row's spec: shared between rows holding the same values, never between rows that differ."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from monitor.domain.checks import CheckKind, SimpleSchedule
from monitor.domain.errors import ScheduleError
from monitor.storage import repositories

ROW: dict[str, Any] = {
    "kind": "cron",
    "schedule": "*/5 * * * *",
    "dialect": "unix",
    "tz": "Europe/Berlin",
    "timeout": 86400,
    "grace": 60,
    "max_runtime": 3600,
    "failure_threshold": 1,
    "recovery_threshold": 1,
    "early_tolerance": None,
    "expected_runs": 1,
    "min_runtime": None,
    "manual_resume": 0,
    "methods": "",
    "name": "backup",
}

OTHER_VALUES: dict[str, Any] = {
    "kind": "simple",
    "schedule": "*/10 * * * *",
    "dialect": "quartz",
    "tz": "America/New_York",
    "timeout": 3600,
    "grace": 61,
    "max_runtime": 60,
    "failure_threshold": 2,
    "recovery_threshold": 3,
    "early_tolerance": 30,
    "expected_runs": 2,
    "min_runtime": 5,
    "manual_resume": 1,
    "methods": "POST",
    "name": "restore",
}


def _schedule_row(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with a schedule its dialect parses (Quartz has a seconds field first)."""
    if row["dialect"] == "quartz":
        return {**row, "schedule": "0 */5 * * * ?"}
    return row


def test_rows_holding_the_same_values_share_one_spec() -> None:
    first = repositories.spec_of(dict(ROW))
    again = repositories.spec_of({**ROW, "id": 7, "uuid": "not part of the spec"})
    assert again is first
    assert first.grace == timedelta(seconds=60)
    assert first.kind is CheckKind.CRON
    assert first.tz == "Europe/Berlin"


@pytest.mark.parametrize("column", sorted(OTHER_VALUES))
def test_a_row_differing_in_any_spec_column_gets_a_spec_of_its_own_values(column: str) -> None:
    base = repositories.spec_of(dict(ROW))
    row = _schedule_row({**ROW, column: OTHER_VALUES[column]})
    changed = repositories.spec_of(row)
    assert changed is not base
    assert changed != base or column == "timeout"  # a cron check's timeout is not part of its spec
    expected = {
        "grace": ("grace", timedelta(seconds=61)),
        "max_runtime": ("max_runtime", timedelta(seconds=60)),
        "failure_threshold": ("failure_threshold", 2),
        "recovery_threshold": ("recovery_threshold", 3),
        "early_tolerance": ("early_tolerance", timedelta(seconds=30)),
        "expected_runs": ("expected_runs", 2),
        "min_runtime": ("min_runtime", timedelta(seconds=5)),
        "manual_resume": ("manual_resume", True),
        "methods": ("post_only", True),
        "name": ("name", "restore"),
        "tz": ("tz", "America/New_York"),
    }
    if column in expected:
        attribute, value = expected[column]
        assert getattr(changed, attribute) == value
    if column in ("schedule", "dialect"):
        assert changed.schedule != base.schedule
    if column == "kind":
        assert changed.schedule == SimpleSchedule(period=timedelta(seconds=86400))
    if column == "timeout":
        assert changed.schedule == base.schedule  # a cron check's timeout is not its schedule
        assert repositories.spec_of({**ROW, "kind": "simple", "timeout": 3600}).schedule == SimpleSchedule(
            period=timedelta(hours=1)
        )


def test_stored_booleans_read_as_integers_give_the_same_spec_as_python_booleans() -> None:
    as_integer = repositories.spec_of({**ROW, "manual_resume": 1})
    assert as_integer == repositories.spec_of({**ROW, "manual_resume": True})
    assert repositories.spec_of({**ROW, "manual_resume": 0}).manual_resume is False


def test_a_row_whose_schedule_does_not_parse_raises_every_time() -> None:
    row = {**ROW, "schedule": "*/5 * * * 8"}
    for _ in range(2):
        with pytest.raises(ScheduleError):
            repositories.spec_of(row)


def test_a_row_missing_a_spec_column_is_refused() -> None:
    row = {name: value for name, value in ROW.items() if name != "grace"}
    with pytest.raises(KeyError):
        repositories.spec_of(row)
