"""Notifications delivered for real: outbox → AppriseNotifier → loopback HTTP and SMTP receivers.

The clock is injected: alerts are raised by ``evaluate_due`` and delivered by ``deliver_due``
at explicit instants, with ``notify_backoff=0`` so retries are due at once.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from monitor.notify.apprise import AppriseNotifier
from monitor.services.dispatch import deliver_due
from monitor.services.evaluator import evaluate_due
from monitor.storage.engine import make_engine
from tests.conftest import Api
from tests.support.app import create_check, list_of
from tests.support.fixtures import http_receiver, make_http_receiver, smtp_receiver
from tests.support.receivers import HttpReceiver, SmtpReceiver, free_port

__all__ = ["http_receiver", "make_http_receiver", "smtp_receiver"]  # fixtures, imported for pytest


@pytest.fixture
async def notifier() -> AsyncIterator[AppriseNotifier]:
    async with AppriseNotifier(allow_private_targets=True) as real:
        yield real


async def add_channel(api: Api, url: str, **fields: Any) -> str:
    r = await api.client.post("/api/v3/channels/", json={"url": url, **fields}, headers=api.headers)
    assert r.status_code == 201, r.text
    channel_id: str = r.json()["id"]
    return channel_id


async def missed_check(api: Api, name: str = "nightly", **fields: Any) -> dict[str, Any]:
    """A simple check (60 s + 10 s grace) pinged once, then missed: one `missed` alert."""
    check = await create_check(api, name=name, slug=name, timeout=60, grace=10, channels="*", **fields)
    assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200
    api.clock.advance(71)
    await evaluate_due(api.engine, api.clock.now(), settings=api.settings)
    [alert] = await list_of(api, check["uuid"], "alerts")
    assert alert["kind"] == "missed"
    return check


async def deliver(api: Api, notifier: AppriseNotifier, settings: Any = None) -> int:
    return await deliver_due(api.engine, notifier, api.clock.now(), settings=settings or api.settings)


async def test_missed_alert_arrives_once_per_channel(
    api: Api, notifier: AppriseNotifier, http_receiver: HttpReceiver, smtp_receiver: SmtpReceiver
) -> None:
    hook = await add_channel(api, http_receiver.url, name="hook")
    mail = await add_channel(api, smtp_receiver.url, name="mail")
    check = await missed_check(api)
    assert await deliver(api, notifier) == 2
    [request] = await http_receiver.async_wait_for_requests(1)
    [message] = await smtp_receiver.async_wait_for_messages(1)
    payload = request.json
    assert payload["kind"] == "missed"
    assert payload["check_uuid"] == check["uuid"]
    assert payload["slug"] == "nightly"
    assert payload["scheduled"] == "2026-07-18T02:01:00Z"
    assert payload["status"] == "down"
    assert "nightly" in payload["title"] and "missed" in payload["title"]
    assert message.subject.startswith("nightly") and "missed" in message.subject
    assert "2026-07-18T02:01:00Z" in message.text
    # Nothing more to send, now or later.
    for _ in range(3):
        api.clock.advance(30)
        assert await deliver(api, notifier) == 0
    await asyncio.sleep(0.2)
    assert len(http_receiver.requests) == 1 and len(smtp_receiver.messages) == 1
    [alert] = await list_of(api, check["uuid"], "alerts")
    assert sorted(
        (n["channel"], n["status"], n["attempts"], n["last_error"]) for n in alert["notifications"]
    ) == sorted([(hook, "sent", 1, None), (mail, "sent", 1, None)])


async def test_failed_delivery_is_retried_and_arrives_once(
    api: Api, notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    receiver = make_http_receiver(fail_first=2)
    await add_channel(api, receiver.url)
    check = await missed_check(api)
    for expected in (1, 1, 1, 0):
        assert await deliver(api, notifier) == expected
        api.clock.advance(1)
    statuses = [r.status for r in receiver.requests]
    assert statuses == [503, 503, 200]
    [alert] = await list_of(api, check["uuid"], "alerts")
    [note] = alert["notifications"]
    assert (note["status"], note["attempts"], note["last_error"]) == ("sent", 3, None)


async def test_retry_waits_for_backoff(
    api: Api, notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    receiver = make_http_receiver(fail_first=1)
    await add_channel(api, receiver.url)
    await missed_check(api)
    settings = api.settings.replace(notify_backoff=60.0)
    assert await deliver(api, notifier, settings) == 1
    api.clock.advance(30)  # backoff is 60 s ± 25 %: not yet due
    assert await deliver(api, notifier, settings) == 0
    api.clock.advance(60)
    assert await deliver(api, notifier, settings) == 1
    assert [r.status for r in receiver.requests] == [503, 200]


async def test_gives_up_after_max_attempts(
    api: Api, notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    receiver = make_http_receiver(status=503)
    await add_channel(api, receiver.url)
    check = await missed_check(api)
    settings = api.settings.replace(notify_max_attempts=3)
    for _ in range(5):
        await deliver(api, notifier, settings)
        api.clock.advance(1)
    assert len(receiver.requests) == 3
    [alert] = await list_of(api, check["uuid"], "alerts")
    [note] = alert["notifications"]
    assert (note["status"], note["attempts"]) == ("failed", 3)
    assert "503" in note["last_error"]


async def test_channel_kinds_filter(
    api: Api, notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    only_late = make_http_receiver()
    everything = make_http_receiver()
    late_id = await add_channel(api, only_late.url, kinds=["late", "recovered"])
    all_id = await add_channel(api, everything.url)
    check = await missed_check(api)
    [alert] = await list_of(api, check["uuid"], "alerts")
    assert [n["channel"] for n in alert["notifications"]] == [all_id]
    await deliver(api, notifier)
    await everything.async_wait_for_requests(1)
    # The recovery goes to both.
    assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200
    alerts = await list_of(api, check["uuid"], "alerts")
    assert alerts[0]["kind"] in ("late", "recovered")
    assert sorted(n["channel"] for n in alerts[0]["notifications"]) == sorted([late_id, all_id])
    await deliver(api, notifier)
    await only_late.async_wait_for_requests(1)
    await everything.async_wait_for_requests(2)
    assert only_late.requests[0].json["kind"] in ("late", "recovered")


async def test_concurrent_deliveries_never_send_twice(
    api: Api,
    notifier: AppriseNotifier,
    make_http_receiver: Callable[..., HttpReceiver],
    database_url: str,
) -> None:
    receiver = make_http_receiver()
    await add_channel(api, receiver.url)
    checks = []
    for i in range(6):
        check = await create_check(api, name=f"c{i}", timeout=60, grace=10, channels="*")
        assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200
        checks.append(check)
    api.clock.advance(71)
    assert await evaluate_due(api.engine, api.clock.now(), settings=api.settings) == 6
    engines = [api.engine, make_engine(database_url)]
    try:
        now = api.clock.now()
        counts = await asyncio.gather(
            *(
                deliver_due(
                    engines[i % 2], notifier, now, settings=api.settings, limit=3, rng=random.Random(i)
                )
                for i in range(6)
            )
        )
        # Whatever is left (limits) goes in later rounds.
        while await deliver_due(api.engine, notifier, now, settings=api.settings):
            pass
    finally:
        await engines[1].dispose()
    assert sum(counts) <= 6
    await receiver.async_wait_for_requests(6)
    await asyncio.sleep(0.2)
    bodies = [r.json["check_uuid"] for r in receiver.requests]
    assert sorted(bodies) == sorted(c["uuid"] for c in checks)
    for check in checks:
        [alert] = await list_of(api, check["uuid"], "alerts")
        assert [(n["status"], n["attempts"]) for n in alert["notifications"]] == [("sent", 1)]


async def test_dead_target_records_the_error(api: Api, notifier: AppriseNotifier) -> None:
    await add_channel(api, f"json://127.0.0.1:{free_port()}/hook")
    check = await missed_check(api)
    await deliver(api, notifier)
    [alert] = await list_of(api, check["uuid"], "alerts")
    [note] = alert["notifications"]
    assert note["status"] == "pending" and note["attempts"] == 1
    assert "refused" in note["last_error"].lower()
    # Due again at once (backoff 0), and still pending with two attempts.
    api.clock.advance(1)
    await deliver(api, notifier)
    [alert] = await list_of(api, check["uuid"], "alerts")
    assert alert["notifications"][0]["attempts"] == 2
