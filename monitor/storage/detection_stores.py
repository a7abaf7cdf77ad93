"""The detection ports on SQLite and PostgreSQL: :class:`~monitor.storage.ports.DetectionStore`,
:class:`~monitor.storage.ports.ShardStore` and :class:`~monitor.storage.ports.ReminderStore`.

Each class works over the open connection of one unit of work. The statements are
dialect-neutral Core except where noted: row locks (``FOR UPDATE`` on PostgreSQL only; SQLite's
``BEGIN IMMEDIATE`` already holds the write lock), ``ON CONFLICT DO NOTHING``
(:func:`monitor.storage.repositories.insert_ignoring_conflicts`) and the set-at-a-time writes of
:mod:`monitor.storage.bulk` (``UPDATE … FROM unnest`` on PostgreSQL, executemany on SQLite).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, Select, bindparam, func, or_, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from monitor.domain.runs import RunBook
from monitor.domain.shards import LEASE_PREFIX
from monitor.storage import bulk, cluster, outbox, repositories, run_stores
from monitor.storage import tables as t

RUN_COLUMNS = tuple(c.name for c in t.runs.columns)
"""Every ``runs`` column: what a sweep's new and changed runs map."""

MARK_COLUMNS = ("check_id", "scheduled", "outcome")
FLIP_COLUMNS = ("check_id", "created_at", "up", "reason", "token")


@functools.cache
def _lock_due_statement(postgres: bool, shards: int | None, columns: tuple[str, ...]) -> Select[Any]:
    """:meth:`SqlDetectionStore.lock_due`'s statement, built once per dialect, shard filter
    (``None``: every shard; 1: ``shard = :shard``; 2: ``shard IN :shards``) and columns: building
    a select of some fifty columns cost more than running it at a few due checks. PostgreSQL
    locks ``FOR UPDATE SKIP LOCKED`` (the port says why); SQLite's ``BEGIN IMMEDIATE`` already
    holds the write lock.
    """
    c = t.checks.c
    in_shards = None
    if shards == 1:
        in_shards = c.shard == bindparam("shard")
    elif shards is not None:
        in_shards = c.shard.in_(bindparam("shards", expanding=True))
    limit = bindparam("batch", type_=Integer)
    if postgres:
        query = select(*(c[name] for name in columns)).where(
            c.next_due < bindparam("now", type_=t.UTCDateTime())
        )
        if in_shards is not None:
            query = query.where(in_shards)
        return query.order_by(c.next_due).limit(limit).with_for_update(of=t.checks, skip_locked=True)
    due = select(c.id).where(c.next_due < bindparam("now", type_=t.UTCDateTime()))
    if in_shards is not None:
        due = due.where(in_shards)
    due = due.order_by(c.next_due).limit(limit)
    return select(*(c[name] for name in columns)).where(c.id.in_(due.scalar_subquery())).order_by(c.id)


_CUSTOM_PLANS = text("SET LOCAL plan_cache_mode = force_custom_plan")
_CACHED_PLANS = text("SET LOCAL plan_cache_mode TO DEFAULT")
"""PostgreSQL: plan each statement for its parameters and the tables' current size, then back
to the server's choice for the rest of the transaction (``SET LOCAL`` ends with it)."""


class _Store:
    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    @property
    def _postgres(self) -> bool:
        return self.conn.dialect.name == "postgresql"


