"""Colours of statuses and outcomes, and the WCAG 2.x contrast ratio they are held to.

Every colour is a background under white text (status pills, badges, strip cells), so each has
a contrast ratio of at least 4.5:1 against white (WCAG 2.1 SC 1.4.3, level AA, normal text);
``tests/unit/web`` computes it with :func:`contrast_ratio`.
"""

from __future__ import annotations

TEXT = "#ffffff"

OUTCOME_COLORS: dict[str, str] = {
    "on_time": "#1a7f37",
    "late": "#8a5a00",
    "missed": "#cf222e",
    "failed": "#a40e26",
    "timed_out": "#8250df",
    "duplicated": "#b35900",
    "overlapped": "#0969da",
    "skipped": "#57606a",
    "unknown": "#59636e",
    "early": "#3b6e8f",
    "incomplete": "#9a3412",
    "too_fast": "#0e6e6e",
    "pending": "#424a53",
}
"""Tick and run outcomes (DESIGN §2) plus ``pending`` (in progress or not judged yet)."""

OUTCOME_LABELS: dict[str, str] = {
    "on_time": "on time",
    "late": "late",
    "missed": "missed",
    "failed": "failed",
    "timed_out": "timed out",
    "duplicated": "duplicated",
    "overlapped": "overlapped",
    "skipped": "skipped",
    "unknown": "unknown (monitor outage)",
    "early": "early (counts for no tick)",
    "incomplete": "incomplete (fewer runs than expected)",
    "too_fast": "too fast",
    "pending": "pending",
}

STATUS_COLORS: dict[str, str] = {
    "up": "#1a7f37",
    "grace": "#8a5a00",
    "down": "#cf222e",
    "new": "#57606a",
    "paused": "#6639ba",
}
"""Check statuses (Healthchecks v3 values)."""

STATUS_LABELS: dict[str, str] = {
    "up": "up",
    "grace": "late (in grace)",
    "down": "down",
    "new": "new",
    "paused": "paused",
}


def _linear(channel: int) -> float:
    c = channel / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def relative_luminance(color: str) -> float:
    """WCAG relative luminance of ``#rrggbb`` (0 black … 1 white)."""
    value = color.lstrip("#")
    r, g, b = (int(value[i : i + 2], 16) for i in (0, 2, 4))
    return 0.2126 * _linear(r) + 0.7152 * _linear(g) + 0.0722 * _linear(b)


def contrast_ratio(first: str, second: str) -> float:
    """WCAG contrast ratio of two ``#rrggbb`` colours, 1.0 … 21.0."""
    lighter, darker = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)
