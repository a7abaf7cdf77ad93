"""The check body's declared schema and the service's reader accept the same values.

``CheckIn`` (monitor/http/api/check_bodies.py) is what the OpenAPI document declares; the
handlers validate with ``parse_check_fields``. Each single-field body is judged by both: the
schema (with jsonschema_rs, the validator schemathesis uses) and the reader must agree, except
on the rules no schema states (a zone name is looked up).
"""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from monitor.domain.errors import ValidationError, ZoneError
from monitor.http.api.check_bodies import CheckIn
from monitor.services.checks import MAX_SECONDS, parse_check_fields

_SCHEMA, _DEFS = msgspec.json.schema_components([CheckIn], ref_template="#/$defs/{name}")
VALIDATOR = jsonschema_rs.validator_for({**_SCHEMA[0], "$defs": _DEFS})
FIELDS = sorted(msgspec.structs.fields(CheckIn), key=lambda f: f.name)
NAMES = [f.name for f in FIELDS if f.name != "api_key"]

BOUNDS = [-1, 0, 1, 2, 999, 1000, 1001, 86_400, 86_401, MAX_SECONDS, MAX_SECONDS + 1]
LENGTHS = [0, 1, 9, 10, 11, 63, 64, 65, 99, 100, 101, 199, 200, 201, 499, 500, 501, 2000, 2001]

values = st.one_of(
    st.sampled_from(BOUNDS),
    st.integers(),
    st.sampled_from(BOUNDS).map(float),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
    st.sampled_from(LENGTHS).map(lambda n: "a" * n),
    st.sampled_from(["unix", " QUARTZ\t", "Seconds", "oncalendar", "cron", "", "POST", "GET"]),
    st.sampled_from(["a\x00b", " ", "\u3000", "*/5 * * * *", "my-slug", "My Slug"]),
    st.lists(st.sampled_from(["name", "slug", "tags", "timeout", "grace", "kind", 1]), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _reader_accepts(body: dict[str, Any]) -> bool:
    try:
        parse_check_fields(body)
    except ValidationError:
        return False
    return True


@settings(max_examples=3000, deadline=None, derandomize=True)
@given(name=st.sampled_from(NAMES), value=values)
@example(name="timeout", value=60.0)
@example(name="timeout", value=60.5)
@example(name="dialect", value="\u2003unix ")
@example(name="schedule", value="\x1c")
def test_the_schema_accepts_a_field_exactly_when_the_reader_does(name: str, value: Any) -> None:
    body = {name: value}
    try:
        reader = _reader_accepts(body)
    except ZoneError:
        return  # a zone name is looked up: no schema says which names exist
    assert VALIDATOR.is_valid(body) == reader, (body, reader)


@pytest.mark.parametrize("body", [{}, {"unknown": [1, {"x": None}]}, {"api_key": "k", "name": "n"}])
def test_unknown_fields_and_the_key_are_ignored_by_both(body: dict[str, Any]) -> None:
    assert VALIDATOR.is_valid(body) and _reader_accepts(body)
