"""Persist what a domain decision changed: runs, tick marks, flips, alerts and their outbox rows.

Shared by the ping ingest and the evaluator, so both write the same way. Alert uniqueness is
the database's job: ``INSERT … ON CONFLICT DO NOTHING`` on ``(project, check, key)``; an alert
that was not inserted (another writer got there first) queues no notifications.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from monitor.domain import messages
from monitor.domain.checks import AlertKind, FlipReason, Status
from monitor.domain.detection import AlertDraft, Effects
from monitor.notify import templates
from monitor.storage import repositories
from monitor.storage import tables as t

PAUSE_REASONS = frozenset({FlipReason.PAUSED.value, FlipReason.RESUMED.value})


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckIdentity:
    """What an alert message needs to know about its check."""

    id: int
    project_id: int
    uuid: str
    name: str
    slug: str | None
    tz: str
    simple: bool = False

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> CheckIdentity:
        return cls(
            id=row["id"],
            project_id=row["project_id"],
            uuid=row["uuid"],
            name=row["name"] or row["uuid"],
            slug=row["slug"],
            tz=row["tz"] if row["kind"] == "cron" else "UTC",
            simple=row["kind"] != "cron",
        )


@dataclass(kw_only=True, slots=True)
class PendingWrites:
    """Rows gathered over a batch, written together (executemany) before commit."""

    new_runs: list[dict[str, Any]]
    changed_runs: list[dict[str, Any]]
    marks: list[dict[str, Any]]
    flips: list[dict[str, Any]]

    @classmethod
    def empty(cls) -> PendingWrites:
        return cls(new_runs=[], changed_runs=[], marks=[], flips=[])

    def add(self, check_id: int, fx: Effects, *, token: int | None = None) -> None:
        for run in fx.new_runs:
            self.new_runs.append(repositories.run_values(run, check_id))
        for run in fx.changed_runs.values():
            values = repositories.run_values(run, check_id)
            values["b_id"] = values.pop("id")
            self.changed_runs.append(values)
        for mark in fx.new_marks:
            self.marks.append(
                {"check_id": check_id, "scheduled": mark.scheduled, "outcome": mark.outcome.value}
            )
        for flip in fx.flips:
            row = {
                "check_id": check_id,
                "created_at": flip.at,
                "up": None if flip.up is None else int(flip.up),
                "reason": flip.reason.value,
                "token": token,
            }
            last = self.flips[-1] if self.flips else None
            if (
                last is not None
                and last["check_id"] == check_id
                and last["created_at"] == flip.at
                and not {last["reason"], row["reason"]} & PAUSE_REASONS
            ):
                # One decision, one instant, one change: a new check's first /fail leaves "new"
                # (up) and goes down at once; Healthchecks records that as one flip (new → down).
                # Pause and resume flips stay: they mark where runs in progress are forgotten.
                self.flips[-1] = row
            else:
                self.flips.append(row)

    async def write(self, conn: AsyncConnection) -> None:
        if self.new_runs:
            await conn.execute(t.runs.insert(), self.new_runs)
        if self.changed_runs:
            columns = [c for c in self.changed_runs[0] if c not in ("b_id", "check_id")]
            stmt = (
                update(t.runs)
                .where(t.runs.c.id == bindparam("b_id"))
                .values({c: bindparam(c) for c in columns})
            )
            await conn.execute(
                stmt, [{k: v for k, v in r.items() if k != "check_id"} for r in self.changed_runs]
            )
        if self.marks:
            await conn.execute(repositories.insert_ignoring_conflicts(conn, t.tick_marks), self.marks)
        if self.flips:
            await conn.execute(t.flips.insert(), self.flips)


async def record_alerts(
    conn: AsyncConnection,
    check: CheckIdentity,
    drafts: Sequence[AlertDraft],
    *,
    now: datetime,
    status: Status,
    base_url: str,
    log_tail: str | None = None,
    token: int | None = None,
    recovering: bool = False,
) -> list[int]:
    """Insert new alerts (queueing one notification per routed channel) and raise counts.

    Args:
        recovering: the ping closed a down episode. Its ``late`` alert is then the recovery
            notice (DESIGN §5), so it also goes to channels whose ``kinds`` accept
            ``recovered`` but not ``late``.

    Returns:
        Ids of the alerts this call inserted.
    """
    inserted: list[int] = []
    for draft in drafts:
        facts = messages.AlertFacts(
            kind=draft.kind.value,
            check_name=check.name,
            check_uuid=check.uuid,
            slug=check.slug,
            tz=check.tz,
            status=status.value,
            scheduled=draft.scheduled,
            count=draft.count,
            late_by_s=draft.late_by.total_seconds() if draft.late_by is not None else None,
            duration_s=draft.duration.total_seconds() if draft.duration is not None else None,
            exit_status=draft.exit_status,
            run_ids=draft.run_ids,
            other_scheduled=draft.other_scheduled,
            log_tail=log_tail,
            check_url=f"{base_url}/checks/{check.uuid}",  # the dashboard's page
            simple=check.simple,
            superseded=draft.superseded,
            runs_seen=draft.runs_seen,
            runs_expected=draft.runs_expected,
            min_runtime_s=draft.min_runtime.total_seconds() if draft.min_runtime is not None else None,
        )
        if not draft.new:
            values: dict[str, object] = {"count": draft.count}
            if draft.scheduled is not None:
                # a bump that carries the whole story (a third run of a duplicated tick): the
                # message says "ran 3 times", not what it said when the alert was raised
                message = templates.render(facts)
                values.update(
                    title=message.title[:300], message=message.body, facts=messages.facts_to_json(facts)
                )
            await conn.execute(
                update(t.alerts)
                .where(t.alerts.c.project_id == check.project_id)
                .where(t.alerts.c.check_id == check.id)
                .where(t.alerts.c.key == draft.key)
                .where(t.alerts.c.count < draft.count)
                .values(values)
            )
            continue
        message = templates.render(facts)
        stmt = (
            repositories.insert_ignoring_conflicts(conn, t.alerts)
            .values(
                project_id=check.project_id,
                check_id=check.id,
                key=draft.key,
                kind=draft.kind.value,
                scheduled=draft.scheduled,
                run_id=draft.run_id,
                rid=draft.rid,
                count=draft.count,
                created_at=now,
                title=message.title[:300],
                message=message.body,
                facts=messages.facts_to_json(facts),
                token=token,
            )
            .returning(t.alerts.c.id)
        )
        alert_id = (await conn.execute(stmt)).scalar_one_or_none()
        if alert_id is None:
            continue  # another writer raised it first
        inserted.append(alert_id)
        channels = (
            await conn.execute(
                select(t.channels.c.id, t.channels.c.kinds)
                .join(t.check_channels, t.check_channels.c.channel_id == t.channels.c.id)
                .where(t.check_channels.c.check_id == check.id)
            )
        ).all()
        rows = [
            {
                "alert_id": alert_id,
                "channel_id": channel_id,
                "status": "pending",
                "attempts": 0,
                "next_attempt_at": now,
                "created_at": now,
            }
            for channel_id, kinds in channels
            if channel_wants(kinds, draft.kind.value)
            or (
                recovering
                and draft.kind is AlertKind.LATE
                and channel_wants(kinds, AlertKind.RECOVERED.value)
            )
        ]
        if rows:
            await conn.execute(t.notifications.insert(), rows)
    return inserted


def channel_wants(kinds: str, kind: str) -> bool:
    """A channel's ``kinds`` filter: empty means every kind; else a comma-separated list."""
    wanted = {k.strip() for k in kinds.split(",") if k.strip()}
    return not wanted or kind in wanted
