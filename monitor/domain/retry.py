"""How long to wait before trying again: one exponential backoff for every retry loop.

Pure arithmetic (the caller passes the jitter's random source), used by the notifier's
outbox retries (``MONITOR_NOTIFY_BACKOFF``) and the bundled scheduler's reporter.
"""

from __future__ import annotations

import random


def backoff(
    attempt: int,
    *,
    base: float,
    factor: float = 2.0,
    cap: float,
    jitter: float = 0.0,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait after ``attempt`` attempts: ``min(cap, base × factor^(attempt-1)) × (1 ± jitter)``.

    The jittered delay is capped again, so the wait never exceeds ``cap``. This is the "full
    exponential with proportional jitter" of the AWS Architecture Blog's *Exponential Backoff
    And Jitter* (jitter spreads retries of rows that failed together).

    Args:
        attempt: attempts made so far (values below 1 count as 1: the first retry waits ``base``).
        base: the first delay, seconds (≥ 0).
        factor: the growth per attempt (≥ 1; 2 doubles).
        cap: the longest delay, seconds (≥ 0).
        jitter: the spread as a fraction of the delay, 0 ≤ jitter < 1 (0.25 = ±25 %).
        rng: the jitter's source (tests pass a seeded one); unused when ``jitter`` is 0.

    Returns:
        The delay in seconds, 0 ≤ delay ≤ ``cap``.

    Raises:
        ValueError: an argument is outside the ranges above.
    """
    if base < 0 or cap < 0 or factor < 1 or not 0 <= jitter < 1:
        raise ValueError(f"backoff: base {base}, cap {cap} ≥ 0, factor {factor} ≥ 1, 0 ≤ jitter {jitter} < 1")
    exponent = max(0, attempt - 1)
    # grow only while below the cap: factor ** exponent overflows floats for huge attempt counts
    delay = base
    for _ in range(exponent):
        if delay >= cap or delay == 0:
            break
        delay *= factor
    delay = min(delay, cap)
    if jitter:
        delay *= (rng or random.Random()).uniform(1 - jitter, 1 + jitter)
    return min(delay, cap)
