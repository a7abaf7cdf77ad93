"""Deliver notifications from the outbox (DESIGN §6 "Notifier", §7).

No lease. Each notification (alert × channel, unique) moves through these statuses
(:class:`monitor.storage.outbox.OutboxStatus`; the SQL is in that storage port):

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
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.domain import maintenance, messages, retry
from monitor.domain.messages import Message, humanize_duration
from monitor.notify import templates
from monitor.notify.base import DeliveryResult, Notifier
from monitor.settings import Settings
from monitor.storage import outbox
from monitor.storage.outbox import OutboxStatus
from monitor.storage.unit_of_work import Connection, Engine, UnitOfWork

logger = logging.getLogger(__name__)

MAX_BACKOFF_S = 3600.0
"""The longest wait between two attempts of one notification, seconds."""

BACKOFF_JITTER = 0.25
"""Retry delays are spread ±25 % (rows that failed together are not retried together)."""

#: Most held rows folded into one digest (the rest follow in the next one).
DIGEST_LIMIT = 100


def retry_delay(attempts: int, settings: Settings, rng: random.Random | None = None) -> timedelta:
    """Wait before attempt ``attempts + 1`` of a notification (DESIGN §6: exponential, jittered).

    :func:`monitor.domain.retry.backoff` with base ``MONITOR_NOTIFY_BACKOFF`` seconds, factor 2,
    ±25 % jitter, capped at 1 h.
    """
    return timedelta(
        seconds=retry.backoff(
            attempts, base=settings.notify_backoff, cap=MAX_BACKOFF_S, jitter=BACKOFF_JITTER, rng=rng
        )
    )


def claim_length(settings: Settings) -> timedelta:
    """How long a claim lasts: ``2 × MONITOR_NOTIFY_TIMEOUT + 5 s`` (one attempt fits twice)."""
    return timedelta(seconds=settings.notify_timeout * 2 + 5)


@dataclass(frozen=True, kw_only=True, slots=True)
class Delivery:
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

    @property
    def source(self) -> outbox.Source:
        """The rate limit's unit: this channel and this check (or the project's project-level alerts)."""
        return outbox.Source(channel_id=self.channel_id, project_id=self.project_id, check_id=self.check_id)


async def claim_due(
    engine: Engine,
    now: datetime,
    *,
    settings: Settings,
    limit: int,
    skip_channels: Collection[str] = (),
    skip_notifications: Collection[int] = (),
    keep: Callable[[str, str], bool] | None = None,
) -> list[Delivery]:
    """Claim up to ``limit`` due notifications for this sender, in one transaction.

    Only the first open notification per check and channel is due (order per check and
    channel, :func:`monitor.storage.outbox.claim`). Every claimed row gets this call's
    ``claim_token``.

    Args:
        now: the claim instant (aware UTC); a claim lasts :func:`claim_length`.
        limit: most rows to claim (≤ 0 claims nothing).
        skip_channels: channel ids not to claim for now (their target host is at its limit of
            deliveries in flight).
        skip_notifications: notification ids not to claim (already handled by the caller).
        keep: called with ``(channel_id, url)`` for each claimed row, oldest due first; a row it
            answers false for is given back in the same transaction and never rendered (the
            notifier's per-target limit: rows beyond a target's room cost no template and no
            second transaction).

    Returns:
        The claimed jobs, oldest due first, with their messages rendered.

    Long because the claim, the per-target give-back and the rendering happen in one transaction, in
    that order.
    """
    if limit <= 0:
        return []
    token = uuid_module.uuid4().hex
    async with UnitOfWork.begin(engine) as uow:
        rows = await outbox.claim(
            uow.connection,
            now,
            until=now + claim_length(settings),
            token=token,
            limit=limit,
            skip_channels=skip_channels,
            skip_notifications=skip_notifications,
        )
        if keep is not None:
            kept = [row for row in rows if keep(row["channel_id"], row["url"])]
            given_back = {row["id"] for row in rows} - {row["id"] for row in kept}
            if given_back:
                await outbox.release(uow.connection, {token: given_back})
            rows = kept
    return [_job(row, token, settings) for row in rows]


def _claims(jobs: Sequence[Delivery]) -> dict[str, set[int]]:
    claims: dict[str, set[int]] = defaultdict(set)
    for job in jobs:
        claims[job.token].add(job.notification_id)
    return claims


async def release_claims(engine: Engine, jobs: Sequence[Delivery]) -> None:
    """Give back claimed, unsent jobs (their rows become claimable at once), under their tokens."""
    if not jobs:
        return
    async with UnitOfWork.begin(engine) as uow:
        await outbox.release(uow.connection, _claims(jobs))


def _job(row: Mapping[Any, Any], token: str, settings: Settings) -> Delivery:
    return Delivery(
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
    template fall back to the title and text stored with the alert, or rendered from the facts with
    the package templates; facts that do not parse either give a title of the check's name and
    the kind, and the raw facts as the body.
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
    try:
        title, body = templates.stored_text(row["title"], row["message"], row["facts"])
    except ValueError:
        # facts that do not parse and no stored text: say what the row holds rather than
        # never delivering the alert
        name = row["name"] or row["uuid"] or "monitor"
        title, body = f"{name}: {row['kind']}", f"{row['kind']} alert; its stored facts: {row['facts']}\n"
    return Message(title=title, body=body, body_markdown=body, json_fields=_json_fields(row))


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


async def prepare(engine: Engine, job: Delivery, now: datetime, *, settings: Settings) -> Delivery | None:
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
    return (await prepare_many(engine, [job], now, settings=settings))[0]


async def prepare_many(
    engine: Engine, jobs: Sequence[Delivery], now: datetime, *, settings: Settings
) -> list[Delivery | None]:
    """:func:`prepare` for several jobs in one transaction (the notifier's batches).

    A fixed number of statements per batch, whatever its size: lock the channels (PostgreSQL,
    in id order, so two senders' batches never deadlock), renew every claim, read the
    projects' maintenance windows and the sources' recent sends once; then the jobs are judged
    in channel order, each counting against the rate limit the ones accepted before it.

    Returns:
        One entry per job, in the order given: the job to send, or ``None``.
    """
    if not jobs:
        return []
    async with UnitOfWork.begin(engine) as uow:
        return await _prepare_batch(uow.connection, jobs, now, settings)


async def _prepare_batch(
    conn: Connection, jobs: Sequence[Delivery], now: datetime, settings: Settings
) -> list[Delivery | None]:
    """The batch's jobs that go out now (``None`` where not), in four steps: still claimed,
    not held back by a maintenance window, within the rate limit, with their digest riders."""
    until = now + claim_length(settings)
    await outbox.lock_channels(conn, {job.channel_id for job in jobs})
    live = _still_claimed(jobs, await outbox.renew(conn, _claims(jobs), until=until))
    unmuted = await _not_in_maintenance(conn, jobs, live)
    accepted = await _within_rate_limit(conn, jobs, unmuted, now, settings)
    return await _with_riders(conn, jobs, accepted, now=now, until=until, settings=settings)


def _still_claimed(jobs: Sequence[Delivery], renewed: Collection[int]) -> list[int]:
    """Indexes of the jobs whose claim was renewed, by (channel, notification)."""
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i].channel_id, jobs[i].notification_id))
    live = []
    for index in order:
        if jobs[index].notification_id in renewed:
            live.append(index)
        else:
            logger.warning(
                "claim lost before sending; another sender took the notification over",
                extra={"action": "claim_lost", "notification_id": jobs[index].notification_id},
            )
    return live


async def _not_in_maintenance(conn: Connection, jobs: Sequence[Delivery], live: list[int]) -> list[int]:
    """``live`` without the jobs a maintenance window holds back (those are suppressed)."""
    windows: dict[int, list[maintenance.Window]] = defaultdict(list)
    for row in await outbox.maintenance_windows(conn, {jobs[i].project_id for i in live}):
        windows[row["project_id"]].append(window_of(row))
    unmuted = []
    for index in live:
        job = jobs[index]
        window = None
        if job.alert_kind != messages.MAINTENANCE and job.alert_created_at is not None:
            window = maintenance.covering(windows[job.project_id], job.check_id, job.alert_created_at)
        if window is None:
            unmuted.append(index)
            continue
        await outbox.reschedule(
            conn,
            job.notification_id,
            job.token,
            status=OutboxStatus.SUPPRESSED,
            last_error=f"held back by maintenance window {window.name or window.id!r}",
        )
    return unmuted


async def _within_rate_limit(
    conn: Connection, jobs: Sequence[Delivery], unmuted: list[int], now: datetime, settings: Settings
) -> list[int]:
    """``unmuted`` without the jobs over the rate limit (held for a digest), marked sending.

    Project-level alerts (monitor_unavailable, project maintenance summaries) are limited too,
    as one more "check" per channel (a flood of them must not reach a channel). Counted: sent
    ones, plus those being sent right now (stamped here; a dead sender's stamp lapses with its
    claim)."""
    rate_window = timedelta(seconds=settings.notify_rate_window)
    sends = await outbox.recent_sends(
        conn,
        {jobs[i].source for i in unmuted},
        since=now - rate_window,
        now=now,
        exclude={jobs[i].notification_id for i in unmuted},
    )
    accepted = []
    for index in unmuted:
        job = jobs[index]
        count, oldest = sends[job.source]
        if count >= settings.notify_rate_limit:
            room_at = (oldest or now) + rate_window
            await outbox.reschedule(
                conn,
                job.notification_id,
                job.token,
                status=OutboxStatus.HELD,
                next_attempt_at=max(room_at, now),
                last_error=(
                    f"held back: rate limit of {settings.notify_rate_limit} notifications about one "
                    f"check per channel in {humanize_duration(settings.notify_rate_window)}; "
                    "goes out in a digest"
                ),
            )
            continue
        sends[job.source] = (count + 1, min(oldest, now) if oldest is not None else now)
        accepted.append(index)
    await outbox.mark_sending(conn, {jobs[i].notification_id for i in accepted}, now)
    return accepted


async def _with_riders(
    conn: Connection,
    jobs: Sequence[Delivery],
    accepted: list[int],
    *,
    now: datetime,
    until: datetime,
    settings: Settings,
) -> list[Delivery | None]:
    """The accepted jobs, each carrying the held notifications of its source as a digest."""
    ready: list[Delivery | None] = [None] * len(jobs)
    sending = {jobs[i].notification_id for i in accepted}
    held = await outbox.held_sources(conn, {jobs[i].source for i in accepted})
    for index in accepted:
        job = jobs[index]
        ready[index] = job
        if job.source not in held:
            continue
        rider_token = uuid_module.uuid4().hex
        riders = await outbox.claim_riders(
            conn,
            job.source,
            owner=job.notification_id,
            owner_token=job.token,
            exclude=sending,
            token=rider_token,
            until=until,
            now=now,
            limit=DIGEST_LIMIT,
        )
        if riders:
            rows = await outbox.alert_texts(conn, [job.notification_id, *riders])
            ready[index] = replace(
                job,
                riders=tuple(riders),
                rider_token=rider_token,
                message=digest(job.message, rows, settings),
            )
    return ready


def digest(first: Message, alerts: Sequence[Mapping[Any, Any]], settings: Settings) -> Message:
    """One message carrying a check's held notifications to a channel (rate limit).

    Args:
        first: the message of the notification whose turn it is (its JSON fields are kept).
        alerts: the alerts of every notification carried, this one's included (``title``,
            ``message``, ``facts``, ``kind``, ``created_at``), oldest first.
    """
    count = len(alerts)
    kinds = list(dict.fromkeys(r["kind"] for r in alerts))
    name = first.json_fields.get("name") or "monitor"
    title = f"{name}: {', '.join(kinds)} — {count} notifications held back by the rate limit"
    intro = (
        f"This channel receives at most {settings.notify_rate_limit} notifications about one check per "
        f"{humanize_duration(settings.notify_rate_window)}; these {count} were held back and arrive together:"
    )
    texts = [templates.stored_text(r["title"], r["message"], r["facts"]) for r in alerts]
    lines = [intro, "", *(f"- {title}" for title, _ in texts), ""]
    text = "\n".join([*lines, *(f"----\n{body.rstrip()}" for _, body in texts)]) + "\n"
    fields = dict(first.json_fields)
    fields.update(kind="digest", count=str(count))
    return Message(title=title[:300], body=text, body_markdown=text, json_fields=fields)


# --------------------------------------------------------------------------- deliver


async def deliver_due(
    engine: Engine,
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
    engine: Engine,
    notifier: Notifier,
    job: Delivery,
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

    job: Delivery
    result: DeliveryResult
    at: datetime


async def record(
    engine: Engine,
    job: Delivery,
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
    engine: Engine,
    attempts: Sequence[Attempt],
    *,
    settings: Settings,
    rng: random.Random | None = None,
) -> None:
    """:func:`record` for several attempts in one transaction (the notifier's recorder).

    Each attempt is recorded only under its claim token (a sender that stalled past its
    claim, whose row another notifier took over, adds no attempt row and changes no status):
    :func:`monitor.storage.outbox.record_attempts`.
    """
    outcomes = [_outcome_of(attempt, settings, rng) for attempt in attempts]
    async with UnitOfWork.begin(engine) as uow:
        recorded = await outbox.record_attempts(uow.connection, outcomes)
    for attempt in attempts:
        _log_attempt(attempt, recorded.get(attempt.job.notification_id))


def _outcome_of(attempt: Attempt, settings: Settings, rng: random.Random | None) -> outbox.Outcome:
    """The row's next status after an attempt: sent; failed for good (a permanent error or the
    last allowed attempt); else pending again after :func:`retry_delay`."""
    job, result, now = attempt.job, attempt.result, attempt.at
    attempts = job.attempts + 1
    next_attempt_at = None
    if result.ok:
        status = OutboxStatus.SENT
    elif result.permanent or attempts >= settings.notify_max_attempts:
        status = OutboxStatus.FAILED
    else:
        status = OutboxStatus.PENDING
        next_attempt_at = now + retry_delay(attempts, settings, rng)
    return outbox.Outcome(
        notification_id=job.notification_id,
        token=job.token,
        attempts=attempts,
        at=now,
        ok=result.ok,
        error=result.error,
        status=status,
        next_attempt_at=next_attempt_at,
        riders=job.riders,
        rider_token=job.rider_token,
    )


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


async def next_delivery_at(engine: Engine) -> datetime | None:
    """When the earliest open (pending or held) notification becomes due (the notifier's sleep)."""
    async with UnitOfWork.read(engine) as uow:
        value = await outbox.next_due_at(uow.connection)
    return value if value is None else value.astimezone(UTC)
