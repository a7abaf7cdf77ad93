"""Rendering without a server: templates and SVG for every outcome and status colour, and the
WCAG contrast of those colours."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from xml.etree import ElementTree

import pytest
from jinja2 import Environment

from monitor.domain.checks import Outcome, Status
from monitor.services.dashboard import TickView
from monitor.services.users import Session, User
from monitor.web import setup, svg
from monitor.web.colors import (
    OUTCOME_COLORS,
    OUTCOME_LABELS,
    STATUS_COLORS,
    STATUS_LABELS,
    TEXT,
    contrast_ratio,
)

NOW = datetime(2026, 7, 18, 3, 0, tzinfo=UTC)
OUTCOMES = [o.value for o in Outcome]


@pytest.fixture(scope="module")
def env() -> Environment:
    engine = setup.template_config().to_engine()
    environment: Environment = engine.engine
    return environment


def test_every_outcome_and_status_has_a_colour_and_a_label() -> None:
    assert set(OUTCOMES) <= set(OUTCOME_COLORS) and set(OUTCOMES) <= set(OUTCOME_LABELS)
    assert {s.value for s in Status} == set(STATUS_COLORS) == set(STATUS_LABELS)


@pytest.mark.parametrize("color", sorted({*OUTCOME_COLORS.values(), *STATUS_COLORS.values()}))
def test_white_text_on_every_colour_meets_wcag_aa(color: str) -> None:
    assert contrast_ratio(TEXT, color) >= 4.5


def test_contrast_ratio_matches_wcag_reference_values() -> None:
    assert contrast_ratio("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast_ratio("#ffffff", "#ffffff") == pytest.approx(1.0)
    assert contrast_ratio("#767676", "#ffffff") == pytest.approx(4.54, abs=0.01)  # the AA grey


def _check(status: str, outcomes: list[str]) -> dict[str, object]:
    strip = [
        TickView(scheduled=NOW - timedelta(minutes=len(outcomes) - i), outcome=o)
        for i, o in enumerate(outcomes)
    ]
    return {
        "uuid": "0b5e3c1e-0000-4000-8000-000000000001",
        "name": "<b>job</b>",
        "slug": "",
        "status": status,
        "started": False,
        "kind": "cron",
        "schedule": "* * * * *",
        "tz": "UTC",
        "project": "ops",
        "tag_list": ["prod"],
        "last_ping": "2026-07-18T02:59:30Z",
        "next_ping": "2026-07-18T03:01:00Z",
        "strip": strip,
    }


@pytest.mark.parametrize("status", [s.value for s in Status])
def test_checks_rows_render_every_outcome_colour_and_the_status_as_text(
    env: Environment, status: str
) -> None:
    html = env.get_template("_checks_rows.html").render(
        checks=[_check(status, [*OUTCOMES, "pending"])], total=1, now=NOW
    )
    assert f'data-status="{status}"' in html
    assert f"background: {STATUS_COLORS[status]}" in html and f">{STATUS_LABELS[status]}<" in html
    for outcome in [*OUTCOMES, "pending"]:
        cell = re.search(
            rf'data-outcome="{outcome}" style="background: (#[0-9a-f]+)" title="[^"]+: ([^"]+)"', html
        )
        assert cell is not None, outcome
        assert cell.group(1) == OUTCOME_COLORS[outcome] and cell.group(2) == OUTCOME_LABELS[outcome]
    # the strip is one image, not 30 links: the row's only tab stop is the check's name
    assert html.count("<a ") == 1 and 'role="img"' in html
    assert "<b>job</b>" not in html and "&lt;b&gt;job&lt;/b&gt;" in html  # autoescaped
    assert "30 s ago" in html and "in 1 min" in html and "2026-07-18 02:59:30 UTC" in html


def _bar(tick: datetime, start_s: float, end_s: float | None, **flags: object) -> svg.RunBar:
    return svg.RunBar(
        id=f"run-{tick:%H%M}-{start_s}",
        scheduled=tick,
        start=tick + timedelta(seconds=start_s),
        end=tick + timedelta(seconds=end_s) if end_s is not None else None,
        outcome=flags.pop("outcome", "on_time"),  # type: ignore[arg-type]
        **flags,  # type: ignore[arg-type]
    )


def test_timeline_svg_has_every_outcome_colour_and_marks_duplicate_overlap_late() -> None:
    base = NOW - timedelta(minutes=12)
    ticks = []
    for i, outcome in enumerate([*OUTCOMES, "upcoming"]):
        tick = base + timedelta(minutes=i)
        runs: tuple[svg.RunBar, ...] = ()
        if outcome == "duplicated":
            runs = (_bar(tick, 1, 20), _bar(tick, 2, 21, duplicate=True, outcome="duplicated"))
        elif outcome == "overlapped":
            runs = (_bar(tick, 1, 30, overlap=True, outcome="overlapped"),)
        elif outcome == "late":
            runs = (_bar(tick, 40, 50, late=True, outcome="late"),)
        elif outcome in ("on_time", "failed", "timed_out"):
            runs = (_bar(tick, 1, 10, outcome=outcome, timed_out=outcome == "timed_out"),)
        ticks.append(svg.TickMark(scheduled=tick, outcome=outcome, runs=runs))
    ticks.append(svg.TickMark(scheduled=NOW, outcome="pending", runs=(_bar(NOW, 1, None, outcome=None),)))
    drawn = svg.timeline_svg(ticks, base - timedelta(minutes=1), NOW + timedelta(minutes=1), NOW)
    root = ElementTree.fromstring(drawn)  # well-formed XML
    assert root.get("role") == "img"
    for outcome in OUTCOMES:
        assert OUTCOME_COLORS[outcome] in drawn, outcome
        assert f'data-outcome="{outcome}"' in drawn
    assert drawn.count('data-flags="duplicate"') == 1 and 'data-flags="overlap"' in drawn
    assert 'data-flags="late"' in drawn and ">duplicate<" in drawn and ">overlap<" in drawn
    # no links inside the image (axe: nested-interactive); the script maps a click to the row
    assert "<a " not in drawn and f'data-tick="{base:%Y-%m-%dT%H:%M:%S}Z"' in drawn
    assert 'fill-opacity="0.55"' in drawn  # the run still in progress


def test_concurrent_runs_get_separate_lanes() -> None:
    tick = NOW - timedelta(minutes=5)
    bars = [_bar(tick, 1, 60), _bar(tick, 2, 61, duplicate=True), _bar(tick, 120, 130)]
    lanes = svg._lanes(bars, NOW, timedelta(seconds=0.5))
    assert lanes[0] != lanes[1] and lanes[2] == 0


def test_badge_svg_is_valid_and_escapes_the_label() -> None:
    drawn = svg.badge_svg("a<b>&c", "down")
    root = ElementTree.fromstring(drawn)
    assert root.get("aria-label") == "a<b>&c: down"
    assert svg.BADGE_COLORS["down"] in drawn


def test_duration_chart_svg() -> None:
    tick = NOW - timedelta(minutes=5)
    drawn = svg.duration_chart_svg([_bar(tick, 0, 12.5), _bar(tick, 0, None)])
    ElementTree.fromstring(drawn)
    assert "12.5 s" in drawn and "1 finished runs" in drawn
    assert "no finished runs" in svg.duration_chart_svg([])


def test_error_page_renders_for_anonymous_visitors(env: Environment) -> None:
    html = env.get_template("error.html").render(title="Not found", message="uuid: nope", session=None)
    assert "<h1>Not found</h1>" in html and "Log out" not in html


def test_check_page_lists_ticks_with_their_ids(env: Environment) -> None:
    tick = NOW - timedelta(minutes=1)
    check = {
        **_check("up", []),
        "tags": "prod",
        "badge_url": "http://x/b/abc.svg",
        "ping_url": "http://x/ping/u",
        "grace": 20,
        "max_runtime": 60,
        "failure_threshold": 1,
        "recovery_threshold": 1,
        "n_pings": 2,
        "dialect": "unix",
        "desc": "",
        "channels": "",
        "uuid": "0b5e3c1e-0000-4000-8000-000000000001",
        "reason": "ok",
        "created_at": tick,
    }
    html = env.get_template("check.html").render(
        check=check,
        project="ops",
        window="auto",
        windows=["auto"],
        since=tick,
        until=NOW,
        now=NOW,
        ticks=[svg.TickMark(scheduled=tick, outcome="missed")],
        timeline_svg="",
        timeline_phone_svg="",
        duration_svg="",
        snippets={"ping URL": "http://x/ping/u"},
        pings=[],
        alerts=[],
        flips=[],
        channel_names={},
        session=Session(user=User(id=1, email="a@b.c", project_ids=(1,)), csrf_token="tok"),
        csrf_token="tok",
    )
    assert f'id="tick-{tick:%Y-%m-%dT%H:%M:%S}Z"' in html and 'value="tok"' in html


def test_outcome_and_status_colours_hold_white_glyphs_and_differ_in_lightness() -> None:
    from monitor.web.colors import OUTCOME_GLYPHS, STATUS_GLYPHS, contrast_ratio

    for name, color in {**OUTCOME_COLORS, **STATUS_COLORS}.items():
        assert contrast_ratio(color, "#ffffff") >= 4.5, name  # WCAG AA for the white glyph/label
    assert set(OUTCOME_COLORS) <= set(OUTCOME_GLYPHS) and set(STATUS_COLORS) == set(STATUS_GLYPHS)
    # colour is not the only cue, and on time vs missed differ in lightness for red-green blindness
    assert len({OUTCOME_GLYPHS[k] for k in OUTCOME_COLORS}) == len(OUTCOME_COLORS)
    assert contrast_ratio(OUTCOME_COLORS["on_time"], OUTCOME_COLORS["missed"]) >= 2.0


def test_timeline_axis_labels_are_in_the_given_zone() -> None:
    from zoneinfo import ZoneInfo

    since, until = NOW - timedelta(hours=1), NOW  # 02:00-03:00 UTC is 07:30-08:30 in Kolkata
    ticks = [svg.TickMark(scheduled=NOW - timedelta(minutes=30), outcome="on_time", runs=())]
    kolkata = svg.timeline_svg(ticks, since, until, NOW, zone=ZoneInfo("Asia/Kolkata"))
    labels = re.findall(r'text-anchor="(?:start|middle|end)">([0-9:-]+(?: [0-9:]+)?)</text>', kolkata)
    assert labels[0] == "07:30:00" and labels[-1] == "08:30:00", labels
    assert "from 2026-07-18 07:30:00 to 2026-07-18 08:30:00 Asia/Kolkata" in kolkata
    assert f'data-tick="{ticks[0].scheduled:%Y-%m-%dT%H:%M:%S}Z"' in kolkata  # anchors stay UTC
    utc = svg.timeline_svg(ticks, since, until, NOW)
    assert re.findall(r'text-anchor="start">([0-9:]+)</text>', utc) == ["02:00:00"]
