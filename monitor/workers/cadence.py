"""Fixed-rate pacing for loops that must act every ``interval`` seconds.

A loop that does its work and then sleeps ``interval`` acts every ``interval`` *plus* the time
its work took: on a loaded machine an evaluator whose round (rebalance, sweep) takes 100 ms
sweeps every 0.6 s instead of every 0.5 s, and the failover bound of DESIGN §6 / the README
(``2 × MONITOR_EVALUATE_INTERVAL + MONITOR_LEASE_TTL``) no longer holds. :class:`Cadence`
sleeps only until ``interval`` after the previous beat started, so the work's own time comes
out of the wait. When the work overran the interval, the next beat starts after a short rest
(``min_rest``, a tenth of the interval by default) rather than at once: an overloaded evaluator
does not run its rounds back to back, holding the SQLite writer and a core, and the schedule
restarts from there (no burst of beats to catch up).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class Cadence:
    """Beats ``interval`` seconds apart, measured start to start.

    Args:
        interval: seconds between the starts of two beats (> 0).
        min_rest: the least sleep between the end of an overrunning piece of work and the next
            beat, in seconds (default ``interval / 10``; 0: none).
        monotonic: the clock, in seconds (default :func:`time.monotonic`; tests drive their own).
        sleep: ``await sleep(seconds)`` (default :func:`asyncio.sleep`).
    """

    def __init__(
        self,
        interval: float,
        *,
        min_rest: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval: {interval!r} must be positive (seconds)")
        self.interval = interval
        self.min_rest = interval / 10 if min_rest is None else max(0.0, min_rest)
        self._monotonic = monotonic
        self._sleep = sleep
        self._last: float | None = None

    def start(self) -> None:
        """Count the current instant as a beat (the first :meth:`wait` ends ``interval`` later)."""
        self._last = self._monotonic()

    async def wait(self, early: float | None = None) -> bool:
        """Sleep until ``interval`` after the previous beat (``min_rest`` if that has passed; not
        at all if there was none), then count this instant as the next beat.

        Args:
            early: an instant on the cadence's monotonic clock (seconds) to wake at instead if
                it comes before the beat; the beat is then still to come, and the next call
                waits for it.

        Returns:
            ``True`` when the beat came, ``False`` when ``early`` did.
        """
        if self._last is not None:
            now = self._monotonic()
            remaining = max(self._last + self.interval - now, self.min_rest)
            if early is not None and early < now + remaining:
                await self._sleep(max(0.0, early - now))
                return False
            if remaining > 0:
                await self._sleep(remaining)
        self._last = self._monotonic()
        return True
