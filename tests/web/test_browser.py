"""The dashboard in a real browser: Playwright driving Debian's Chromium.

One server (uvicorn, real HTTP, injected clock) and one browser for the module. The scenario
(``tests.support.dashboard.seed``) sends real pings: three replicas running one tick, a run
lapping the next tick, a missed tick, a late and a failed run, a down and a paused check.
Screenshots go to ``tests/artifacts/`` (ignored by git); ``scripts/screenshots.py`` writes the
committed ones under ``docs/screenshots/``.

Chromium comes from Debian (``apt-get install chromium``, done by ``.ci/run``): Playwright's
own browser download cannot work here.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Cookie, Page, expect, sync_playwright

from monitor.domain.clock import FrozenClock
from monitor.settings import Settings
from monitor.web.colors import STATUS_COLORS, contrast_ratio
from tests.support import dashboard as scenario
from tests.support.process import REPO_ROOT
from tests.support.receivers import HttpReceiver

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = REPO_ROOT / "tests" / "artifacts"


@pytest.fixture(scope="module")
def site() -> Iterator[scenario.Dashboard]:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite+aiosqlite:///{folder}/monitor.db"
        scenario.prepare(url)
        settings = Settings(database_url=url, allow_private_targets=True, notify_timeout=5.0)
        clock = FrozenClock(scenario.START)
        with scenario.ServerThread(scenario.make_app(settings, clock)) as server:
            checks = scenario.seed(server.base, clock, settings)
            yield scenario.Dashboard(server=server, clock=clock, settings=settings, checks=checks)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():  # a missing browser fails the module; it never skips it
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    opened = context.new_page()
    yield opened
    context.close()


def log_in(page: Page, site: scenario.Dashboard) -> None:
    page.goto(f"{site.base}/login")
    page.get_by_label("Email").fill(scenario.EMAIL)
    page.get_by_label("Password").fill(scenario.PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{site.base}/")


@pytest.fixture(scope="module")
def session(browser: Browser, site: scenario.Dashboard) -> list[Cookie]:
    """The cookies of one login through the login form: each test's page starts with them
    instead of logging in again (three page loads and an argon2 hash, ~0.65 s a test)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    log_in(context.new_page(), site)
    cookies = context.cookies()
    context.close()
    return cookies


def open_logged_in(page: Page, site: scenario.Dashboard, session: list[Cookie]) -> None:
    """Open the checks page (where a login lands) with the module's session."""
    page.context.add_cookies(session)  # type: ignore[arg-type]
    page.goto(f"{site.base}/")
    assert page.url == f"{site.base}/", page.url  # not sent to the login page


def row(page: Page, name: str) -> Any:
    return page.locator("#check-rows tr").filter(has=page.get_by_role("link", name=name, exact=True))


