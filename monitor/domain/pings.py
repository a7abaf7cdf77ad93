"""Pings on the wire: parsing what clients send (DESIGN §5). Pure: no I/O, no clock."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from monitor.domain.errors import ValidationError

IDEMPOTENCY_WINDOW = timedelta(days=7)
"""How long a ping's ``Idempotency-Key`` is remembered, scoped to (check, ping kind): a repeat
within it stores nothing and gets the first answer (DESIGN §5)."""

MILLISECONDS_FROM = 10**11
EARLIEST_SCHEDULED = datetime(2000, 1, 1, tzinfo=UTC)
LATEST_SCHEDULED = datetime(9000, 1, 1, tzinfo=UTC)
"""Logical run times outside this window are refused: no job of ours ran before 2000, and the
calendar arithmetic of schedules near year 1 or 9999 has no room left."""
PLUS_AS_SPACE_RE = re.compile(r"^(\d{4}-\d\d-\d\dT[\d:.,]+) (\d\d(?::?\d\d)?)$")


def parse_logical_time(text: str | int | float, field: str = "scheduled") -> datetime:
    """A ping's ``scheduled`` (logical run time): ISO 8601 with an offset or Z, unix seconds, or
    unix milliseconds (≥ 10^11), as DESIGN §5 allows; the result is aware UTC. ``finished``
    (a finish's real end, docs/design.md §5) is read the same way, with ``field="finished"``.

    Raises:
        ValidationError: field ``field``: unparseable, without an offset, or outside
            2000-01-01 … 9000-01-01.
    """
    value = str(text).strip()
    # An unencoded "+" of an offset (curl '...?scheduled=2026-07-19T05:00:00+02:00') arrives
    # as a space once the query string is decoded.
    value = PLUS_AS_SPACE_RE.sub(r"\1+\2", value)
    if re.fullmatch(r"\d{1,16}(\.\d+)?", value):
        number = float(value)
        if number >= MILLISECONDS_FROM:
            number /= 1000
        try:
            instant = datetime.fromtimestamp(number, UTC)
        except (OverflowError, ValueError, OSError):
            raise ValidationError(field, "out of range") from None
    else:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise ValidationError(field, "not ISO 8601, unix seconds or unix milliseconds") from None
        if not re.search(r"\d[Tt ]\d", value):
            # Python reads "2026-07-19Z" as a naive midnight, dropping the zone it was given
            raise ValidationError(
                field, "needs a time of day and a UTC offset or Z (e.g. 2026-07-19T03:00:00Z)"
            )
        if parsed.tzinfo is None:
            raise ValidationError(field, "needs a UTC offset or Z (e.g. 2026-07-19T03:00:00Z)")
        try:
            instant = parsed.astimezone(UTC)
        except OverflowError:
            raise ValidationError(field, "out of range") from None
    if not EARLIEST_SCHEDULED <= instant <= LATEST_SCHEDULED:
        raise ValidationError(field, "out of range (2000-01-01 to 9000-01-01)")
    return instant
