"""The request body of ``POST /api/v3/checks/`` and ``POST /api/v3/checks/{uuid}`` as a type.

:class:`CheckIn` states every field :func:`monitor.services.checks.parse_check_fields` reads,
with the type and range it accepts, so the OpenAPI document declares the body (and schemathesis
fuzzes it). The handlers still read the JSON object and hand it to ``parse_check_fields``, whose
``{"error": "<field>: <problem>"}`` messages Healthchecks clients rely on (a decoder's own
messages would differ); ``tests/unit/test_check_bodies.py`` holds the two to the same
rules, value by value.

Rules no JSON Schema states are the service's alone: a schedule's grammar in its dialect, a zone
name, channel names, a free slug.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from monitor.domain import keywords
from monitor.domain.cron.parse import Dialect
from monitor.services.checks import MAX_SECONDS, SLUG, UNIQUE_FIELDS

__all__ = ["CHECK_BODY_SCHEMA_NAME", "CheckIn", "dialect_pattern"]

CHECK_BODY_SCHEMA_NAME = "CheckIn"

NO_NUL = "^[^\\x00]*$"
"""PostgreSQL text cannot store U+0000: every string field refuses it."""


BLANK = "[\\s\\x1c-\\x1f]"
"""What ``str.strip()`` strips: Unicode White_Space (a JSON Schema ``\\s``) and the separators
U+001C-U+001F, which Python counts as blanks and Unicode does not."""


def _text(limit: int, pattern: str = NO_NUL) -> Meta:
    return Meta(max_length=limit, pattern=pattern)


def dialect_pattern() -> str:
    """The dialect names in any letter case with surrounding blanks, as ``Dialect`` looks them up
    (``" Quartz "`` is ``quartz``)."""
    names = "|".join("".join(f"[{c.lower()}{c.upper()}]" for c in d.value) for d in Dialect)
    return f"^{BLANK}*({names}){BLANK}*$"


SCHEDULE_PATTERN = f"^[^\\x00]*[^{BLANK[1:-1]}\\x00][^\\x00]*$"
"""Not blank (the reader strips it) and no NUL."""

Seconds = Annotated[int, Meta(ge=1, le=MAX_SECONDS, description="seconds")]
Count = Annotated[int, Meta(ge=1, le=1000)]
OptionalSeconds = Annotated[int, Meta(ge=0, le=MAX_SECONDS, description="seconds; 0 or null: off")]
Keywords = Annotated[str, _text(keywords.KEYWORDS_LIMIT)]


class CheckIn(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A check to create (every field optional: Healthchecks' defaults) or the fields to change.

    A JSON list of up to 1000 of these creates several checks in one transaction. Unknown fields
    are ignored, as Healthchecks ignores them.
    """

    name: Annotated[str, _text(100)] | UnsetType = UNSET
    slug: Annotated[str, _text(100, SLUG.pattern)] | UnsetType = UNSET
    """Empty: none (v1 and v2 derive it from ``name``)."""
    tags: Annotated[str, _text(500)] | UnsetType = UNSET
    """Space-separated."""
    desc: Annotated[str, _text(10_000)] | UnsetType = UNSET
    timeout: Seconds | UnsetType = UNSET
    """A simple check's period, seconds."""
    grace: Seconds | UnsetType = UNSET
    """Seconds after a due time before the check is down."""
    max_runtime: Seconds | UnsetType = UNSET
    """Seconds a started run may take before it has timed out."""
    early_tolerance: Annotated[int, Meta(ge=0, le=86400)] | UnsetType | None = UNSET
    """Seconds before its tick a run still counts for it; null: min(grace, 5 min)."""
    min_runtime: Seconds | UnsetType | None = UNSET
    """A run shorter than this many seconds is too fast; null: no lower bound."""
    expected_runs: Count | UnsetType | None = UNSET
    """Runs per tick (a fleet); null: 1."""
    failure_threshold: Count | UnsetType = UNSET
    recovery_threshold: Count | UnsetType = UNSET
    schedule: Annotated[str, Meta(max_length=200, pattern=SCHEDULE_PATTERN)] | UnsetType = UNSET
    """A cron expression in ``dialect``: makes the check a cron check."""
    tz: Annotated[str, _text(64)] | UnsetType = UNSET
    """An IANA zone name the schedule is read in."""
    dialect: Annotated[str, Meta(max_length=10, pattern=dialect_pattern())] | UnsetType = UNSET
    manual_resume: bool | UnsetType = UNSET
    methods: Literal["", "POST"] | UnsetType = UNSET
    """``POST``: a GET ping is ignored."""
    channels: Annotated[str, _text(10_000)] | UnsetType = UNSET
    """Comma-separated channel ids or names, ``*`` for all, empty for none."""
    filter_subject: bool | UnsetType = UNSET
    filter_body: bool | UnsetType = UNSET
    filter_http_body: bool | UnsetType = UNSET
    filter_default_fail: bool | UnsetType = UNSET
    start_kw: Keywords | UnsetType = UNSET
    success_kw: Keywords | UnsetType = UNSET
    failure_kw: Keywords | UnsetType = UNSET
    subject: Keywords | UnsetType = UNSET
    """Deprecated: ``success_kw`` with ``filter_subject``."""
    subject_fail: Keywords | UnsetType = UNSET
    """Deprecated: ``failure_kw`` with ``filter_subject``."""
    nag_interval: OptionalSeconds | UnsetType | None = UNSET
    """Seconds between reminders while down."""
    escalate_after: OptionalSeconds | UnsetType | None = UNSET
    """Seconds down before ``escalate_to`` is told."""
    escalate_to: Annotated[str, _text(2000)] | UnsetType = UNSET
    unique: list[Literal[UNIQUE_FIELDS]] | UnsetType = UNSET  # type: ignore[valid-type]
    """Fields that identify an existing check to answer instead (an upsert)."""
    api_key: str | UnsetType = UNSET
    """Healthchecks' other place for the key (``X-Api-Key`` is preferred)."""
