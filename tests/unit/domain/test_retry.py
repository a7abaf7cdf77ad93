"""The one backoff (monitor/domain/retry.py): growth, cap and jitter, in seconds."""

from __future__ import annotations

import random

import pytest

from monitor.domain.retry import backoff


def test_the_delay_starts_at_base_and_grows_by_the_factor_up_to_the_cap() -> None:
    delays = [backoff(attempt, base=2.0, cap=3600.0) for attempt in range(1, 14)]
    assert delays[:4] == [2.0, 4.0, 8.0, 16.0]
    assert delays[-1] == 3600.0 and delays == sorted(delays)
    assert backoff(0, base=2.0, cap=10.0) == 2.0  # no attempt yet counts as the first
    assert backoff(3, base=1.0, factor=3.0, cap=100.0) == 9.0


def test_jitter_spreads_the_delay_and_never_passes_the_cap() -> None:
    rng = random.Random(7)
    spread = [backoff(3, base=2.0, cap=3600.0, jitter=0.25, rng=rng) for _ in range(500)]
    assert min(spread) >= 6.0 and max(spread) <= 10.0 and len(set(spread)) > 100
    capped = [backoff(50, base=2.0, cap=60.0, jitter=0.25, rng=rng) for _ in range(200)]
    assert max(capped) <= 60.0 and min(capped) >= 45.0


def test_huge_attempt_counts_and_a_zero_base_stay_bounded() -> None:
    assert backoff(10**9, base=0.5, cap=30.0) == 30.0
    assert backoff(10**9, base=0.0, cap=30.0) == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base": -1.0, "cap": 1.0},
        {"base": 1.0, "cap": -1.0},
        {"base": 1.0, "cap": 1.0, "factor": 0.5},
        {"base": 1.0, "cap": 1.0, "jitter": 1.0},
    ],
)
def test_out_of_range_arguments_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="backoff"):
        backoff(1, **kwargs)  # type: ignore[arg-type]
