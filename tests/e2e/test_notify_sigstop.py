"""A stalled notifier does not re-deliver (DESIGN §6 "Notifier").

Real processes on a throwaway PostgreSQL database: notifier A claims a notification and is
SIGSTOPped before sending (``tests.support.delayed_notifier``, ``monitor notify`` with a
pre-send delay, holds it in that gap long enough for the test to see the claim). Its claim
(2 × notify timeout + 5 s) expires; notifier B takes the row over and delivers it. A is resumed
with SIGCONT: it must find its claim gone and send nothing. Exactly one request reaches the
receiver.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from monitor.domain.clock import SystemClock
from monitor.domain.messages import AlertFacts
from monitor.services import channels as channel_service
from monitor.services import checks as check_service
from monitor.services import projects
from monitor.services.reminders import insert_alert
from monitor.storage import tables as t
from monitor.storage.engine import make_engine, migrate
from tests.support.process import MonitorProcess, checkout_env, throwaway_postgres, wait_until
from tests.support.receivers import HttpReceiver

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


async def _seed(database_url: str, receiver_url: str) -> None:
    engine = make_engine(database_url)
    try:
        await migrate(engine)
        now = SystemClock().now()
        async with engine.begin() as conn:
            project = await projects.create_project(conn, "sigstop", now)
            channel = await channel_service.create_channel(conn, project["id"], {"url": receiver_url}, now)
            check_id, _ = await check_service.create_or_upsert(
                conn, project["id"], {"name": "nightly", "channels": channel}, now, shards=16
            )
            uuid = (await conn.execute(select(t.checks.c.uuid).where(t.checks.c.id == check_id))).scalar_one()
            facts = AlertFacts(
                kind="missed",
                check_name="nightly",
                check_uuid=uuid,
                slug=None,
                tz="UTC",
                status="down",
                scheduled=now,
                check_url=f"http://127.0.0.1/checks/{uuid}",
            )
            await insert_alert(
                conn,
                project_id=project["id"],
                check_id=check_id,
                key="missed:sigstop",
                facts=facts,
                now=now,
                channels=[channel],
            )
    finally:
        await engine.dispose()


async def _row(database_url: str) -> dict[str, object]:
    engine = make_engine(database_url)
    try:
        async with engine.connect() as conn:
            row = (await conn.execute(select(t.notifications))).mappings().one()
            return dict(row)
    finally:
        await engine.dispose()


def test_sigstopped_notifier_past_its_claim_does_not_deliver_again(tmp_path: Path) -> None:
    with throwaway_postgres("monitor_sigstop") as database_url, HttpReceiver() as receiver:
        asyncio.run(_seed(database_url, receiver.url))
        common = {
            "MONITOR_DATABASE_URL": database_url,
            "MONITOR_ALLOW_PRIVATE_TARGETS": "1",
            "MONITOR_NOTIFY_TIMEOUT": "0.5",  # claims last 2 x 0.5 + 5 = 6 s
        }
        argv = [sys.executable, "-m", "monitor", "notify"]
        a = MonitorProcess(
            [sys.executable, "-m", "tests.support.delayed_notifier", "5"],
            env=checkout_env(**common),
            cwd=tmp_path,
            logs=tmp_path,
            name="notifier-a",
        )
        b = MonitorProcess(argv, env=checkout_env(**common), cwd=tmp_path, logs=tmp_path, name="notifier-b")
        try:
            a.start()
            claim = wait_until(
                lambda: (r := asyncio.run(_row(database_url)))["claim_token"] and r,
                timeout=20,
                interval=0.05,
                what=f"notifier A to claim the notification\n{a.describe()}",
            )
            assert a.proc is not None
            a.proc.send_signal(signal.SIGSTOP)  # stalled inside the claim → send gap
            b.start()
            receiver.wait_for_requests(1, timeout=20)  # B, once A's claim has expired
            claimed_until = claim["claimed_until"]
            assert isinstance(claimed_until, datetime)
            assert datetime.now(UTC) >= claimed_until, "B must wait for A's claim to expire"
            row = wait_until(
                lambda: (r := asyncio.run(_row(database_url)))["status"] == "sent" and r,
                timeout=10,
                what="B to record the delivery",
            )
            assert row["claim_token"] is None and row["attempts"] == 1
            a.proc.send_signal(signal.SIGCONT)
            deadline = time.monotonic() + 15  # A sleeps out its pre-send delay, then re-checks
            while "claim lost" not in a.stderr and len(receiver.requests) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(0.5)
            assert len(receiver.requests) == 1, (claim, a.describe(), b.describe())
            assert "claim lost" in a.stderr, a.describe()
            assert asyncio.run(_row(database_url))["attempts"] == 1
        finally:
            for process in (a, b):
                if process.proc is not None and process.proc.poll() is None:
                    process.proc.send_signal(signal.SIGCONT)
                process.close()
