"""The dashboard's read model (:class:`~monitor.storage.ports.DashboardReads`) on SQLite and
PostgreSQL: dialect-neutral Core statements, read-only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import String, and_, case, func, literal, or_, select, union
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from monitor.storage import tables as t
from monitor.storage.engine import SQLITE_FOLD
from monitor.storage.ports import TRIAGE_ORDER


class Folded(FunctionElement[str]):
    """``lower()`` of every letter, as Python's ``str.lower`` (the needle's fold): SQLite's own
    ``lower()`` folds ASCII only, so ``Éclair`` would never match ``éclair``, nor itself."""

    type = String()
    inherit_cache = True


@compiles(Folded)
def _folded(element: Folded, compiler: SQLCompiler, **kw: Any) -> str:
    return f"lower({compiler.process(element.clauses, **kw)})"


@compiles(Folded, "sqlite")
def _folded_sqlite(element: Folded, compiler: SQLCompiler, **kw: Any) -> str:
    # registered on every SQLite connection by monitor.storage.engine.make_engine
    return f"{SQLITE_FOLD}({compiler.process(element.clauses, **kw)})"


def _rank(now: datetime) -> Any:
    """SQL index of a check's status in :data:`TRIAGE_ORDER`; the same first-match rule as
    :func:`monitor.domain.detection.status` (paused, new, down, grace, up)."""
    c = t.checks.c
    return case(
        (c.paused, TRIAGE_ORDER.index("paused")),
        (c.watch_from.is_(None), TRIAGE_ORDER.index("new")),
        (c.episode_key.is_not(None), TRIAGE_ORDER.index("down")),
        (and_(c.pending_tick.is_not(None), c.pending_tick <= now), TRIAGE_ORDER.index("grace")),
        else_=TRIAGE_ORDER.index("up"),
    )


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _bad_ping() -> Any:
    p = t.pings.c
    return or_(p.kind == "fail", and_(p.exit_status.is_not(None), p.exit_status != 0))


class SqlDashboardReads:
    """:class:`~monitor.storage.ports.DashboardReads` over one open connection."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def project_names(self, project_ids: Sequence[int]) -> dict[int, str]:
        rows = await self.conn.execute(
            select(t.projects.c.id, t.projects.c.name).where(t.projects.c.id.in_(list(project_ids)))
        )
        return {r[0]: r[1] for r in rows}

    async def status_counts(self, project_ids: Sequence[int], now: datetime) -> dict[str, int]:
        counts = dict.fromkeys(TRIAGE_ORDER, 0)
        ids = list(project_ids)
        if not ids:
            return counts
        rank = _rank(now)
        for value, count in await self.conn.execute(
            select(rank, func.count()).where(t.checks.c.project_id.in_(ids)).group_by(rank)
        ):
            counts[TRIAGE_ORDER[int(value)]] = int(count)
        return counts

    async def check_page(
        self,
        project_ids: Sequence[int],
        now: datetime,
        *,
        needle: str = "",
        tag: str = "",
        status: str = "",
        offset: int = 0,
        limit: int = 50,
    ) -> tuple[int, list[dict[str, Any]]]:
        rank = _rank(now)
        c = t.checks.c
        query = select(t.checks).where(c.project_id.in_(list(project_ids)))
        if needle:
            pattern = f"%{_escape_like(needle)}%"
            query = query.where(
                or_(
                    Folded(c.name).like(pattern, escape="\\"),
                    Folded(func.coalesce(c.slug, "")).like(pattern, escape="\\"),
                )
            )
        if tag:
            spaced = literal(" ") + c.tags + literal(" ")
            query = query.where(spaced.like(f"% {_escape_like(tag)} %", escape="\\"))
        if status in TRIAGE_ORDER:
            query = query.where(rank == TRIAGE_ORDER.index(status))
        matched = int(
            (await self.conn.execute(select(func.count()).select_from(query.subquery()))).scalar_one()
        )
        page = query.order_by(rank, c.project_id, c.name, c.id).offset(max(0, offset)).limit(limit)
        rows = [dict(r) for r in (await self.conn.execute(page)).mappings().all()]
        return matched, rows

    async def recent_ticks(
        self, check_ids: Sequence[int], ticks: int
    ) -> tuple[list[dict[str, Any]], list[tuple[int, datetime, str]]]:
        ids = list(check_ids)
        if not ids:
            return [], []
        known = union(
            select(t.runs.c.check_id, t.runs.c.scheduled).where(t.runs.c.check_id.in_(ids)),
            select(t.tick_marks.c.check_id, t.tick_marks.c.scheduled).where(t.tick_marks.c.check_id.in_(ids)),
        ).subquery()
        ranked = select(
            known.c.check_id,
            known.c.scheduled,
            func.row_number()
            .over(partition_by=known.c.check_id, order_by=known.c.scheduled.desc())
            .label("rank"),
        ).subquery()
        since = (
            select(ranked.c.check_id, func.min(ranked.c.scheduled).label("since"))
            .where(ranked.c.rank <= ticks)
            .group_by(ranked.c.check_id)
            .subquery()
        )
        runs = select(t.runs).join(
            since, and_(since.c.check_id == t.runs.c.check_id, t.runs.c.scheduled >= since.c.since)
        )
        marks = select(t.tick_marks.c.check_id, t.tick_marks.c.scheduled, t.tick_marks.c.outcome).join(
            since,
            and_(since.c.check_id == t.tick_marks.c.check_id, t.tick_marks.c.scheduled >= since.c.since),
        )
        run_rows = [dict(r) for r in (await self.conn.execute(runs)).mappings()]
        mark_rows = [(int(r[0]), r[1], str(r[2])) for r in await self.conn.execute(marks)]
        return run_rows, mark_rows

    async def episode_alerts(
        self, keys: Mapping[int, str]
    ) -> list[tuple[int, str, str, int, datetime | None, datetime]]:
        if not keys:
            return []
        a = t.alerts.c
        found = await self.conn.execute(
            select(a.check_id, a.key, a.kind, a.count, a.scheduled, a.created_at)
            .where(a.check_id.in_(list(keys)))
            .where(a.key.in_(list(set(keys.values()))))
        )
        return [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in found]

    async def last_body(self, check_id: int, *, failing: bool) -> tuple[bytes, str, int | None] | None:
        p = t.pings.c
        query = select(p.body, p.kind, p.exit_status).where(p.check_id == check_id).where(p.body.is_not(None))
        if failing:
            query = query.where(_bad_ping())
        found = (await self.conn.execute(query.order_by(p.n.desc()).limit(1))).first()
        if found is None:
            return None
        return bytes(found[0]), found[1], found[2]

    async def last_failure(self, check_id: int) -> tuple[int, datetime, str, int | None, bytes | None] | None:
        p = t.pings.c
        found = (
            await self.conn.execute(
                select(p.n, p.received_at, p.kind, p.exit_status, p.body)
                .where(p.check_id == check_id)
                .where(_bad_ping())
                .order_by(p.n.desc())
                .limit(1)
            )
        ).first()
        if found is None:
            return None
        body = bytes(found[4]) if found[4] is not None else None
        return found[0], found[1], found[2], found[3], body

    async def last_good_run(self, check_id: int) -> tuple[datetime, datetime | None] | None:
        r = t.runs.c
        found = (
            await self.conn.execute(
                select(r.scheduled, r.finished_at)
                .where(r.check_id == check_id)
                .where(r.finish_kind == "success")
                .where(r.early.is_(False))
                .order_by(r.scheduled.desc())
                .limit(1)
            )
        ).first()
        return (found[0], found[1]) if found is not None else None

    async def status_since(self, check_id: int) -> datetime | None:
        found: datetime | None = (
            await self.conn.execute(
                select(t.flips.c.created_at)
                .where(t.flips.c.check_id == check_id)
                .order_by(t.flips.c.id.desc())
                .limit(1)
            )
        ).scalar_one_or_none()
        return found

    async def check_in(self, project_ids: Sequence[int], uuid: str) -> dict[str, Any] | None:
        query = (
            select(t.checks)
            .where(t.checks.c.uuid == uuid)
            .where(t.checks.c.project_id.in_(list(project_ids)))
        )
        row = (await self.conn.execute(query)).mappings().first()
        return None if row is None else dict(row)

    async def window_runs(
        self, check_id: int, since: datetime, until: datetime, limit: int
    ) -> list[dict[str, Any]]:
        r = t.runs.c
        query = (
            select(t.runs)
            .where(r.check_id == check_id)
            .where(r.scheduled >= since)
            .where(r.scheduled <= until)
            .order_by(r.scheduled.desc())
            .limit(limit)
        )
        return [dict(row) for row in (await self.conn.execute(query)).mappings().all()]

    async def window_marks(
        self, check_id: int, since: datetime, until: datetime, limit: int
    ) -> list[tuple[datetime, str]]:
        m = t.tick_marks.c
        query = (
            select(m.scheduled, m.outcome)
            .where(m.check_id == check_id)
            .where(m.scheduled >= since)
            .where(m.scheduled <= until)
            .order_by(m.scheduled.desc())
            .limit(limit)
        )
        return [(row[0], str(row[1])) for row in await self.conn.execute(query)]

    async def first_run_tick(self, check_id: int) -> datetime | None:
        found: datetime | None = (
            await self.conn.execute(
                select(t.runs.c.scheduled)
                .where(t.runs.c.check_id == check_id)
                .order_by(t.runs.c.scheduled)
                .limit(1)
            )
        ).scalar_one_or_none()
        return found

    async def check_by_badge(self, badge_uuid: str) -> dict[str, Any] | None:
        query = select(t.checks).where(t.checks.c.badge_uuid == badge_uuid)
        row = (await self.conn.execute(query)).mappings().first()
        return None if row is None else dict(row)

    async def project_by_badge_key(self, badge_key: str) -> int | None:
        found: int | None = (
            await self.conn.execute(select(t.projects.c.id).where(t.projects.c.badge_key == badge_key))
        ).scalar_one_or_none()
        return found

    async def project_checks(self, project_id: int) -> list[dict[str, Any]]:
        query = select(t.checks).where(t.checks.c.project_id == project_id)
        return [dict(r) for r in (await self.conn.execute(query)).mappings().all()]

    async def project_tags(self, project_id: int) -> list[str]:
        tags: set[str] = set()
        query = select(t.checks.c.tags).where(t.checks.c.project_id == project_id)
        for (text,) in await self.conn.execute(query):
            tags.update(text.split())
        return sorted(tags)

    async def badge_key(self, project_id: int) -> str:
        key: str = (
            await self.conn.execute(select(t.projects.c.badge_key).where(t.projects.c.id == project_id))
        ).scalar_one()
        return key

    async def recent_pings(self, check_id: int, limit: int) -> list[dict[str, Any]]:
        query = (
            select(t.pings).where(t.pings.c.check_id == check_id).order_by(t.pings.c.n.desc()).limit(limit)
        )
        rows = [dict(r) for r in (await self.conn.execute(query)).mappings().all()]
        for row in rows:
            row["body"] = bytes(row["body"]) if row["body"] is not None else None
        return rows

    async def check_names(self, project_id: int) -> list[dict[str, Any]]:
        c = t.checks.c
        query = select(c.id, c.uuid, c.name, c.slug).where(c.project_id == project_id).order_by(c.name, c.id)
        return [dict(r) for r in (await self.conn.execute(query)).mappings().all()]

    async def routed_checks(self, channel_id: str) -> set[int]:
        query = select(t.check_channels.c.check_id).where(t.check_channels.c.channel_id == channel_id)
        return {int(r[0]) for r in await self.conn.execute(query)}

    async def channel_check_counts(self, channel_ids: Sequence[str]) -> dict[str, int]:
        if not channel_ids:
            return {}
        cc = t.check_channels.c
        rows = await self.conn.execute(
            select(cc.channel_id, func.count())
            .where(cc.channel_id.in_(list(channel_ids)))
            .group_by(cc.channel_id)
        )
        return {r[0]: int(r[1]) for r in rows}
