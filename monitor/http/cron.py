"""``GET /api/v3/cron/explain`` (DESIGN §4): explain a cron expression; no API key needed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from litestar import Controller, get

from monitor.domain.cron.explain import MAX_COUNT, explain
from monitor.domain.cron.schedules import Dialect
from monitor.domain.errors import ScheduleError, ValidationError, ZoneError

__all__ = ["CronController"]


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

    @get("/explain", sync_to_thread=False)
    def explain_schedule(
        self,
        schedule: str,
        tz: str = "UTC",
        dialect: str = "unix",
        count: str = "5",
        after: str | None = None,
    ) -> dict[str, Any]:
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
        try:
            n = int(count)
        except ValueError:
            problem = f"must be a whole number from 1 to {MAX_COUNT}, got {count!r}"
            raise ValidationError("count", problem) from None
        instant = _parse_after(after)
        try:
            return explain(schedule, dialect=chosen, tz=tz, count=n, after=instant)
        except ScheduleError as error:
            raise ValidationError("schedule", error.message) from None
        except ZoneError as error:
            raise ValidationError("tz", str(error)) from None
