"""English for explain texts, shared by the cron and ``oncalendar`` explainers."""

from __future__ import annotations

__all__ = ["consecutive_runs", "join_and", "ordinal"]


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``21st`` ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def join_and(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``; ``""`` for no items."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def consecutive_runs(values: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs of sorted integers: [1,2,3,5] -> [(1,3), (5,5)]."""
    out: list[tuple[int, int]] = []
    for v in values:
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out