class SqlDetectionStore(_Store):
    """:class:`~monitor.storage.ports.DetectionStore` on SQLite and PostgreSQL."""

    async def lock_due(
        self, now: datetime, shards: Sequence[int] | None, batch: int, columns: Sequence[str]
    ) -> tuple[list[Mapping[str, Any]], int]:
        params: dict[str, Any] = {"now": now, "batch": batch}
        mode: int | None = None
        if shards is not None and len(shards) == 1:
            mode, params["shard"] = 1, shards[0]
        elif shards is not None:
            mode, params["shards"] = 2, list(shards)
        statement = _lock_due_statement(self._postgres, mode, tuple(columns))
        result = await self.conn.execute(statement, params)
        # plain dicts: the sweep reads each row's fifty columns several times (spec, state, what
        # changed, the alert's identity), and a dict lookup costs a fraction of a RowMapping's
        rows = [dict(zip(columns, values, strict=True)) for values in result]
        if self._postgres:
            rows.sort(key=lambda r: r["id"])  # by id, as SQLite's
        still_due: list[Mapping[str, Any]] = [
            r for r in rows if r["next_due"] is not None and r["next_due"] < now
        ]
        return still_due, len(rows)

    async def next_deadline(self, shards: Sequence[int] | None, after: datetime) -> datetime | None:
        c = t.checks.c
        query = select(c.next_due).where(c.next_due > after)
        if shards is not None:
            query = query.where(c.shard.in_(list(shards)))
        found: datetime | None = (
            await self.conn.execute(query.order_by(c.next_due).limit(1))
        ).scalar_one_or_none()
        return found

    async def books(
        self, cutoffs: Mapping[int, datetime | None], *, replan: bool = False
    ) -> dict[int, RunBook]:
        if not (replan and self._postgres):
            return await repositories.load_books(self.conn, cutoffs)
        await self.conn.execute(_CUSTOM_PLANS)
        books = await repositories.load_books(self.conn, cutoffs)
        await self.conn.execute(_CACHED_PLANS)
        return books

    async def save_sweep(
        self,
        states: Sequence[Mapping[str, Any]],
        *,
        marks: Sequence[Mapping[str, Any]],
        flips: Sequence[Mapping[str, Any]],
        new_runs: Sequence[Mapping[str, Any]],
        changed_runs: Sequence[Mapping[str, Any]],
        alerts: Sequence[outbox.NewAlert] = (),
    ) -> list[int | None]:
        alert_insert = outbox.AlertInsert.of(alerts)
        writes = [
            *repositories.state_writes(states, key="id"),
            bulk.RowsWrite(table=t.tick_marks, rows=marks, columns=MARK_COLUMNS, ignore_conflicts=True),
            bulk.RowsWrite(table=t.flips, rows=flips, columns=FLIP_COLUMNS),
            *_run_writes(new_runs, changed_runs, key="id"),
            alert_insert.write,  # last: the one write that returns rows
        ]
        return alert_insert.ids(await bulk.write_together(self.conn, writes))

    async def write_effects(
        self,
        *,
        new_runs: Sequence[Mapping[str, Any]],
        changed_runs: Sequence[Mapping[str, Any]],
        marks: Sequence[Mapping[str, Any]],
        flips: Sequence[Mapping[str, Any]],
        pings: Sequence[Mapping[str, Any]] = (),
        states: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        # set-at-a-time (one write per table and column set, one statement on PostgreSQL)
        # rather than SQLAlchemy's per-row executemany processing: this runs in every ingest batch
        writes = [
            run_stores.ping_write(pings),
            *_run_writes(new_runs, changed_runs, key="b_id"),
            bulk.RowsWrite(table=t.tick_marks, rows=marks, columns=MARK_COLUMNS, ignore_conflicts=True),
            bulk.RowsWrite(table=t.flips, rows=flips, columns=FLIP_COLUMNS),
            *repositories.state_writes(states),
        ]
        await bulk.write_together(self.conn, writes)

    async def latest_arrivals(
        self, check_ids: Sequence[int], per_check: int
    ) -> list[tuple[int, datetime, datetime]]:
        if not check_ids:
            return []
        r = t.runs.c
        rank = (
            func.row_number()
            .over(partition_by=r.check_id, order_by=(r.first_ping_at.desc(), r.scheduled.desc()))
            .label("rank")
        )
        latest = (
            select(r.check_id, r.scheduled, r.first_ping_at, rank)
            .where(r.check_id.in_(list(check_ids)))
            .subquery()
        )
        query = select(latest.c.check_id, latest.c.scheduled, latest.c.first_ping_at).where(
            latest.c.rank <= per_check
        )
        return [(int(cid), tick, arrived) for cid, tick, arrived in (await self.conn.execute(query))]

    async def checks_named(
        self, *, uuid: str | None = None, slug: str | None = None, limit: int = 2
    ) -> list[dict[str, Any]]:
        by = t.checks.c.uuid == uuid if uuid is not None else t.checks.c.slug == slug
        rows = (await self.conn.execute(select(t.checks).where(by).limit(limit))).mappings().all()
        return [dict(row) for row in rows]

    async def recipient_exists(
        self, *, uuid: str | None = None, ping_key: str | None = None, slug: str | None = None
    ) -> bool:
        if uuid is not None:
            query = select(t.checks.c.id).where(t.checks.c.uuid == uuid)
        else:
            query = (
                select(t.checks.c.id)
                .join(t.projects, t.projects.c.id == t.checks.c.project_id)
                .where(t.projects.c.ping_key == ping_key)
                .where(t.checks.c.slug == slug)
            )
        return (await self.conn.execute(query.limit(1))).first() is not None


def _run_writes(
    new_runs: Sequence[Mapping[str, Any]], changed_runs: Sequence[Mapping[str, Any]], *, key: str
) -> list[bulk.RowsWrite]:
    """The insert of ``new_runs`` and one update per set of columns ``changed_runs`` set (each
    change names its run by ``key``), after :func:`_fold_changes_into_new`."""
    new_runs, changed_runs = _fold_changes_into_new(new_runs, changed_runs, key=key)
    by_columns: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for run in changed_runs:
        columns = tuple(c for c in run if c not in _RUN_NAMES)
        if columns:
            by_columns.setdefault(columns, []).append({**run, "id": run[key]})
    return [
        bulk.RowsWrite(table=t.runs, rows=new_runs, columns=RUN_COLUMNS),
        *(bulk.RowsWrite(table=t.runs, key="id", rows=rows, columns=c) for c, rows in by_columns.items()),
    ]


_RUN_NAMES = ("id", "b_id", "check_id")
"""The keys of a run change that name its run, not columns it sets."""


def _fold_changes_into_new(
    new_runs: Sequence[Mapping[str, Any]], changed_runs: Sequence[Mapping[str, Any]], *, key: str = "id"
) -> tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]]:
    """The runs to insert, each with the changes ``changed_runs`` make to it, and the changes
    left for runs that exist already, one per run (a later change of a run wins over an earlier
    one, column by column): the writes of one :func:`bulk.write_together` all see the tables as
    they were before it, so an update of a run inserted beside it would find nothing, and of
    two updates of one row in one statement PostgreSQL applies either. A change names its run
    by ``key`` (``b_id`` in the ingest's changes, ``id`` in a sweep's)."""
    run_ids = [change[key] for change in changed_runs]
    inserted = {run["id"]: index for index, run in enumerate(new_runs)}
    if len(set(run_ids)) == len(run_ids) and not inserted.keys() & set(run_ids):
        return new_runs, changed_runs
    folded = [dict(run) for run in new_runs]
    left: dict[Any, dict[str, Any]] = {}
    for change in changed_runs:
        index = inserted.get(change[key])
        if index is None:
            left.setdefault(change[key], {}).update(change)
        else:
            folded[index].update({c: v for c, v in change.items() if c not in _RUN_NAMES})
    return folded, list(left.values())


