"""Managing everything from the dashboard in a real browser, on a desktop and on a phone.

Playwright drives Debian's Chromium against the real app (uvicorn, injected clock) seeded by
``tests.support.dashboard``. Each flow runs at 1400×900 and at 390×844 — a plain viewport, not
mobile emulation (which widens ``innerWidth`` to the content and hides overflow) — and on every
page it visits it checks that nothing scrolls sideways (``scrollWidth <= innerWidth``) and that
axe-core (the npm package, installed under ``tests/web/node_modules`` when missing) finds no
serious or critical violation. The module logs in through the login form once per viewport and
its later contexts start with that session; they load axe-core into every page by an init script.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from monitor.domain.clock import FrozenClock
from monitor.settings import Settings
from tests.support import dashboard as scenario
from tests.support.process import REPO_ROOT
from tests.support.receivers import HttpReceiver

CHROMIUM = "/usr/bin/chromium"
HERE = Path(__file__).resolve().parent
AXE = HERE / "node_modules" / "axe-core" / "axe.min.js"
VIEWPORTS = {"desktop": {"width": 1400, "height": 900}, "phone": {"width": 390, "height": 844}}
NARROW = {"narrow": {"width": 360, "height": 740}}
"""A small phone, for the pages-fit test only (plain viewport, like the others)."""
ARTIFACTS = REPO_ROOT / "tests" / "artifacts"


def _axe_source() -> str:
    if not AXE.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail("npm is missing: it installs axe-core for the accessibility checks")
        subprocess.run([npm, "install", "--no-audit", "--no-fund"], cwd=HERE, check=True, timeout=300)
    return AXE.read_text()


@pytest.fixture(scope="module")
def axe() -> str:
    return _axe_source()


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


class Sessions:
    """The browser state (session cookie) of a login through the login form, one per viewport,
    each made the first time a test asks for it: every later context of the module starts
    logged in instead of logging in again (three page loads and an argon2 hash, ~0.65 s)."""

    def __init__(self, browser: Browser, site: scenario.Dashboard) -> None:
        self.browser = browser
        self.site = site
        self.states: dict[str, Any] = {}

    def state(self, viewport: str) -> Any:
        if viewport not in self.states:
            size = {**VIEWPORTS, **NARROW}[viewport]
            context = self.browser.new_context(viewport=size)  # type: ignore[arg-type]
            log_in(context.new_page(), self.site)
            self.states[viewport] = context.storage_state()
            context.close()
        return self.states[viewport]


@pytest.fixture(scope="module")
def sessions(browser: Browser, site: scenario.Dashboard) -> Sessions:
    return Sessions(browser, site)


def audited_context(
    browser: Browser, sessions: Sessions, axe: str, viewport: str, **options: Any
) -> BrowserContext:
    """A context at ``viewport``, logged in (:class:`Sessions`), with axe-core loaded in every
    page before the page's own scripts run: handing the 650 kB script to each page audited
    cost ~0.15 s a page. bypass_csp: the pages' CSP refuses a script the test adds."""
    context = browser.new_context(
        viewport={**VIEWPORTS, **NARROW}[viewport],  # type: ignore[arg-type]
        bypass_csp=True,
        storage_state=sessions.state(viewport),
        **options,
    )
    context.add_init_script(script=axe)
    return context


def open_checks(page: Page, site: scenario.Dashboard) -> None:
    """Open the checks page in a logged-in context (where a login lands)."""
    page.goto(f"{site.base}/")
    assert page.url == f"{site.base}/", page.url  # not sent to the login page


@pytest.fixture(params=list(VIEWPORTS))
def page(
    request: pytest.FixtureRequest, browser: Browser, site: scenario.Dashboard, sessions: Sessions, axe: str
) -> Iterator[Page]:
    context = audited_context(browser, sessions, axe, request.param)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site.base)
    opened = context.new_page()
    opened.viewport_name = request.param  # type: ignore[attr-defined]
    yield opened
    context.close()


