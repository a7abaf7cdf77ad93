"""A sender whose claim was taken over records nothing (DESIGN §6 "Notifier").

A notifier that stalled (SIGSTOP, GC) between sending and recording finds, when it resumes,
that its claim expired and another notifier took the row over. Its result is logged (one line:
notification id, channel id, outcome), never stored: the row's attempts and its attempt rows
stay those of the claim's holder. Clock-driven through the services.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from monitor.notify.apprise import AppriseNotifier
from monitor.notify.base import DeliveryResult
from monitor.services.dispatch import claim_due, claim_length, record
from monitor.storage import tables as t
from tests.conftest import Api
from tests.integration.test_dispatch import add_channel, missed_check
from tests.support.fixtures import http_receiver
from tests.support.receivers import HttpReceiver

__all__ = ["http_receiver"]


@pytest.fixture
async def notifier() -> AsyncIterator[AppriseNotifier]:
    async with AppriseNotifier(allow_private_targets=True) as real:
        yield real


async def test_a_result_under_a_lost_claim_is_logged_not_recorded(
    api: Api, http_receiver: HttpReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    channel = await add_channel(api, http_receiver.url, name="hook")
    await missed_check(api)
    [stalled] = await claim_due(api.engine, api.clock.now(), settings=api.settings, limit=10)
    api.clock.advance(claim_length(api.settings).total_seconds() + 1)  # A's claim expires
    [taker] = await claim_due(api.engine, api.clock.now(), settings=api.settings, limit=10)
    assert taker.notification_id == stalled.notification_id and taker.token != stalled.token

    await record(
        api.engine, taker, DeliveryResult(ok=True, error=None), api.clock.now(), settings=api.settings
    )
    caplog.set_level(logging.INFO, logger="monitor.services.dispatch")
    # A resumes: its send had ended (ok, and again timed out); neither is stored
    for late in (DeliveryResult(ok=True, error=None), DeliveryResult(ok=False, error="timed out")):
        await record(api.engine, stalled, late, api.clock.now(), settings=api.settings)

    async with api.engine.connect() as conn:
        attempts = (await conn.execute(select(t.notification_attempts.c.ok))).scalars().all()
        row = (await conn.execute(select(t.notifications))).mappings().one()
    assert attempts == [True]
    assert row["attempts"] == 1 and row["status"] == "sent"
    stale = [r for r in caplog.records if getattr(r, "action", "") == "stale_delivery_result"]
    assert len(stale) == 2
    text = stale[1].getMessage()
    assert f"notification {stalled.notification_id}" in text and f"channel {channel}" in text
    assert "timed out" in text and "\n" not in text


async def test_the_attempt_log_line_names_notification_channel_and_outcome(
    api: Api, http_receiver: HttpReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    channel = await add_channel(api, http_receiver.url, name="hook")
    await missed_check(api)
    [job] = await claim_due(api.engine, api.clock.now(), settings=api.settings, limit=10)
    caplog.set_level(logging.INFO, logger="monitor.services.dispatch")
    await record(
        api.engine, job, DeliveryResult(ok=False, error="HTTP 500"), api.clock.now(), settings=api.settings
    )
    [line] = [r for r in caplog.records if getattr(r, "action", "") == "notification_attempt"]
    assert line.getMessage().startswith(
        f"notification attempt: notification {job.notification_id} channel {channel} outcome failed: HTTP 500"
    )