def test_log_in_with_the_keyboard_and_see_a_down_check(page: Page, site: scenario.Dashboard) -> None:
    page.goto(f"{site.base}/")
    assert page.url.startswith(f"{site.base}/login?next=")
    # the email field has focus; Tab to the password, Enter submits
    page.keyboard.type(scenario.EMAIL)
    page.keyboard.press("Tab")
    page.keyboard.type(scenario.PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{site.base}/")
    down = row(page, "nightly-report")
    pill = down.locator(".pill")
    expect(pill).to_have_attribute("data-status", "down")
    expect(pill).to_contain_text("down")
    background = pill.evaluate("e => getComputedStyle(e).backgroundColor")
    assert background == _rgb(STATUS_COLORS["down"])
    expect(row(page, "log-archive").locator(".pill")).to_have_attribute("data-status", "paused")
    strip = row(page, "billing-sync").locator(".strip .cell")
    outcomes = [strip.nth(i).get_attribute("data-outcome") for i in range(strip.count())]
    assert outcomes == [
        "on_time",
        "duplicated",
        "on_time",
        "overlapped",
        "missed",
        "late",
        "failed",
        "on_time",
    ]
    page.screenshot(path=str(ARTIFACTS / "checks.png"), full_page=True)


def test_filter_search_and_live_refresh_without_reload(
    page: Page, site: scenario.Dashboard, session: list[Cookie]
) -> None:
    # Playwright's clock in the page, moved on by one 5 s live-refresh interval below instead of
    # waiting for it; the refresh's fetch, the server and the page's script stay real
    page.clock.install()
    open_logged_in(page, site, session)
    page.evaluate("window.__same_page = true")
    page.get_by_label("Search by name").fill("night")
    expect(page.locator("#check-rows tr")).to_have_count(1)
    expect(row(page, "nightly-report")).to_be_visible()
    page.get_by_label("Search by name").fill("")
    page.get_by_label("Tag").select_option("staging")
    expect(page.locator("#check-rows tr")).to_have_count(2)
    page.get_by_label("Tag").select_option("")
    page.get_by_label("Status", exact=True).select_option("down")
    expect(page.locator("#check-rows tr")).to_have_count(1)
    page.get_by_label("Status", exact=True).select_option("")
    # a ping arriving elsewhere shows up by the next poll, without a reload
    warmer = site.checks["cache-warmer"]
    expect(row(page, "cache-warmer").locator(".pill")).to_have_attribute("data-status", "up")
    assert httpx.post(f"{site.base}/ping/{warmer['uuid']}/fail").status_code == 200
    page.clock.run_for(5000)
    expect(row(page, "cache-warmer").locator(".pill")).to_have_attribute("data-status", "down")
    assert page.evaluate("window.__same_page") is True
    assert "status=" in page.url  # filters are kept in the address for sharing


def test_check_timeline_marks_duplicates_overlaps_missed_late(
    page: Page, site: scenario.Dashboard, session: list[Cookie]
) -> None:
    open_logged_in(page, site, session)
    page.get_by_role("link", name="billing-sync", exact=True).click()
    page.get_by_role("link", name="15m").click()
    sync = site.checks["billing-sync"]
    page.wait_for_url(re.compile(rf"/checks/{sync['uuid']}\?window=15m"))
    tick = page.locator("#tick-2026-07-18T02\\:01\\:00Z")
    assert tick.get_attribute("data-outcome") == "duplicated"
    expect(tick).to_contain_text("duplicate")
    timeline = page.locator("svg#timeline")
    expect(timeline.locator('g.run[data-flags*="duplicate"]')).to_have_count(2)
    expect(timeline.locator('g.run[data-flags*="overlap"]')).to_have_count(1)
    expect(timeline.locator('g.tick[data-outcome="missed"]')).to_have_count(1)
    expect(timeline.locator('g.run[data-flags*="late"]')).to_have_count(1)
    assert page.locator("#tick-2026-07-18T02\\:03\\:00Z").get_attribute("data-outcome") == "overlapped"
    # pings show their bodies, alerts their kind
    page.get_by_text("body (").first.click()
    expect(page.locator("table.pings pre").first).to_be_visible()
    expect(page.locator("table.alerts")).to_contain_text("duplicate")
    expect(page.locator("table.alerts")).to_contain_text("overlap")
    page.screenshot(path=str(ARTIFACTS / "timeline.png"), full_page=True)
    # the tick a notification links to is the page's target
    page.goto(f"{site.base}/checks/{sync['uuid']}?window=15m#tick-2026-07-18T02:04:00Z")
    assert page.evaluate("document.querySelector(':target').dataset.outcome") == "missed"
    # a tick outside the window: the page re-centres its window on it; this one is from before
    # the check existed, and no tick from before then is ever drawn
    page.goto(f"{site.base}/checks/{sync['uuid']}#tick-2026-07-18T01:20:00Z")
    page.wait_for_url(re.compile(r"around=2026-07-18T01"))
    expect(page.locator("table.ticks")).to_be_visible()
    assert page.locator("[id^='tick-2026-07-18T01']").count() == 0


def test_pause_and_resume_ask_first(page: Page, site: scenario.Dashboard, session: list[Cookie]) -> None:
    open_logged_in(page, site, session)
    warmer = site.checks["cache-warmer"]
    page.goto(f"{site.base}/checks/{warmer['uuid']}")
    page.get_by_role("link", name="Pause…").click()
    expect(page.locator("h1")).to_have_text("Pause cache-warmer?")
    page.get_by_role("button", name="Pause this check").click()
    expect(page.locator(".head-title .pill")).to_have_attribute("data-status", "paused")
    page.get_by_role("link", name="Resume…").click()
    page.get_by_role("button", name="Resume this check").click()
    expect(page.locator(".head-title .pill")).to_have_attribute("data-status", "new")


def test_cron_explain_page_explains_as_you_type(
    page: Page, site: scenario.Dashboard, session: list[Cookie]
) -> None:
    open_logged_in(page, site, session)
    page.get_by_role("link", name="Cron explain").click()
    page.get_by_label("Expression").fill("30 2 * * 1-5")
    page.get_by_label("Time zone").fill("Europe/Berlin")
    expect(page.locator("#cron-result table.fields")).to_contain_text("day of week")
    expect(page.locator("#cron-result ol.next li")).to_have_count(5)
    page.get_by_label("Dialect").select_option("quartz")
    expect(page.locator("#cron-result [role=alert]")).to_contain_text("schedule:")
    page.get_by_label("Dialect").select_option("unix")
    page.get_by_label("Expression").fill("0 0 1 * 1")
    expect(page.locator("#cron-result ul.warnings")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "cron.png"), full_page=True)


