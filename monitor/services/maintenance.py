"""Maintenance windows: validation and storage (rules in :mod:`monitor.domain.maintenance`).

A window body is JSON:

* one-off: ``{"name": "db upgrade", "check": "<uuid>", "start": "2026-07-19T02:00:00Z",
  "end": "2026-07-19T03:00:00Z"}``;
* recurring: ``{"name": "nightly deploy", "schedule": "0 2 * * *", "tz": "Europe/Berlin",
  "dialect": "unix", "duration": 1800}`` — every tick opens a window of ``duration`` seconds.

Without ``check`` the window covers every check of the project (and its project-level alerts).
"""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.domain import maintenance, pings
from monitor.domain.cron import schedules
from monitor.domain.errors import NotFound, ScheduleError, ValidationError, ZoneError
from monitor.services import reminders
from monitor.services.dispatch import window_of
from monitor.settings import Settings
from monitor.storage.unit_of_work import Connection, Engine, UnitOfWork

MAX_DURATION_S = int(maintenance.MAX_DURATION.total_seconds())


def _instant(data: Mapping[str, Any], name: str) -> datetime:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        raise ValidationError(name, "is required: ISO 8601 with an offset or Z, e.g. 2026-07-19T02:00:00Z")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValidationError(name, f"must be ISO 8601 with an offset or Z, got {value!r}") from None
    if parsed.tzinfo is None:
        raise ValidationError(name, "needs a UTC offset or Z")
    try:
        instant = parsed.astimezone(UTC)
    except OverflowError:
        raise ValidationError(name, "out of range (2000-01-01 to 9000-01-01)") from None
    # the same range as a ping's ``scheduled`` (monitor.domain.pings)
    if not pings.EARLIEST_SCHEDULED <= instant <= pings.LATEST_SCHEDULED:
        raise ValidationError(name, "out of range (2000-01-01 to 9000-01-01)")
    return instant


def _text(data: Mapping[str, Any], name: str, limit: int, default: str) -> str:
    value = data.get(name, default)
    if not isinstance(value, str) or len(value) > limit or "\x00" in value:
        raise ValidationError(name, f"must be a string of at most {limit} characters (no NUL)")
    return value


async def validate_window(conn: Connection, project_id: int, data: Any, now: datetime) -> dict[str, Any]:
    """Validate a window body into column values.

    Args:
        project_id: the caller's project (``check`` must be one of its checks).
        data: the decoded JSON body.
        now: the current instant (a recurring schedule must still fire after it).

    Returns:
        Column values for ``maintenance_windows`` (without ``id``/``created_at``).

    Raises:
        ValidationError: naming ``body``, ``name``, ``check``, ``start``, ``end``, ``schedule``,
            ``tz``, ``dialect`` or ``duration``.

    Long because a window body's fields are validated in turn, each with its own message.
    """
    if not isinstance(data, dict):
        raise ValidationError("body", "must be a JSON object")
    out: dict[str, Any] = {"name": _text(data, "name", 100, ""), "check_id": None}
    check = data.get("check")
    if check is not None:
        if not isinstance(check, str) or "\x00" in check:
            raise ValidationError("check", "must be a check's uuid")
        check_id = await UnitOfWork.joining(conn).maintenance.check_id(project_id, check)
        if check_id is None:
            raise ValidationError("check", f"no check {check!r} in this project")
        out["check_id"] = check_id
    one_off = "start" in data or "end" in data
    recurring = "schedule" in data
    if one_off == recurring:
        raise ValidationError(
            "schedule",
            "give either start and end (a one-off window) or schedule and duration (a recurring one)",
        )
    if one_off:
        start, end = _instant(data, "start"), _instant(data, "end")
        if end <= start:
            raise ValidationError("end", "must be after start")
        if end - start > maintenance.MAX_ONE_OFF:
            raise ValidationError(
                "end", f"a one-off window lasts at most {maintenance.MAX_ONE_OFF.days} days"
            )
        out.update(
            starts_at=start, ends_at=end, schedule=None, duration=None, tz=_text(data, "tz", 64, "UTC")
        )
        try:
            schedules.validate_zone(out["tz"])
        except ZoneError as error:
            raise ValidationError("tz", str(error)) from None
        return out
    schedule = _text(data, "schedule", 200, "").strip()
    dialect = _text(data, "dialect", 10, "unix").strip().lower()
    tz = _text(data, "tz", 64, "UTC")
    if dialect not in {d.value for d in schedules.Dialect}:
        names = ", ".join(d.value for d in schedules.Dialect)
        raise ValidationError("dialect", f"must be one of {names}, got {dialect!r}")
    try:
        cron = schedules.parse_cron(schedule, dialect, tz)
        schedules.ensure_fires_after(cron, now)
    except ZoneError as error:
        raise ValidationError("tz", str(error)) from None
    except ScheduleError as error:
        raise ValidationError("schedule", str(error)) from None
    duration = data.get("duration")
    if isinstance(duration, bool) or not isinstance(duration, int) or not 1 <= duration <= MAX_DURATION_S:
        raise ValidationError(
            "duration", f"must be whole seconds between 1 and {MAX_DURATION_S}, got {duration!r}"
        )
    gap = maintenance.shortest_gap(cron, now)
    if gap is not None and timedelta(seconds=duration) >= gap:
        # Occurrences would overlap or touch: the window would never end between ticks.
        raise ValidationError(
            "duration",
            f"must be shorter than the schedule's shortest gap between ticks "
            f"({int(gap.total_seconds())} s), got {duration}; for a continuous mute use a one-off "
            "window (start and end)",
        )
    out.update(starts_at=None, ends_at=None, schedule=schedule, dialect=dialect, tz=tz, duration=duration)
    return out


