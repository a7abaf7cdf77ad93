"""Regenerate the dashboard screenshots in docs/screenshots/, desktop and phone.

Starts the real app on a loopback port with an injected clock, sends the scenario's real pings
(tests/support/dashboard.py: three replicas running one tick → duplicates, a run lapping the
next tick → overlap, a missed, a late and a failed tick, a down and a paused check), logs in
through the login form and photographs the pages with Playwright driving Debian's Chromium.

    .venv/bin/python scripts/screenshots.py [--out docs/screenshots] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from playwright.sync_api import expect, sync_playwright  # noqa: E402

from monitor.domain.clock import FrozenClock  # noqa: E402
from monitor.settings import Settings  # noqa: E402
from tests.support import dashboard as scenario  # noqa: E402

VIEWPORTS = {"desktop": {"width": 1400, "height": 900}, "phone": {"width": 390, "height": 844}}
"""A desktop and a phone (a plain 390 px viewport, as the browser tests use)."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite+aiosqlite:///{folder}/monitor.db"
        scenario.prepare(url)
        settings = Settings(database_url=url, allow_private_targets=True)
        clock = FrozenClock(scenario.START)
        with scenario.ServerThread(scenario.make_app(settings, clock)) as server:
            checks = scenario.seed(server.base, clock, settings)
            made = httpx.post(
                f"{server.base}/api/v3/channels/",
                json={"name": "ops-webhook", "url": "json://127.0.0.1:9/hook", "kinds": ["missed", "failed"]},
                headers={"X-Api-Key": scenario.API_KEY},
            )
            assert made.status_code in (200, 201), made.text
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
                for device, viewport in VIEWPORTS.items():
                    page = browser.new_page(viewport=viewport, device_scale_factor=1)
                    page.goto(f"{server.base}/login")
                    page.get_by_label("Email").fill(scenario.EMAIL)
                    page.get_by_label("Password").fill(scenario.PASSWORD)
                    page.get_by_role("button", name="Log in").click()
                    page.wait_for_url(f"{server.base}/")
                    sync = checks["billing-sync"]["uuid"]
                    report = checks["nightly-report"]["uuid"]
                    shots = {
                        "checks": "/",
                        "check-down": f"/checks/{report}",
                        "timeline": f"/checks/{sync}?window=15m",
                        "check-form": f"/checks/{sync}/edit",
                        "channels": "/channels",
                    }
                    for name, path in shots.items():
                        page.goto(f"{server.base}{path}")
                        if name == "check-form":
                            expect(page.locator("#schedule-preview ol.next li")).to_have_count(5)
                            if device == "phone":
                                page.evaluate("document.getElementById('schedule').scrollIntoView()")
                        out = args.out / f"{name}-{device}.png"
                        if name == "timeline":
                            page.locator("#timeline-h").scroll_into_view_if_needed()
                            page.evaluate("document.getElementById('timeline-h').scrollIntoView()")
                        # desktop: the whole page; phone: the first screen (what is above the fold)
                        page.screenshot(path=str(out), full_page=device == "desktop" and name != "timeline")
                        written.append(out)
                    page.close()
                browser.close()
    for out in written:
        print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
