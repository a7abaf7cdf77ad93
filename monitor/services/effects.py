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

from monitor.domain import messages
from monitor.domain.checks import AlertKind, FlipReason, Status
from monitor.domain.detection import AlertDraft, Effects
from monitor.storage import outbox, repositories
from monitor.storage.unit_of_work import Connection, UnitOfWork

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

    async def write(
        self,
        conn: Connection,
        *,
        pings: Sequence[Mapping[str, Any]] = (),
        states: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """Write the gathered rows in the caller's transaction, with the batch's ``pings`` and
        check ``states`` (:meth:`~monitor.storage.ports.DetectionStore.write_effects`: one
        statement on PostgreSQL)."""
        await UnitOfWork.joining(conn).detection.write_effects(
            new_runs=self.new_runs,
            changed_runs=self.changed_runs,
            marks=self.marks,
            flips=self.flips,
            pings=pings,
            states=states,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckAlerts:
    """One check's alert drafts from one decision, with what their messages need.

    Attributes:
        status: the check's status after the decision (shown in the messages).
        log_tail: the ping body that raised them, if any (shown in the messages).
        recovering: the ping closed a down episode. Its ``late`` alert is then the recovery
            notice (DESIGN §5), so it also goes to channels whose ``kinds`` accept
            ``recovered`` but not ``late``.
        token: the fencing token that wrote them, when it differs from the call's ``token``
            (a sweep over several shards: each shard's own token, all in one call).
    """

    check: CheckIdentity
    drafts: Sequence[AlertDraft]
    status: Status
    log_tail: str | None = None
    recovering: bool = False
    token: int | None = None


async def record_alerts(
    conn: Connection,
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
    """Insert one check's new alerts (queueing one notification per routed channel) and raise counts.

    :func:`record_alerts_many` for one check.

    Args:
        recovering: the ping closed a down episode. Its ``late`` alert is then the recovery
            notice (DESIGN §5), so it also goes to channels whose ``kinds`` accept
            ``recovered`` but not ``late``.

    Returns:
        Ids of the alerts this call inserted.

    Long because alerts are inserted and their notifications queued per routed channel in one pass.
    """
    batch = CheckAlerts(check=check, drafts=drafts, status=status, log_tail=log_tail, recovering=recovering)
    return await record_alerts_many(conn, [batch], now=now, base_url=base_url, token=token)


async def record_alerts_many(
    conn: Connection,
    batches: Sequence[CheckAlerts],
    *,
    now: datetime,
    base_url: str,
    token: int | None = None,
) -> list[int]:
    """Insert the new alerts of many checks, queue their notifications, and raise counts.

    A fixed number of statements however many checks: one multi-row insert of the new alerts
    (:func:`monitor.storage.outbox.insert_alerts`, ``ON CONFLICT DO NOTHING``), then
    :func:`queue_alerts`. The evaluator inserts the alerts of :func:`plan_alerts` with its
    other writes instead (one round trip) and then calls :func:`queue_alerts` itself.

    Args:
        batches: per check, its drafts (a check may appear more than once).
        now: the decision's instant (aware UTC): the alerts' ``created_at`` and the
            notifications' first due time.
        base_url: ``MONITOR_BASE_URL``, for the links in the messages.
        token: the fencing token that wrote them (evaluator), recorded on the alerts; a
            batch's own ``token`` wins.

    Returns:
        Ids of the alerts inserted, in the order given.
    """
    plan = plan_alerts(batches, now=now, base_url=base_url, token=token)
    ids = await outbox.insert_alerts(conn, plan.new)
    return await queue_alerts(conn, plan, ids, now=now)


@dataclass(frozen=True, kw_only=True, slots=True)
class AlertPlan:
    """What :func:`plan_alerts` made of some checks' drafts.

    Attributes:
        new: the rows of the new alerts, for :func:`monitor.storage.outbox.insert_alerts`.
        raised: per row of ``new``, the check and draft it came from.
        bumps: drafts of alerts that exist (their count raised), with their facts.
    """

    new: list[outbox.NewAlert]
    raised: list[tuple[CheckAlerts, AlertDraft]]
    bumps: list[tuple[CheckAlerts, AlertDraft, str]]


def plan_alerts(
    batches: Sequence[CheckAlerts], *, now: datetime, base_url: str, token: int | None = None
) -> AlertPlan:
    """The new alert rows and count bumps of ``batches`` (no I/O; arguments as
    :func:`record_alerts_many`'s)."""
    plan = AlertPlan(new=[], raised=[], bumps=[])
    for batch in batches:
        for draft in batch.drafts:
            facts = _facts(batch, draft, base_url)
            if draft.new:
                written = batch.token if batch.token is not None else token
                plan.new.append(_new_alert(batch, draft, facts, now=now, token=written))
                plan.raised.append((batch, draft))
            else:
                plan.bumps.append((batch, draft, facts))
    return plan


async def queue_alerts(
    conn: Connection, plan: AlertPlan, ids: Sequence[int | None], *, now: datetime
) -> list[int]:
    """After ``plan.new`` was inserted (``ids``: per row, its new id or ``None`` when another
    writer had raised it): raise the counts of ``plan.bumps`` (one update each; a bump may be of
    an alert just raised), read the channels of the checks whose alerts were inserted (one
    query) and queue a notification per accepting channel (one insert). An alert that was not
    inserted queues nothing.

    Returns:
        Ids of the alerts inserted, in the order of ``plan.new``.
    """
    for batch, draft, facts in plan.bumps:
        await _raise_count(conn, batch, draft, facts)
    inserted = [
        (alert_id, batch, draft)
        for alert_id, (batch, draft) in zip(ids, plan.raised, strict=True)
        if alert_id
    ]
    routes = await outbox.check_routes(conn, {batch.check.id for _, batch, _ in inserted})
    await outbox.enqueue(
        conn,
        [
            outbox.Notice(alert_id=alert_id, channel_id=route.channel_id, due_at=now)
            for alert_id, batch, draft in inserted
            for route in routes.get(batch.check.id, [])
            if route.accepts(
                draft.kind.value,
                also=AlertKind.RECOVERED.value if batch.recovering and draft.kind is AlertKind.LATE else None,
            )
        ],
    )
    return [alert_id for alert_id, _, _ in inserted]


def _new_alert(
    batch: CheckAlerts, draft: AlertDraft, facts: str, *, now: datetime, token: int | None
) -> outbox.NewAlert:
    """The row of a new alert: its facts, no text (readers render it from the facts:
    :func:`monitor.notify.templates.stored_text`)."""
    return outbox.NewAlert(
        project_id=batch.check.project_id,
        check_id=batch.check.id,
        key=draft.key,
        kind=draft.kind.value,
        scheduled=draft.scheduled,
        run_id=draft.run_id,
        rid=draft.rid,
        count=draft.count,
        created_at=now,
        title="",
        message="",
        facts=facts,
        token=token,
    )


async def _raise_count(conn: Connection, batch: CheckAlerts, draft: AlertDraft, facts: str) -> None:
    """Bump an alert that exists. A bump that carries the whole story (a third run of a
    duplicated tick) rewrites the message: it says "ran 3 times", not what it said when the
    alert was raised."""
    text = None
    if draft.scheduled is not None:
        text = ("", "", facts)  # rendered by readers, as a new alert's
    await outbox.raise_count(
        conn,
        project_id=batch.check.project_id,
        check_id=batch.check.id,
        key=draft.key,
        count=draft.count,
        text=text,
    )


def _facts(batch: CheckAlerts, draft: AlertDraft, base_url: str) -> str:
    """The alert's stored facts (:func:`monitor.domain.messages.encode_facts`), built straight
    from the draft: a sweep stores thousands, and :class:`~monitor.domain.messages.AlertFacts`
    of some thirty fields, then read back field by field, was a tenth of its alerting cost."""
    check = batch.check
    values: dict[str, Any] = {
        "kind": draft.kind.value,
        "check_name": check.name,
        "check_uuid": check.uuid,
        "slug": check.slug,
        "tz": check.tz,
        "status": batch.status.value,
        "scheduled": draft.scheduled,
        "count": draft.count,
        "check_url": f"{base_url}/checks/{check.uuid}",  # the dashboard's page
        "simple": check.simple,
        "superseded": draft.superseded,
    }
    if draft.late_by is not None:
        values["late_by_s"] = draft.late_by.total_seconds()
    if draft.duration is not None:
        values["duration_s"] = draft.duration.total_seconds()
    if draft.exit_status is not None:
        values["exit_status"] = draft.exit_status
    if draft.run_ids:
        values["run_ids"] = draft.run_ids
    if draft.other_scheduled is not None:
        values["other_scheduled"] = draft.other_scheduled
    if batch.log_tail is not None:
        values["log_tail"] = batch.log_tail
    if draft.runs_seen is not None:
        values["runs_seen"] = draft.runs_seen
    if draft.runs_expected is not None:
        values["runs_expected"] = draft.runs_expected
    if draft.min_runtime is not None:
        values["min_runtime_s"] = draft.min_runtime.total_seconds()
    return messages.encode_facts(values)
