"""The outbox: alerts and their notifications (alert × channel), as one storage port.

Every write of the ``alerts``, ``notifications`` and ``notification_attempts`` tables goes
through here, so the rules live in one place (DESIGN §6 "Notifier"):

* an alert is unique per ``(project, check, key)`` — :func:`insert_alerts` is ``INSERT … ON
  CONFLICT DO NOTHING`` and says which rows it inserted; only those are queued;
* :func:`enqueue` is the one insert of notifications (effects, reminders and outages all use it);
* a sender owns a row while the row carries its ``claim_token``: :func:`claim` writes the
  token, and every later write (:func:`renew`, :func:`reschedule`, :func:`record_attempts`,
  :func:`release`) is conditional on it, so a sender whose claim was taken over writes nothing.

Every function takes an open connection and runs in the caller's transaction; each does a
fixed number of statements whatever the batch size (multi-row ``VALUES`` lists or
executemany), so a burst of a thousand alerts costs a handful of round trips, not thousands.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import bindparam, exists, func, or_, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from monitor.storage import bulk
from monitor.storage import tables as t


class OutboxStatus(StrEnum):
    """A notification's status (the ``notifications.status`` column)."""

    PENDING = "pending"
    """Due at ``next_attempt_at``; claimed by one sender at a time."""
    HELD = "held"
    """Over the channel's rate limit; waits for room, then goes out in one digest."""
    SENT = "sent"
    """Delivered (``sent_at``)."""
    COALESCED = "coalesced"
    """Delivered inside another notification's digest."""
    FAILED = "failed"
    """Given up after ``MONITOR_NOTIFY_MAX_ATTEMPTS`` or a permanent error (dead)."""
    SUPPRESSED = "suppressed"
    """Raised inside a maintenance window: recorded, never sent."""