def log_in(page: Page, site: scenario.Dashboard) -> None:
    page.goto(f"{site.base}/login")
    page.get_by_label("Email").fill(scenario.EMAIL)
    page.get_by_label("Password").fill(scenario.PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{site.base}/")


def audit(page: Page, axe: str) -> None:
    """No sideways scrolling at the page's width, and no serious or critical axe violation."""
    script = (
        "() => ({scroll: document.documentElement.scrollWidth, inner: window.innerWidth,"
        " wide: [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right >"
        " window.innerWidth + 1).slice(0, 5).map(e => e.tagName + '.' + e.className)})"
    )
    for attempt in range(3):
        # a link clicked just before may still be replacing the document (no documentElement
        # yet, or the context destroyed mid-call): audit the page once it has loaded
        try:
            page.wait_for_load_state("load")
            overflow = page.evaluate(script)
            break
        except PlaywrightError:
            if attempt == 2:
                raise
            page.wait_for_timeout(200)
    assert overflow["scroll"] <= overflow["inner"], (page.url, overflow)
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(content=axe)
    violations = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
        ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map(n => n.html)}))"
    )
    assert violations == [], (page.url, json.dumps(violations, indent=1))


def name_of(page: Page, base: str) -> str:
    return f"{base}-{page.viewport_name}"  # type: ignore[attr-defined]


def check_row(page: Page, name: str) -> object:
    return page.locator("#check-rows tr").filter(has=page.get_by_role("link", name=name, exact=True))