class SqlShardStore(_Store):
    """:class:`~monitor.storage.ports.ShardStore` on SQLite and PostgreSQL."""

    async def lock_evaluator_leases(self) -> None:
        if not self._postgres:
            return
        name = t.leases.c.name
        await self.conn.execute(
            select(name)
            .where(or_(name.like(f"{LEASE_PREFIX}%"), name == cluster.LEGACY_EVALUATOR_LEASE))
            .order_by(name)
            .with_for_update()
        )

    async def store_count(self, count: int, now: datetime) -> int | None:
        s = t.cluster_settings.c
        row = select(s.shards).where(s.id == cluster.SETTINGS_ROW).with_for_update()
        before = (await self.conn.execute(row)).scalar_one_or_none()
        if before is None:
            await self.conn.execute(
                repositories.insert_ignoring_conflicts(self.conn, t.cluster_settings).values(
                    id=cluster.SETTINGS_ROW, shards=count, changed_at=now
                )
            )
            # another process may have recorded a count between the read and the insert
            before = (await self.conn.execute(row)).scalar_one_or_none()
            before = None if before == count else before
        await self.conn.execute(
            update(t.cluster_settings)
            .where(s.id == cluster.SETTINGS_ROW)
            .values(shards=count, changed_at=now)
        )
        return None if before is None else int(before)

    async def rewrite_checks(self, count: int) -> int:
        return await cluster.rewrite_check_shards(self.conn, count)

    async def prune_leases(self, count: int) -> list[str]:
        return await cluster.prune_stale_leases(self.conn, count)


class SqlReminderStore(_Store):
    """:class:`~monitor.storage.ports.ReminderStore` on SQLite and PostgreSQL."""

    async def open_episodes(self) -> list[dict[str, Any]]:
        c, a = t.checks.c, t.alerts.c
        query = (
            select(
                c.id,
                c.project_id,
                c.uuid,
                c.name,
                c.slug,
                c.kind.label("check_kind"),
                c.tz,
                c.episode_key,
                c.nag_interval,
                c.escalate_after,
                c.escalate_to,
                a.kind.label("episode_kind"),
                a.scheduled,
                a.created_at.label("opened_at"),
            )
            .join(t.alerts, (a.check_id == c.id) & (a.key == c.episode_key))
            .where(c.episode_key.is_not(None))
            .where(c.paused.is_(False))
            .where(or_(c.nag_interval.is_not(None), c.escalate_after.is_not(None)))
        )
        return [dict(row) for row in (await self.conn.execute(query)).mappings().all()]

    async def windows(self) -> list[dict[str, Any]]:
        return [dict(row) for row in (await self.conn.execute(select(t.maintenance_windows))).mappings()]

    async def claim_summary(self, window_id: str, until: datetime) -> bool:
        w = t.maintenance_windows.c
        won = await self.conn.execute(
            update(t.maintenance_windows)
            .where(w.id == window_id)
            .where(or_(w.summarized_until.is_(None), w.summarized_until < until))
            .values(summarized_until=until)
        )
        return bool(won.rowcount == 1)

    async def down_checks(self, project_id: int) -> list[tuple[str | None, str]]:
        c = t.checks.c
        rows = await self.conn.execute(
            select(c.name, c.uuid)
            .where(c.project_id == project_id)
            .where(c.episode_key.is_not(None))
            .where(c.paused.is_(False))
            .order_by(c.name, c.id)
        )
        return [(name, str(uuid)) for name, uuid in rows]