OPEN_STATUSES: tuple[OutboxStatus, ...] = (OutboxStatus.PENDING, OutboxStatus.HELD)
"""Statuses of notifications that may still be sent."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NewAlert:
    """One alert row to insert (``title`` is cut to the column's 300 characters)."""

    project_id: int
    check_id: int | None
    key: str
    kind: str
    created_at: datetime
    title: str
    message: str
    scheduled: datetime | None = None
    run_id: str | None = None
    rid: str | None = None
    count: int = 1
    facts: str | None = None
    token: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Notice:
    """One notification to queue: ``alert_id`` to ``channel_id``, due at ``due_at`` (aware UTC)."""

    alert_id: int
    channel_id: str
    due_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class Route:
    """A channel a check (or project) may notify, with its ``kinds`` filter (comma-separated)."""

    channel_id: str
    kinds: str

    def accepts(self, kind: str, *, also: str | None = None) -> bool:
        """The channel's ``kinds`` filter (DESIGN §9): empty accepts every kind; else ``kind``
        (or ``also``, a second kind that qualifies) must be in the comma-separated list."""
        wanted = {k.strip() for k in self.kinds.split(",") if k.strip()}
        return not wanted or kind in wanted or (also is not None and also in wanted)


# --------------------------------------------------------------------------- raising


async def insert_alerts(conn: AsyncConnection, alerts: Sequence[NewAlert]) -> list[int | None]:
    """Insert ``alerts`` (``ON CONFLICT DO NOTHING`` on ``(project, check, key)``).

    One statement (:func:`monitor.storage.bulk.insert_returning`: ``unnest`` arrays on
    PostgreSQL, multi-row ``VALUES`` on SQLite) whose text depends only on the columns; SQLAlchemy's
    per-row parameter handling of a Core ``executemany`` cost more than the insert at thousands of
    alerts per sweep. Two alerts of one call with the same ``(project, check, key)``: the first
    one given wins. :class:`AlertInsert` is the same insert as a write of
    :func:`monitor.storage.bulk.write_together`.

    Returns:
        Per alert given, in order: its new id, or ``None`` when it existed already (another
        writer raised it first) or repeated an earlier alert of this call.
    """
    insert = AlertInsert.of(alerts)
    return insert.ids(await bulk.write_together(conn, [insert.write]))


@dataclass(frozen=True, kw_only=True, slots=True)
class AlertInsert:
    """:func:`insert_alerts` as a write: ``write`` inserts the first alert given of each
    ``(project, check, key)`` and returns the rows it inserted, which :meth:`ids` maps back to
    the alerts given."""

    count: int
    first: Mapping[tuple[int, int | None, str], int]
    write: bulk.RowsWrite

    @classmethod
    def of(cls, alerts: Sequence[NewAlert]) -> AlertInsert:
        first: dict[tuple[int, int | None, str], int] = {}
        for index, alert in enumerate(alerts):
            first.setdefault((alert.project_id, alert.check_id, alert.key), index)
        write = bulk.RowsWrite(
            table=t.alerts,
            rows=[_alert_values(alerts[i]) for i in sorted(first.values())],
            columns=ALERT_COLUMNS,
            ignore_conflicts=True,
            returning=("id", "project_id", "check_id", "key"),
        )
        return cls(count=len(alerts), first=first, write=write)

    def ids(self, inserted: Sequence[tuple[Any, ...]]) -> list[int | None]:
        """Per alert given, in order: its new id among ``inserted`` (the write's returned rows),
        or ``None`` (it existed already, or repeated an earlier alert)."""
        ids: list[int | None] = [None] * self.count
        for alert_id, project_id, check_id, key in inserted:
            ids[self.first[(project_id, check_id, key)]] = int(alert_id)
        return ids


ALERT_COLUMNS = (
    "project_id",
    "check_id",
    "key",
    "kind",
    "scheduled",
    "run_id",
    "rid",
    "count",
    "created_at",
    "title",
    "message",
    "facts",
    "token",
)
"""The columns a new alert sets (:func:`_alert_values`)."""


def _alert_values(alert: NewAlert) -> dict[str, Any]:
    return {
        "project_id": alert.project_id,
        "check_id": alert.check_id,
        "key": alert.key,
        "kind": alert.kind,
        "scheduled": alert.scheduled,
        "run_id": alert.run_id,
        "rid": alert.rid,
        "count": alert.count,
        "created_at": alert.created_at,
        "title": alert.title[:300],
        "message": alert.message,
        "facts": alert.facts,
        "token": alert.token,
    }


async def alert_exists(conn: AsyncConnection, project_id: int, check_id: int | None, key: str) -> bool:
    """Whether the alert ``(project, check, key)`` was raised already."""
    a = t.alerts.c
    check = a.check_id.is_(None) if check_id is None else a.check_id == check_id
    query = select(a.id).where(a.project_id == project_id).where(check).where(a.key == key)
    return (await conn.execute(query)).first() is not None


async def raise_count(
    conn: AsyncConnection,
    *,
    project_id: int,
    check_id: int,
    key: str,
    count: int,
    text: tuple[str, str, str] | None = None,
) -> None:
    """Raise a raised alert's ``count`` to ``count`` (never lowers it).

    Args:
        text: ``(title, message, facts JSON)`` replacing the stored text, when the new count
            changes what the alert says.
    """
    a = t.alerts.c
    values: dict[str, object] = {"count": count}
    if text is not None:
        values.update(title=text[0][:300], message=text[1], facts=text[2])
    await conn.execute(
        update(t.alerts)
        .where(a.project_id == project_id)
        .where(a.check_id == check_id)
        .where(a.key == key)
        .where(a.count < count)
        .values(values)
    )


_CHECK_ROUTES = {
    postgres: (
        select(t.check_channels.c.check_id, t.channels.c.id, t.channels.c.kinds)
        .join(t.check_channels, t.check_channels.c.channel_id == t.channels.c.id)
        .where(bulk.member_of(t.check_channels.c.check_id, "ids", postgres=postgres))
        .order_by(t.check_channels.c.check_id, t.channels.c.id)
    )
    for postgres in (False, True)
}
"""Built once per dialect (SQLite, PostgreSQL): every sweep batch that alerts reads its checks'
routes."""


async def check_routes(conn: AsyncConnection, check_ids: Collection[int]) -> dict[int, list[Route]]:
    """The channels attached to each check (one query), ``{check id: [Route, …]}``."""
    routes: dict[int, list[Route]] = defaultdict(list)
    if not check_ids:
        return routes
    statement = _CHECK_ROUTES[conn.dialect.name == "postgresql"]
    rows = await conn.execute(statement, {"ids": sorted(set(check_ids))})
    for check_id, channel_id, kinds in rows.all():
        routes[check_id].append(Route(channel_id=channel_id, kinds=kinds))
    return routes


async def project_routes(
    conn: AsyncConnection, project_id: int, channel_ids: Collection[str] | None = None
) -> list[Route]:
    """The project's channels (only those among ``channel_ids`` when given)."""
    ch = t.channels.c
    query = select(ch.id, ch.kinds).where(ch.project_id == project_id).order_by(ch.id)
    if channel_ids is not None:
        if not channel_ids:
            return []
        query = query.where(ch.id.in_(sorted(set(channel_ids))))
    return [Route(channel_id=i, kinds=k) for i, k in (await conn.execute(query)).all()]


async def enqueue(conn: AsyncConnection, notices: Sequence[Notice]) -> int:
    """Queue ``notices`` as pending notifications with no attempts: one statement
    (:func:`monitor.storage.bulk.insert_rows`).

    Returns:
        How many rows were queued.

    Raises:
        sqlalchemy.exc.IntegrityError: an ``(alert, channel)`` pair is queued already, or the
            alert or channel does not exist.
    """
    if not notices:
        return 0
    await bulk.insert_rows(
        conn,
        t.notifications,
        [
            {
                "alert_id": notice.alert_id,
                "channel_id": notice.channel_id,
                "status": OutboxStatus.PENDING.value,
                "attempts": 0,
                "next_attempt_at": notice.due_at,
                "created_at": notice.due_at,
            }
            for notice in notices
        ],
        NOTICE_COLUMNS,
    )
    return len(notices)


NOTICE_COLUMNS = ("alert_id", "channel_id", "status", "attempts", "next_attempt_at", "created_at")


# --------------------------------------------------------------------------- claiming


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
            (earlier.c.status == OutboxStatus.PENDING)
            | ((earlier.c.status == OutboxStatus.HELD) & (earlier.c.claimed_until >= now))
        )
    )


