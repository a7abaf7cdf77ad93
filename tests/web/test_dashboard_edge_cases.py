"""Dashboard edge cases, each pinned: a dense check's bounded timeline, ``?around=`` at
datetime's limits, HTML errors on pages, the exact /metrics content type, login throttling of
unknown emails, fixed channel messages, ``no-store`` pages, zone-local ticks, ``HEAD /``.

In process on SQLite and PostgreSQL (clock injected); the ``monitor serve`` start warning and
``HEAD /`` through uvicorn are checked on one real process.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import exposition
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.domain.checks import PingKind
from monitor.domain.clock import FrozenClock
from monitor.http.metrics import PUBLIC_CHECK_METRICS_WARNING, PUBLIC_METRICS_WARNING
from monitor.services import dashboard, users
from monitor.services.ingest import PingRequest, ingest_pings
from monitor.settings import Settings
from monitor.storage import tables as t
from tests.conftest import Api
from tests.support.app import create_check, open_api
from tests.support.process import CURL, REPO_ROOT, MonitorProcess, checkout_env
from tests.support.receivers import HttpReceiver, free_port
from tests.web.test_dashboard import START, csrf_of, log_in, make_user

TICK_ROW = re.compile(r'<tr id="tick-([0-9T:\-]+Z)"')


async def dense_check(api: Api, pings: int) -> str:
    """A ``* * * * * *`` check with one success ping a second from START, clock after them."""
    check = await create_check(api, name="dense", schedule="* * * * * *", dialect="seconds", grace=5)
    for first in range(0, pings, 500):
        batch = [
            PingRequest(
                kind=PingKind.SUCCESS,
                received=START + timedelta(seconds=i, milliseconds=200),
                uuid=check["uuid"],
            )
            for i in range(first, min(pings, first + 500))
        ]
        await ingest_pings(api.engine, batch, settings=api.settings)
    api.clock.set(START + timedelta(seconds=pings + 1))
    await make_user(api)
    await log_in(api)
    return str(check["uuid"])


def stamp(seconds: int) -> str:
    return (START + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_dense_check_timeline_is_capped_and_says_so(api: Api) -> None:
    uuid = await dense_check(api, 1200)
    page = await api.client.get(f"/checks/{uuid}?window=1h")
    assert page.status_code == 200
    rows = TICK_ROW.findall(page.text)
    assert len(rows) == dashboard.MAX_WINDOW_TICKS
    assert stamp(1199) in rows and stamp(1199 - dashboard.MAX_WINDOW_TICKS) not in rows
    assert 'id="truncated"' in page.text and "narrow the window" in page.text
    # the window's margin after now adds a few upcoming ticks, not hundreds
    assert (
        len(re.findall(r'<tr id="tick-[^"]+" data-outcome="upcoming"', page.text)) == dashboard.UPCOMING_TICKS
    )
    assert len(page.content) < 1_000_000
    # an old tick (a notification's link): the shown ticks surround it, bounded on both sides
    old = await api.client.get(f"/checks/{uuid}?window=1h&around={stamp(100)}")
    rows = TICK_ROW.findall(old.text)
    assert len(rows) <= dashboard.MAX_WINDOW_TICKS
    assert stamp(100) in rows and stamp(1199) not in rows
    # nothing is drawn from before the check's first run: no "no run" ticks before it existed
    assert min(rows) == stamp(0)
    narrow = await api.client.get(f"/checks/{uuid}?window=1h&around={stamp(1150)}")
    assert stamp(1150) in TICK_ROW.findall(narrow.text)


async def test_around_at_the_limits_of_datetime_answers_the_default_window(api: Api) -> None:
    check = await create_check(api, name="nightly", schedule="0 3 * * *", tz="Europe/Berlin")
    await make_user(api)
    await log_in(api)
    for around in (
        "9999-12-31T23:59:59Z",
        "9999-12-30T00:00:00Z",
        "0001-01-01T00:00:00Z",
        "0001-01-01T00:00:00+01:00",
        "not-a-date",
    ):
        page = await api.client.get(f"/checks/{check['uuid']}?window=7d&around={around}")
        assert page.status_code == 200, (around, page.text[:300])
        assert page.headers["content-type"].startswith("text/html")
        assert "showing the default window" in page.text


async def test_pages_answer_errors_as_html(api: Api) -> None:
    check = await create_check(api, name="broken", schedule="0 3 * * *")
    await make_user(api)
    await log_in(api)
    missing = await api.client.get("/checks/00000000-0000-4000-8000-000000000000")
    assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")
    where = t.checks.c.uuid == check["uuid"]
    async with api.engine.connect() as conn:
        check_id = (await conn.execute(select(t.checks.c.id).where(where))).scalar_one()
    async with api.engine.begin() as conn:  # a domain error under a page: an HTML 400
        await conn.execute(update(t.checks).where(where).values(dialect="bogus"))
    bad = await api.client.get(f"/checks/{check['uuid']}")
    assert bad.status_code == 400 and bad.headers["content-type"].startswith("text/html")
    async with api.engine.begin() as conn:  # a mark no version wrote: an unexpected error
        await conn.execute(update(t.checks).where(where).values(dialect="unix"))
        await conn.execute(
            t.tick_marks.insert().values(
                check_id=int(check_id), scheduled=api.clock.now() - timedelta(hours=1), outcome="bogus"
            )
        )
    broken = await api.client.get(f"/checks/{check['uuid']}")
    assert broken.status_code == 500
    assert broken.headers["content-type"].startswith("text/html")
    assert "internal error" in broken.text and '{"error"' not in broken.text


SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
"""For tests of in-memory or HTTP-level behaviour, where PostgreSQL adds nothing but time."""


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("", "text/plain; version=0.0.4; charset=utf-8"),
        ("text/plain", "text/plain; version=0.0.4; charset=utf-8"),
        ("application/openmetrics-text", "application/openmetrics-text; version=1.0.0; charset=utf-8"),
        (
            "application/openmetrics-text; version=1.0.0",
            "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores",
        ),
    ],
)
async def test_metrics_content_type_is_prometheus_clients_exactly(
    api: Api, accept: str, expected: str
) -> None:
    answer = await api.client.get("/metrics", headers={"Accept": accept} if accept else {})
    assert answer.status_code == 200
    assert expected == exposition.choose_encoder(accept)[1]
    assert answer.headers.get_list("content-type") == [expected]  # one header, one charset


@SQLITE_ONLY
async def test_unknown_emails_are_throttled_like_accounts(api: Api) -> None:
    await make_user(api)
    answers = {}
    for email in ("ops@example.com", "nobody@example.com"):
        for _ in range(users.MAX_FAILED_LOGINS):
            assert (await log_in(api, email=email, password="wrong password!")).status_code == 400
        locked = await log_in(api, email=email, password="wrong password!")
        answers[email] = (locked.status_code, locked.headers.get("retry-after"), "too many" in locked.text)
    assert answers["ops@example.com"] == answers["nobody@example.com"] == (429, "31", True)
    api.clock.advance((users.LOCKOUT + timedelta(seconds=1)).total_seconds())
    for email in ("ops@example.com", "NOBODY@example.com "):  # a failure after the lock: locked again
        assert (await log_in(api, email=email, password="wrong password!")).status_code == 400
        assert (await log_in(api, email=email, password="wrong password!")).status_code == 429


def test_login_throttle_forgets_the_oldest_unknown_emails() -> None:
    throttle = users.LoginThrottle(size=2)
    for email in ("a@x.io", "b@x.io", "c@x.io"):
        for _ in range(users.MAX_FAILED_LOGINS):
            throttle.fail(email, START)
    assert throttle.locked_until("a@x.io") is None
    assert throttle.locked_until(" C@X.IO") == START + users.LOCKOUT


async def test_channel_messages_come_from_the_server_not_the_url(api: Api) -> None:
    await make_user(api)
    await log_in(api)
    forged = await api.client.get("/channels?message=Your+account+is+suspended&ok=1")
    assert forged.status_code == 200 and "suspended" not in forged.text
    assert "Test notification" not in (await api.client.get("/channels?tested=x")).text
    page = await api.client.get("/channels")
    added = await api.client.post(
        "/channels",
        data={
            "csrf_token": csrf_of(page.text),
            "project": str(api.project["id"]),
            "name": "nowhere",
            "service": "apprise",
            "apprise_url": "json://127.0.0.1:9/",
        },
        follow_redirects=False,
    )
    assert added.status_code == 303 and added.headers["location"] == "/channels?added=1"
    listed = await api.client.get("/channels?added=1")
    assert "Channel added." in listed.text
    channel = re.search(r'data-channel="([^"]+)"', listed.text)
    assert channel is not None
    tested = await api.client.post(
        f"/channels/{channel.group(1)}/test",
        data={"csrf_token": csrf_of(listed.text)},
        follow_redirects=False,
    )
    location = tested.headers["location"]
    assert re.fullmatch(r"/channels\?tested=[A-Za-z0-9_\-]+", location), location
    result = await api.client.get(location)
    assert "Test notification to nowhere: failed" in result.text
    again = await api.client.get(location)  # one-time: a reload shows no stale message
    assert "Test notification to" not in again.text


async def test_authenticated_pages_are_not_cached_and_ticks_show_the_checks_zone(api: Api) -> None:
    check = await create_check(api, name="berlin", schedule="0 3 * * *", tz="Europe/Berlin")
    api.clock.set(START + timedelta(days=1))
    await api.client.get(f"/ping/{check['uuid']}")
    await make_user(api)
    await log_in(api)
    for path in ("/", f"/checks/{check['uuid']}", "/cron", "/channels"):
        page = await api.client.get(path)
        assert page.status_code == 200, path
        assert page.headers["cache-control"] == "no-store", path
        assert '<link rel="icon" id="favicon"' in page.text
    page = await api.client.get(f"/checks/{check['uuid']}?window=7d")
    assert "Tick (Europe/Berlin)" in page.text and " CEST</td>" in page.text
    # the SVG is one image without links inside (the ticks table is the keyboard path)
    svg = page.text[page.text.index("<svg") : page.text.index("</svg>")]
    assert "<a " not in svg and 'class="tick"' in svg
    head = await api.client.head("/")
    assert head.status_code == 200


def test_serve_warns_when_metrics_are_public_and_answers_head(tmp_path: Path) -> None:
    logs = tmp_path
    port = free_port()
    env = checkout_env(MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{logs}/serve.db")
    with MonitorProcess.serve(port, env=env, cwd=REPO_ROOT, logs=logs, name="serve", dev=False) as proc:
        proc.wait_healthy()
        assert PUBLIC_METRICS_WARNING in proc.stderr
        assert "uuid" not in PUBLIC_METRICS_WARNING  # no uuid is shown without the per-check series
        for path, status in (("/login", b"200"), ("/", b"303")):  # HEAD answers like GET
            head = subprocess.run(
                [CURL, "-sS", "-I", "-o", "/dev/null", "-w", "%{http_code}", f"{proc.base}{path}"],
                capture_output=True,
                timeout=10,
                check=False,
            )
            assert head.stdout == status, (path, head)
        metrics = subprocess.run(
            [CURL, "-sS", "-D", "-", "-o", "/dev/null", f"{proc.base}/metrics"],
            capture_output=True,
            timeout=10,
            check=False,
        )
        assert "content-type: text/plain; version=0.0.4; charset=utf-8\r\n" in metrics.stdout.decode().lower()
        assert proc.terminate() == 0
    per_check = {**env, "MONITOR_METRICS_PER_CHECK": "1"}
    with MonitorProcess.serve(
        free_port(), env=per_check, cwd=REPO_ROOT, logs=logs, name="serve2", dev=False
    ) as again:
        again.wait_healthy()
        assert PUBLIC_CHECK_METRICS_WARNING in again.stderr and PUBLIC_METRICS_WARNING not in again.stderr
        assert again.terminate() == 0


async def test_a_test_send_to_a_target_that_never_answers_says_it_timed_out(
    engine: AsyncEngine, clock: FrozenClock, settings_factory: Callable[..., Settings]
) -> None:
    # a 1 s send timeout (the suite's is 5 s): the test waits it out in full
    async with open_api(engine, clock, settings_factory(notify_timeout=1.0)) as api:
        await make_user(api)
        await log_in(api)
        with HttpReceiver(hang_s=30) as silent:  # takes the connection, never answers
            created = await api.client.post(
                "/api/v3/channels/", json={"name": "silent", "url": silent.url}, headers=api.headers
            )
            channel = created.json()["id"]
            page = await api.client.get("/channels")
            tested = await api.client.post(
                f"/channels/{channel}/test", data={"csrf_token": csrf_of(page.text)}, follow_redirects=True
            )
            silent.hang_s = 0
    said = re.search(r'id="channel-message">([^<]*)<', tested.text)
    assert said is not None, tested.text[:500]
    # it connected: the news is that the target did not answer in time, not "cannot connect"
    assert re.fullmatch(r"Test notification to silent: failed: timed out after [0-9.]+s", said.group(1)), said


async def test_a_form_sent_after_the_session_ended_says_nothing_was_saved_and_leads_back(api: Api) -> None:
    await make_user(api)
    await log_in(api)
    form = await api.client.get("/checks/new")
    token = csrf_of(form.text)
    await api.client.post("/logout", data={"csrf_token": token})  # another tab logged out
    sent = await api.client.post(
        "/checks/new",
        data={"csrf_token": token, "name": "typed", "schedule": "0 4 * * *"},
        headers={"Referer": f"{api.client.base_url}/checks/new?from=list"},
        follow_redirects=False,
    )
    assert sent.status_code == 303
    assert sent.headers["location"] == "/login?next=%2Fchecks%2Fnew%3Ffrom%3Dlist&ended=1"
    page = await api.client.get(sent.headers["location"])
    assert "nothing was saved" in page.text
    assert 'name="next" value="/checks/new?from=list"' in page.text
    # another site's page is never where the login leads
    foreign = await api.client.post(
        "/checks/new",
        data={"name": "x"},
        headers={"Referer": "https://evil.example/checks/new"},
        follow_redirects=False,
    )
    assert foreign.headers["location"] == "/login?next=%2F&ended=1"
    plain = await api.client.get("/login?next=%2Fchecks%2Fnew")
    assert "nothing was saved" not in plain.text
