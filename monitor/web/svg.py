"""Server-rendered SVG: status badges, the run timeline and the duration chart (issue 9).

Pure functions from plain data to SVG text (no I/O, no clock: ``now`` is an argument). Every
piece of user text is escaped. The timeline draws, over a window ``[since, until]``:

* a tick row: one marker per tick, coloured by the tick's outcome (DESIGN §2), a cross for
  ``missed``; each marker links to ``#tick-<YYYY-MM-DDTHH:MM:SSZ>`` (the tick's row in the page)
  for a pointer, with ``tabindex="-1"``: the SVG is one image to assistive technology, and the
  ticks table below it is the keyboard path (hundreds of tab stops would trap a keyboard user);
* run lanes: each run a bar from its start (its first ping when it sent no ``start``) to its
  finish (or to ``now`` while in progress), with a dashed leader from its tick's marker to the
  bar's start. Runs that overlap in time get separate lanes, so three replicas running one tick
  (duplicates) stack as three bars under one tick, and a run lapping the next tick sits beside
  the next tick's run. Duplicates, overlaps, late and timed-out runs are labelled in text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from html import escape

from monitor.web.colors import OUTCOME_COLORS, OUTCOME_LABELS, TEXT

BADGE_LABEL_COLOR = "#555555"
BADGE_COLORS = {"up": "#1a7f37", "late": "#8a5a00", "down": "#cf222e"}
SHIELDS_COLORS = {"up": "success", "late": "important", "down": "critical"}


def _text_width(text: str) -> int:
    # Verdana 11px averages ~6.5 px per character; wide letters get a little more room.
    return int(sum(8.5 if c in "mwMW@" else 6.5 for c in text)) + 10


def badge_svg(label: str, status: str) -> str:
    """A flat, shields.io-style badge: ``label`` on grey, ``status`` (up/late/down) in colour."""
    label_w = _text_width(label)
    status_w = _text_width(status)
    width = label_w + status_w
    color = BADGE_COLORS.get(status, "#57606a")
    lab, stat = escape(label), escape(status)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="20" role="img" '
        f'aria-label="{lab}: {stat}"><title>{lab}: {stat}</title>'
        f'<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/>'
        f'<stop offset="1" stop-opacity=".1"/></linearGradient>'
        f'<clipPath id="r"><rect width="{width}" height="20" rx="3" fill="#fff"/></clipPath>'
        f'<g clip-path="url(#r)"><rect width="{label_w}" height="20" fill="{BADGE_LABEL_COLOR}"/>'
        f'<rect x="{label_w}" width="{status_w}" height="20" fill="{color}"/>'
        f'<rect width="{width}" height="20" fill="url(#s)"/></g>'
        f'<g fill="{TEXT}" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" '
        f'font-size="11"><text x="{label_w / 2:.1f}" y="14">{lab}</text>'
        f'<text x="{label_w + status_w / 2:.1f}" y="14">{stat}</text></g></svg>'
    )


def tick_id(tick: datetime) -> str:
    """The element id of a tick: ``tick-YYYY-MM-DDTHH:MM:SSZ`` (links in notifications use it)."""
    return "tick-" + tick.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, kw_only=True, slots=True)
class RunBar:
    """One run on the timeline: ``start`` (aware UTC), ``end`` (``None`` while in progress)."""

    id: str
    scheduled: datetime
    start: datetime
    end: datetime | None
    outcome: str | None
    late: bool = False
    duplicate: bool = False
    overlap: bool = False
    timed_out: bool = False
    rid: str | None = None

    @property
    def flags(self) -> list[str]:
        return [
            name
            for name, on in (
                ("duplicate", self.duplicate),
                ("overlap", self.overlap),
                ("late", self.late),
                ("timed out", self.timed_out),
            )
            if on
        ]

    @property
    def color_key(self) -> str:
        if self.duplicate:
            return "duplicated"
        if self.overlap:
            return "overlapped"
        if self.timed_out:
            return "timed_out"
        if self.outcome is None:
            return "pending"
        return self.outcome


@dataclass(frozen=True, kw_only=True, slots=True)
class TickMark:
    """One tick: its outcome key (an ``OUTCOME_COLORS`` key, or ``upcoming``/``no_run``)."""

    scheduled: datetime
    outcome: str
    runs: tuple[RunBar, ...] = field(default_factory=tuple)


def _lanes(bars: Sequence[RunBar], now: datetime, per_px: timedelta) -> list[int]:
    """Greedy interval partitioning: runs overlapping in time get different lanes; a bar's
    reach includes its label (``per_px``: the time one pixel spans) so labels never collide."""
    ends: list[datetime] = []
    out: list[int] = []
    gap = per_px * 2
    for bar in bars:
        label = ", ".join(bar.flags)
        end = max(bar.end or now, bar.start + per_px * 4) + per_px * (len(label) * 6 + 6 if label else 0)
        for lane, lane_end in enumerate(ends):
            if lane_end + gap < bar.start:
                ends[lane] = max(end, bar.start)
                out.append(lane)
                break
        else:
            ends.append(max(end, bar.start))
            out.append(len(ends) - 1)
    return out


def _fmt_axis(instant: datetime, span: timedelta) -> str:
    if span <= timedelta(hours=1):
        return instant.strftime("%H:%M:%S")
    if span <= timedelta(days=2):
        return instant.strftime("%H:%M")
    return instant.strftime("%m-%d %H:%M")


def timeline_svg(
    ticks: Sequence[TickMark], since: datetime, until: datetime, now: datetime, *, width: int = 1000
) -> str:
    """The run timeline over ``[since, until]`` as an accessible SVG (role img + title/desc)."""
    left, right = 12, 12
    span = max(until - since, timedelta(seconds=1))
    inner = width - left - right

    def x(instant: datetime) -> float:
        ratio = (instant - since) / span
        return left + max(0.0, min(1.0, ratio)) * inner

    bars = sorted((b for t in ticks for b in t.runs), key=lambda b: (b.start, b.scheduled))
    lanes = _lanes(bars, now, span / inner)
    lane_count = max(lanes, default=-1) + 1
    axis_y, tick_y, lanes_y, lane_h = 18, 40, 62, 22
    height = lanes_y + max(1, lane_count) * lane_h + 34
    parts: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" viewBox="0 0 {width} {height}" '
        f'width="100%" role="img" aria-labelledby="timeline-title timeline-desc">',
        '<title id="timeline-title">Run timeline: ticks against runs</title>',
        f'<desc id="timeline-desc">{len(ticks)} ticks and {len(bars)} runs from '
        f"{since:%Y-%m-%d %H:%M:%S} to {until:%Y-%m-%d %H:%M:%S} UTC</desc>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    for i in range(6):
        at = since + span * (i / 5)
        ax = x(at)
        anchor = "start" if i == 0 else "end" if i == 5 else "middle"
        parts.append(
            f'<line x1="{ax:.1f}" y1="{axis_y + 4}" x2="{ax:.1f}" y2="{height - 30}" stroke="#d0d7de" '
            f'stroke-dasharray="2,3"/><text x="{ax:.1f}" y="{axis_y}" font-size="11" fill="#424a53" '
            f'text-anchor="{anchor}">{_fmt_axis(at, span)}</text>'
        )
    if since <= now <= until:
        nx = x(now)
        parts.append(
            f'<line x1="{nx:.1f}" y1="{axis_y + 4}" x2="{nx:.1f}" y2="{height - 30}" stroke="#0969da" '
            f'stroke-width="1.5"/><text x="{nx - 3:.1f}" y="{height - 32}" font-size="10" fill="#0969da" '
            'text-anchor="end">now</text>'
        )
    parts.append(
        f'<text x="{left}" y="{tick_y - 8}" font-size="10" fill="#424a53">ticks</text>'
        f'<text x="{left}" y="{lanes_y - 4}" font-size="10" fill="#424a53">runs</text>'
    )
    for tick in ticks:
        tx = x(tick.scheduled)
        color = OUTCOME_COLORS.get(tick.outcome, "#8c959f")
        label = OUTCOME_LABELS.get(tick.outcome, tick.outcome.replace("_", " "))
        stamp = tick.scheduled.strftime("%Y-%m-%dT%H:%M:%SZ")
        title = f"tick {stamp}: {label}, {len(tick.runs)} run(s)"
        parts.append(
            f'<a href="#{tick_id(tick.scheduled)}" tabindex="-1" class="tick" data-tick="{stamp}" '
            f'data-outcome="{escape(tick.outcome)}"><title>{escape(title)}</title>'
        )
        if tick.outcome == "missed":
            parts.append(
                f'<path d="M{tx - 5:.1f},{tick_y - 5} l10,10 M{tx + 5:.1f},{tick_y - 5} l-10,10" '
                f'stroke="{color}" stroke-width="2.5"/>'
            )
        elif tick.outcome in ("upcoming", "no_run"):
            parts.append(
                f'<circle cx="{tx:.1f}" cy="{tick_y}" r="4" fill="#ffffff" stroke="#6e7781" '
                'stroke-width="1.5"/>'
            )
        else:
            parts.append(f'<circle cx="{tx:.1f}" cy="{tick_y}" r="5" fill="{color}"/>')
        parts.append("</a>")
    for bar, lane in zip(bars, lanes, strict=True):
        y = lanes_y + lane * lane_h
        sx = x(bar.start)
        ex = max(sx + 4, x(bar.end or now))
        tx = x(bar.scheduled)
        color = OUTCOME_COLORS.get(bar.color_key, "#424a53")
        flags = bar.flags
        outcome = OUTCOME_LABELS.get(bar.outcome, "in progress") if bar.outcome else "in progress"
        title = (
            f"run {bar.rid or bar.id[:8]} for tick {bar.scheduled:%Y-%m-%dT%H:%M:%SZ}: {outcome}"
            + (f" ({', '.join(flags)})" if flags else "")
            + f"; started {bar.start:%H:%M:%S}"
            + (f", finished {bar.end:%H:%M:%S}" if bar.end else ", still running")
        )
        parts.append(
            f'<g class="run" data-outcome="{escape(bar.color_key)}" data-flags="{escape(" ".join(flags))}">'
            f"<title>{escape(title)}</title>"
            f'<path d="M{tx:.1f},{tick_y + 5} L{sx:.1f},{y + 2}" stroke="{color}" stroke-width="1" '
            f'stroke-dasharray="3,2" fill="none"/>'
            f'<rect x="{sx:.1f}" y="{y + 2}" width="{ex - sx:.1f}" height="{lane_h - 8}" rx="2" '
            f'fill="{color}"' + (' fill-opacity="0.55"' if bar.end is None else "") + "/>"
        )
        if flags:
            parts.append(
                f'<text x="{ex + 3:.1f}" y="{y + lane_h - 9}" font-size="10" font-weight="bold" '
                f'fill="{color}">{escape(", ".join(flags))}</text>'
            )
        parts.append("</g>")
    legend_y = height - 10
    lx = float(left)
    for key in ("on_time", "late", "missed", "failed", "timed_out", "duplicated", "overlapped", "pending"):
        label = OUTCOME_LABELS[key]
        parts.append(
            f'<rect x="{lx:.1f}" y="{legend_y - 9}" width="10" height="10" fill="{OUTCOME_COLORS[key]}"/>'
            f'<text x="{lx + 13:.1f}" y="{legend_y}" font-size="10" fill="#24292f">{label}</text>'
        )
        lx += 20 + len(label) * 6
    parts.append("</svg>")
    return "".join(parts)


def duration_chart_svg(bars: Sequence[RunBar], *, width: int = 1000, height: int = 140) -> str:
    """Finished runs' durations (seconds), one bar per run in start order, coloured by outcome."""
    done = [b for b in sorted(bars, key=lambda b: b.start) if b.end is not None][-200:]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="durations" viewBox="0 0 {width} {height}" '
        f'width="100%" role="img" aria-labelledby="durations-title">',
        f'<title id="durations-title">Run durations ({len(done)} finished runs)</title>',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    if not done:
        parts.append(
            f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" font-size="12" fill="#424a53">'
            "no finished runs in this window</text></svg>"
        )
        return "".join(parts)
    seconds = [max(0.0, ((b.end or b.start) - b.start).total_seconds()) for b in done]
    top = max(seconds) or 1.0
    left, bottom = 60, 20
    step = (width - left - 10) / len(done)
    bar_w = max(1.0, step * 0.7)
    parts.append(
        f'<text x="{left - 6}" y="16" font-size="10" text-anchor="end" fill="#424a53">{top:.3g} s</text>'
        f'<text x="{left - 6}" y="{height - bottom}" font-size="10" text-anchor="end" '
        'fill="#424a53">0 s</text>'
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" '
        'stroke="#8c959f"/>'
    )
    for i, (bar, value) in enumerate(zip(done, seconds, strict=True)):
        h = (height - bottom - 12) * value / top
        bx = left + i * step
        parts.append(
            f'<rect x="{bx:.1f}" y="{height - bottom - h:.1f}" width="{bar_w:.1f}" height="{max(h, 1):.1f}" '
            f'fill="{OUTCOME_COLORS.get(bar.color_key, "#424a53")}"><title>'
            f"{bar.scheduled:%Y-%m-%dT%H:%M:%SZ}: {value:.3f} s</title></rect>"
        )
    parts.append("</svg>")
    return "".join(parts)