async def claim(
    conn: AsyncConnection,
    now: datetime,
    *,
    until: datetime,
    token: str,
    limit: int,
    skip_channels: Collection[str] = (),
    skip_notifications: Collection[int] = (),
) -> list[Mapping[Any, Any]]:
    """Claim up to ``limit`` due notifications for ``token`` until ``until``.

    Due: open, ``next_attempt_at ≤ now``, not claimed (or the claim lapsed), and first in line
    for its check and channel. PostgreSQL selects the candidates ``FOR UPDATE SKIP LOCKED``;
    SQLite (no row locks) takes them with one conditional update whose ``RETURNING`` says
    which rows this call won.

    Returns:
        The claimed rows, oldest due first, joined with their alert, channel and check:
        ``id, attempts, alert_id, channel_id, url, project_id, check_id, title, message,
        facts, kind, scheduled, created_at, uuid, slug, name, episode_key, paused, watch_from``.
    """
    if limit <= 0:
        return []
    n = t.notifications.c
    values = {"claimed_until": until, "claim_token": token}
    candidates = (
        select(n.id)
        .join(t.alerts, t.alerts.c.id == n.alert_id)
        .where(_due(now))
        .where(_first_in_line(now))
        .order_by(n.next_attempt_at, n.id)
        .limit(limit)
    )
    if skip_channels:
        candidates = candidates.where(n.channel_id.not_in(sorted(skip_channels)))
    if skip_notifications:
        candidates = candidates.where(n.id.not_in(sorted(skip_notifications)))
    if conn.dialect.name == "postgresql":
        ids = list(
            (await conn.execute(candidates.with_for_update(skip_locked=True, of=t.notifications)))
            .scalars()
            .all()
        )
        if ids:
            await conn.execute(update(t.notifications).where(n.id.in_(ids)).values(values))
    else:
        ids = list((await conn.execute(candidates)).scalars().all())
        if ids:
            # conditional: a row another sender claimed since the select stays theirs
            stmt = update(t.notifications).where(n.id.in_(ids)).where(_due(now)).values(values)
            won = set((await conn.execute(stmt.returning(n.id))).scalars().all())
            ids = [i for i in ids if i in won]
    if not ids:
        return []
    query = _job_query().where(n.id.in_(ids)).where(n.claim_token == token)
    rows = {row["id"]: row for row in (await conn.execute(query)).mappings().all()}
    return [rows[i] for i in ids if i in rows]