def test_add_a_channel_and_send_a_test(page: Page, site: scenario.Dashboard, session: list[Cookie]) -> None:
    with HttpReceiver() as receiver:
        open_logged_in(page, site, session)
        page.get_by_role("link", name="Channels").click()
        page.get_by_label("Service").select_option("apprise")
        page.get_by_label("Apprise URL").fill("notaurl")
        page.get_by_role("button", name="Add channel").click()
        expect(page.locator("#channel-error")).to_contain_text("url:")
        page.get_by_label("Service").select_option("apprise")
        page.get_by_label("Name").fill("ops-hook")
        page.get_by_label("Apprise URL").fill(receiver.url)
        page.get_by_label("failed").check()
        page.get_by_role("button", name="Add channel").click()
        added = page.locator("ul.channels li").filter(has_text="ops-hook")
        expect(added).to_contain_text("failed")
        added.get_by_role("button", name="Send test to ops-hook").click()
        expect(page.get_by_role("status")).to_contain_text("delivered")
        assert len(receiver.wait_for_requests(1)) >= 1
        page.screenshot(path=str(ARTIFACTS / "channels.png"), full_page=True)


def test_accessibility_basics(page: Page, site: scenario.Dashboard, session: list[Cookie]) -> None:
    open_logged_in(page, site, session)
    sync = site.checks["billing-sync"]
    unlabelled_js = """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
        .filter(e => e.labels.length === 0 && !e.getAttribute('aria-label')).map(e => e.outerHTML)"""
    for path in ("/", "/cron", "/channels", f"/checks/{sync['uuid']}"):
        page.goto(f"{site.base}{path}")
        assert page.evaluate(unlabelled_js) == [], path
        assert page.locator("html").get_attribute("lang") == "en"
        assert page.locator("h1").count() == 1
    # status pills: white text on colours of at least 4.5:1 contrast, as rendered
    page.goto(f"{site.base}/")
    pills = page.locator(".pill")
    for i in range(pills.count()):
        styles = pills.nth(i).evaluate(
            "e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]"
        )
        assert contrast_ratio(_hex(styles[0]), _hex(styles[1])) >= 4.5, styles
    # keyboard: the first Tab reaches the skip link, then the main navigation in order
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    focused = []
    for _ in range(4):
        page.keyboard.press("Tab")
        focused.append(page.evaluate("document.activeElement.textContent.trim()"))
    assert focused == ["monitor", "Checks", "New check", "Channels"]
    page.keyboard.press("Enter")
    page.wait_for_url(f"{site.base}/channels")


def _rgb(color: str) -> str:
    value = color.lstrip("#")
    r, g, b = (int(value[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgb({r}, {g}, {b})"


def _hex(css: str) -> str:
    r, g, b = (int(x) for x in re.findall(r"\d+", css)[:3])
    return f"#{r:02x}{g:02x}{b:02x}"
