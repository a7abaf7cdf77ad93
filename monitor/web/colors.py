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
    "missed": "#82071e",
    "failed": "#a40e26",
    "timed_out": "#6639ba",
    "duplicated": "#953800",
    "overlapped": "#0550ae",
    "skipped": "#57606a",
    "unknown": "#59636e",
    "pending": "#424a53",
    "early": "#006a72",
    "incomplete": "#7a4a00",
    "too_fast": "#7c3aa0",
}
"""Tick and run outcomes (DESIGN §2) plus ``pending`` (in progress or not judged yet).

Colour is never the only cue: every mark also carries its :data:`OUTCOME_GLYPHS` glyph. The
good outcome is a mid green and the bad ones are dark (crimson, wine, purple), so on time and
missed differ in lightness too (≥ 2:1), which is what red-green colour-blind readers see."""

OUTCOME_GLYPHS: dict[str, str] = {
    "on_time": "✓",
    "late": "!",
    "missed": "∅",
    "failed": "✗",
    "timed_out": "T",
    "duplicated": "2",
    "overlapped": "≈",
    "skipped": "–",
    "unknown": "?",
    "pending": "…",
    "early": "«",
    "incomplete": "½",
    "too_fast": "»",
    "no_run": "·",
    "upcoming": "·",
}
"""The glyph drawn on each outcome's mark (in the strip, the timeline and the ticks table)."""

OUTCOME_LABELS: dict[str, str] = {
    "on_time": "on time",
    "late": "late",
    "missed": "missed",
    "failed": "failed",
    "timed_out": "timed out",
    "duplicated": "duplicated",
    "overlapped": "overlapped",
    "skipped": "skipped",
    "unknown": "unknown (monitor outage or lost run)",
    "pending": "pending",
    "early": "early (counts for no tick)",
    "incomplete": "incomplete (fewer runs than expected)",
    "too_fast": "too fast",
    "no_run": "no run",
    "upcoming": "upcoming",
}

OUTCOME_SEVERITY: tuple[str, ...] = (
    "failed",
    "missed",
    "timed_out",
    "incomplete",
    "too_fast",
    "early",
    "late",
    "overlapped",
    "duplicated",
    "unknown",
    "pending",
    "skipped",
    "on_time",
    "no_run",
    "upcoming",
)
"""Worst first: the outcome a bucket of ticks shows on a wide timeline."""

STATUS_COLORS: dict[str, str] = {
    "up": "#1a7f37",
    "grace": "#8a5a00",
    "down": "#b3261e",
    "new": "#57606a",
    "paused": "#6639ba",
}
"""Check statuses (Healthchecks v3 values)."""

STATUS_GLYPHS: dict[str, str] = {"up": "✓", "grace": "!", "down": "✗", "new": "○", "paused": "‖"}

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