def _job_query() -> Any:
    n, a, ch, c = t.notifications.c, t.alerts.c, t.channels.c, t.checks.c
    return (
        select(
            n.id,
            n.attempts,
            n.alert_id,
            n.channel_id,
            ch.url,
            a.project_id,
            a.check_id,
            a.title,
            a.message,
            a.facts,
            a.kind,
            a.scheduled,
            a.created_at,
            c.uuid,
            c.slug,
            c.name,
            c.episode_key,
            c.paused,
            c.watch_from,
        )
        .join(t.channels, ch.id == n.channel_id)
        .join(t.alerts, a.id == n.alert_id)
        .outerjoin(t.checks, c.id == a.check_id)
    )


async def release(conn: AsyncConnection, claims: Mapping[str, Collection[int]]) -> None:
    """Give claimed rows back unchanged (claimable at once): ``{token: notification ids}``."""
    n = t.notifications.c
    for token, ids in claims.items():
        if ids:
            await conn.execute(
                update(t.notifications)
                .where(n.id.in_(sorted(ids)))
                .where(n.claim_token == token)
                .values(claimed_until=None, claim_token=None)
            )


async def lock_channels(conn: AsyncConnection, channel_ids: Collection[str]) -> None:
    """PostgreSQL: lock the channels' rows ``FOR NO KEY UPDATE``, in id order, until commit.

    Serialises preparations per channel (rate-limit counts, taking riders) without holding up
    inserts of notifications (a foreign key's share lock). A no-op on SQLite (one writer).
    """
    if conn.dialect.name != "postgresql" or not channel_ids:
        return
    await conn.execute(
        select(t.channels.c.id)
        .where(t.channels.c.id.in_(sorted(set(channel_ids))))
        .order_by(t.channels.c.id)
        .with_for_update(key_share=True)
    )


async def renew(conn: AsyncConnection, claims: Mapping[str, Collection[int]], *, until: datetime) -> set[int]:
    """Extend the claims that still hold: rows still open and carrying their token.

    Args:
        claims: ``{token: notification ids}``.
        until: the new end of the claims.

    Returns:
        The ids renewed; a row missing was taken over (or finished) by another sender.
    """
    n = t.notifications.c
    renewed: set[int] = set()
    for token, ids in claims.items():
        if not ids:
            continue
        stmt = (
            update(t.notifications)
            .where(n.id.in_(sorted(ids)))
            .where(n.claim_token == token)
            .where(n.status.in_(OPEN_STATUSES))
            .values(claimed_until=until)
            .returning(n.id)
        )
        renewed.update((await conn.execute(stmt)).scalars().all())
    return renewed


async def mark_sending(conn: AsyncConnection, ids: Collection[int], now: datetime) -> None:
    """Stamp ``sent_at`` on rows about to be sent: they count against the rate limit while in flight."""
    if ids:
        n = t.notifications.c
        await conn.execute(update(t.notifications).where(n.id.in_(sorted(ids))).values(sent_at=now))


async def reschedule(
    conn: AsyncConnection,
    notification_id: int,
    token: str,
    *,
    status: OutboxStatus,
    last_error: str,
    next_attempt_at: datetime | None = None,
) -> bool:
    """Set a claimed row's status (held, suppressed …) and give the claim back, under ``token``.

    Returns:
        True if the row still carried ``token`` (and was changed).
    """
    n = t.notifications.c
    values: dict[str, Any] = {
        "claimed_until": None,
        "claim_token": None,
        "status": status.value,
        "last_error": last_error,
    }
    if next_attempt_at is not None:
        values["next_attempt_at"] = next_attempt_at
    result = await conn.execute(
        update(t.notifications).where(n.id == notification_id).where(n.claim_token == token).values(values)
    )
    return bool(result.rowcount == 1)


@dataclass(frozen=True, kw_only=True, slots=True)
class Source:
    """The rate limit's unit: one channel and one check (``check_id`` None: the project's
    project-level alerts)."""

    channel_id: str
    project_id: int
    check_id: int | None


