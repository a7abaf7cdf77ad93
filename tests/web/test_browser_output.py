"""The live checks list in a browser: the last output line on a phone (cut to one line, opened to
the whole line by a tap or the keyboard, one tab stop per row, no sideways scrolling, no serious
axe finding) and the notice when the live refresh of the list or of a check's page loses the
server. Playwright drives Debian's Chromium against the real app seeded by
``tests.support.dashboard``."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Browser, expect

from tests.support import dashboard as scenario
from tests.web.test_browser_management import (
    Sessions,
    audit,
    audited_context,
    axe,
    browser,
    open_checks,
    sessions,
    site,
)

__all__ = ["axe", "browser", "sessions", "site"]  # fixtures, imported for pytest

REFRESH = 5000
"""The pages' live refresh interval (ms, their data-interval). Each test installs Playwright's
clock in its browser context before the pages load and moves it on by one interval where the
test waited for the next refresh (up to 5-10 s of real time each); the fetches, the server
and the page's scripts stay real."""

LONG_LINE = "ERROR: " + " ".join(f"table_{n}" for n in range(24)) + " could not be vacuumed: disk full"


def test_a_cut_last_output_line_opens_to_the_whole_line_on_a_phone(
    browser: Browser, site: scenario.Dashboard, sessions: Sessions, axe: str
) -> None:
    made = httpx.post(
        f"{site.base}/api/v3/checks/",
        json={"name": "vacuum", "schedule": "0 4 * * *", "grace": 600},
        headers={"X-Api-Key": scenario.API_KEY},
    ).json()
    sent = httpx.post(f"{site.base}/ping/{made['uuid']}/fail", content=(LONG_LINE + "\n").encode())
    assert sent.status_code == 200
    context = audited_context(browser, sessions, axe, "narrow")
    page = context.new_page()
    page.clock.install()  # REFRESH
    open_checks(page, site)
    row = page.locator("#check-rows tr").filter(has=page.get_by_role("link", name="vacuum", exact=True))
    line = row.locator(".output code")
    expect(line).to_have_text(LONG_LINE)
    cut = line.evaluate("e => ({height: e.clientHeight, cut: e.scrollWidth > e.clientWidth})")
    assert cut["cut"], "the line is longer than the phone is wide"
    audit(page, axe)

    # one tab stop after the check's link: the summary; Enter opens it to the whole line
    row.get_by_role("link", name="vacuum", exact=True).focus()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.tagName") == "SUMMARY"
    page.keyboard.press("Enter")
    expect(row.locator("details.output")).to_have_attribute("open", "")
    opened = line.evaluate("e => ({height: e.clientHeight, cut: e.scrollWidth > e.clientWidth})")
    assert not opened["cut"] and opened["height"] > cut["height"] * 2, (cut, opened)
    audit(page, axe)
    # the 5-second refresh keeps it open: the refreshed row's element (not the one marked
    # before) is open
    row.locator("details.output").evaluate("e => e.setAttribute('data-before-refresh', '')")
    page.clock.run_for(REFRESH)
    expect(row.locator("details.output:not([data-before-refresh])")).to_have_attribute("open", "")
    page.keyboard.press("Enter")  # the focus stayed on the summary: Enter closes it again
    expect(row.locator("details.output")).not_to_have_attribute("open", "")
    context.close()


def test_a_failing_live_refresh_says_the_rows_are_stale_and_since_when(
    browser: Browser, site: scenario.Dashboard, sessions: Sessions, axe: str
) -> None:
    context = audited_context(browser, sessions, axe, "narrow")
    page = context.new_page()
    page.clock.install()  # REFRESH
    open_checks(page, site)
    lost = page.locator("#live-lost")
    expect(lost).to_be_hidden()
    shown_at = page.locator("#live-meta").get_attribute("data-at")
    assert shown_at
    page.route("**/fragments/checks*", lambda route: route.abort())
    page.clock.run_for(REFRESH)
    expect(lost).to_be_visible()
    expect(lost).to_have_text(
        re.compile(rf"^Connection lost — showing data from {shown_at[11:16]}\. Retrying every few seconds\.$")
    )
    audit(page, axe)
    page.unroute("**/fragments/checks*")
    page.clock.run_for(REFRESH)
    expect(lost).to_be_hidden()
    context.close()


def test_a_failing_live_refresh_of_a_check_page_says_its_header_is_stale(
    browser: Browser, site: scenario.Dashboard, sessions: Sessions, axe: str
) -> None:
    made = httpx.post(
        f"{site.base}/api/v3/checks/",
        json={"name": "watched", "schedule": "0 4 * * *", "grace": 600},
        headers={"X-Api-Key": scenario.API_KEY},
    ).json()
    context = audited_context(browser, sessions, axe, "narrow")
    page = context.new_page()
    page.clock.install()  # REFRESH
    open_checks(page, site)
    page.goto(f"{site.base}/checks/{made['uuid']}")
    lost = page.locator("#live-lost")
    expect(lost).to_be_hidden()
    shown_at = page.locator("#head-meta").get_attribute("data-at")
    assert shown_at
    page.route("**/fragments/checks/*/header", lambda route: route.abort())
    page.clock.run_for(REFRESH)
    expect(lost).to_be_visible()
    expect(lost).to_have_text(
        re.compile(rf"^Connection lost — showing data from {shown_at[11:16]}\. Retrying every few seconds\.$")
    )
    audit(page, axe)
    page.unroute("**/fragments/checks/*/header")
    page.clock.run_for(REFRESH)
    expect(lost).to_be_hidden()
    context.close()
