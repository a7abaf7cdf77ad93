"""Clocks: injected at the edges; domain code never reads the time itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Something that tells the current instant (aware, UTC)."""

    def now(self) -> datetime: ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class FrozenClock:
    """A clock that moves only when told to (tests, replay)."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("FrozenClock needs an aware datetime")
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def set(self, instant: datetime) -> None:
        self._now = instant.astimezone(UTC)

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
