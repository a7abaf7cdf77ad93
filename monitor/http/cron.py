"""``GET /api/v3/cron/explain`` (DESIGN §4): explain a cron expression; no API key needed."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any
from zoneinfo import available_timezones

import msgspec
from litestar import Controller, get
from litestar.params import Parameter

from monitor.domain.cron.explain import MAX_COUNT, MAX_SCHEDULE_LENGTH, explain
from monitor.domain.cron.schedules import Dialect
from monitor.domain.errors import ScheduleError, ValidationError, ZoneError
from monitor.http.api.common import error_responses

__all__ = ["CronController", "Explanation"]


class ExplainedField(msgspec.Struct, frozen=True):
    name: str
    """The field's kind (``minute``, ``day of week``, an OnCalendar line's ``date``…)."""
    value: str
    """The field as written."""
    meaning: str


class Tick(msgspec.Struct, frozen=True):
    utc: str
    """ISO 8601 in UTC with ``Z``."""
    local: str
    """The same instant in ``tz``, ISO 8601 with its offset."""


class Explanation(msgspec.Struct, frozen=True):
    """What :func:`monitor.domain.cron.explain.explain` answers."""

    schedule: str
    tz: str
    dialect: str
    fields: list[ExplainedField]
    description: str
    warnings: list[str]
    next: list[Tick]


def _letters(word: str) -> str:
    """``unix`` → ``[uU][nN][iI][xX]`` (JSON Schema patterns have no case-insensitive flag)."""
    return "".join(f"[{c}{c.upper()}]" for c in word)


DIALECT_PATTERN = "^(" + "|".join(_letters(d.value) for d in Dialect) + ")$"
COUNT_PATTERN = "^0{0,6}([1-9][0-9]?|100)$"
# years 1900-9000, days 01-28 (every month has them), an offset or Z: what ``after`` surely accepts
AFTER_PATTERN = (
    r"^(19[0-9]{2}|[2-8][0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](Z|[+-](0[0-9]|1[0-3]):[0-5][0-9])$"
)
ZONES = sorted(
    zone
    for zone in available_timezones()
    if zone not in ("localtime", "posixrules", "Factory")
    and not zone.lower().startswith(("right/", "posix/"))
)
"""The names ``tz`` accepts (:func:`monitor.domain.cron.zones.validate_zone` refuses the rest)."""


def _parse_after(after: str | None) -> datetime:
    if after is None or after == "":
        return datetime.now(UTC)
    text = after.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        instant = datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError("after", f"{after!r} is not an ISO 8601 instant") from None
    if instant.tzinfo is None:
        raise ValidationError("after", f"{after!r} has no UTC offset; add 'Z' or '+02:00'")
    return instant


class CronController(Controller):
    """Cron tooling of the management API."""

    path = "/api/v3/cron"
    tags = ("cron",)

    @get("/explain", sync_to_thread=False, responses=error_responses(400))
    def explain_schedule(
        self,
        schedule: Annotated[
            str,
            Parameter(
                description="The expression (unix, seconds, Quartz or systemd OnCalendar)",
                schema_extra={"maxLength": MAX_SCHEDULE_LENGTH},
            ),
        ],
        tz: Annotated[
            str, Parameter(description="IANA time zone of the ticks", schema_extra={"enum": ZONES})
        ] = "UTC",
        dialect: Annotated[
            str,
            Parameter(
                description="unix, seconds, quartz or oncalendar (any case)",
                schema_extra={"pattern": DIALECT_PATTERN},
            ),
        ] = "unix",
        count: Annotated[
            str,
            Parameter(description=f"How many ticks, 1-{MAX_COUNT}", schema_extra={"pattern": COUNT_PATTERN}),
        ] = "5",
        after: Annotated[
            str | None,
            Parameter(
                description="List ticks strictly after this instant (ISO 8601 with an offset, years "
                "1900-9000); default now",
                schema_extra={"pattern": AFTER_PATTERN},
            ),
        ] = None,
    ) -> Explanation:
        """Decode ``schedule`` and list its next ``count`` ticks strictly after ``after``.

        Query parameters: ``schedule`` (required, at most 200 characters as in the checks API),
        ``tz`` (IANA name, default UTC), ``dialect`` (unix, seconds, quartz, oncalendar in any case, answered
        in lower case as the checks API stores it; default unix), ``count`` (1-100, default 5),
        ``after`` (ISO 8601 with an offset, years 1900-9000; default now).

        Raises:
            ValidationError: bad input, naming the field (``schedule``, ``tz``, ``dialect``,
                ``count``, ``after``); the app maps it to ``400 {"error": "<field>: <problem>"}``.
        """
        try:
            chosen = Dialect(dialect)  # case-insensitive, as parse_cron and the checks API
        except ValueError:
            raise ValidationError(
                "dialect", f"unknown dialect {dialect!r}; use unix, seconds, quartz or oncalendar"
            ) from None
        if not re.fullmatch(r"[0-9]{1,9}", count):  # no sign, space, "_" or non-ASCII digit
            problem = f"must be a whole number from 1 to {MAX_COUNT}, got {count!r}"
            raise ValidationError("count", problem)
        instant = _parse_after(after)
        try:
            answer: dict[str, Any] = explain(schedule, dialect=chosen, tz=tz, count=int(count), after=instant)
        except ScheduleError as error:
            raise ValidationError("schedule", error.message) from None
        except ZoneError as error:
            raise ValidationError("tz", str(error)) from None
        return msgspec.convert(answer, Explanation)
