"""Deliver notifications from the outbox (DESIGN §6 "Notifier", §7).

No lease: each notification row is claimed with a conditional update (``claimed_until``), so
any number of notifier processes can run; a delivery repeats only if a sender dies between
sending and recording. Failures are retried with exponential backoff and jitter up to
``MONITOR_NOTIFY_MAX_ATTEMPTS``, then the notification is marked ``failed`` with its last error.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.domain.messages import Message
from monitor.notify.base import DeliveryResult, Notifier
from monitor.settings import Settings
from monitor.storage import tables as t

logger = logging.getLogger(__name__)

MAX_BACKOFF = timedelta(hours=1)


def backoff(attempts: int, base: float, rng: random.Random | None = None) -> timedelta:
    """Delay before attempt ``attempts + 1``: ``base × 2^(attempts-1)``, ±25 % jitter, capped at 1 h.

    Args:
        attempts: attempts made so far (≥ 1).
        base: the first delay, seconds.
    """
    rng = rng or random.Random()
    delay = base * (2 ** max(0, attempts - 1)) * rng.uniform(0.75, 1.25)
    return min(timedelta(seconds=delay), MAX_BACKOFF)


@dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    """A claimed notification: where to send what."""

    notification_id: int
    attempts: int
    url: str
    message: Message


async def _claim(engine: AsyncEngine, now: datetime, settings: Settings, limit: int) -> list[Job]:
    lease = timedelta(seconds=settings.notify_timeout * 2 + 5)
    claimed: list[Job] = []
    async with engine.begin() as conn:
        rows = (
            (
                await conn.execute(
                    select(
                        t.notifications.c.id,
                        t.notifications.c.attempts,
                        t.channels.c.url,
                        t.alerts.c.title,
                        t.alerts.c.message,
                        t.alerts.c.kind,
                        t.alerts.c.scheduled,
                        t.checks.c.uuid,
                        t.checks.c.slug,
                        t.checks.c.episode_key,
                        t.checks.c.paused,
                        t.checks.c.watch_from,
                    )
                    .join(t.channels, t.channels.c.id == t.notifications.c.channel_id)
                    .join(t.alerts, t.alerts.c.id == t.notifications.c.alert_id)
                    .outerjoin(t.checks, t.checks.c.id == t.alerts.c.check_id)
                    .where(t.notifications.c.status == "pending")
                    .where(t.notifications.c.next_attempt_at <= now)
                    .where(
                        or_(t.notifications.c.claimed_until.is_(None), t.notifications.c.claimed_until < now)
                    )
                    .order_by(t.notifications.c.next_attempt_at)
                    .limit(limit)
                )
            )
            .mappings()
            .all()
        )
        for row in rows:
            result = await conn.execute(
                update(t.notifications)
                .where(t.notifications.c.id == row["id"])
                .where(t.notifications.c.status == "pending")
                .where(or_(t.notifications.c.claimed_until.is_(None), t.notifications.c.claimed_until < now))
                .values(claimed_until=now + lease)
            )
            if result.rowcount != 1:
                continue  # another notifier claimed it
            claimed.append(
                Job(
                    notification_id=row["id"],
                    attempts=row["attempts"],
                    url=row["url"],
                    message=Message(
                        title=row["title"],
                        body=row["message"],
                        body_markdown=row["message"],
                        json_fields=_json_fields(row),
                    ),
                )
            )
    return claimed


def _json_fields(row: Any) -> dict[str, str]:
    scheduled = row["scheduled"]
    if row["uuid"] is None:
        status = ""  # a project-level alert (monitor_unavailable) has no check
    elif row["paused"]:
        status = "paused"
    elif row["watch_from"] is None:
        status = "new"
    else:
        status = "down" if row["episode_key"] else "up"
    return {
        "kind": row["kind"],
        "check_uuid": row["uuid"] or "",
        "slug": row["slug"] or "",
        "scheduled": scheduled.strftime("%Y-%m-%dT%H:%M:%SZ") if scheduled else "",
        "status": status,
    }


async def deliver_due(
    engine: AsyncEngine,
    notifier: Notifier,
    now: datetime,
    *,
    settings: Settings,
    limit: int = 20,
    rng: random.Random | None = None,
) -> int:
    """Claim due notifications, deliver them concurrently and record each attempt.

    Args:
        now: the instant the claims and attempts are recorded at (aware UTC).

    Returns:
        How many deliveries were attempted.
    """
    jobs = await claim_due(engine, now, settings=settings, limit=limit)
    await asyncio.gather(
        *(deliver(engine, notifier, job, lambda: now, settings=settings, rng=rng) for job in jobs)
    )
    return len(jobs)


async def claim_due(engine: AsyncEngine, now: datetime, *, settings: Settings, limit: int) -> list[Job]:
    """Claim up to ``limit`` due notifications for this process (conditional update per row)."""
    if limit <= 0:
        return []
    return await _claim(engine, now, settings, limit)


async def deliver(
    engine: AsyncEngine,
    notifier: Notifier,
    job: Job,
    clock: Callable[[], datetime],
    *,
    settings: Settings,
    rng: random.Random | None = None,
) -> DeliveryResult:
    """Send one claimed notification and record the attempt (its own transaction).

    ``clock()`` is read once the send has ended: the attempt's time and the retry's backoff
    start there, not before a send that may have taken the whole timeout.

    Each delivery records itself, so one hanging target holds up only its own row, never the
    others (QA: a target that never answered delayed alerts to healthy channels by its timeout).
    """
    try:
        result = await notifier.send(job.url, job.message, timeout=settings.notify_timeout)
    except Exception as error:  # an adapter bug must not lose the row: record it as a failure
        result = DeliveryResult(ok=False, error=f"{type(error).__name__}: {error}")
    now = clock()
    attempts = job.attempts + 1
    values: dict[str, Any] = {"attempts": attempts, "claimed_until": None}
    if result.ok:
        values.update(status="sent", sent_at=now, last_error=None)
    else:
        values["last_error"] = result.error
        if result.permanent or attempts >= settings.notify_max_attempts:
            values["status"] = "failed"
        else:
            values["next_attempt_at"] = now + backoff(attempts, settings.notify_backoff, rng)
    async with engine.begin() as conn:
        await conn.execute(
            t.notification_attempts.insert().values(
                notification_id=job.notification_id, at=now, ok=result.ok, error=result.error
            )
        )
        await conn.execute(
            update(t.notifications).where(t.notifications.c.id == job.notification_id).values(values)
        )
    logger.info(
        "notification attempt",
        extra={
            "action": "notification_attempt",
            "notification_id": job.notification_id,
            "ok": result.ok,
            "attempt": attempts,
        },
    )
    return result


async def next_delivery_at(engine: AsyncEngine) -> datetime | None:
    """When the earliest pending notification becomes due (for the notifier's sleep)."""
    async with engine.connect() as conn:
        value = (
            await conn.execute(
                select(t.notifications.c.next_attempt_at)
                .where(and_(t.notifications.c.status == "pending"))
                .order_by(t.notifications.c.next_attempt_at)
                .limit(1)
            )
        ).scalar_one_or_none()
    return value