async def create_window(conn: Connection, project_id: int, values: Mapping[str, Any], now: datetime) -> str:
    """Store a validated window; returns its new id."""
    window_id = str(uuid_module.uuid4())
    await UnitOfWork.joining(conn).maintenance.insert(
        {**values, "id": window_id, "project_id": project_id, "created_at": now}
    )
    return window_id


async def get_window(conn: Connection, project_id: int, window_id: str) -> dict[str, Any]:
    """The window row joined with its check's uuid (``check_uuid``).

    Raises:
        NotFound: no such window in the project.
    """
    rows = await _rows(conn, project_id, window_id)
    if not rows:
        raise NotFound("id: no maintenance window with this id in this project")
    return rows[0]


async def list_windows(conn: Connection, project_id: int) -> list[dict[str, Any]]:
    """The project's windows, oldest first."""
    return await _rows(conn, project_id, None)


async def _rows(conn: Connection, project_id: int, window_id: str | None) -> list[dict[str, Any]]:
    if window_id is not None and "\x00" in window_id:  # no id has one, and PostgreSQL rejects it
        return []
    return await UnitOfWork.joining(conn).maintenance.windows(project_id, window_id)


async def delete_window(
    conn: Connection, row: Mapping[str, Any], now: datetime, *, settings: Settings
) -> bool:
    """Delete a window; what it held back is summarised now.

    Deleting a window ends it: an occurrence going on counts as ended at ``now`` (and one that
    ended but was not summarised yet is still owed), so its summary — listing the alerts it
    held back and the check's status (for a project window: the checks that are down) — is
    raised in the same transaction, if it held anything back. Notifications of those alerts
    still waiting for their turn are marked ``suppressed`` first: they are told in the summary,
    not sent again one by one. This holds for check windows and project windows alike.

    Args:
        row: the window's row (:func:`get_window`).
        now: the deletion instant (aware UTC).
        settings: ``base_url`` and templates for the summary.

    Returns:
        True if a summary was raised.
    """
    uow = UnitOfWork.joining(conn)
    window = window_of(row)
    try:
        occurrence = maintenance.cut_short(window, row["summarized_until"], now)
    except (ScheduleError, ZoneError):  # a schedule that no longer parses: nothing to summarise
        occurrence = None
    raised = False
    if occurrence is not None:
        await uow.maintenance.suppress_held_back(
            row["project_id"],
            window.check_id,
            occurrence.start,
            occurrence.end,
            now,
            f"held back by maintenance window {window.name or window.id!r} (deleted)",
        )
        raised = await reminders.summarise(conn, row, window, occurrence, now, settings)
    await uow.maintenance.delete(window.id)
    return raised


def _iso(instant: datetime | None) -> str | None:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ") if instant is not None else None


def window_to_dict(row: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """A window's JSON: ``id, name, check`` (uuid or null), ``start, end`` (one-off) or
    ``schedule, dialect, duration`` (recurring), ``tz``, ``active`` and ``next``
    (``{"start", "end"}`` of the occurrence going on or coming next, or null)."""
    window = window_of(row)
    upcoming = maintenance.next_occurrence(window, now)
    out: dict[str, Any] = {
        "id": row["id"],
        "name": row["name"],
        "check": row["check_uuid"],
        "tz": row["tz"],
    }
    if window.recurring:
        out.update(schedule=row["schedule"], dialect=row["dialect"], duration=row["duration"])
    else:
        out.update(start=_iso(row["starts_at"]), end=_iso(row["ends_at"]))
    out["active"] = maintenance.occurrence_at(window, now) is not None
    out["next"] = {"start": _iso(upcoming.start), "end": _iso(upcoming.end)} if upcoming else None
    return out


# -- the management API's use cases: one unit of work each --------------------------------------


async def windows_of(engine: Engine, project_id: int) -> list[dict[str, Any]]:
    """The project's window rows, oldest first (:func:`list_windows`)."""
    async with UnitOfWork.read(engine) as uow:
        return await list_windows(uow.connection, project_id)


async def add_window(engine: Engine, project_id: int, data: Any, now: datetime) -> dict[str, Any]:
    """Validate a window body (:func:`validate_window`) and store it in one transaction; the new
    window's row (as :func:`get_window`).

    Raises:
        ValidationError: as :func:`validate_window`.
    """
    async with UnitOfWork.begin(engine) as uow:
        values = await validate_window(uow.connection, project_id, data, now)
        window_id = await create_window(uow.connection, project_id, values, now)
        return await get_window(uow.connection, project_id, window_id)


async def find_window(engine: Engine, project_id: int, window_id: str) -> dict[str, Any]:
    """:func:`get_window` in a read of its own.

    Raises:
        NotFound: no such window in the project.
    """
    async with UnitOfWork.read(engine) as uow:
        return await get_window(uow.connection, project_id, window_id)


async def remove_window(
    engine: Engine, project_id: int, window_id: str, now: datetime, *, settings: Settings
) -> dict[str, Any]:
    """Delete a window (:func:`delete_window`, its summary raised in the same transaction); its
    row as it was.

    Raises:
        NotFound: no such window in the project.
    """
    async with UnitOfWork.begin(engine) as uow:
        row = await get_window(uow.connection, project_id, window_id)
        await delete_window(uow.connection, row, now, settings=settings)
        return row
