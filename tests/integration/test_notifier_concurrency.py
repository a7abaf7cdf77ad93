"""Concurrent deliveries: order per check and channel, one record per attempt, per-target limits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import func, select

from monitor.domain.checks import PingKind
from monitor.domain.clock import SystemClock
from monitor.notify import templates
from monitor.notify.apprise import AppriseNotifier
from monitor.services.ingest import PingRequest, ingest_pings
from monitor.settings import Settings
from monitor.storage import tables as t
from monitor.workers import notifier as notifier_worker
from monitor.workers.notifier import run_notifier
from tests.conftest import Api
from tests.support.receivers import HttpReceiver


async def _channel(api: Api, url: str) -> str:
    r = await api.client.post("/api/v3/channels/", json={"name": "hook", "url": url}, headers=api.headers)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _check(api: Api, channel: str, name: str = "job") -> str:
    r = await api.client.post(
        "/api/v3/checks/", json={"name": name, "timeout": 3600, "channels": channel}, headers=api.headers
    )
    assert r.status_code == 201, r.text
    return str(r.json()["uuid"])


async def _failed_checks(api: Api, channel: str, prefix: str, count: int, settings: Settings) -> list[str]:
    """``count`` checks on ``channel`` (named ``<prefix>-<i>``), each sent a fail ping: one
    alert each, queued to ``channel``."""
    uuids = [await _check(api, channel, name=f"{prefix}-{i}") for i in range(count)]
    now = SystemClock().now()
    await ingest_pings(
        api.engine, [PingRequest(kind=PingKind.FAIL, received=now, uuid=u) for u in uuids], settings=settings
    )
    return uuids


async def _settled(api: Api) -> bool:
    """No notification is open or claimed (every attempt so far is recorded)."""
    n = t.notifications.c
    async with api.engine.connect() as conn:
        busy = (
            await conn.execute(
                select(func.count()).where((n.status.in_(["pending", "held"])) | n.claim_token.is_not(None))
            )
        ).scalar()
    return busy == 0


async def _run_until(
    api: Api, settings: Settings, done: Callable[[], bool], within: float = 20.0, *, settle: bool = True
) -> None:
    async with AppriseNotifier(
        allow_private_targets=True, max_workers=settings.notify_concurrency
    ) as notifier:
        loop = asyncio.create_task(run_notifier(api.engine, notifier, settings, SystemClock()))
        try:
            deadline = time.monotonic() + within
            while not (done() and (not settle or await _settled(api))):
                assert time.monotonic() < deadline, "deliveries did not finish in time"
                assert not loop.done(), loop
                await asyncio.sleep(0.02)
        finally:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)


async def test_a_backlog_for_one_check_goes_out_without_waiting_a_poll_per_notice(
    api: Api, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    # each notice of a check and channel waits for the one before it to be recorded; once that
    # delivery ends, the next is claimed within the claim pacing window (0.1 s), not at the
    # notifier's next poll (1 s): 8 notices took 8 s
    receiver = make_http_receiver()
    channel = await _channel(api, receiver.url)
    uuid = await _check(api, channel)
    settings = api.settings.replace(notify_rate_limit=100, notify_concurrency=64)
    now = SystemClock().now()
    for i, kind in enumerate([PingKind.FAIL, PingKind.SUCCESS] * 4):  # every notice due by now
        await ingest_pings(
            api.engine,
            [PingRequest(kind=kind, received=now - timedelta(seconds=10 - i), uuid=uuid)],
            settings=settings,
        )
    began = time.monotonic()
    await _run_until(api, settings, lambda: len(receiver.requests) >= 8)
    elapsed = time.monotonic() - began
    assert len(receiver.requests) == 8
    assert elapsed < 5.0, elapsed  # one poll a notice: 7 s and more


async def test_a_burst_for_one_check_is_delivered_in_the_order_raised_through_retries(
    api: Api, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    # the channel answers 500 to its first three attempts: the first notice is retried while
    # the later ones are due; none may overtake it
    receiver = make_http_receiver(fail_first=3, fail_status=500)
    channel = await _channel(api, receiver.url)
    uuid = await _check(api, channel)
    settings = api.settings.replace(notify_backoff=0.3, notify_rate_limit=100, notify_concurrency=64)
    now = SystemClock().now()
    kinds = [PingKind.FAIL, PingKind.SUCCESS] * 4
    for i, kind in enumerate(kinds):
        await ingest_pings(
            api.engine,
            [PingRequest(kind=kind, received=now + timedelta(seconds=i), uuid=uuid)],
            settings=settings,
        )
    async with api.engine.connect() as conn:
        stored = await conn.execute(
            select(t.alerts.c.kind, t.alerts.c.title, t.alerts.c.message, t.alerts.c.facts).order_by(
                t.alerts.c.id
            )
        )
        raised = [
            (kind, templates.stored_text(title, message, facts)[0]) for kind, title, message, facts in stored
        ]
    assert [kind for kind, _ in raised] == ["failed", "recovered"] * 4

    def delivered() -> list[str]:
        return [r.json["title"] for r in receiver.requests if r.status == 200]

    await _run_until(api, settings, lambda: len(delivered()) >= len(raised))
    await asyncio.sleep(0.3)  # a doubled delivery would show by now
    assert delivered() == [title for _, title in raised]
    async with api.engine.connect() as conn:
        attempts = (await conn.execute(select(func.count()).select_from(t.notification_attempts))).scalar()
        statuses = (await conn.execute(select(t.notifications.c.status))).scalars().all()
    # each request the channel saw is recorded exactly once as an attempt
    assert attempts == len(receiver.requests) == len(raised) + 3
    assert set(statuses) == {"sent"}


async def test_concurrent_deliveries_for_many_checks_keep_each_checks_order(
    api: Api, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    receiver = make_http_receiver(fail_first=5, fail_status=500)
    channel = await _channel(api, receiver.url)
    uuids = [await _check(api, channel, name=f"job-{i}") for i in range(12)]
    settings = api.settings.replace(notify_backoff=0.05, notify_rate_limit=100, notify_per_host=64)
    now = SystemClock().now()
    for step, kind in enumerate([PingKind.FAIL, PingKind.SUCCESS, PingKind.FAIL]):
        await ingest_pings(
            api.engine,
            [PingRequest(kind=kind, received=now + timedelta(seconds=step), uuid=uuid) for uuid in uuids],
            settings=settings,
        )

    def delivered() -> list[dict[str, str]]:
        return [r.json for r in receiver.requests if r.status == 200]

    await _run_until(api, settings, lambda: len(delivered()) >= 3 * len(uuids))
    await asyncio.sleep(0.3)
    seen = delivered()
    assert len(seen) == 3 * len(uuids)
    for uuid in uuids:
        assert [p["kind"] for p in seen if p["check_uuid"] == uuid] == ["failed", "recovered", "failed"]
    async with api.engine.connect() as conn:
        attempts = (await conn.execute(select(func.count()).select_from(t.notification_attempts))).scalar()
    assert attempts == len(receiver.requests)


async def test_a_slow_target_holds_only_its_own_slots(
    api: Api, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    slow = make_http_receiver(hang_s=3)
    healthy = make_http_receiver()
    stuck = await _channel(api, slow.url)
    good = await _channel(api, healthy.url)
    # more alerts for the slow target than the process has delivery slots
    settings = api.settings.replace(notify_timeout=5.0, notify_concurrency=16, notify_per_host=4)
    await _failed_checks(api, stuck, "slow", 40, settings)
    fast_checks = await _failed_checks(api, good, "fast", 10, settings)
    started = time.monotonic()
    try:
        await _run_until(
            api, settings, lambda: len(healthy.requests) >= len(fast_checks), within=10, settle=False
        )
        assert time.monotonic() - started < 2.5  # before the first slow answer
        assert len(slow.requests) <= settings.notify_per_host
    finally:
        slow.hang_s = 0


async def test_several_targets_that_never_answer_cannot_hold_every_slot(
    api: Api, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    # three hung hosts with more alerts than the process has slots, raised before the healthy
    # target's: at the per-host limit they would hold all 16 slots until their sends end (8 s)
    hung = [make_http_receiver(hang_s=8) for _ in range(3)]
    healthy = make_http_receiver()
    settings = api.settings.replace(notify_timeout=20.0, notify_concurrency=16, notify_per_host=8)
    for n, receiver in enumerate(hung):
        await _failed_checks(api, await _channel(api, receiver.url), f"hung-{n}", 12, settings)
    fast_checks = await _failed_checks(api, await _channel(api, healthy.url), "fast", 30, settings)
    started = time.monotonic()
    try:
        await _run_until(
            api, settings, lambda: len(healthy.requests) >= len(fast_checks), within=20, settle=False
        )
        assert time.monotonic() - started < 6  # well before the first hung send ends
        assert all(len(receiver.requests) <= notifier_worker.START_ALLOWANCE for receiver in hung)
    finally:
        for receiver in hung:
            receiver.hang_s = 0


def test_a_targets_allowance_opens_with_a_send_in_time_and_shrinks_with_slow_ones() -> None:
    slots = notifier_worker._Slots(per_host=32, slow_after=5.0)
    assert slots.allowance("a:1") == notifier_worker.START_ALLOWANCE
    slots.take("a:1")
    slots.give("a:1", took=0.01)
    assert slots.allowance("a:1") == 32
    for expected in (16, 8, 4, 2, 1, 1):
        slots.take("a:1")
        slots.give("a:1", took=5.0)
        assert slots.allowance("a:1") == expected
    slots.take("a:1")
    slots.give("a:1")  # not sent (its claim was lost): says nothing of the target
    assert slots.allowance("a:1") == 1 and slots.count == 0 and slots.busy["a:1"] == 0
    slots.take("a:1")
    slots.give("a:1", took=4.9)
    assert slots.allowance("a:1") == 32
    assert notifier_worker._Slots(per_host=2, slow_after=5.0).allowance("b") == 2


async def test_a_notifier_stopped_mid_send_lets_the_send_end_and_records_it_once(
    api: Api, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    # SIGTERM (a cancelled loop) while a send is on the wire: the send ends and is recorded as
    # sent, so no notifier sends it again once its claim would have lapsed
    receiver = make_http_receiver(hang_s=0.4)
    channel = await _channel(api, receiver.url)
    uuid = await _check(api, channel)
    settings = api.settings.replace(notify_backoff=0.3)
    failed = PingRequest(kind=PingKind.FAIL, received=SystemClock().now(), uuid=uuid)
    await ingest_pings(api.engine, [failed], settings=settings)
    async with AppriseNotifier(allow_private_targets=True, max_workers=4) as notifier:
        loop = asyncio.create_task(run_notifier(api.engine, notifier, settings, SystemClock()))
        deadline = time.monotonic() + 20
        while not receiver.requests:
            assert time.monotonic() < deadline and not loop.done(), "the send did not start"
            await asyncio.sleep(0.01)
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
    assert await _settled(api)
    async with api.engine.connect() as conn:
        statuses = (await conn.execute(select(t.notifications.c.status))).scalars().all()
        attempts = (await conn.execute(select(func.count()).select_from(t.notification_attempts))).scalar()
    assert statuses == ["sent"] and attempts == 1 and len(receiver.requests) == 1
