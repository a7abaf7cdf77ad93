"""The notifier loop: a hanging target holds up only its own deliveries."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from monitor.domain.checks import PingKind
from monitor.domain.clock import SystemClock
from monitor.notify.apprise import AppriseNotifier
from monitor.services.ingest import PingRequest, ingest_pings
from monitor.workers.notifier import run_notifier
from tests.conftest import Api
from tests.support.receivers import HttpReceiver


async def _channel(api: Api, url: str) -> str:
    r = await api.client.post("/api/v3/channels/", json={"name": url[:20], "url": url}, headers=api.headers)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _failing_check(api: Api, channel: str) -> str:
    r = await api.client.post(
        "/api/v3/checks/", json={"name": "job", "timeout": 3600, "channels": channel}, headers=api.headers
    )
    return str(r.json()["uuid"])


async def test_a_hanging_target_does_not_delay_healthy_channels(
    api: Api, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    hanging = make_http_receiver(hang_s=30)
    healthy = make_http_receiver()
    stuck = await _channel(api, hanging.url)
    good = await _channel(api, healthy.url)
    settings = api.settings.replace(notify_timeout=5.0)
    now = SystemClock().now()
    # six alerts for the hanging target, then one for the healthy one
    for _ in range(6):
        uuid = await _failing_check(api, stuck)
        await ingest_pings(
            api.engine, [PingRequest(kind=PingKind.FAIL, received=now, uuid=uuid)], settings=settings
        )
    uuid = await _failing_check(api, good)
    await ingest_pings(
        api.engine, [PingRequest(kind=PingKind.FAIL, received=now, uuid=uuid)], settings=settings
    )
    async with AppriseNotifier(allow_private_targets=True) as notifier:
        started = time.monotonic()
        loop = asyncio.create_task(run_notifier(api.engine, notifier, settings, SystemClock()))
        try:
            await healthy.async_wait_for_requests(1, timeout=4.0)
            assert time.monotonic() - started < 4.0
        finally:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)
            hanging.hang_s = 0
