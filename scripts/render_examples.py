"""Write docs/notifications/examples.md: one real message of each kind, as the receivers got it.

Drives the real path — the management and ping APIs (the Litestar app in process), the
evaluator, the reminder sweep and the dispatcher with the real ``AppriseNotifier`` — against a
throwaway SQLite file, with an injected clock so that every scenario takes a moment rather than
days. Two real local receivers are the channels: an HTTP server behind ``json://`` and an
aiosmtpd SMTP server behind ``mailto://`` (the ones the tests use, ``tests/support/receivers``).
Whatever they received is written verbatim (the JSON body pretty-printed; the e-mail's
Subject, From, To and plain-text part).

Run from the repository root (needs the test extras: aiosmtpd)::

    .venv/bin/python scripts/render_examples.py [--out docs/notifications/examples.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from litestar.testing import AsyncTestClient  # noqa: E402

from monitor.app import create_app  # noqa: E402
from monitor.domain.clock import FrozenClock  # noqa: E402
from monitor.notify.apprise import AppriseNotifier  # noqa: E402
from monitor.services import projects, reminders  # noqa: E402
from monitor.services.dispatch import deliver_due  # noqa: E402
from monitor.services.evaluator import evaluate_due  # noqa: E402
from monitor.settings import Settings  # noqa: E402
from monitor.storage.engine import make_engine, migrate  # noqa: E402
from tests.support.receivers import HttpReceiver, SmtpReceiver  # noqa: E402

API_KEY = "examples-api-key-0123456789"
BASE_URL = "https://monitor.example.com"
KINDS = (
    "missed",
    "late",
    "failed",
    "timeout",
    "overlap",
    "duplicate",
    "recovered",
    "nag",
    "escalation",
    "maintenance",
)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


class Driver:
    """The app, the clock, the receivers, and what each delivery round brought in."""

    def __init__(self, client: AsyncTestClient[Any], clock: FrozenClock, settings: Settings, engine: Any):
        self.client, self.clock, self.settings, self.engine = client, clock, settings, engine
        self.notifier = AppriseNotifier(allow_private_targets=True)
        self.headers = {"X-Api-Key": API_KEY}

    async def api(self, method: str, path: str, body: Any = None) -> Any:
        response = await self.client.request(method, f"/api/v3{path}", json=body, headers=self.headers)
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text}")
        return response.json()

    async def ping(self, uuid: str, suffix: str = "", *, body: str | None = None, **query: str) -> None:
        response = await self.client.post(
            f"/ping/{uuid}{suffix}", params=query, content=(body or "").encode()
        )
        if response.status_code != 200:
            raise RuntimeError(f"ping {suffix}: {response.status_code} {response.text}")

    async def to(self, instant: str) -> None:
        self.clock.set(at(instant))
        await evaluate_due(self.engine, self.clock.now(), settings=self.settings)
        await reminders.raise_due(self.engine, self.clock.now(), settings=self.settings)
        while await deliver_due(self.engine, self.notifier, self.clock.now(), settings=self.settings):
            pass


async def scenario(d: Driver) -> None:
    async def check(**fields: Any) -> str:
        created = await d.api("POST", "/checks/", {"channels": "*", **fields})
        return str(created["uuid"])

    # missed, nag, escalation, late: a nightly backup at 03:00 Berlin time (01:00 UTC), reminders
    # every hour, escalated after 90 minutes down.
    backup = await check(
        name="nightly-backup",
        slug="nightly-backup",
        schedule="0 3 * * *",
        tz="Europe/Berlin",
        grace=600,
        max_runtime=3600,
        nag_interval=3600,
        escalate_after=5400,
        escalate_to="webhook,on call",
    )
    await d.to("2026-07-18T01:00:20Z")
    await d.ping(backup, scheduled="2026-07-18T01:00:00Z")
    await d.to("2026-07-19T01:10:01Z")  # missed
    await d.to("2026-07-19T02:10:01Z")  # reminder
    await d.to("2026-07-19T02:40:01Z")  # escalation
    await d.to("2026-07-19T02:50:00Z")
    await d.ping(backup, scheduled="2026-07-19T01:00:00Z")  # late: the recovery notice
    await d.to("2026-07-19T02:50:01Z")
    await d.api("POST", f"/checks/{backup}/pause")

    # failed, recovered: billing at 04:30 UTC with a run id and the job's output.
    billing = await check(name="billing", schedule="30 4 * * *", grace=300, max_runtime=1800)
    await d.to("2026-07-20T04:30:05Z")
    await d.ping(billing, scheduled="2026-07-20T04:30:00Z")
    rid = "3f2a9c1e-5b7d-4e0a-9c61-2d8f0b4a7e15"
    await d.to("2026-07-21T04:30:05Z")
    await d.ping(billing, "/start", rid=rid)
    await d.to("2026-07-21T04:32:41Z")
    log = "charging 1204 customers\n" + "".join(f"customer {i}: ok\n" for i in range(40))
    log += "customer 41: stripe.error.APIConnectionError: Could not connect to Stripe\nexit 2\n"
    await d.ping(billing, "/2", rid=rid, body=log)
    await d.to("2026-07-21T04:32:42Z")
    await d.to("2026-07-22T04:30:05Z")
    await d.ping(billing, "/start", rid="9b1d2e3f-0000-4000-8000-00000000b111")
    await d.to("2026-07-22T04:31:15Z")
    await d.ping(billing, rid="9b1d2e3f-0000-4000-8000-00000000b111")
    await d.to("2026-07-22T04:31:16Z")
    await d.api("POST", f"/checks/{billing}/pause")

    # timeout: an export allowed 10 minutes that is still running after them.
    export = await check(name="report-export", schedule="0 6 * * *", grace=300, max_runtime=600)
    await d.to("2026-07-23T06:00:05Z")
    await d.ping(export, scheduled="2026-07-23T06:00:00Z")
    await d.to("2026-07-24T06:00:05Z")
    await d.ping(export, "/start", rid="5c0ffee0-0000-4000-8000-00000000e001")
    await d.to("2026-07-24T06:10:06Z")
    await d.api("POST", f"/checks/{export}/pause")

    # overlap: a quarter-hourly sync whose 12:00 run is still going at 12:15.
    sync = await check(name="sync", schedule="*/15 * * * *", grace=120, max_runtime=3600)
    await d.to("2026-07-25T12:00:05Z")
    await d.ping(sync, "/start", rid="aaaa0001-0000-4000-8000-000000000001", scheduled="2026-07-25T12:00:00Z")
    await d.to("2026-07-25T12:15:04Z")
    await d.ping(sync, "/start", rid="aaaa0002-0000-4000-8000-000000000002", scheduled="2026-07-25T12:15:00Z")
    await d.to("2026-07-25T12:15:05Z")
    await d.api("POST", f"/checks/{sync}/pause")

    # duplicate: the 09:00 invoice run reported twice (two replicas ran it).
    invoice = await check(name="invoice-run", schedule="0 9 * * *", grace=300, max_runtime=600)
    await d.to("2026-07-26T09:00:10Z")
    await d.ping(invoice, scheduled="2026-07-26T09:00:00Z")
    await d.to("2026-07-26T09:00:40Z")
    await d.ping(invoice, scheduled="2026-07-26T09:00:00Z")
    await d.to("2026-07-26T09:00:41Z")
    await d.api("POST", f"/checks/{invoice}/pause")

    # maintenance: the ETL's 02:00 run misses inside a database upgrade window.
    etl = await check(name="etl", schedule="0 2 * * *", grace=300, max_runtime=1800)
    await d.to("2026-07-27T02:00:05Z")
    await d.ping(etl, scheduled="2026-07-27T02:00:00Z")
    await d.api(
        "POST",
        "/maintenance/",
        {"name": "db upgrade", "check": etl, "start": "2026-07-28T01:45:00Z", "end": "2026-07-28T02:30:00Z"},
    )
    await d.to("2026-07-28T02:05:01Z")  # missed, held back
    await d.to("2026-07-28T02:30:00Z")  # the window ends: summary
    await d.api("POST", f"/checks/{etl}/pause")


def _email(mail: Any) -> str:
    return "\n".join(
        [
            f"Subject: {mail.subject}",
            f"From: {mail.message['From']}",
            f"To: {mail.message['To']}",
            "",
            mail.text.rstrip(),
        ]
    )


def render(json_requests: list[Any], mails: list[Any]) -> str:
    by_kind: dict[str, tuple[Any, Any]] = {}
    for request in json_requests:
        payload = request.json
        kind = payload.get("kind", "")
        mail = next((m for m in mails if m.subject == payload["title"]), None)
        if kind in KINDS and kind not in by_kind:
            by_kind[kind] = (payload, mail)
    missing = [k for k in KINDS if k not in by_kind]
    if missing:
        raise SystemExit(f"no message of kind {', '.join(missing)} arrived")
    out = [
        "# Notification examples",
        "",
        "One real message of each kind, exactly as the local receivers got it: the JSON body that",
        "Apprise POSTed to a `json://` channel (pretty-printed; the `kind`, `check_uuid`, `slug`,",
        "`scheduled`, `status`, `name` and `url` fields are top-level), and the e-mail an aiosmtpd",
        "server received through a `mailto://` channel (Subject, From, To and the plain-text body).",
        "Chat services (Slack, Discord, Telegram …) get the same text as Markdown.",
        "",
        "Generated by `scripts/render_examples.py` (the real API, evaluator, reminder sweep,",
        f"dispatcher and Apprise, with an injected clock and `MONITOR_BASE_URL={BASE_URL}`); do not",
        "edit by hand.",
        "",
    ]
    for kind in KINDS:
        payload, mail = by_kind[kind]
        out += [
            f"## {kind}",
            "",
            "`json://` receiver:",
            "",
            "```json",
            json.dumps(payload, indent=2, ensure_ascii=False),
        ]
        out += ["```", "", "SMTP receiver:", "", "```", _email(mail) if mail else "(no e-mail)", "```", ""]
    return "\n".join(out)


async def main() -> str:
    with tempfile.TemporaryDirectory() as tmp, HttpReceiver() as hook, SmtpReceiver() as smtp:
        settings = Settings(
            database_url=f"sqlite+aiosqlite:///{tmp}/examples.db",
            base_url=BASE_URL,
            allow_private_targets=True,
            notify_backoff=0.0,
            notify_timeout=5.0,
        )
        engine = make_engine(settings.database_url)
        await migrate(engine)
        clock = FrozenClock(at("2026-07-18T00:00:00Z"))
        async with engine.begin() as conn:
            await projects.create_project(conn, "examples", clock.now(), api_key=API_KEY)
        app = create_app(settings, clock=clock, evaluator=False, notify=False, liveness=False)
        async with AsyncTestClient(app) as client:
            driver = Driver(client, clock, settings, engine)
            await driver.api("POST", "/channels/", {"name": "webhook", "url": hook.url})
            await driver.api("POST", "/channels/", {"name": "on call", "url": smtp.url})
            await scenario(driver)
            await driver.notifier.aclose()
        await engine.dispose()
        await asyncio.sleep(0.3)
        return render(hook.requests, smtp.messages)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "notifications" / "examples.md")
    out = parser.parse_args().out
    text = asyncio.run(main())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out} ({len(text)} characters)")
