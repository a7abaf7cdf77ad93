"""The check form's optional numbers: an emptied field resets the setting to its default."""

from __future__ import annotations

from monitor.web.pages import check_form_data


def test_emptied_optional_fields_reset_to_the_api_defaults() -> None:
    form = {
        "kind": "cron",
        "schedule": "0 3 * * *",
        "grace": "600",
        "max_runtime": "1800",
        "failure_threshold": "1",
        "recovery_threshold": "1",
        "early_tolerance": "",
        "expected_runs": " ",
        "min_runtime": "",
        "nag_interval": "",
    }
    data = check_form_data(form, [])
    assert (data["early_tolerance"], data["expected_runs"], data["min_runtime"], data["nag_interval"]) == (
        None,
        1,
        None,
        None,
    )


def test_filled_optional_fields_are_sent_and_absent_ones_left_alone() -> None:
    form = {"kind": "simple", "timeout": "60", "grace": "5", "max_runtime": "30", "expected_runs": "3"}
    data = check_form_data(form, [])
    assert data["expected_runs"] == 3
    assert "min_runtime" not in data and "early_tolerance" not in data