def test_create_edit_route_copy_ping_pause_and_delete_a_check(
    page: Page, site: scenario.Dashboard, axe: str
) -> None:
    channel = name_of(page, "pager")
    answer = httpx.post(
        f"{site.base}/api/v3/channels/",
        json={"name": channel, "url": "json://127.0.0.1:9/hook"},
        headers={"X-Api-Key": scenario.API_KEY},
    )
    assert answer.status_code in (200, 201), answer.text
    open_checks(page, site)
    audit(page, axe)
    page.get_by_role("link", name="New check", exact=True).first.click()
    page.wait_for_url(f"{site.base}/checks/new")
    name = name_of(page, "db-backup")
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Tags").fill("prod db")
    page.get_by_label("On a cron schedule").check()
    # the explain preview follows the schedule as it is typed
    page.get_by_label("Schedule", exact=True).press_sequentially("*/5 * * * *")
    preview = page.locator("#schedule-preview")
    expect(preview).to_contain_text("Next ticks")
    expect(preview.locator("ol.next li")).to_have_count(5)
    page.get_by_label("Schedule", exact=True).fill("*/5 * * *")
    expect(preview.locator("[role=alert]")).to_contain_text("schedule:")
    page.get_by_label("Schedule", exact=True).fill("*/5 * * * *")
    expect(preview.locator("ol.next li")).to_have_count(5)
    page.get_by_label("Grace in seconds").fill("60")
    audit(page, axe)
    page.get_by_role("button", name="Create check").click()
    expect(page.locator("#saved")).to_contain_text("Check created")
    uuid = page.url.split("/checks/")[1].split("?")[0]
    audit(page, axe)
    # edit its grace, and route it to the channel
    page.get_by_role("link", name="Edit", exact=True).click()
    page.get_by_label("Grace in seconds").fill("120")
    page.get_by_label(channel).check()
    audit(page, axe)
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#saved")).to_contain_text("Check saved")
    settings = page.locator("dl.settings")
    expect(settings).to_contain_text("2 min (120 s)")
    expect(settings).to_contain_text(channel)
    # copy its ping URL
    page.get_by_role("button", name="Copy ping URL").click()
    expect(page.locator("#copied")).to_contain_text("Copied ping URL")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == f"{site.settings.base_url}/ping/{uuid}"
    # ping it with curl (the server listens on its own port; the URL's path is the ping's)
    curl = subprocess.run(
        [
            "curl",
            "-fsS",
            "-m",
            "10",
            "--data-binary",
            "pg_dump: disk full",
            site.base + urlsplit(copied).path + "/2",
        ],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert curl.returncode == 0 and curl.stdout.strip() == "OK", curl
    # down, with the reason in the list, the title and the favicon
    page.goto(f"{site.base}/")
    row = check_row(page, name)
    expect(row.locator(".pill")).to_have_attribute("data-status", "down")
    expect(row.locator(".reason")).to_have_text("failed: exit 2")
    expect(row.locator(".output")).to_contain_text("pg_dump: disk full")
    assert re.fullmatch(r"\(\d+ down\) monitor", page.title()), page.title()
    icon = page.locator("#favicon")
    assert icon.get_attribute("href") == icon.get_attribute("data-down")
    # down checks come first
    first = page.locator("#check-rows tr").first
    expect(first).to_have_attribute("data-status", "down")
    page.screenshot(path=str(ARTIFACTS / f"list-{page.viewport_name}.png"), full_page=True)  # type: ignore[attr-defined]
    # the check page says why above the fold, with the failure's output
    row.get_by_role("link", name=name, exact=True).click()
    why = page.locator(".head .why")
    expect(why).to_have_text("failed: exit 2")
    expect(page.locator(".head .tail")).to_contain_text("pg_dump: disk full")
    box = why.bounding_box()
    assert box is not None and box["y"] + box["height"] < VIEWPORTS[page.viewport_name]["height"]  # type: ignore[attr-defined]
    assert page.title().startswith("(down) ")
    # pause, after a confirmation
    page.get_by_role("link", name="Pause…").click()
    expect(page.locator("h1")).to_have_text(f"Pause {name}?")
    audit(page, axe)
    page.get_by_role("button", name="Pause this check").click()
    expect(page.locator(".head-title .pill")).to_have_attribute("data-status", "paused")
    # delete, after typing its name
    page.get_by_role("link", name="Delete…").click()
    audit(page, axe)
    page.get_by_label("Type").fill("wrong name")
    page.get_by_role("button", name="Delete this check").click()
    expect(page.locator("#confirm-error")).to_contain_text(f"type {name}")
    page.get_by_label("Type").fill(name)
    page.get_by_role("button", name="Delete this check").click()
    page.wait_for_url(re.compile(r"/\?deleted="))
    expect(page.get_by_role("status").first).to_contain_text(f"Check {name} deleted")
    assert check_row(page, name).count() == 0  # type: ignore[attr-defined]
    gone = httpx.get(f"{site.base}/api/v3/checks/{uuid}", headers={"X-Api-Key": scenario.API_KEY})
    assert gone.status_code == 404


def test_add_edit_test_and_delete_a_channel(page: Page, site: scenario.Dashboard, axe: str) -> None:
    name = name_of(page, "ops-webhook")
    with HttpReceiver() as receiver:
        open_checks(page, site)
        page.get_by_role("link", name="Channels", exact=True).click()
        page.get_by_label("Service").select_option("webhook")
        # only the chosen service's fields are shown
        expect(page.get_by_label("Bot token")).to_be_hidden()
        page.get_by_role("textbox", name="Webhook URL", exact=True).fill(receiver.http_url)
        page.get_by_label("Name").fill(name)
        audit(page, axe)
        page.get_by_role("button", name="Add channel").click()
        expect(page.locator("#channel-message")).to_have_text("Channel added.")
        card = page.locator("ul.channels li").filter(has_text=name)
        expect(card.locator(".url")).to_contain_text("json://127.0.0.1:")
        audit(page, axe)
        # edit: rename it and route a check to it
        card.get_by_role("link", name=f"Edit {name}").click()
        audit(page, axe)
        renamed = name + "-2"
        page.get_by_label("Name").fill(renamed)
        page.get_by_label("billing-sync").check()
        page.get_by_role("button", name="Save channel").click()
        expect(page.locator("#channel-message")).to_have_text("Channel saved.")
        card = page.locator("ul.channels li").filter(has_text=renamed)
        expect(card).to_contain_text("1 check(s)")
        # send a test: the receiver gets it and the page says so
        card.get_by_role("button", name=f"Send test to {renamed}").click()
        expect(page.locator("#channel-message")).to_contain_text(f"Test notification to {renamed}: delivered")
        assert len(receiver.wait_for_requests(1)) >= 1
        # delete, after a confirmation
        page.locator("ul.channels li").filter(has_text=renamed).get_by_role(
            "link", name=f"Delete {renamed}"
        ).click()
        audit(page, axe)
        page.get_by_role("button", name="Delete this channel").click()
        expect(page.locator("#channel-message")).to_have_text("Channel deleted.")
        expect(page.locator("ul.channels li").filter(has_text=renamed)).to_have_count(0)


def test_create_and_remove_a_user(page: Page, site: scenario.Dashboard, axe: str) -> None:
    email = f"{name_of(page, 'newcomer')}@example.com"
    open_checks(page, site)
    page.get_by_role("link", name="Users", exact=True).click()
    audit(page, axe)
    page.get_by_label("Email").first.fill(email)
    page.get_by_label("First password").fill("a long first password")
    page.get_by_role("button", name="Create user").click()
    expect(page.locator("#users-message")).to_contain_text("User created")
    card = page.locator("ul.users > li").filter(has_text=email)
    expect(card).to_contain_text("ops: member")
    audit(page, axe)
    # the new user can log in and sees the project's checks
    with httpx.Client(base_url=site.base, follow_redirects=True) as client:
        form = client.get("/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        assert token is not None
        answer = client.post(
            "/login", data={"csrf_token": token.group(1), "email": email, "password": "a long first password"}
        )
        assert answer.status_code == 200 and "billing-sync" in answer.text
    card.get_by_role("button", name=f"Remove {email} from ops").click()
    expect(page.locator("#users-message")).to_contain_text("User removed")
    expect(page.locator("ul.users > li").filter(has_text=email)).to_have_count(0)
    # the last admin of a project cannot remove themselves
    me = page.locator("ul.users > li").filter(has_text=scenario.EMAIL)
    me.get_by_role("button", name=f"Remove {scenario.EMAIL} from ops").click()
    expect(page.locator("#users-error")).to_contain_text("last admin")


@pytest.mark.parametrize("page", [*VIEWPORTS, *NARROW], indirect=True)
def test_every_page_fits_the_viewport_and_passes_axe(page: Page, site: scenario.Dashboard, axe: str) -> None:
    open_checks(page, site)
    sync = site.checks["billing-sync"]["uuid"]
    # the longest name and a long tag, without a space to break at
    long_tag = name_of(page, "t").ljust(120, "t")
    long_check = httpx.post(
        f"{site.base}/api/v3/checks/",
        json={
            "name": name_of(page, "n").ljust(100, "n"),
            "tags": f"prod {long_tag}",
            "schedule": "0 3 * * *",
        },
        headers={"X-Api-Key": scenario.API_KEY},
    ).json()
    assert len(long_check["name"]) == 100 and long_tag in long_check["tags"].split()
    long_uuid = long_check["uuid"]
    channel = httpx.post(
        f"{site.base}/api/v3/channels/",
        json={"name": name_of(page, "audit"), "url": "json://127.0.0.1:9/audit"},
        headers={"X-Api-Key": scenario.API_KEY},
    ).json()["id"]
    paths = [
        "/",
        "/?status=down",
        "/checks/new",
        "/cron?schedule=30+2+*+*+1-5&tz=Europe/Berlin",
        "/channels",
        f"/channels/{channel}/edit",
        f"/channels/{channel}/delete",
        "/users",
        "/account",
        "/no/such/page",
        f"/?tag={long_tag}",
        f"/checks/{long_uuid}",
        f"/checks/{long_uuid}/edit",
        f"/checks/{long_uuid}/pause",
        f"/checks/{long_uuid}/delete",
    ]
    for check in site.checks.values():
        uuid = check["uuid"]
        paths += [f"/checks/{uuid}", f"/checks/{uuid}?window=7d"]
    paths += [
        f"/checks/{sync}/edit",
        f"/checks/{sync}/pause",
        f"/checks/{sync}/delete",
        f"/checks/{sync}?window=15m",
    ]
    for path in paths:
        page.goto(f"{site.base}{path}")
        audit(page, axe)
    page.goto(f"{site.base}/no/such/page")
    assert page.locator("h1").text_content() == "Not found"
    expect(
        page.get_by_role("navigation", name="Where to go").get_by_role("link", name="Checks")
    ).to_be_visible()
    # the login page too, logged out
    page.context.clear_cookies()
    page.goto(f"{site.base}/login")
    audit(page, axe)


def test_times_follow_the_users_zone(browser: Browser, site: scenario.Dashboard, sessions: Sessions) -> None:
    state = sessions.state("desktop")
    context = browser.new_context(viewport=VIEWPORTS["desktop"], storage_state=state)  # type: ignore[arg-type]
    page = context.new_page()
    open_checks(page, site)
    page.get_by_role("link", name="Account").click()
    page.get_by_label("Show times in this time zone").fill("Nowhere/Atlantis")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#account-error")).to_contain_text("tz: unknown time zone")
    page.get_by_label("Show times in this time zone").fill("Europe/Berlin")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_contain_text("Time zone saved")
    page.goto(f"{site.base}/checks/{site.checks['billing-sync']['uuid']}")
    expect(page.locator(".facts")).to_contain_text("CEST")
    page.goto(f"{site.base}/account")
    page.get_by_label("Show times in this time zone").fill("UTC")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_contain_text("Time zone saved")
    context.close()


def test_check_page_refreshes_its_header_without_a_reload(page: Page, site: scenario.Dashboard) -> None:
    made = httpx.post(
        f"{site.base}/api/v3/checks/",
        json={"name": name_of(page, "live"), "schedule": "* * * * *", "grace": 30},
        headers={"X-Api-Key": scenario.API_KEY},
    ).json()
    # Playwright's clock in the page, moved on by one 5 s refresh interval below instead of
    # waiting for it; the refresh's fetch, the server and the page's script stay real
    page.clock.install()
    open_checks(page, site)
    page.goto(f"{site.base}/checks/{made['uuid']}")
    expect(page.locator(".head-title .pill")).to_have_attribute("data-status", "new")
    page.evaluate("window.__same_page = true")
    assert (
        httpx.post(f"{site.base}/ping/{made['uuid']}/fail", content=b"exit: quota exceeded").status_code
        == 200
    )
    page.clock.run_for(5000)
    expect(page.locator(".head-title .pill")).to_have_attribute("data-status", "down")
    expect(page.locator(".head .tail")).to_contain_text("quota exceeded")
    assert page.evaluate("window.__same_page") is True
    assert page.title().startswith("(down) ")


def test_dark_mode_pages_pass_axe(
    browser: Browser, site: scenario.Dashboard, sessions: Sessions, axe: str
) -> None:
    for name in VIEWPORTS:
        context = audited_context(browser, sessions, axe, name, color_scheme="dark")
        page = context.new_page()
        open_checks(page, site)
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(13, 17, 23)", (name, background)
        for path in ("/", f"/checks/{site.checks['billing-sync']['uuid']}", "/channels", "/checks/new"):
            page.goto(f"{site.base}{path}")
            audit(page, axe)
        context.close()


MULTI_LINE = "Mon..Fri 09:00\nSat 10:30 Europe/Berlin"


def test_a_multi_line_oncalendar_schedule_is_previewed_and_kept_exactly(
    page: Page, site: scenario.Dashboard, axe: str
) -> None:
    open_checks(page, site)
    page.goto(f"{site.base}/checks/new")
    page.get_by_label("Name", exact=True).fill(name_of(page, "office-hours"))
    page.get_by_label("Dialect").select_option("oncalendar")
    schedule = page.get_by_label("Schedule", exact=True)
    first, second = MULTI_LINE.split("\n")
    schedule.press_sequentially(first)
    schedule.press("Enter")
    schedule.press_sequentially(second)
    assert schedule.input_value() == MULTI_LINE
    # the preview explains both lines as they are typed
    preview = page.locator("#schedule-preview")
    expect(preview.locator("ol.next li")).to_have_count(5)
    expect(preview.locator("h2")).to_have_text(
        "At 09:00 on Monday to Friday (UTC); and at 10:30 on Saturday (Europe/Berlin)"
    )
    expect(preview.locator("[role=alert]")).to_have_count(0)
    audit(page, axe)
    page.get_by_role("button", name="Create check").click()
    expect(page.locator("#saved")).to_contain_text("Check created")
    uuid = page.url.split("/checks/")[1].split("?")[0]
    headers = {"X-Api-Key": scenario.API_KEY}
    body = httpx.get(f"{site.base}/api/v3/checks/{uuid}", headers=headers).json()
    assert body["schedule"] == MULTI_LINE and body["dialect"] == "oncalendar"
    # editing shows the same lines, and saving keeps them
    page.get_by_role("link", name="Edit", exact=True).click()
    assert page.get_by_label("Schedule", exact=True).input_value() == MULTI_LINE
    expect(page.locator("#schedule-preview ol.next li")).to_have_count(5)
    page.get_by_label("Grace in seconds").fill("120")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#saved")).to_contain_text("Check saved")
    body = httpx.get(f"{site.base}/api/v3/checks/{uuid}", headers=headers).json()
    assert body["schedule"] == MULTI_LINE and body["grace"] == 120
    # the cron page takes several lines too
    page.goto(f"{site.base}/cron")
    page.get_by_label("Dialect").select_option("oncalendar")
    cron = page.get_by_label("Expression")
    cron.press_sequentially(first)
    cron.press("Enter")
    cron.press_sequentially(second)
    expect(page.locator("#cron-result ol.next li")).to_have_count(5)
    expect(page.locator("#cron-result h2")).to_contain_text("and at 10:30 on Saturday")
    assert cron.input_value() == MULTI_LINE
    audit(page, axe)
