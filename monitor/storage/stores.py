"""SQLAlchemy Core implementations of the storage ports (:mod:`monitor.storage.ports`).

One class per port, each over the open ``AsyncConnection`` of a unit of work. Each serves both
SQLite and PostgreSQL: the statements are dialect-neutral Core, with branches on
``conn.dialect.name`` only where the databases differ — row locks (``FOR UPDATE`` exists on
PostgreSQL only; SQLite's ``BEGIN IMMEDIATE`` already holds the write lock). A unique-constraint
violation is raised as :class:`~monitor.storage.ports.DuplicateKey` after rolling back a
savepoint, so the transaction stays usable.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import case, delete, func, literal, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from monitor.domain.checks import Status
from monitor.storage import cluster, history_totals
from monitor.storage import tables as t
from monitor.storage.ports import DuplicateKey


class _Store:
    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    @property
    def _postgres(self) -> bool:
        return self.conn.dialect.name == "postgresql"


def _column_default(name: str) -> Any:
    """The Python-side default of a ``checks`` column (for rows of a multi-row insert)."""
    default = t.checks.c[name].default
    if default is None:
        return None
    value = getattr(default, "arg", None)
    return None if callable(value) else value


class SqlCheckStore(_Store):
    """:class:`~monitor.storage.ports.CheckStore` on SQLite and PostgreSQL."""

    async def insert(self, values: Mapping[str, Any]) -> int:
        try:
            async with self.conn.begin_nested():
                found = await self.conn.execute(
                    t.checks.insert().values(dict(values)).returning(t.checks.c.id)
                )
                return int(found.scalar_one())
        except IntegrityError as error:
            raise DuplicateKey(str(error.orig)) from None

    async def insert_many(self, rows: Sequence[Mapping[str, Any]]) -> list[int]:
        if not rows:
            return []
        # One column set for every row (a multi-row INSERT needs it), each missing column's
        # default looked up once, not once per row.
        columns = list(dict.fromkeys(c for r in rows for c in r))
        defaults = {c: _column_default(c) for c in columns}
        filled = [r if len(r) == len(columns) else {c: r.get(c, defaults[c]) for c in columns} for r in rows]
        # RETURNING matched back by uuid rather than sort_by_parameter_order: SQLite has no
        # sentinel SQLAlchemy trusts to order the rows of one multi-row INSERT, so the sorted form
        # falls back to one INSERT (two thread hops through aiosqlite) per row.
        statement = t.checks.insert().returning(t.checks.c.id, t.checks.c.uuid)
        try:
            async with self.conn.begin_nested():
                inserted = (await self.conn.execute(statement, filled)).all()
        except IntegrityError as error:
            raise DuplicateKey(str(error.orig)) from None
        by_uuid = {str(u): int(i) for i, u in inserted}
        return [by_uuid[str(r["uuid"])] for r in filled]

    async def update(self, check_id: int, changes: Mapping[str, Any]) -> None:
        try:
            async with self.conn.begin_nested():
                await self.conn.execute(
                    update(t.checks).where(t.checks.c.id == check_id).values(dict(changes))
                )
        except IntegrityError as error:
            raise DuplicateKey(str(error.orig)) from None

    async def delete(self, check_id: int) -> None:
        conn = self.conn
        await history_totals.count_of_check(conn, check_id)  # the metrics' counters keep them
        for table in (t.pings, t.runs, t.tick_marks, t.flips, t.check_channels):
            await conn.execute(delete(table).where(table.c.check_id == check_id))
        alert_ids = select(t.alerts.c.id).where(t.alerts.c.check_id == check_id)
        notification_ids = select(t.notifications.c.id).where(t.notifications.c.alert_id.in_(alert_ids))
        await conn.execute(
            delete(t.notification_attempts).where(
                t.notification_attempts.c.notification_id.in_(notification_ids)
            )
        )
        await conn.execute(delete(t.notifications).where(t.notifications.c.alert_id.in_(alert_ids)))
        await conn.execute(delete(t.alerts).where(t.alerts.c.check_id == check_id))
        await conn.execute(delete(t.checks).where(t.checks.c.id == check_id))

    async def get(self, project_id: int, uuid: str, *, lock: bool = False) -> dict[str, Any] | None:
        query = select(t.checks).where(t.checks.c.uuid == uuid).where(t.checks.c.project_id == project_id)
        if lock and self._postgres:
            query = query.with_for_update()
        row = (await self.conn.execute(query)).mappings().first()
        return None if row is None else dict(row)

    async def by_ids(self, check_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        ids = list(check_ids)
        if not ids:
            return {}
        rows = (await self.conn.execute(select(t.checks).where(t.checks.c.id.in_(ids)))).mappings().all()
        return {int(r["id"]): dict(r) for r in rows}

    async def uuids(self, project_id: int) -> list[str]:
        rows = await self.conn.execute(
            select(t.checks.c.uuid).where(t.checks.c.project_id == project_id).order_by(t.checks.c.id)
        )
        return [str(r[0]) for r in rows]

    async def query(
        self,
        project_id: int,
        *,
        tags: Sequence[str] = (),
        slug: str | None = None,
        after_id: int | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        c = t.checks.c
        query = select(t.checks).where(c.project_id == project_id)
        if slug is not None:
            query = query.where(c.slug == slug)
        for wanted in dict.fromkeys(tags):
            # tags are space-separated words: match a whole word
            query = query.where(
                (literal(" ") + c.tags + literal(" ")).contains(f" {wanted} ", autoescape=True)
            )
        if after_id is not None:
            query = query.where(c.id > after_id)
        query = query.order_by(c.id)
        if limit is not None:
            query = query.limit(limit)
        return [dict(r) for r in (await self.conn.execute(query)).mappings().all()]

    async def first_match(self, project_id: int, fields: Mapping[str, Any]) -> int | None:
        query = select(t.checks.c.id).where(t.checks.c.project_id == project_id)
        for name, value in fields.items():
            query = query.where(t.checks.c[name] == value)
        found = (await self.conn.execute(query.order_by(t.checks.c.id).limit(1))).scalar_one_or_none()
        return None if found is None else int(found)

    async def slug_taken(self, project_id: int, slug: str, *, except_id: int | None = None) -> bool:
        query = (
            select(t.checks.c.id).where(t.checks.c.project_id == project_id).where(t.checks.c.slug == slug)
        )
        if except_id is not None:
            query = query.where(t.checks.c.id != except_id)
        return (await self.conn.execute(query.limit(1))).first() is not None

    async def first_taken_slug(self, project_id: int, slugs: Sequence[str]) -> str | None:
        if not slugs:
            return None
        query = (
            select(t.checks.c.slug)
            .where(t.checks.c.project_id == project_id)
            .where(t.checks.c.slug.in_(list(slugs)))
            .limit(1)
        )
        found = (await self.conn.execute(query)).scalar_one_or_none()
        return None if found is None else str(found)

    async def started_runs(self, check_ids: Sequence[int]) -> list[tuple[int, datetime]]:
        if not check_ids:
            return []
        rows = await self.conn.execute(
            select(t.runs.c.check_id, t.runs.c.started_at)
            .where(t.runs.c.check_id.in_(list(check_ids)))
            .where(t.runs.c.outcome.is_(None))
            .where(t.runs.c.started_at.is_not(None))
        )
        return [(int(cid), at) for cid, at in rows]

    async def last_pauses(self, check_ids: Sequence[int]) -> list[tuple[int, str, datetime]]:
        if not check_ids:
            return []
        rows = await self.conn.execute(
            select(t.flips.c.check_id, t.flips.c.reason, func.max(t.flips.c.created_at))
            .where(t.flips.c.check_id.in_(list(check_ids)))
            .where(t.flips.c.reason.in_(("paused", "resumed")))
            .group_by(t.flips.c.check_id, t.flips.c.reason)
        )
        return [(int(cid), str(reason), at) for cid, reason, at in rows]

    async def oldest_due(self) -> datetime | None:
        found: datetime | None = (
            await self.conn.execute(
                select(t.checks.c.next_due)
                .where(t.checks.c.next_due.is_not(None))
                .order_by(t.checks.c.next_due)
                .limit(1)
            )
        ).scalar_one_or_none()
        return found

    async def escalating_to(self, project_id: int, channel_id: str) -> list[tuple[str, str, str]]:
        rows = await self.conn.execute(
            select(t.checks.c.uuid, t.checks.c.name, t.checks.c.escalate_to)
            .where(t.checks.c.project_id == project_id)
            .where(t.checks.c.escalate_to.contains(channel_id, autoescape=True))
            .order_by(t.checks.c.id)
        )
        return [(str(u), str(n or ""), str(e or "")) for u, n, e in rows]


class SqlChannelStore(_Store):
    """:class:`~monitor.storage.ports.ChannelStore` on SQLite and PostgreSQL."""

    async def insert(self, values: Mapping[str, Any]) -> None:
        await self.conn.execute(t.channels.insert().values(dict(values)))

    async def get(self, project_id: int, channel_id: str) -> dict[str, Any] | None:
        row = (
            (
                await self.conn.execute(
                    select(t.channels)
                    .where(t.channels.c.id == channel_id)
                    .where(t.channels.c.project_id == project_id)
                )
            )
            .mappings()
            .first()
        )
        return None if row is None else dict(row)

    async def of_project(self, project_id: int) -> list[dict[str, Any]]:
        rows = await self.conn.execute(
            select(t.channels).where(t.channels.c.project_id == project_id).order_by(t.channels.c.created_at)
        )
        return [dict(r) for r in rows.mappings().all()]

    async def names(self, project_id: int, *, lock: bool = False) -> list[tuple[str, str]]:
        query = select(t.channels.c.id, t.channels.c.name).where(t.channels.c.project_id == project_id)
        if lock:  # FOR KEY SHARE on PostgreSQL; SQLite's compiler renders no lock clause
            query = query.with_for_update(read=True, key_share=True)
        rows = await self.conn.execute(query)
        return [(str(r[0]), str(r[1])) for r in rows]

    async def default_ids(self, project_id: int, *, lock: bool = False) -> list[str]:
        query = (
            select(t.channels.c.id)
            .where(t.channels.c.project_id == project_id)
            .where(t.channels.c.is_default)
        )
        if lock:
            query = query.with_for_update(read=True, key_share=True)
        return [str(c) for c in (await self.conn.execute(query)).scalars().all()]

    async def update(self, channel_id: str, values: Mapping[str, Any]) -> None:
        if values:
            await self.conn.execute(
                update(t.channels).where(t.channels.c.id == channel_id).values(dict(values))
            )

    async def delete(self, channel_id: str) -> None:
        conn = self.conn
        notification_ids = select(t.notifications.c.id).where(t.notifications.c.channel_id == channel_id)
        await conn.execute(
            delete(t.notification_attempts).where(
                t.notification_attempts.c.notification_id.in_(notification_ids)
            )
        )
        await conn.execute(delete(t.notifications).where(t.notifications.c.channel_id == channel_id))
        await conn.execute(delete(t.check_channels).where(t.check_channels.c.channel_id == channel_id))
        await conn.execute(delete(t.channels).where(t.channels.c.id == channel_id))

    async def assign(self, check_id: int, channel_ids: Sequence[str], *, replace: bool = True) -> None:
        if replace:
            await self.conn.execute(delete(t.check_channels).where(t.check_channels.c.check_id == check_id))
        await self.assign_many([(check_id, c) for c in dict.fromkeys(channel_ids)])

    async def assign_many(self, links: Sequence[tuple[int, str]]) -> None:
        if links:
            await self.conn.execute(
                t.check_channels.insert(), [{"check_id": cid, "channel_id": ch} for cid, ch in links]
            )

    async def of_checks(self, check_ids: Sequence[int]) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {i: [] for i in check_ids}
        if check_ids:
            rows = await self.conn.execute(
                select(t.check_channels.c.check_id, t.check_channels.c.channel_id).where(
                    t.check_channels.c.check_id.in_(list(check_ids))
                )
            )
            for cid, channel in rows:
                out[cid].append(channel)
        return out


class SqlProjectStore(_Store):
    """:class:`~monitor.storage.ports.ProjectStore` on SQLite and PostgreSQL."""

    async def insert(self, values: Mapping[str, Any]) -> int:
        found = await self.conn.execute(t.projects.insert().values(dict(values)).returning(t.projects.c.id))
        return int(found.scalar_one())

    async def insert_keys(self, keys: Sequence[Mapping[str, Any]]) -> None:
        if not keys:
            return
        try:
            async with self.conn.begin_nested():
                await self.conn.execute(t.api_keys.insert(), [dict(k) for k in keys])
        except IntegrityError as error:
            raise DuplicateKey(str(error.orig)) from None

    async def count(self) -> int:
        return int((await self.conn.execute(select(func.count()).select_from(t.projects))).scalar_one())

    async def key(self, key_hash: str) -> tuple[int, bool] | None:
        row = (
            await self.conn.execute(
                select(t.api_keys.c.project_id, t.api_keys.c.read_only).where(
                    t.api_keys.c.key_hash == key_hash
                )
            )
        ).first()
        return None if row is None else (int(row[0]), bool(row[1]))

    async def ids_named(self, name: str) -> list[int]:
        rows = await self.conn.execute(
            select(t.projects.c.id).where(t.projects.c.name == name).order_by(t.projects.c.id)
        )
        return [int(r[0]) for r in rows]

    async def names(self, project_ids: Sequence[int]) -> list[str]:
        if not project_ids:
            return []
        rows = await self.conn.execute(
            select(t.projects.c.name).where(t.projects.c.id.in_(list(project_ids))).order_by(t.projects.c.id)
        )
        return [str(r[0]) for r in rows]

    async def lock(self, project_id: int) -> None:
        if self._postgres:
            await self.conn.execute(
                select(t.projects.c.id).where(t.projects.c.id == project_id).with_for_update(key_share=True)
            )


class SqlUserStore(_Store):
    """:class:`~monitor.storage.ports.UserStore` on SQLite and PostgreSQL."""

    async def insert(self, values: Mapping[str, Any]) -> int:
        try:
            async with self.conn.begin_nested():
                found = await self.conn.execute(t.users.insert().values(dict(values)).returning(t.users.c.id))
                return int(found.scalar_one())
        except IntegrityError as error:
            raise DuplicateKey(str(error.orig)) from None

    async def by_email(self, email: str) -> dict[str, Any] | None:
        row = (await self.conn.execute(select(t.users).where(t.users.c.email == email))).mappings().first()
        return None if row is None else dict(row)

    async def exists(self, user_id: int) -> bool:
        return (
            await self.conn.execute(select(t.users.c.id).where(t.users.c.id == user_id))
        ).first() is not None

    async def update(self, user_id: int, changes: Mapping[str, Any]) -> None:
        await self.conn.execute(update(t.users).where(t.users.c.id == user_id).values(dict(changes)))

    async def delete(self, user_id: int) -> None:
        await self.conn.execute(delete(t.web_sessions).where(t.web_sessions.c.user_id == user_id))
        await self.conn.execute(delete(t.users).where(t.users.c.id == user_id))

    async def add_session(self, values: Mapping[str, Any]) -> None:
        await self.conn.execute(t.web_sessions.insert().values(dict(values)))

    async def session(self, token_hash: str, now: datetime) -> tuple[int, str, str, str | None] | None:
        row = (
            await self.conn.execute(
                select(t.web_sessions.c.user_id, t.web_sessions.c.csrf_token, t.users.c.email, t.users.c.tz)
                .join(t.users, t.users.c.id == t.web_sessions.c.user_id)
                .where(t.web_sessions.c.token_hash == token_hash)
                .where(t.web_sessions.c.expires_at > now)
            )
        ).first()
        return None if row is None else (int(row[0]), str(row[1]), str(row[2]), row[3])

    async def end_session(self, token_hash: str, now: datetime) -> None:
        await self.conn.execute(delete(t.web_sessions).where(t.web_sessions.c.token_hash == token_hash))
        await self.conn.execute(delete(t.web_sessions).where(t.web_sessions.c.expires_at <= now))

    async def memberships(self, user_id: int) -> list[tuple[int, bool]]:
        rows = await self.conn.execute(
            select(t.user_projects.c.project_id, t.user_projects.c.is_admin)
            .where(t.user_projects.c.user_id == user_id)
            .order_by(t.user_projects.c.project_id)
        )
        return [(int(p), bool(a)) for p, a in rows]

    async def membership(self, user_id: int, project_id: int) -> bool | None:
        row = (
            await self.conn.execute(
                select(t.user_projects.c.is_admin)
                .where(t.user_projects.c.user_id == user_id)
                .where(t.user_projects.c.project_id == project_id)
            )
        ).first()
        return None if row is None else bool(row[0])

    async def add_memberships(self, user_id: int, project_ids: Sequence[int], *, admin: bool) -> None:
        if project_ids:
            await self.conn.execute(
                t.user_projects.insert(),
                [{"user_id": user_id, "project_id": p, "is_admin": admin} for p in project_ids],
            )

    async def set_admin(self, user_id: int, project_id: int, admin: bool) -> None:
        await self.conn.execute(
            update(t.user_projects)
            .where(t.user_projects.c.user_id == user_id)
            .where(t.user_projects.c.project_id == project_id)
            .values(is_admin=admin)
        )

    async def remove_membership(self, user_id: int, project_id: int) -> None:
        await self.conn.execute(
            delete(t.user_projects)
            .where(t.user_projects.c.user_id == user_id)
            .where(t.user_projects.c.project_id == project_id)
        )

    async def admins_other_than(self, project_id: int, user_id: int) -> int:
        count = (
            await self.conn.execute(
                select(func.count())
                .select_from(t.user_projects)
                .where(t.user_projects.c.project_id == project_id)
                .where(t.user_projects.c.is_admin)
                .where(t.user_projects.c.user_id != user_id)
            )
        ).scalar_one()
        return int(count)

    async def members(self, project_ids: Sequence[int]) -> list[tuple[int, str, int, bool]]:
        if not project_ids:
            return []
        rows = await self.conn.execute(
            select(t.users.c.id, t.users.c.email, t.user_projects.c.project_id, t.user_projects.c.is_admin)
            .join(t.user_projects, t.user_projects.c.user_id == t.users.c.id)
            .where(t.user_projects.c.project_id.in_(list(project_ids)))
            .order_by(t.users.c.email, t.user_projects.c.project_id)
        )
        return [(int(u), str(e), int(p), bool(a)) for u, e, p, a in rows]


_GROUPABLE = {
    "pings.kind": t.pings.c.kind,
    "alerts.kind": t.alerts.c.kind,
    "notifications.status": t.notifications.c.status,
    "notification_attempts.ok": t.notification_attempts.c.ok,
}


_TOTALLED = {
    "pings.kind": history_totals.PINGS,
    "alerts.kind": history_totals.ALERTS,
    "notification_attempts.ok": history_totals.ATTEMPTS,
}


class SqlStatusStore(_Store):
    """:class:`~monitor.storage.ports.StatusStore` on SQLite and PostgreSQL."""

    async def ping(self) -> None:
        await self.conn.execute(text("SELECT 1"))

    async def stored_shard_count(self) -> int | None:
        return await cluster.stored_shard_count(self.conn)

    async def leases(self) -> list[tuple[str, str | None, int, datetime | None]]:
        rows = await self.conn.execute(
            select(t.leases.c.name, t.leases.c.holder, t.leases.c.token, t.leases.c.expires_at).order_by(
                t.leases.c.name
            )
        )
        return [(str(r[0]), r[1], int(r[2]), r[3]) for r in rows]

    async def checks_due(self, now: datetime) -> int:
        query = select(func.count()).select_from(t.checks).where(t.checks.c.next_due < now)
        return int((await self.conn.execute(query)).scalar_one())

    async def renewed_replicas(self, role: str, since: datetime) -> int:
        query = (
            select(func.count())
            .select_from(t.replicas)
            .where(t.replicas.c.role == role)
            .where(t.replicas.c.renewed_at >= since)
        )
        return int((await self.conn.execute(query)).scalar_one())

    async def live_processes(self, since: datetime) -> int:
        query = select(func.count()).select_from(t.liveness).where(t.liveness.c.renewed_at >= since)
        return int((await self.conn.execute(query)).scalar_one())

    async def last_liveness(self) -> datetime | None:
        found: datetime | None = (
            await self.conn.execute(select(func.max(t.liveness.c.renewed_at)))
        ).scalar_one_or_none()
        return found

    async def outages(self) -> int:
        return int((await self.conn.execute(select(func.count()).select_from(t.outages))).scalar_one())

    async def all_checks(self) -> list[dict[str, Any]]:
        return [dict(r) for r in (await self.conn.execute(select(t.checks))).mappings().all()]

    async def checks_by_status(self, now: datetime) -> dict[str, int]:
        c = t.checks.c
        status = case(
            (c.paused, Status.PAUSED.value),
            (c.watch_from.is_(None), Status.NEW.value),
            (c.episode_key.is_not(None), Status.DOWN.value),
            (c.pending_tick.is_not(None) & (c.pending_tick <= now), Status.GRACE.value),
            else_=Status.UP.value,
        ).label("status")
        rows = await self.conn.execute(select(status, func.count()).select_from(t.checks).group_by(status))
        return {str(k): int(n) for k, n in rows}

    async def started_count(self, now: datetime) -> int:
        # open runs are few: the partial index ix_runs_open
        rows = await self.conn.execute(
            select(t.runs.c.check_id, t.runs.c.started_at, t.checks.c.max_runtime)
            .join(t.checks, t.checks.c.id == t.runs.c.check_id)
            .where(t.runs.c.outcome.is_(None))
            .where(t.runs.c.started_at.is_not(None))
        )
        return len({cid for cid, at, limit in rows if (now - at).total_seconds() <= limit})

    async def counts_by(self, column: str) -> list[tuple[str, int]]:
        target = _GROUPABLE[column]
        rows = await self.conn.execute(select(target, func.count()).group_by(target))
        label = history_totals.result_label if column == "notification_attempts.ok" else str
        counted: Counter[str] = Counter()
        for key, n in rows:
            counted[label(key)] += int(n)
        family = _TOTALLED.get(column)
        if family is not None:
            counted.update(await history_totals.totals(self.conn, family))
        return sorted(counted.items())
