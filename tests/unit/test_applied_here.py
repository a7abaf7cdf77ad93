"""A process's record of the pings it applied, which tells a start whether a finish came first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from monitor.domain.detection import REORDER_WINDOW
from monitor.services.ingest import AppliedHere

T0 = datetime(2026, 3, 29, 1, 59, 59, 990000, tzinfo=UTC)


def test_a_check_keeps_the_arrivals_within_the_window_of_its_newest() -> None:
    applied = AppliedHere()
    assert applied.of(1) == frozenset()
    applied.add(1, T0)
    applied.add(1, T0 + REORDER_WINDOW / 2)
    applied.add(2, T0)
    assert applied.of(1) == {T0, T0 + REORDER_WINDOW / 2}
    applied.add(1, T0 + REORDER_WINDOW + timedelta(microseconds=1))
    assert applied.of(1) == {T0 + REORDER_WINDOW / 2, T0 + REORDER_WINDOW + timedelta(microseconds=1)}
    assert applied.of(2) == {T0}


def test_the_least_recently_pinged_checks_are_dropped_beyond_the_bound() -> None:
    applied = AppliedHere(checks=2)
    applied.add(1, T0)
    applied.add(2, T0)
    applied.add(1, T0 + timedelta(milliseconds=1))  # check 1 is now the most recent
    applied.add(3, T0 + timedelta(milliseconds=2))
    assert applied.of(2) == frozenset()
    assert applied.of(1) == {T0, T0 + timedelta(milliseconds=1)}
    assert applied.of(3) == {T0 + timedelta(milliseconds=2)}
