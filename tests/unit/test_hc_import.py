"""The translation of a Healthchecks check into our create body (monitor import-healthchecks)."""

from __future__ import annotations

import pytest

from monitor.services import hc_import


@pytest.mark.parametrize(
    ("schedule", "dialect"),
    [
        ("0 3 * * *", "unix"),
        ("*/5 * * * * *", "oncalendar"),  # six fields: Healthchecks reads OnCalendar
        ("12:34", "oncalendar"),
        ("Mon *-*-* 03:00\nFri 04:00", "oncalendar"),
    ],
)
def test_dialect_follows_healthchecks_guess(schedule: str, dialect: str) -> None:
    assert hc_import.source_dialect(schedule) == dialect


def test_translate_copies_fields_and_channels_by_name() -> None:
    check = {
        "name": "backup",
        "slug": "backup",
        "tags": "db",
        "desc": "pg_dump",
        "grace": 900,
        "schedule": "0 3 * * *",
        "tz": "Europe/Riga",
        "manual_resume": False,
        "methods": "",
        "channels": "id-1,id-2",
        "success_kw": "OK",
        "status": "up",
    }
    body, notes = hc_import.translate(
        check,
        slug="backup",
        channel_names={"id-1": "ops mail", "id-2": "pager"},
        target_channels={"ops mail"},
    )
    assert body == {
        "name": "backup",
        "tags": "db",
        "desc": "pg_dump",
        "grace": 900,
        "manual_resume": False,
        "methods": "",
        "slug": "backup",
        "unique": ["slug"],
        "schedule": "0 3 * * *",
        "tz": "Europe/Riga",
        "dialect": "unix",
        "success_kw": "OK",
        "channels": "ops mail",
    }
    assert notes == ["check 'backup': channel 'pager' has no channel of that name here"]


def test_simple_check_takes_timeout() -> None:
    body, notes = hc_import.translate(
        {"name": "x", "timeout": 3600, "grace": 60}, slug="x", channel_names={}, target_channels=set()
    )
    assert body["timeout"] == 3600 and "schedule" not in body and body["channels"] == "" and notes == []


def test_apprise_schemes_for_a_kind() -> None:
    assert hc_import.apprise_schemes_for("email") == ["mailto", "mailtos"]
    assert hc_import.apprise_schemes_for("nothing-like-it") == []
