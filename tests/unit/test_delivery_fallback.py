"""The message a delivery sends when neither templates nor stored facts can render the alert."""

from __future__ import annotations

from datetime import UTC, datetime

from monitor.services import dispatch
from monitor.settings import Settings


def _row(**overrides: object) -> dict[str, object]:
    row: dict[str, object] = {
        "alert_id": 7,
        "facts": "{not json",
        "title": "",
        "message": "",
        "kind": "missed",
        "name": "nightly-billing",
        "uuid": "5f1c1f2e-0000-4000-8000-000000000001",
        "slug": None,
        "scheduled": datetime(2026, 7, 19, 3, 0, tzinfo=UTC),
        "paused": False,
        "watch_from": datetime(2026, 7, 1, tzinfo=UTC),
        "episode_key": "missed:2026-07-19T03:00:00Z",
    }
    row.update(overrides)
    return row


def test_facts_that_do_not_parse_still_give_a_message_naming_the_check_and_kind() -> None:
    message = dispatch._message(_row(), Settings())

    assert message.title == "nightly-billing: missed"
    assert "{not json" in message.body
    assert message.json_fields["check_uuid"] == "5f1c1f2e-0000-4000-8000-000000000001"


def test_a_row_with_stored_text_sends_that_text() -> None:
    message = dispatch._message(_row(facts=None, title="project: outage", message="text\n"), Settings())

    assert (message.title, message.body) == ("project: outage", "text\n")
