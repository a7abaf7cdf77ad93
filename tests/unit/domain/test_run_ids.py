"""Server-chosen run ids: UUID version 7 (RFC 9562 §5.7), ordered by the instant given."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from monitor.domain.runs import new_run_id

instants = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)


@given(instants)
def test_a_run_id_is_a_version_7_uuid_led_by_the_instants_milliseconds(at: datetime) -> None:
    value = uuid.UUID(new_run_id(at))
    assert value.version == 7
    assert value.variant == uuid.RFC_4122
    assert value.int >> 80 == (at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


@given(instants, st.integers(min_value=1, max_value=10**12))
def test_later_instants_give_greater_ids_as_text(at: datetime, millis: int) -> None:
    later = at + timedelta(milliseconds=millis)
    assert new_run_id(at) < new_run_id(later)


def test_ids_of_one_instant_differ() -> None:
    at = datetime(2026, 12, 6, 15, 0, tzinfo=UTC)
    assert len({new_run_id(at) for _ in range(1000)}) == 1000
