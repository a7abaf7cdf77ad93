"""Maintenance windows: the pure rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from monitor.domain import maintenance
from monitor.domain.maintenance import Occurrence, Window

CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def one_off(check_id: int | None = 1) -> Window:
    return Window(
        id="w1",
        check_id=check_id,
        name="upgrade",
        created_at=CREATED,
        starts_at=at("2026-07-19T02:00:00Z"),
        ends_at=at("2026-07-19T03:00:00Z"),
    )


def nightly(tz: str = "Europe/Berlin", minutes: int = 30) -> Window:
    return Window(
        id="w2",
        check_id=None,
        name="deploy",
        created_at=CREATED,
        schedule="0 2 * * *",
        tz=tz,
        duration=timedelta(minutes=minutes),
    )


@pytest.mark.parametrize(
    ("instant", "inside"),
    [
        pytest.param("2026-07-19T01:59:59Z", False, id="before"),
        pytest.param("2026-07-19T02:00:00Z", True, id="start-inclusive"),
        pytest.param("2026-07-19T02:59:59Z", True, id="inside"),
        pytest.param("2026-07-19T03:00:00Z", False, id="end-exclusive"),
    ],
)
def test_one_off_window_is_half_open(instant: str, inside: bool) -> None:
    found = maintenance.occurrence_at(one_off(), at(instant))
    assert (found is not None) is inside


def test_recurring_window_follows_the_zone_across_dst() -> None:
    window = nightly()
    # 02:00 Berlin is 00:00 UTC in summer and 01:00 UTC in winter.
    assert maintenance.occurrence_at(window, at("2026-07-19T00:10:00Z")) == Occurrence(
        at("2026-07-19T00:00:00Z"), at("2026-07-19T00:30:00Z")
    )
    assert maintenance.occurrence_at(window, at("2026-01-19T00:10:00Z")) is None
    assert maintenance.occurrence_at(window, at("2026-01-19T01:10:00Z")) is not None
    # Spring forward: 02:00 does not exist on 2026-03-29; the fixed-time tick fires at 03:00 CEST.
    assert maintenance.occurrence_at(window, at("2026-03-29T01:10:00Z")) == Occurrence(
        at("2026-03-29T01:00:00Z"), at("2026-03-29T01:30:00Z")
    )


def test_window_longer_than_its_period_still_covers() -> None:
    window = Window(
        id="w",
        check_id=None,
        name="",
        created_at=CREATED,
        schedule="*/10 * * * *",
        duration=timedelta(minutes=25),
    )
    found = maintenance.occurrence_at(window, at("2026-07-19T02:24:00Z"))
    # occurrences that overlap are one span (merged up to MERGE_LIMIT ticks each way)
    assert found is not None
    assert found.start <= at("2026-07-19T02:20:00Z") and found.end >= at("2026-07-19T02:45:00Z")
    assert found.end - found.start <= timedelta(minutes=10 * 2 * maintenance.MERGE_LIMIT + 25)


def test_covering_respects_the_windows_scope() -> None:
    check_window, project_window = one_off(check_id=7), one_off(check_id=None)
    instant = at("2026-07-19T02:30:00Z")
    assert maintenance.covering([check_window], 7, instant) is check_window
    assert maintenance.covering([check_window], 8, instant) is None
    assert maintenance.covering([check_window, project_window], 8, instant) is project_window
    assert maintenance.covering([project_window], None, instant) is project_window  # project-level alerts


def test_summary_is_due_once_the_occurrence_has_ended() -> None:
    window = one_off()
    assert maintenance.summary_due(window, None, at("2026-07-19T02:59:59Z")) is None
    due = maintenance.summary_due(window, None, at("2026-07-19T03:00:00Z"))
    assert due == Occurrence(at("2026-07-19T02:00:00Z"), at("2026-07-19T03:00:00Z"))
    assert maintenance.summary_due(window, due.end, at("2026-07-20T00:00:00Z")) is None


def test_one_off_window_created_after_it_ended_needs_no_summary() -> None:
    window = Window(
        id="w",
        check_id=None,
        name="",
        created_at=at("2026-07-20T00:00:00Z"),
        starts_at=at("2026-07-19T02:00:00Z"),
        ends_at=at("2026-07-19T03:00:00Z"),
    )
    assert maintenance.summary_due(window, None, at("2026-07-21T00:00:00Z")) is None


def test_recurring_summary_names_only_the_latest_ended_occurrence() -> None:
    window = nightly(tz="UTC")
    first = maintenance.summary_due(window, None, at("2026-07-19T02:30:00Z"))
    assert first == Occurrence(at("2026-07-19T02:00:00Z"), at("2026-07-19T02:30:00Z"))
    assert maintenance.summary_due(window, first.end, at("2026-07-20T02:29:59Z")) is None
    # Three nights without a notifier: one summary for the latest night, not a burst of three.
    late = maintenance.summary_due(window, first.end, at("2026-07-23T12:00:00Z"))
    assert late == Occurrence(at("2026-07-23T02:00:00Z"), at("2026-07-23T02:30:00Z"))


def test_next_occurrence_for_display() -> None:
    assert maintenance.next_occurrence(nightly(tz="UTC"), at("2026-07-19T05:00:00Z")) == Occurrence(
        at("2026-07-20T02:00:00Z"), at("2026-07-20T02:30:00Z")
    )
    assert maintenance.next_occurrence(one_off(), at("2026-07-19T04:00:00Z")) is None