async def recent_sends(
    conn: AsyncConnection,
    sources: Collection[Source],
    *,
    since: datetime,
    now: datetime,
    exclude: Collection[int],
) -> dict[Source, tuple[int, datetime | None]]:
    """Per source: how many notifications were sent after ``since`` — or are being sent now
    (open, ``sent_at`` stamped, claim alive) — and the oldest of their ``sent_at``.

    Args:
        exclude: notification ids not to count (the ones being prepared).

    Returns:
        ``{source: (count, oldest sent_at or None)}`` for every source given.
    """
    counts: dict[Source, tuple[int, datetime | None]] = {source: (0, None) for source in sources}
    if not sources:
        return counts
    n, a = t.notifications.c, t.alerts.c
    channels = sorted({s.channel_id for s in sources})
    projects = sorted({s.project_id for s in sources})
    query = (
        select(n.channel_id, a.project_id, a.check_id, func.count(), func.min(n.sent_at))
        .select_from(t.notifications.join(t.alerts, a.id == n.alert_id))
        .where(n.channel_id.in_(channels))
        .where(a.project_id.in_(projects))
        .where(n.sent_at > since)
        .where(
            or_(
                n.status == OutboxStatus.SENT,
                n.status.in_(OPEN_STATUSES) & (n.claimed_until >= now),
            )
        )
        .group_by(n.channel_id, a.project_id, a.check_id)
    )
    checks = sorted({s.check_id for s in sources if s.check_id is not None})
    project_level = any(s.check_id is None for s in sources)
    query = query.where(
        or_(a.check_id.in_(checks), a.check_id.is_(None)) if project_level else a.check_id.in_(checks)
    )
    if exclude:
        query = query.where(n.id.not_in(sorted(exclude)))
    for channel_id, project_id, check_id, count, oldest in (await conn.execute(query)).all():
        source = Source(channel_id=channel_id, project_id=project_id, check_id=check_id)
        if source in counts:
            counts[source] = (count, oldest)
    return counts


async def held_sources(conn: AsyncConnection, sources: Collection[Source]) -> set[Source]:
    """The sources among ``sources`` that have held notifications (candidates for a digest)."""
    if not sources:
        return set()
    n, a = t.notifications.c, t.alerts.c
    query = (
        select(n.channel_id, a.project_id, a.check_id)
        .select_from(t.notifications.join(t.alerts, a.id == n.alert_id))
        .where(n.status == OutboxStatus.HELD)
        .where(n.channel_id.in_(sorted({s.channel_id for s in sources})))
        .where(a.project_id.in_(sorted({s.project_id for s in sources})))
        .distinct()
    )
    found = {
        Source(channel_id=channel_id, project_id=project_id, check_id=check_id)
        for channel_id, project_id, check_id in (await conn.execute(query)).all()
    }
    return found & set(sources)


async def claim_riders(
    conn: AsyncConnection,
    source: Source,
    *,
    owner: int,
    owner_token: str,
    exclude: Collection[int] = (),
    token: str,
    until: datetime,
    now: datetime,
    limit: int,
) -> list[int]:
    """Take up to ``limit`` held rows of ``source`` into notification ``owner``'s delivery.

    Rows claimed by nobody, or by ``owner_token`` (the owner's own claim batch), qualify; they
    get ``token`` until ``until``, so their own jobs of the batch (if any) find their claim
    gone and send nothing.

    Args:
        exclude: ids never taken (rows of the owner's batch that are being sent themselves).

    Returns:
        The rider ids, oldest first.
    """
    n = t.notifications.c
    free = or_(n.claimed_until.is_(None), n.claimed_until < now, n.claim_token == owner_token)
    held = await _held_of(conn, source, free, never=sorted({owner, *exclude}), limit=limit)
    if not held:
        return []
    won = set(
        (
            await conn.execute(
                update(t.notifications)
                .where(n.id.in_(list(held)))
                .where(n.status == OutboxStatus.HELD)
                .where(free)
                .values(claimed_until=until, claim_token=token)
                .returning(n.id)
            )
        )
        .scalars()
        .all()
    )
    return [i for i in held if i in won]


