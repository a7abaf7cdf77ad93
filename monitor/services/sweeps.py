"""This process's evaluator sweep durations, for ``/metrics``.

The evaluator loop calls :func:`record_sweep` with each sweep's wall-clock duration; ``/metrics``
exports the count, sum and last value as ``monitor_evaluator_sweep_duration_seconds``. Plain
numbers, not a ``prometheus_client`` registry, so nothing is registered globally.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class SweepStats:
    """Sweeps recorded by this process: how many, their total and last duration (seconds)."""

    count: int = 0
    total_s: float = 0.0
    last_s: float = 0.0


STATS = SweepStats()


def record_sweep(seconds: float) -> None:
    """Record one evaluator sweep that took ``seconds`` (wall clock, ≥ 0)."""
    STATS.count += 1
    STATS.total_s += max(0.0, seconds)
    STATS.last_s = max(0.0, seconds)


def snapshot() -> SweepStats:
    return SweepStats(count=STATS.count, total_s=STATS.total_s, last_s=STATS.last_s)
