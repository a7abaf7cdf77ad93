"""Time-driven notifications: reminders ("nag"), escalations, maintenance summaries.

:func:`raise_due` runs in every notifier process each round. It holds no lease: every alert it
raises has a deterministic key — ``nag:<episode key>:<n>``, ``escalation:<episode key>``,
``maintenance:<window id>:<occurrence end>`` — inserted with ``ON CONFLICT DO NOTHING`` (and,
for project-level summaries, whose check is NULL, after winning a conditional update of the
window's ``summarized_until``), so any number of notifiers raise each one exactly once.

* **Nag** (Healthchecks' "nag"): while a check's down episode stays open, every
  ``nag_interval`` seconds after it opened, a reminder goes to the check's channels (those
  whose ``kinds`` filter accepts ``nag`` or the episode's kind). After an outage of the
  notifiers only the latest reminder is raised, never a burst.
* **Escalation**: once a down episode has lasted ``escalate_after`` seconds, one escalation
  goes to the channels in ``escalate_to`` (explicit routing: their ``kinds`` filters do not
  apply).
* **Maintenance summary**: when an occurrence of a maintenance window ends (or the window is
  deleted), one summary lists the alerts held back during it (recorded but not sent) and the
  check's status — or, for a project window, the checks that are down. Nothing held back,
  no summary.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from monitor.domain import detection, maintenance, messages
from monitor.domain.messages import AlertFacts
from monitor.notify import templates
from monitor.services.dispatch import window_of
from monitor.settings import Settings
from monitor.storage import outbox, repositories
from monitor.storage.unit_of_work import Connection, Engine, UnitOfWork

logger = logging.getLogger(__name__)

#: Most alerts named one by one in a maintenance summary.
SUMMARY_LINES = 50


async def raise_due(engine: Engine, now: datetime, *, settings: Settings) -> int:
    """Raise the reminders, escalations and maintenance summaries due at ``now``.

    Args:
        engine: the database.
        now: the current instant (aware UTC; injected by tests).
        settings: ``base_url`` (links) and ``templates_dir``.

    Returns:
        How many alerts were raised.
    """
    async with UnitOfWork.begin(engine) as uow:
        raised = await _repeats(uow, now, settings)
    async with UnitOfWork.begin(engine) as uow:
        raised += await _summaries(uow, now, settings)
    return raised


# --------------------------------------------------------------------------- nag, escalation


async def _repeats(uow: UnitOfWork, now: datetime, settings: Settings) -> int:
    conn = uow.connection
    rows = await uow.reminders.open_episodes()
    raised = 0
    for row in rows:
        down_for = (now - row["opened_at"]).total_seconds()
        if row["nag_interval"]:
            n = int(down_for // row["nag_interval"])
            if n >= 1:
                key = f"{messages.NAG}:{row['episode_key']}:{n}"
                facts = _facts(row, messages.NAG, settings, down_for_s=down_for, reminder=n)
                channels = await _check_channels(conn, row["id"])
                if await _raise(conn, row, key, facts, now, channels=channels):
                    raised += 1
        if row["escalate_after"] and down_for >= row["escalate_after"] and row["escalate_to"]:
            key = f"{messages.ESCALATION}:{row['episode_key']}"
            facts = _facts(row, messages.ESCALATION, settings, down_for_s=down_for)
            targets = [i for i in row["escalate_to"].split(",") if i]
            if await _raise(conn, row, key, facts, now, channels=targets, explicit=True):
                raised += 1
    return raised


def _facts(row: Mapping[Any, Any], kind: str, settings: Settings, **extra: Any) -> AlertFacts:
    return AlertFacts(
        kind=kind,
        check_name=row["name"] or row["uuid"],
        check_uuid=row["uuid"],
        slug=row["slug"],
        tz=row["tz"] if row["check_kind"] == "cron" else "UTC",
        status="down",
        scheduled=row["scheduled"],
        check_url=f"{settings.base_url}/checks/{row['uuid']}",
        episode_kind=row["episode_kind"],
        **extra,
    )


async def _check_channels(conn: Connection, check_id: int) -> list[str]:
    return [route.channel_id for route in (await outbox.check_routes(conn, [check_id])).get(check_id, [])]


async def _raise(
    conn: Connection,
    row: Mapping[Any, Any],
    key: str,
    facts: AlertFacts,
    now: datetime,
    *,
    channels: Sequence[str],
    explicit: bool = False,
) -> bool:
    """Insert one alert (unless its key exists) and queue it to ``channels``; True if inserted."""
    if await outbox.alert_exists(conn, row["project_id"], row["id"], key):
        return False
    return await insert_alert(
        conn,
        project_id=row["project_id"],
        check_id=row["id"],
        key=key,
        facts=facts,
        now=now,
        channels=channels,
        explicit=explicit,
    )


async def insert_alert(
    conn: Connection,
    *,
    project_id: int,
    check_id: int | None,
    key: str,
    facts: AlertFacts,
    now: datetime,
    channels: Sequence[str],
    explicit: bool = False,
) -> bool:
    """Insert an alert rendered from ``facts`` and one pending notification per wanted channel.

    Args:
        channels: candidate channel ids (only the project's own are used).
        explicit: skip the channels' ``kinds`` filters (escalation targets were chosen by name).

    Returns:
        True if the alert was inserted (False: its key existed already).

    Long because an alert and its notification per channel are written together, with the channel
    routing rules.
    """
    message = templates.render(facts)
    (alert_id,) = await outbox.insert_alerts(
        conn,
        [
            outbox.NewAlert(
                project_id=project_id,
                check_id=check_id,
                key=key,
                kind=facts.kind,
                scheduled=facts.scheduled,
                created_at=now,
                title=message.title,
                message=message.body,
                facts=messages.facts_to_json(facts),
            )
        ],
    )
    if alert_id is None:
        return False
    routes = await outbox.project_routes(conn, project_id, channels)
    await outbox.enqueue(
        conn,
        [
            outbox.Notice(alert_id=alert_id, channel_id=route.channel_id, due_at=now)
            for route in routes
            if explicit or route.accepts(facts.kind, also=facts.episode_kind)
        ],
    )
    logger.info(
        "notification raised", extra={"action": "notification_raised", "kind": facts.kind, "key": key}
    )
    return True


# --------------------------------------------------------------------------- maintenance


async def _summaries(uow: UnitOfWork, now: datetime, settings: Settings) -> int:
    rows = await uow.reminders.windows()
    raised = 0
    for row in rows:
        window = window_of(row)
        try:
            occurrence = maintenance.summary_due(window, row["summarized_until"], now)
        except Exception:  # a schedule that no longer parses must not stop the other windows
            logger.exception(
                "maintenance window unreadable", extra={"action": "window_failed", "id": row["id"]}
            )
            continue
        if occurrence is None:
            continue
        if not await uow.reminders.claim_summary(window.id, occurrence.end):
            continue  # another notifier summarised it
        if await summarise(uow.connection, row, window, occurrence, now, settings):
            raised += 1
    return raised


async def held_back(
    conn: Connection,
    project_id: int,
    window: maintenance.Window,
    occurrence: maintenance.Occurrence,
    since: datetime | None = None,
) -> list[tuple[datetime, str]]:
    """``(raised at, title)`` of the alerts ``window`` held back during ``occurrence``, oldest first.

    An alert counts when it is in the window's scope (its check, or for a project window every
    check and the project-level alerts), was raised in ``[start, end)``, and has a notification
    that was suppressed or is still waiting (it will be suppressed when its turn comes: the
    window covers it). Alerts already sent — raised before the window was created — and alerts
    routed to no channel were not held back by anything. ``since`` (the end of the span last
    summarised) keeps an alert out of a second summary when merged spans overlap.
    """
    start = max(occurrence.start, since) if since is not None else occurrence.start
    held = await outbox.held_back_alerts(
        conn, project_id, window.check_id, start=start, end=occurrence.end, except_kind=messages.MAINTENANCE
    )
    return [(at, templates.stored_text(title, message, facts)[0]) for at, title, message, facts in held]


async def summarise(
    conn: Connection,
    row: Mapping[Any, Any],
    window: maintenance.Window,
    occurrence: maintenance.Occurrence,
    now: datetime,
    settings: Settings,
) -> bool:
    """Raise the summary of one ended occurrence — only if it held something back.

    Args:
        row: the ``maintenance_windows`` row (``project_id``; ``summarized_until`` as it was
            before this summary).
        window: the row as a domain window.
        occurrence: the span that ended (``end`` is part of the summary's key, so one
            occurrence is summarised once).
        now: the current instant (the check's status is judged at it).
        settings: ``base_url`` and templates.

    Returns:
        True if a summary alert was raised.

    Long because an ended occurrence's summary is gathered and queued in one transaction.
    """
    held_rows = await held_back(conn, row["project_id"], window, occurrence, row["summarized_until"])
    if not held_rows:
        return False  # nothing was held back: nothing to tell anyone
    held = [f"{messages.format_utc(at)} {title}" for at, title in held_rows[:SUMMARY_LINES]]
    if len(held_rows) > SUMMARY_LINES:
        held.append(f"… and {len(held_rows) - SUMMARY_LINES} more (see the alerts in the API)")
    common: dict[str, Any] = {
        "kind": messages.MAINTENANCE,
        "scheduled": None,
        "window_name": window.name or None,
        "window_start": occurrence.start,
        "window_end": occurrence.end,
        "held": tuple(held),
        "count": len(held_rows),
        "tz": window.tz,
    }
    uow = UnitOfWork.joining(conn)
    if window.check_id is not None:
        check = (await uow.checks.by_ids([window.check_id])).get(window.check_id)
        if check is None:
            return False
        status = detection.status(repositories.state_of(check), now).value
        facts = AlertFacts(
            check_name=check["name"] or check["uuid"],
            check_uuid=check["uuid"],
            slug=check["slug"],
            status=status,
            check_url=f"{settings.base_url}/checks/{check['uuid']}",
            **common,
        )
        channels = await _check_channels(conn, window.check_id)
    else:
        (project,) = await uow.projects.names([row["project_id"]])
        down = await uow.reminders.down_checks(row["project_id"])
        facts = AlertFacts(
            check_name=f"project {project}",
            check_uuid="",
            slug=None,
            status="",
            check_url=f"{settings.base_url}/",
            down_checks=tuple(name or uuid for name, uuid in down[:SUMMARY_LINES]),
            **common,
        )
        channels = [channel_id for channel_id, _ in await uow.channels.names(row["project_id"])]
    # Held-back alerts are shown by the time they were raised: the summary's held count is
    # already in "held", the per-alert statuses in GET /checks/<uuid>/alerts/ say "suppressed".
    return await insert_alert(
        conn,
        project_id=row["project_id"],
        check_id=window.check_id,
        key=f"{messages.MAINTENANCE}:{window.id}:{messages.format_utc(occurrence.end)}",
        facts=facts,
        now=now,
        channels=channels,
    )