async def _held_of(
    conn: AsyncConnection, source: Source, free: ColumnElement[bool], *, never: list[int], limit: int
) -> list[int]:
    """Up to ``limit`` ids of ``source``'s held rows that are ``free`` and not in ``never``, oldest first."""
    n, a = t.notifications.c, t.alerts.c
    same = (
        (a.check_id.is_(None) & (a.project_id == source.project_id))
        if source.check_id is None
        else a.check_id == source.check_id
    )
    query = (
        select(n.id)
        .join(t.alerts, a.id == n.alert_id)
        .where(same)
        .where(n.channel_id == source.channel_id)
        .where(n.status == OutboxStatus.HELD)
        .where(n.id.not_in(never))
        .where(free)
        .order_by(n.id)
        .limit(limit)
    )
    return list((await conn.execute(query)).scalars().all())


async def alert_texts(conn: AsyncConnection, notification_ids: Collection[int]) -> list[Mapping[Any, Any]]:
    """``title, message, facts, kind, created_at`` of the notifications' alerts, oldest raised
    first (``title`` and ``message`` are ``""`` when the alert stored only its facts)."""
    a = t.alerts.c
    query = (
        select(a.title, a.message, a.facts, a.kind, a.created_at)
        .join(t.notifications, t.notifications.c.alert_id == a.id)
        .where(t.notifications.c.id.in_(sorted(notification_ids)))
        .order_by(a.created_at, a.id)
    )
    return list((await conn.execute(query)).mappings().all())


# --------------------------------------------------------------------------- recording


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """One attempt's result to record on its row (and its riders) under the claim's token.

    Attributes:
        status: the row's new status: ``SENT``, ``PENDING`` (retry at ``next_attempt_at``) or
            ``FAILED`` (dead).
        riders: ids of held rows carried in this delivery (a digest), claimed with
            ``rider_token``; they become ``COALESCED`` when sent, ``FAILED`` when the row
            fails for good, else ``HELD`` until ``next_attempt_at``.
    """

    notification_id: int
    token: str
    attempts: int
    at: datetime
    ok: bool
    error: str | None
    status: OutboxStatus
    next_attempt_at: datetime | None = None
    riders: tuple[int, ...] = ()
    rider_token: str = ""


async def record_attempts(conn: AsyncConnection, outcomes: Sequence[Outcome]) -> dict[int, int]:
    """Record each outcome exactly once: the row's new status plus one attempt row per row sent.

    Only the claim's holder records: an outcome whose row no longer carries its token (a
    sender that stalled past its claim, whose row another sender took over) writes nothing.
    Ownership is read once for the whole batch under a lock (PostgreSQL ``FOR UPDATE``;
    SQLite's transactions hold the write lock from ``BEGIN IMMEDIATE``), then the rows are
    updated and the attempts inserted with one executemany each.

    Returns:
        ``{notification id: rows recorded (1 + riders)}`` for the outcomes recorded; an
        outcome missing was not recorded.
    """
    unique: dict[int, Outcome] = {}
    for o in outcomes:
        unique.setdefault(o.notification_id, o)  # a row is recorded once per claim
    outcomes = list(unique.values())
    if not outcomes:
        return {}
    n = t.notifications.c
    owned_query = select(n.id, n.claim_token).where(
        tuple_(n.id, n.claim_token).in_([(o.notification_id, o.token) for o in outcomes])
    )
    if conn.dialect.name == "postgresql":
        owned_query = owned_query.order_by(n.id).with_for_update()
    owned = {(i, token) for i, token in (await conn.execute(owned_query)).all()}
    mine = [o for o in outcomes if (o.notification_id, o.token) in owned]
    if not mine:
        return {}
    await _update_rows(conn, mine)
    recorded: dict[int, list[int]] = {o.notification_id: [o.notification_id] for o in mine}
    for o in mine:
        if o.riders:
            recorded[o.notification_id].extend(await _record_riders(conn, o))
    attempts = [
        {"notification_id": i, "at": o.at, "ok": o.ok, "error": o.error}
        for o in mine
        for i in recorded[o.notification_id]
    ]
    await conn.execute(t.notification_attempts.insert(), attempts)
    return {i: len(ids) for i, ids in recorded.items()}


