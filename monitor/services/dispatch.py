"""Deliver notifications from the outbox (DESIGN §6 "Notifier", §7).

No lease. Each notification (alert × channel, unique) moves through these statuses:

``pending``  due at ``next_attempt_at``; claimed by one sender at a time;
``held``     over the rate limit (per channel and check: a flapping check cannot flood a
             channel): waits for room, then goes out in one digest;
``sent``     delivered (``sent_at``); ``coalesced``: delivered inside another row's digest;
``failed``   gave up after ``MONITOR_NOTIFY_MAX_ATTEMPTS`` (or a permanent error), with the
             error text Apprise logged;
``suppressed`` raised inside a maintenance window: recorded, never sent (the window's
             summary lists it).

Claims. A sender claims due rows by writing ``claimed_until`` (now + 2 × notify timeout + 5 s)
and a fresh ``claim_token``: on PostgreSQL the candidates are selected ``FOR UPDATE SKIP
LOCKED`` so concurrent senders never wait on each other or take the same row; SQLite has no row
locks, so each row is taken by a conditional ``UPDATE … WHERE claim expired`` whose rowcount
says who won (DESIGN §10, apscheduler #959).

Immediately before sending, the sender re-checks — in one conditional update that also renews
the claim — that the row still carries *its* token and is still unsent. A sender that stalled
(GC pause, SIGSTOP, a frozen VM) past its claim finds the row taken over by another sender and
does not send; so a delivery repeats only if a sender dies between sending and recording
(DESIGN §6). The outcome is recorded only under the same token.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid as uuid_module
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from monitor.domain import maintenance, messages
from monitor.domain.messages import Message, humanize_duration
from monitor.notify import templates
from monitor.notify.base import DeliveryResult, Notifier
from monitor.settings import Settings
from monitor.storage import tables as t

logger = logging.getLogger(__name__)

MAX_BACKOFF = timedelta(hours=1)

PENDING, HELD, SENT, FAILED, SUPPRESSED, COALESCED = (
    "pending",
    "held",
    "sent",
    "failed",
    "suppressed",
    "coalesced",
)
OPEN_STATUSES = (PENDING, HELD)

#: Most held rows folded into one digest (the rest follow in the next one).
DIGEST_LIMIT = 100


def backoff(attempts: int, base: float, rng: random.Random | None = None) -> timedelta:
    """Delay before attempt ``attempts + 1``: ``base × 2^(attempts-1)``, ±25 % jitter, capped at 1 h.

    Args:
        attempts: attempts made so far (≥ 1).
        base: the first delay, seconds.
        rng: the jitter's source (tests pass a seeded one).
    """
    rng = rng or random.Random()
    delay = base * (2 ** max(0, attempts - 1)) * rng.uniform(0.75, 1.25)
    return min(timedelta(seconds=delay), MAX_BACKOFF)


def claim_length(settings: Settings) -> timedelta:
    """How long a claim lasts: ``2 × MONITOR_NOTIFY_TIMEOUT + 5 s`` (one attempt fits twice)."""
    return timedelta(seconds=settings.notify_timeout * 2 + 5)


@dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    """A claimed notification: where to send what, and the claim that allows it.

    Attributes:
        token: the claim token written with the claim; sending and recording require it.
        riders: held notifications of the same channel folded into this delivery (a digest).
    """

    notification_id: int
    attempts: int
    url: str
    message: Message
    token: str = ""
    alert_id: int = 0
    channel_id: str = ""
    project_id: int = 0
    check_id: int | None = None
    alert_kind: str = ""
    alert_created_at: datetime | None = None
    riders: tuple[int, ...] = ()
    rider_token: str = ""


def _due(now: datetime) -> Any:
    n = t.notifications.c
    return (
        n.status.in_(OPEN_STATUSES)
        & (n.next_attempt_at <= now)
        & or_(n.claimed_until.is_(None), n.claimed_until < now)
    )


def _first_in_line(now: datetime) -> Any:
    """No earlier notification of the same check to the same channel is still open.

    Per check and channel, notifications go out in the order their alerts were raised (alert
    ids grow with raising): a later one waits until every earlier one is sent, coalesced,
    suppressed or has finally failed — a ``recovered`` can never overtake the ``missed`` it
    answers while that one is being retried. Project-level alerts (no check) are not ordered.
    """
    n = t.notifications.c
    earlier = t.notifications.alias("earlier")
    earlier_alert = t.alerts.alias("earlier_alert")
    return ~exists(
        select(earlier.c.id)
        .select_from(earlier.join(earlier_alert, earlier_alert.c.id == earlier.c.alert_id))
        .where(earlier_alert.c.check_id == t.alerts.c.check_id)
        .where(earlier.c.channel_id == n.channel_id)
        .where(earlier.c.alert_id < n.alert_id)
        # A held (rate-limited) earlier one does not block unless a sender holds it: a later
        # one is then over the limit too and held, or has room and carries it as a rider in
        # its digest — either way it is not delivered before the earlier one.
        .where(
            (earlier.c.status == PENDING) | ((earlier.c.status == HELD) & (earlier.c.claimed_until >= now))
        )
    )


async def claim_due(
    engine: AsyncEngine,
    now: datetime,
    *,
    settings: Settings,
    limit: int,
    skip_channels: Collection[str] = (),
    skip_notifications: Collection[int] = (),
) -> list[Job]:
    """Claim up to ``limit`` due notifications for this sender, in one transaction.

    Only the first open notification per check and channel is due (:func:`_first_in_line`).
    PostgreSQL: ``SELECT … FOR UPDATE SKIP LOCKED`` then one update; SQLite: one conditional
    update over the candidates whose ``RETURNING`` says which rows are ours. Every claimed row
    gets this call's ``claim_token``.

    Args:
        now: the claim instant (aware UTC); a claim lasts :func:`claim_length`.
        limit: most rows to claim (≤ 0 claims nothing).
        skip_channels: channel ids not to claim for now (their target host is at its limit of
            deliveries in flight).
        skip_notifications: notification ids not to claim (already handled by the caller).

    Returns:
        The claimed jobs, oldest due first, with their messages rendered.
    """
    if limit <= 0:
        return []
    n = t.notifications.c
    token = uuid_module.uuid4().hex
    claim = {"claimed_until": now + claim_length(settings), "claim_token": token}
    async with engine.begin() as conn:
        candidates = (
            select(n.id)
            .join(t.alerts, t.alerts.c.id == n.alert_id)
            .where(_due(now))
            .where(_first_in_line(now))
            .order_by(n.next_attempt_at, n.id)
            .limit(limit)
        )
        if skip_channels:
            candidates = candidates.where(n.channel_id.not_in(list(skip_channels)))
        if skip_notifications:
            candidates = candidates.where(n.id.not_in(list(skip_notifications)))
        if conn.dialect.name == "postgresql":
            ids = list(
                (await conn.execute(candidates.with_for_update(skip_locked=True, of=t.notifications)))
                .scalars()
                .all()
            )
            if ids:
                await conn.execute(update(t.notifications).where(n.id.in_(ids)).values(claim))
        else:
            ids = list((await conn.execute(candidates)).scalars().all())
            if ids:
                # conditional: a row another sender claimed since the select stays theirs
                won = set(
                    (
                        await conn.execute(
                            update(t.notifications)
                            .where(n.id.in_(ids))
                            .where(_due(now))
                            .values(claim)
                            .returning(n.id)
                        )
                    )
                    .scalars()
                    .all()
                )
                ids = [i for i in ids if i in won]
        if not ids:
            return []
        rows = (
            (await conn.execute(_job_query().where(n.id.in_(ids)).where(n.claim_token == token)))
            .mappings()
            .all()
        )
    order = {notification_id: index for index, notification_id in enumerate(ids)}
    jobs = [_job(row, token, settings) for row in rows]
    jobs.sort(key=lambda j: order[j.notification_id])
    return jobs


async def release_claims(engine: AsyncEngine, jobs: Sequence[Job]) -> None:
    """Give back claimed, unsent jobs (their rows become claimable at once), under their tokens."""
    if not jobs:
        return
    n = t.notifications.c
    async with engine.begin() as conn:
        for token in {job.token for job in jobs}:
            await conn.execute(
                update(t.notifications)
                .where(n.id.in_([job.notification_id for job in jobs if job.token == token]))
                .where(n.claim_token == token)
                .values(claimed_until=None, claim_token=None)
            )


def _job_query() -> Any:
    return (
        select(
            t.notifications.c.id,
            t.notifications.c.attempts,
            t.notifications.c.alert_id,
            t.notifications.c.channel_id,
            t.channels.c.url,
            t.alerts.c.project_id,
            t.alerts.c.check_id,
            t.alerts.c.title,
            t.alerts.c.message,
            t.alerts.c.facts,
            t.alerts.c.kind,
            t.alerts.c.scheduled,
            t.alerts.c.created_at,
            t.checks.c.uuid,
            t.checks.c.slug,
            t.checks.c.name,
            t.checks.c.episode_key,
            t.checks.c.paused,
            t.checks.c.watch_from,
        )
        .join(t.channels, t.channels.c.id == t.notifications.c.channel_id)
        .join(t.alerts, t.alerts.c.id == t.notifications.c.alert_id)
        .outerjoin(t.checks, t.checks.c.id == t.alerts.c.check_id)
    )


def _job(row: Mapping[Any, Any], token: str, settings: Settings) -> Job:
    return Job(
        notification_id=row["id"],
        attempts=row["attempts"],
        url=row["url"],
        message=_message(row, settings),
        token=token,
        alert_id=row["alert_id"],
        channel_id=row["channel_id"],
        project_id=row["project_id"],
        check_id=row["check_id"],
        alert_kind=row["kind"],
        alert_created_at=row["created_at"],
    )


def _message(row: Mapping[Any, Any], settings: Settings) -> Message:
    """Render the alert for delivery from its stored facts, with the configured templates.

    Rows without facts (project-level alerts, alerts older than stored facts) and a broken override
    template fall back to the title and text stored with the alert.
    """
    if row["facts"]:
        try:
            return templates.render(
                messages.facts_from_json(row["facts"]), templates_dir=settings.templates_dir
            )
        except Exception:
            logger.exception(
                "message template failed; sending the stored text",
                extra={"action": "template_failed", "alert_id": row["alert_id"]},
            )
    return Message(
        title=row["title"], body=row["message"], body_markdown=row["message"], json_fields=_json_fields(row)
    )


def _json_fields(row: Mapping[Any, Any]) -> dict[str, str]:
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
        "name": row["name"] or row["uuid"] or "",
        "url": "",
    }


# --------------------------------------------------------------------------- before sending


async def _windows(conn: AsyncConnection, project_id: int, check_id: int | None) -> list[maintenance.Window]:
    w = t.maintenance_windows.c
    query = select(t.maintenance_windows).where(w.project_id == project_id)
    query = query.where(
        w.check_id.is_(None) if check_id is None else or_(w.check_id.is_(None), w.check_id == check_id)
    )
    rows = (await conn.execute(query)).mappings().all()
    return [window_of(r) for r in rows]


def window_of(row: Mapping[Any, Any]) -> maintenance.Window:
    """A ``maintenance_windows`` row as a domain :class:`~monitor.domain.maintenance.Window`."""
    return maintenance.Window(
        id=row["id"],
        check_id=row["check_id"],
        name=row["name"],
        created_at=row["created_at"],
        starts_at=row["starts_at"],
        ends_at=row["ends_at"],
        schedule=row["schedule"],
        dialect=row["dialect"],
        tz=row["tz"],
        duration=timedelta(seconds=row["duration"]) if row["duration"] is not None else None,
    )


async def _release(conn: AsyncConnection, job: Job, values: dict[str, Any]) -> None:
    await conn.execute(
        update(t.notifications)
        .where(t.notifications.c.id == job.notification_id)
        .where(t.notifications.c.claim_token == job.token)
        .values(claimed_until=None, claim_token=None, **values)
    )


async def prepare(engine: AsyncEngine, job: Job, now: datetime, *, settings: Settings) -> Job | None:
    """Re-check the claim right before sending, and apply maintenance windows and rate limits.

    One transaction: renew the claim only if the row still carries ``job.token`` and is not
    sent (a stalled sender whose claim was taken over stops here); a notification whose alert
    was raised inside a maintenance window becomes ``suppressed``; one over the channel's rate
    limit (per channel and check) becomes ``held`` until the window has room; otherwise the
    check's other held rows for this channel are folded into this delivery as a digest.

    Args:
        job: a job from :func:`claim_due`.
        now: the current instant (aware UTC).

    Returns:
        The job to send (possibly with riders and a digest message), or ``None`` when there
        is nothing to send now.
    """
    async with engine.begin() as conn:
        return await _prepare(conn, job, now, settings)


async def prepare_many(
    engine: AsyncEngine, jobs: Sequence[Job], now: datetime, *, settings: Settings
) -> list[Job | None]:
    """:func:`prepare` for several jobs in one transaction (the notifier's batches).

    Jobs are prepared in channel order, so two senders' batches lock channel rows in the same
    order (PostgreSQL) and never deadlock. Returns one entry per job, in the order given.
    """
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i].channel_id, jobs[i].notification_id))
    ready: list[Job | None] = [None] * len(jobs)
    async with engine.begin() as conn:
        for index in order:
            ready[index] = await _prepare(conn, jobs[index], now, settings)
    return ready


async def _prepare(conn: AsyncConnection, job: Job, now: datetime, settings: Settings) -> Job | None:
    n = t.notifications.c
    if conn.dialect.name == "postgresql":
        # Serialise preparations per channel (the rate-limit count, taking riders): always the
        # channel row first, then notification rows, so two preparations never deadlock.
        await conn.execute(
            # NO KEY UPDATE: inserts of notifications (a foreign-key share lock) are not held up
            select(t.channels.c.id).where(t.channels.c.id == job.channel_id).with_for_update(key_share=True)
        )
    renewed = await conn.execute(
        update(t.notifications)
        .where(n.id == job.notification_id)
        .where(n.claim_token == job.token)
        .where(n.status.in_(OPEN_STATUSES))
        .values(claimed_until=now + claim_length(settings))
    )
    if renewed.rowcount != 1:
        logger.warning(
            "claim lost before sending; another sender took the notification over",
            extra={"action": "claim_lost", "notification_id": job.notification_id},
        )
        return None
    if job.alert_kind != messages.MAINTENANCE and job.alert_created_at is not None:
        window = maintenance.covering(
            await _windows(conn, job.project_id, job.check_id), job.check_id, job.alert_created_at
        )
        if window is not None:
            await _release(
                conn,
                job,
                {
                    "status": SUPPRESSED,
                    "last_error": f"held back by maintenance window {window.name or window.id!r}",
                },
            )
            return None
    # Project-level alerts (monitor_unavailable, project maintenance summaries) are limited
    # too, as one more "check" per channel (a flood of them must not reach a channel).
    window_start = now - timedelta(seconds=settings.notify_rate_window)
    # Sent ones about this check, plus those being sent right now (marked below; a dead
    # sender's mark lapses with its claim).
    sent_count, oldest = (
        await conn.execute(
            select(func.count(), func.min(n.sent_at))
            .select_from(t.notifications.join(t.alerts, t.alerts.c.id == n.alert_id))
            .where(n.channel_id == job.channel_id)
            .where(_same_source(job))
            .where(n.id != job.notification_id)
            .where(n.sent_at > window_start)
            .where(or_(n.status == SENT, n.status.in_(OPEN_STATUSES) & (n.claimed_until >= now)))
        )
    ).one()
    if sent_count >= settings.notify_rate_limit:
        room_at = (oldest or now) + timedelta(seconds=settings.notify_rate_window)
        await _release(
            conn,
            job,
            {
                "status": HELD,
                "next_attempt_at": max(room_at, now),
                "last_error": (
                    f"held back: rate limit of {settings.notify_rate_limit} notifications about one "
                    f"check per channel in {humanize_duration(settings.notify_rate_window)}; "
                    "goes out in a digest"
                ),
            },
        )
        return None
    await conn.execute(update(t.notifications).where(n.id == job.notification_id).values(sent_at=now))
    rider_token = uuid_module.uuid4().hex
    riders = await _claim_riders(conn, job, rider_token, now, settings)
    if not riders:
        return job
    rows = (
        (
            await conn.execute(
                select(t.alerts.c.title, t.alerts.c.message, t.alerts.c.kind, t.alerts.c.created_at)
                .join(t.notifications, t.notifications.c.alert_id == t.alerts.c.id)
                .where(t.notifications.c.id.in_([job.notification_id, *riders]))
                .order_by(t.alerts.c.created_at)
            )
        )
        .mappings()
        .all()
    )
    return replace(
        job, riders=tuple(riders), rider_token=rider_token, message=digest(job.message, rows, settings)
    )


def _same_source(job: Job) -> Any:
    """Alerts about the job's check, or — for a project-level alert — the project's other
    project-level alerts (the rate limit's unit)."""
    a = t.alerts.c
    if job.check_id is None:
        return a.check_id.is_(None) & (a.project_id == job.project_id)
    return a.check_id == job.check_id


async def _claim_riders(
    conn: AsyncConnection, job: Job, rider_token: str, now: datetime, settings: Settings
) -> list[int]:
    """Take the other held rows of this channel and check into this delivery.

    Rows claimed by nobody, or by this job's own claim batch, qualify; they get ``rider_token``,
    so their own jobs of the batch (if any) find their claim gone and send nothing.
    """
    n = t.notifications.c
    free = or_(n.claimed_until.is_(None), n.claimed_until < now, n.claim_token == job.token)
    held = (
        (
            await conn.execute(
                select(n.id)
                .join(t.alerts, t.alerts.c.id == n.alert_id)
                .where(_same_source(job))
                .where(n.channel_id == job.channel_id)
                .where(n.status == HELD)
                .where(n.id != job.notification_id)
                .where(free)
                .order_by(n.id)
                .limit(DIGEST_LIMIT)
            )
        )
        .scalars()
        .all()
    )
    riders = []
    for rider in held:
        result = await conn.execute(
            update(t.notifications)
            .where(n.id == rider)
            .where(n.status == HELD)
            .where(free)
            .values(claimed_until=now + claim_length(settings), claim_token=rider_token)
        )
        if result.rowcount == 1:
            riders.append(rider)
    return riders


def digest(first: Message, alerts: Sequence[Mapping[Any, Any]], settings: Settings) -> Message:
    """One message carrying a check's held notifications to a channel (rate limit).

    Args:
        first: the message of the notification whose turn it is (its JSON fields are kept).
        alerts: the alerts of every notification carried, this one's included (``title``,
            ``message``, ``kind``, ``created_at``), oldest first.
    """
    count = len(alerts)
    kinds = list(dict.fromkeys(r["kind"] for r in alerts))
    name = first.json_fields.get("name") or "monitor"
    title = f"{name}: {', '.join(kinds)} — {count} notifications held back by the rate limit"
    intro = (
        f"This channel receives at most {settings.notify_rate_limit} notifications about one check per "
        f"{humanize_duration(settings.notify_rate_window)}; these {count} were held back and arrive together:"
    )
    lines = [intro, "", *(f"- {r['title']}" for r in alerts), ""]
    text = "\n".join([*lines, *(f"----\n{r['message'].rstrip()}" for r in alerts)]) + "\n"
    fields = dict(first.json_fields)
    fields.update(kind="digest", count=str(count))
    return Message(title=title[:300], body=text, body_markdown=text, json_fields=fields)


# --------------------------------------------------------------------------- deliver


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

    Claims in rounds until nothing more is due (or ``limit`` notifications were claimed), so
    the notifications queued behind a delivered one for the same check and channel go too.

    Args:
        now: the instant the claims and attempts are recorded at (aware UTC).

    Returns:
        How many notifications were claimed (each was sent, held, suppressed or found taken).
    """
    handled: set[int] = set()
    while len(handled) < limit:
        # rounds: the next notification of a check and channel becomes due once the one before
        # it is delivered; each notification is attempted at most once per call
        jobs = await claim_due(
            engine, now, settings=settings, limit=limit - len(handled), skip_notifications=handled
        )
        if not jobs:
            break
        handled.update(job.notification_id for job in jobs)
        await asyncio.gather(
            *(deliver(engine, notifier, job, lambda: now, settings=settings, rng=rng) for job in jobs)
        )
    return len(handled)


async def deliver(
    engine: AsyncEngine,
    notifier: Notifier,
    job: Job,
    clock: Callable[[], datetime],
    *,
    settings: Settings,
    rng: random.Random | None = None,
    pre_send_delay: float = 0.0,
) -> DeliveryResult | None:
    """Send one claimed notification and record the attempt (its own transactions).

    :func:`prepare` runs first (claim re-check, maintenance, rate limit). ``clock()`` is read
    again once the send has ended: the attempt's time and the retry's backoff start there.

    Each delivery records itself, so one hanging target holds up only its own row.
    ``pre_send_delay`` (seconds, default 0) waits between the claim and its re-check: a test
    hook that lets a test stall (SIGSTOP) a sender inside that gap.

    Returns:
        The attempt's result, or ``None`` when nothing was sent (claim lost, suppressed, held).
    """
    if pre_send_delay > 0:
        await asyncio.sleep(pre_send_delay)
    ready = await prepare(engine, job, clock(), settings=settings)
    if ready is None:
        return None
    job = ready
    try:
        result = await notifier.send(job.url, job.message, timeout=settings.notify_timeout)
    except Exception as error:  # an adapter bug must not lose the row: record it as a failure
        result = DeliveryResult(ok=False, error=f"{type(error).__name__}: {error}")
    await record(engine, job, result, clock(), settings=settings, rng=rng)
    return result


@dataclass(frozen=True, slots=True)
class Attempt:
    """One delivery's outcome waiting to be recorded: the job, the result, when the send ended."""

    job: Job
    result: DeliveryResult
    at: datetime


async def record(
    engine: AsyncEngine,
    job: Job,
    result: DeliveryResult,
    now: datetime,
    *,
    settings: Settings,
    rng: random.Random | None = None,
) -> None:
    """Record one attempt: an attempt row, then the row's new status, under the claim token.

    Args:
        job: the job that was sent (with its riders, if a digest).
        result: what the notifier said.
        now: when the send ended (aware UTC).
    """
    await record_many(engine, [Attempt(job, result, now)], settings=settings, rng=rng)


async def record_many(
    engine: AsyncEngine,
    attempts: Sequence[Attempt],
    *,
    settings: Settings,
    rng: random.Random | None = None,
) -> None:
    """:func:`record` for several attempts in one transaction (the notifier's recorder)."""
    logged = []
    async with engine.begin() as conn:
        for attempt in attempts:
            logged.append((attempt, await _record(conn, attempt, settings, rng)))
    for attempt, recorded in logged:
        _log_attempt(attempt, recorded)


def _outcome(result: DeliveryResult) -> str:
    return "ok" if result.ok else f"failed: {result.error or 'unknown error'}"


def _log_attempt(attempt: Attempt, recorded: int | None) -> None:
    job, result = attempt.job, attempt.result
    outcome = _outcome(result)
    if recorded is None:
        logger.warning(
            "stale delivery result not recorded: notification %d channel %s outcome %s"
            " (its claim was taken over)",
            job.notification_id,
            job.channel_id,
            outcome,
            extra={
                "action": "stale_delivery_result",
                "notification_id": job.notification_id,
                "channel_id": job.channel_id,
                "ok": result.ok,
                "outcome": outcome,
            },
        )
        return
    logger.info(
        "notification attempt: notification %d channel %s outcome %s (attempt %d)",
        job.notification_id,
        job.channel_id,
        outcome,
        job.attempts + 1,
        extra={
            "action": "notification_attempt",
            "notification_id": job.notification_id,
            "channel_id": job.channel_id,
            "ok": result.ok,
            "outcome": outcome,
            "attempt": job.attempts + 1,
            "riders": recorded - 1,
        },
    )


async def _record(
    conn: AsyncConnection, attempt: Attempt, settings: Settings, rng: random.Random | None
) -> int | None:
    """Record one attempt inside ``conn``'s transaction; the rows recorded, or ``None`` when the
    claim was taken over (nothing is written)."""
    job, result, now = attempt.job, attempt.result, attempt.at
    attempts = job.attempts + 1
    values: dict[str, Any] = {"attempts": attempts, "claimed_until": None, "claim_token": None}
    if result.ok:
        values.update(status=SENT, sent_at=now, last_error=None)
    else:
        values.update(last_error=result.error, sent_at=None)
        if result.permanent or attempts >= settings.notify_max_attempts:
            values["status"] = FAILED
        else:
            values.update(
                status=PENDING, next_attempt_at=now + backoff(attempts, settings.notify_backoff, rng)
            )
    n = t.notifications.c
    # Only the claim's holder records: a sender that stalled past its claim, whose
    # row another notifier took over, must not add attempt rows or overwrite the status.
    mine = (
        await conn.execute(
            update(t.notifications)
            .where(n.id == job.notification_id)
            .where(n.claim_token == job.token)
            .values(values)
        )
    ).rowcount == 1
    if not mine:
        return None
    recorded = [job.notification_id]
    if job.riders:
        rider_values: dict[str, Any] = {
            "claimed_until": None,
            "claim_token": None,
            "attempts": n.attempts + 1,
        }
        if result.ok:
            rider_values.update(
                status=COALESCED,
                sent_at=now,
                last_error=f"sent in the digest of notification {job.notification_id}",
            )
        elif values.get("status") == FAILED:
            rider_values.update(status=FAILED, last_error=result.error)
        else:
            rider_values.update(
                status=HELD, next_attempt_at=values["next_attempt_at"], last_error=result.error
            )
        riders = (
            (
                await conn.execute(
                    update(t.notifications)
                    .where(n.id.in_(job.riders))
                    .where(n.claim_token == job.rider_token)
                    .values(rider_values)
                    .returning(n.id)
                )
            )
            .scalars()
            .all()
        )
        recorded.extend(riders)
    await conn.execute(
        t.notification_attempts.insert(),
        [{"notification_id": i, "at": now, "ok": result.ok, "error": result.error} for i in recorded],
    )
    return len(recorded)


async def next_delivery_at(engine: AsyncEngine) -> datetime | None:
    """When the earliest open (pending or held) notification becomes due (the notifier's sleep)."""
    async with engine.connect() as conn:
        value = (
            await conn.execute(
                select(t.notifications.c.next_attempt_at)
                .where(t.notifications.c.status.in_(OPEN_STATUSES))
                .order_by(t.notifications.c.next_attempt_at)
                .limit(1)
            )
        ).scalar_one_or_none()
    return value if value is None else value.astimezone(UTC)
