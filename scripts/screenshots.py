"""Regenerate the dashboard screenshots in docs/screenshots/ (issue 9).

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

from playwright.sync_api import sync_playwright  # noqa: E402

from monitor.domain.clock import FrozenClock  # noqa: E402
from monitor.settings import Settings  # noqa: E402
from tests.support import dashboard as scenario  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite+aiosqlite:///{folder}/monitor.db"
        scenario.prepare(url)
        settings = Settings(database_url=url, allow_private_targets=True)
        clock = FrozenClock(scenario.START)
        with scenario.ServerThread(scenario.make_app(settings, clock)) as server:
            checks = scenario.seed(server.base, clock, settings)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1400, "height": 600}, device_scale_factor=1)
                page.goto(f"{server.base}/login")
                page.get_by_label("Email").fill(scenario.EMAIL)
                page.get_by_label("Password").fill(scenario.PASSWORD)
                page.get_by_role("button", name="Log in").click()
                page.wait_for_url(f"{server.base}/")
                page.screenshot(path=str(args.out / "checks.png"), full_page=True)
                page.goto(f"{server.base}/checks/{checks['billing-sync']['uuid']}")
                bottom = page.locator("table.ticks").bounding_box()
                assert bottom is not None
                page.set_viewport_size({"width": 1400, "height": int(bottom["y"] + bottom["height"] + 20)})
                page.screenshot(path=str(args.out / "timeline.png"))
                browser.close()
    for name in ("checks.png", "timeline.png"):
        print(args.out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