async def _update_rows(conn: AsyncConnection, mine: Sequence[Outcome]) -> None:
    """Write each recorded outcome's status on its row (still under the outcome's token):
    one executemany for the rows without a retry time, one for those with."""
    n = t.notifications.c
    rows = []
    for o in mine:
        row: dict[str, Any] = {
            "b_id": o.notification_id,
            "b_token": o.token,
            "attempts": o.attempts,
            "claimed_until": None,
            "claim_token": None,
            "status": o.status.value,
            "last_error": None if o.ok else o.error,
            "sent_at": o.at if o.ok else None,
            "next_attempt_at": o.next_attempt_at,
        }
        rows.append(row)
    columns = ("attempts", "claimed_until", "claim_token", "status", "last_error", "sent_at")
    retry_rows = [r for r in rows if r["next_attempt_at"] is not None]
    plain_rows = [
        {k: v for k, v in r.items() if k != "next_attempt_at"} for r in rows if r["next_attempt_at"] is None
    ]
    for batch, names in ((plain_rows, columns), (retry_rows, (*columns, "next_attempt_at"))):
        if batch:
            stmt = (
                update(t.notifications)
                .where(n.id == bindparam("b_id"))
                .where(n.claim_token == bindparam("b_token"))
                .values({c: bindparam(c) for c in names})
            )
            await conn.execute(stmt, batch)


async def _record_riders(conn: AsyncConnection, o: Outcome) -> list[int]:
    n = t.notifications.c
    values: dict[str, Any] = {"claimed_until": None, "claim_token": None, "attempts": n.attempts + 1}
    if o.ok:
        values.update(
            status=OutboxStatus.COALESCED.value,
            sent_at=o.at,
            last_error=f"sent in the digest of notification {o.notification_id}",
        )
    elif o.status is OutboxStatus.FAILED:
        values.update(status=OutboxStatus.FAILED.value, last_error=o.error)
    else:
        values.update(status=OutboxStatus.HELD.value, next_attempt_at=o.next_attempt_at, last_error=o.error)
    stmt = (
        update(t.notifications)
        .where(n.id.in_(list(o.riders)))
        .where(n.claim_token == o.rider_token)
        .values(values)
        .returning(n.id)
    )
    return list((await conn.execute(stmt)).scalars().all())


# --------------------------------------------------------------------------- reading


async def maintenance_windows(conn: AsyncConnection, project_ids: Collection[int]) -> list[Mapping[Any, Any]]:
    """The ``maintenance_windows`` rows of the projects (check-level and project-level)."""
    if not project_ids:
        return []
    w = t.maintenance_windows.c
    query = select(t.maintenance_windows).where(w.project_id.in_(sorted(set(project_ids)))).order_by(w.id)
    return list((await conn.execute(query)).mappings().all())


async def held_back_alerts(
    conn: AsyncConnection,
    project_id: int,
    check_id: int | None,
    *,
    start: datetime,
    end: datetime,
    except_kind: str,
) -> list[tuple[datetime, str, str, str | None]]:
    """``(raised at, title, message, facts)`` of the project's alerts raised in ``[start, end)``
    that have a notification suppressed or still open, oldest first (a maintenance summary's
    list; ``title`` and ``message`` are ``""`` when the alert stored only its facts).

    Args:
        check_id: only this check's alerts; ``None``: every alert of the project.
        except_kind: a kind left out (the summaries themselves).
    """
    a, n = t.alerts.c, t.notifications.c
    waiting = (
        select(n.id)
        .where(n.alert_id == a.id)
        .where(n.status.in_((OutboxStatus.SUPPRESSED, *OPEN_STATUSES)))
        .exists()
    )
    query = (
        select(a.created_at, a.title, a.message, a.facts)
        .where(a.project_id == project_id)
        .where(a.created_at >= start)
        .where(a.created_at < end)
        .where(a.kind != except_kind)
        .where(waiting)
        .order_by(a.created_at, a.id)
    )
    if check_id is not None:
        query = query.where(a.check_id == check_id)
    return [(at, title, message, facts) for at, title, message, facts in (await conn.execute(query)).all()]


async def next_due_at(conn: AsyncConnection) -> datetime | None:
    """When the earliest open notification becomes due (``next_attempt_at``), or None."""
    n = t.notifications.c
    query = select(n.next_attempt_at).where(n.status.in_(OPEN_STATUSES)).order_by(n.next_attempt_at).limit(1)
    return (await conn.execute(query)).scalar_one_or_none()
