"""Server-rendered SVG: status badges, the run timeline and the duration chart.

Pure functions from plain data to SVG text (no I/O, no clock: ``now`` is an argument). Every
piece of user text is escaped. The timeline draws, over a window ``[since, until]``:

* a tick row: one mark per tick, coloured by the tick's outcome (DESIGN §2) and carrying its
  glyph (colour is never the only cue); the SVG holds no links — it is one image to assistive
  technology (links inside ``role="img"`` are axe's ``nested-interactive``) — and the page's
  script takes a click on a mark to the tick's row; the ticks table below is the keyboard path;
  over a wide window the ticks are grouped into buckets shown by their worst outcome;
* run lanes: each run a bar from its start (its first ping when it sent no ``start``) to its
  finish (or to ``now`` while in progress), with a dashed leader from its tick's marker to the
  bar's start. Runs that overlap in time get separate lanes, so three replicas running one tick
  (duplicates) stack as three bars under one tick, and a run lapping the next tick sits beside
  the next tick's run. Duplicates, overlaps, late and timed-out runs are labelled in text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from html import escape

from monitor.web.colors import OUTCOME_COLORS, OUTCOME_GLYPHS, OUTCOME_LABELS, OUTCOME_SEVERITY, TEXT

BADGE_LABEL_COLOR = "#555555"
BADGE_COLORS = {"up": "#1a7f37", "late": "#8a5a00", "down": "#b3261e", "new": "#57606a", "paused": "#57606a"}
SHIELDS_COLORS = {
    "up": "success",
    "late": "important",
    "down": "critical",
    "new": "inactive",
    "paused": "inactive",
}


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


def _bucketed(
    ticks: Sequence[TickMark], since: datetime, span: timedelta, count: int
) -> list[tuple[datetime, datetime, list[TickMark]]]:
    """``ticks`` grouped into ``count`` equal slices of ``[since, since + span]`` (empty
    slices left out): ``(slice start, slice end, ticks)``."""
    slices: dict[int, list[TickMark]] = {}
    for tick in ticks:
        index = min(count - 1, max(0, int((tick.scheduled - since) / span * count)))
        slices.setdefault(index, []).append(tick)
    return [(since + span * (i / count), since + span * ((i + 1) / count), slices[i]) for i in sorted(slices)]


def _worst(ticks: Sequence[TickMark]) -> str:
    rank = {key: n for n, key in enumerate(OUTCOME_SEVERITY)}
    return min((t.outcome for t in ticks), key=lambda o: rank.get(o, len(rank)))


def _mark(outcome: str, cx: float, cy: float, r: float) -> str:
    """A tick's mark: a disc in the outcome's colour with its glyph (hollow for no run)."""
    glyph = escape(OUTCOME_GLYPHS.get(outcome, "?"))
    if outcome in ("upcoming", "no_run"):
        return (
            f'<circle class="mark hollow" cx="{cx:.1f}" cy="{cy}" r="{r - 1:.1f}" fill="#ffffff" '
            'stroke="#6e7781" stroke-width="1.5"/>'
        )
    color = OUTCOME_COLORS.get(outcome, "#424a53")
    return (
        f'<circle class="mark" cx="{cx:.1f}" cy="{cy}" r="{r:.1f}" fill="{color}"/>'
        f'<text x="{cx:.1f}" y="{cy + r * 0.42:.1f}" font-size="{r * 1.25:.1f}" font-weight="bold" '
        f'text-anchor="middle" fill="{TEXT}">{glyph}</text>'
    )


def timeline_svg(
    ticks: Sequence[TickMark],
    since: datetime,
    until: datetime,
    now: datetime,
    *,
    width: int = 1000,
    max_marks: int = 120,
    svg_id: str = "timeline",
    zone: tzinfo = UTC,
) -> str:
    """The run timeline over ``[since, until]`` as an accessible SVG (role img + title/desc).

    With more than ``max_marks`` ticks the window is cut into ``max_marks`` equal buckets, each
    drawn as one mark of its worst outcome (its title counts the outcomes), and runs are not
    drawn one by one (the ticks table and a narrower window show them): a wide window stays a
    readable strip instead of a staircase of lanes. ``width`` is the drawing's width in user
    units; a narrow one (the phone version) gets larger text and marks. ``zone`` is the zone the
    axis labels, the description and the titles are written in (the user's preference, as the
    rest of the page); the ``data-tick`` stamps stay ISO UTC, as the ticks table's anchors.

    Long because the run timeline is drawn as SVG in one pass over its lanes and ticks.
    """
    left, right = 12, 12
    zone_name = str(zone)
    span = max(until - since, timedelta(seconds=1))
    inner = width - left - right
    small = width < 700
    font = 13 if small else 11
    radius = 9.0 if small else 7.0

    def x(instant: datetime) -> float:
        ratio = (instant - since) / span
        return left + max(0.0, min(1.0, ratio)) * inner

    bucketed = len(ticks) > max_marks
    bars = (
        [] if bucketed else sorted((b for t in ticks for b in t.runs), key=lambda b: (b.start, b.scheduled))
    )
    run_total = sum(len(t.runs) for t in ticks)
    lanes = _lanes(bars, now, span / inner)
    lane_count = max(lanes, default=-1) + 1
    axis_y, tick_y, lanes_y, lane_h = 18, 42, 66, 22
    legend_rows = 2 if small else 1
    height = lanes_y + max(1, lane_count) * lane_h + 22 + 16 * legend_rows
    title_id, desc_id = f"{svg_id}-title", f"{svg_id}-desc"
    parts: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" id="{svg_id}" '
        f'viewBox="0 0 {width} {height}" width="100%" role="img" aria-labelledby="{title_id} {desc_id}">',
        f'<title id="{title_id}">Run timeline: ticks against runs</title>',
        f'<desc id="{desc_id}">{len(ticks)} ticks and {run_total} runs from '
        f"{since.astimezone(zone):%Y-%m-%d %H:%M:%S} to "
        f"{until.astimezone(zone):%Y-%m-%d %H:%M:%S} {zone_name}"
        + (f", grouped into {max_marks} buckets" if bucketed else "")
        + "</desc>",
        f'<rect class="svg-bg" x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    axis_n = 3 if small else 5
    grid_bottom = lanes_y + max(1, lane_count) * lane_h
    for i in range(axis_n + 1):
        at = since + span * (i / axis_n)
        ax = x(at)
        label = _fmt_axis(at.astimezone(zone), span)
        anchor = "start" if i == 0 else "end" if i == axis_n else "middle"
        parts.append(
            f'<line class="svg-grid" x1="{ax:.1f}" y1="{axis_y + 4}" x2="{ax:.1f}" y2="{grid_bottom}" '
            f'stroke="#d0d7de" stroke-dasharray="2,3"/><text class="svg-text" x="{ax:.1f}" y="{axis_y}" '
            f'font-size="{font}" fill="#424a53" text-anchor="{anchor}">{label}</text>'
        )
    if since <= now <= until:
        nx = x(now)
        parts.append(
            f'<line class="svg-now" x1="{nx:.1f}" y1="{axis_y + 4}" x2="{nx:.1f}" y2="{grid_bottom}" '
            f'stroke="#0969da" stroke-width="1.5"/><text class="svg-now" x="{nx - 3:.1f}" '
            f'y="{grid_bottom - 4}" font-size="{font - 1}" fill="#0969da" text-anchor="end">now</text>'
        )
    parts.append(
        f'<text class="svg-text" x="{left}" y="{tick_y - radius - 3}" font-size="{font - 1}" fill="#424a53">'
        + ("ticks (grouped)" if bucketed else "ticks")
        + f'</text><text class="svg-text" x="{left}" y="{lanes_y - 2}" font-size="{font - 1}" '
        'fill="#424a53">runs</text>'
    )
    if bucketed:
        for start, end, group in _bucketed(ticks, since, span, max_marks):
            worst = _worst(group)
            counts: dict[str, int] = {}
            for tick in group:
                counts[tick.outcome] = counts.get(tick.outcome, 0) + 1
            summary = ", ".join(f"{n} {OUTCOME_LABELS.get(k, k)}" for k, n in counts.items())
            local_start, local_end = start.astimezone(zone), end.astimezone(zone)
            title = (
                f"{local_start:%Y-%m-%d %H:%M}–{local_end:%H:%M} {zone_name}: {len(group)} ticks: {summary}"
            )
            stamp = group[-1].scheduled.strftime("%Y-%m-%dT%H:%M:%SZ")
            parts.append(
                f'<g class="tick bucket" data-tick="{stamp}" data-outcome="{escape(worst)}" '
                f'data-count="{len(group)}"><title>{escape(title)}</title>'
                + _mark(worst, x(start + (end - start) / 2), tick_y, radius)
                + "</g>"
            )
        parts.append(
            f'<text class="svg-text" x="{width / 2:.0f}" y="{lanes_y + 14}" font-size="{font}" '
            f'fill="#424a53" text-anchor="middle">{run_total} runs; '
            "pick a narrower window to see each run</text>"
        )
    else:
        for tick in ticks:
            label = OUTCOME_LABELS.get(tick.outcome, tick.outcome.replace("_", " "))
            stamp = tick.scheduled.strftime("%Y-%m-%dT%H:%M:%SZ")
            title = f"tick {stamp}: {label}, {len(tick.runs)} run(s)"
            parts.append(
                f'<g class="tick" data-tick="{stamp}" data-outcome="{escape(tick.outcome)}">'
                f"<title>{escape(title)}</title>"
                + _mark(tick.outcome, x(tick.scheduled), tick_y, radius)
                + "</g>"
            )
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
            + f"; started {bar.start.astimezone(zone):%H:%M:%S}"
            + (f", finished {bar.end.astimezone(zone):%H:%M:%S}" if bar.end else ", still running")
        )
        bad = bar.outcome in ("failed", "timed_out") or bar.timed_out
        parts.append(
            f'<g class="run" data-outcome="{escape(bar.color_key)}" data-flags="{escape(" ".join(flags))}">'
            f"<title>{escape(title)}</title>"
            f'<path d="M{tx:.1f},{tick_y + radius} L{sx:.1f},{y + 2}" stroke="{color}" stroke-width="1" '
            f'stroke-dasharray="3,2" fill="none"/>'
            f'<rect x="{sx:.1f}" y="{y + 2}" width="{ex - sx:.1f}" height="{lane_h - 8}" rx="2" '
            f'fill="{color}"'
            + (' fill-opacity="0.55"' if bar.end is None else "")
            + (' stroke="#000000" stroke-width="1.5" stroke-dasharray="3,2"' if bad else "")
            + "/>"
        )
        if flags:
            parts.append(
                f'<text class="svg-flag" x="{ex + 3:.1f}" y="{y + lane_h - 9}" font-size="{font - 1}" '
                f'font-weight="bold" fill="{color}">{escape(", ".join(flags))}</text>'
            )
        parts.append("</g>")
    legend_y = float(grid_bottom + 26)
    lx = float(left)
    keys = ("on_time", "late", "missed", "failed", "timed_out", "duplicated", "overlapped", "pending")
    for key in keys:
        label = OUTCOME_LABELS[key]
        step = 2 * radius + 8 + len(label) * font * 0.58
        if lx + step > width - right:
            lx, legend_y = float(left), legend_y + 2 * radius + 4
        parts.append(
            _mark(key, lx + radius, legend_y - radius / 2, radius * 0.85)
            + f'<text class="svg-text" x="{lx + 2 * radius + 3:.1f}" y="{legend_y}" font-size="{font - 1}" '
            f'fill="#24292f">{label}</text>'
        )
        lx += step
    parts.append("</svg>")
    svg = "".join(parts)
    # the legend may have wrapped onto another row: grow the drawing to hold it
    needed = legend_y + 10
    if needed > height:
        svg = svg.replace(f'viewBox="0 0 {width} {height}"', f'viewBox="0 0 {width} {needed:.0f}"', 1)
        svg = svg.replace(
            f'width="{width}" height="{height}" fill="#ffffff"',
            f'width="{width}" height="{needed:.0f}" fill="#ffffff"',
            1,
        )
    return svg


def duration_chart_svg(bars: Sequence[RunBar], *, width: int = 1000, height: int = 140) -> str:
    """Finished runs' durations (seconds), one bar per run in start order, coloured by outcome."""
    done = [b for b in sorted(bars, key=lambda b: b.start) if b.end is not None][-200:]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="durations" viewBox="0 0 {width} {height}" '
        f'width="100%" role="img" aria-labelledby="durations-title">',
        f'<title id="durations-title">Run durations ({len(done)} finished runs)</title>',
        f'<rect class="svg-bg" x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    if not done:
        parts.append(
            f'<text class="svg-text" x="{width / 2}" y="{height / 2}" text-anchor="middle" font-size="12" '
            'fill="#424a53">'
            "no finished runs in this window</text></svg>"
        )
        return "".join(parts)
    seconds = [max(0.0, ((b.end or b.start) - b.start).total_seconds()) for b in done]
    top = max(seconds) or 1.0
    left, bottom = 60, 20
    step = (width - left - 10) / len(done)
    bar_w = max(1.0, step * 0.7)
    parts.append(
        f'<text class="svg-text" x="{left - 6}" y="16" font-size="10" text-anchor="end" '
        f'fill="#424a53">{top:.3g} s</text>'
        f'<text class="svg-text" x="{left - 6}" y="{height - bottom}" font-size="10" text-anchor="end" '
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
