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
class _Job:
    notification_id: int
    attempts: int
    url: str
    message: Message


async def _claim(engine: AsyncEngine, now: datetime, settings: Settings, limit: int) -> list[_Job]:
    lease = timedelta(seconds=settings.notify_timeout * 2 + 5)
    claimed: list[_Job] = []
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
                _Job(
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
    if row["paused"]:
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
    jobs = await _claim(engine, now, settings, limit)
    if not jobs:
        return 0
    results = await asyncio.gather(
        *(notifier.send(job.url, job.message, timeout=settings.notify_timeout) for job in jobs),
        return_exceptions=True,
    )
    async with engine.begin() as conn:
        for job, result in zip(jobs, results, strict=True):
            if isinstance(result, BaseException):
                result = DeliveryResult(ok=False, error=f"{type(result).__name__}: {result}")
            attempts = job.attempts + 1
            await conn.execute(
                t.notification_attempts.insert().values(
                    notification_id=job.notification_id, at=now, ok=result.ok, error=result.error
                )
            )
            values: dict[str, Any] = {"attempts": attempts, "claimed_until": None}
            if result.ok:
                values.update(status="sent", sent_at=now, last_error=None)
            else:
                values["last_error"] = result.error
                if result.permanent or attempts >= settings.notify_max_attempts:
                    values["status"] = "failed"
                else:
                    values["next_attempt_at"] = now + backoff(attempts, settings.notify_backoff, rng)
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
    return len(jobs)


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
