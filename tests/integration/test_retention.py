"""Retention: the newest pings per check are kept, never one still needed; storage stays flat."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from litestar.testing import AsyncTestClient
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.app import create_app
from monitor.domain.clock import FrozenClock
from monitor.services import projects
from monitor.services.evaluator import evaluate_due
from monitor.services.retention import Retention
from monitor.settings import Settings
from monitor.storage import tables as t
from tests.conftest import API_KEY, Api
from tests.support.app import create_check, list_of


async def _count(api: Api, table: object) -> int:
    async with api.engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(table))).scalar() or 0)  # type: ignore[arg-type]


async def test_retention_keeps_the_newest_pings_of_each_check(api: Api) -> None:
    settings = api.settings.replace(ping_retention=5)
    checks = [await create_check(api, name=f"job-{i}", timeout=60, grace=10, channels="") for i in range(3)]
    for _ in range(12):
        for check in checks:
            assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200
        api.clock.advance(60)
    await Retention(api.engine, settings).pass_(api.clock.now())
    for check in checks:
        pings = await list_of(api, check["uuid"], "pings")
        assert [p["n"] for p in pings] == [12, 11, 10, 9, 8]
    assert await _count(api, t.pings) == 15


async def test_keyed_pings_are_pruned_and_their_keys_still_recognise_a_repeat_for_7_days(api: Api) -> None:
    # a client that sends a fresh Idempotency-Key with every ping (the bundled Python client
    # does) kept 7 days of pings per check whatever MONITOR_PING_RETENTION said
    settings = api.settings.replace(ping_retention=3)
    check = await create_check(api, name="keyed", timeout=60, grace=10, channels="")
    url = f"/ping/{check['uuid']}/log"
    for i in range(10):
        answer = await api.client.get(url, headers={"Idempotency-Key": f"key-{i}"})
        assert answer.status_code == 200
        api.clock.advance(60)
    await Retention(api.engine, settings).pass_(api.clock.now())
    assert [p["n"] for p in await list_of(api, check["uuid"], "pings")] == [10, 9, 8]
    assert await _count(api, t.ping_keys) == 7
    # a repeat of a pruned ping is still recognised: nothing stored, the first answer
    repeat = await api.client.get(url, headers={"Idempotency-Key": "key-0"})
    assert (repeat.status_code, repeat.text) == (200, "OK")
    assert [p["n"] for p in await list_of(api, check["uuid"], "pings")] == [10, 9, 8]
    # the same key for another kind is another ping (the scope is check and kind)
    other_kind = await api.client.get(f"/ping/{check['uuid']}/start", headers={"Idempotency-Key": "key-0"})
    assert other_kind.status_code == 200
    assert len(await list_of(api, check["uuid"], "pings")) == 4
    # after 7 days the keys are forgotten, and a repeat is a new ping
    api.clock.advance(7 * 86_400)
    await Retention(api.engine, settings).pass_(api.clock.now())
    assert await _count(api, t.ping_keys) == 0
    late = await api.client.get(url, headers={"Idempotency-Key": "key-1"})
    assert late.status_code == 200
    assert (await list_of(api, check["uuid"], "pings"))[0]["n"] == 12


async def test_retention_keeps_the_pings_of_a_run_in_progress(api: Api) -> None:
    settings = api.settings.replace(ping_retention=2)
    check = await create_check(api, name="long", timeout=3600, grace=60, max_runtime=7200, channels="")
    rid = "5f0c6a4e-6f0e-4a4e-9a55-0b1f0c2e9d11"
    assert (await api.client.get(f"/ping/{check['uuid']}/start?rid={rid}")).status_code == 200
    for _ in range(6):
        api.clock.advance(30)
        assert (await api.client.get(f"/ping/{check['uuid']}/log")).status_code == 200
    await Retention(api.engine, settings).pass_(api.clock.now())
    kept = [p["n"] for p in await list_of(api, check["uuid"], "pings")]
    assert kept == [7, 6, 1]  # the newest two, and the start of the run still going
    api.clock.advance(30)
    assert (await api.client.get(f"/ping/{check['uuid']}?rid={rid}")).status_code == 200  # finishes
    await Retention(api.engine, settings).pass_(api.clock.now())
    assert [p["n"] for p in await list_of(api, check["uuid"], "pings")] == [8, 7]
    [run] = [r for r in await list_of(api, check["uuid"], "runs") if r["rid"] == rid]
    assert run["outcome"] == "on_time"


async def test_retention_keeps_run_pings_of_ticks_still_to_be_judged(api: Api) -> None:
    settings = api.settings.replace(ping_retention=1)
    api.clock.set(datetime(2026, 7, 18, 3, 0, 5, tzinfo=UTC))
    check = await create_check(
        api, name="daily", schedule="0 3 * * *", grace=600, early_tolerance=60, channels=""
    )
    assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200  # today's run
    # tomorrow's run, 30 s early and naming its tick; then log lines
    api.clock.set(datetime(2026, 7, 19, 2, 59, 30, tzinfo=UTC))
    answer = await api.client.get(f"/ping/{check['uuid']}?scheduled=2026-07-19T03:00:00Z")
    assert answer.status_code == 200, answer.text
    for _ in range(3):
        api.clock.advance(5)
        assert (await api.client.get(f"/ping/{check['uuid']}/log")).status_code == 200
    assert [p["scheduled"] for p in await list_of(api, check["uuid"], "pings")][3] == "2026-07-19T03:00:00Z"
    await Retention(api.engine, settings).pass_(api.clock.now())
    # the newest, and the run ping of the tick decisions still look at (log lines never
    # satisfy a tick: they may go; yesterday's run is judged)
    assert [p["n"] for p in await list_of(api, check["uuid"], "pings")] == [5, 2]
    # once the evaluator has judged a later tick, it may go too
    api.clock.set(datetime(2026, 7, 20, 3, 11, tzinfo=UTC))
    await evaluate_due(api.engine, api.clock.now(), settings=settings)
    await Retention(api.engine, settings).pass_(api.clock.now())
    assert [p["n"] for p in await list_of(api, check["uuid"], "pings")] == [5]


async def test_storage_stays_flat_under_a_long_stream(api: Api) -> None:
    settings = api.settings.replace(
        ping_retention=20, history_retention=3600.0, ping_body_retention=600.0, notify_rate_limit=1000
    )
    checks = [await create_check(api, name=f"job-{i}", timeout=60, grace=10, channels="") for i in range(4)]
    retention = Retention(api.engine, settings)
    sizes = []
    for minute in range(240):  # four hours: a ping a minute per check, a failure every 10th
        for check in checks:
            kind = "/fail" if minute % 10 == 0 else ""
            answer = await api.client.post(f"/ping/{check['uuid']}{kind}", content=b"output " * 20)
            assert answer.status_code == 200
        api.clock.advance(60)
        if minute % 30 == 29:
            await retention.pass_(api.clock.now())
            sizes.append(
                {
                    "pings": await _count(api, t.pings),
                    "runs": await _count(api, t.runs),
                    "alerts": await _count(api, t.alerts),
                    "flips": await _count(api, t.flips),
                }
            )
    assert all(size["pings"] <= 4 * 20 for size in sizes), sizes
    # history is kept an hour (plus the newest few per check): after the first hours, flat
    late = sizes[3:]
    for kind in ("runs", "alerts", "flips"):
        assert max(s[kind] for s in late) - min(s[kind] for s in late) <= 4 * 2, (kind, sizes)
        assert max(s[kind] for s in late) <= 4 * 90, (kind, sizes)
    async with api.engine.connect() as conn:
        old_bodies = (
            await conn.execute(
                select(func.count())
                .select_from(t.pings)
                .where(t.pings.c.body.is_not(None))
                .where(t.pings.c.received_at < api.clock.now() - timedelta(seconds=660))
            )
        ).scalar()
    assert old_bodies == 0


async def test_the_serving_process_prunes_in_the_background(
    engine: AsyncEngine, clock: FrozenClock, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory(ping_retention=3, retention_interval=0.05)
    async with engine.begin() as conn:
        await projects.create_project(conn, "test", clock.now(), api_key=API_KEY)
    app = create_app(settings, clock=clock, evaluator=True, notify=False, liveness=False)
    async with AsyncTestClient(app) as client:
        headers = {"X-Api-Key": API_KEY}
        made = await client.post("/api/v3/checks/", json={"name": "chatty", "channels": ""}, headers=headers)
        uuid = made.json()["uuid"]
        for _ in range(10):
            assert (await client.get(f"/ping/{uuid}")).status_code == 200
            clock.advance(1)
        deadline = time.monotonic() + 10
        while True:
            pings = (await client.get(f"/api/v3/checks/{uuid}/pings/", headers=headers)).json()["pings"]
            if [p["n"] for p in pings] == [10, 9, 8] or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        assert [p["n"] for p in pings] == [10, 9, 8]
