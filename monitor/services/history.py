"""Read models of a check's past: pings, flips, runs, alerts with their notifications.

Each function is a step that joins the caller's unit of work (it takes its connection) and
reads through :attr:`UnitOfWork.history` (:class:`monitor.storage.ports.HistoryReads`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.domain.detection import iso
from monitor.domain.errors import NotFound, ValidationError
from monitor.notify import templates
from monitor.storage.unit_of_work import Connection, UnitOfWork

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_PING_NUMBER = 2**31 - 1


def _iso(value: datetime | None) -> str | None:
    return iso(value) if value is not None else None


def _tick(value: datetime | None) -> str | None:
    """A ``scheduled`` instant in whole seconds (``…:57Z``): a simple check's tick is a due
    instant computed from a ping's arrival and carries its microseconds."""
    return iso(value.replace(microsecond=0)) if value is not None else None


async def list_pings(
    conn: Connection, check_id: int, uuid: str, base_url: str, limit: int, *, before: int | None = None
) -> list[dict[str, Any]]:
    """The check's pings, newest first: at most ``limit``, numbered below ``before`` if given."""
    rows = await UnitOfWork.joining(conn).history.pings(check_id, limit, before=before)
    return [
        {
            "n": r["n"],
            "type": r["kind"],
            "date": _iso(r["received_at"]),
            "scheduled": _tick(r["scheduled"]),
            "rid": r["rid"],
            "exit_status": r["exit_status"],
            "duration": round(r["duration"], 3) if r["duration"] is not None else None,
            "scheme": r["scheme"],  # Healthchecks' field: http, https or email
            "method": r["method"],
            "remote_addr": r["remote_addr"],
            "ua": r["ua"],
            "body_size": r["body_size"],
            "body_url": f"{base_url}/api/v3/checks/{uuid}/pings/{r['n']}/body" if r["has_body"] else None,
        }
        for r in rows
    ]


async def ping_body(conn: Connection, check_id: int, n: int) -> bytes:
    if not 1 <= n <= MAX_PING_NUMBER:  # beyond the column's range: no such ping (and no DB error)
        raise NotFound("n: no stored body for this ping")
    body = await UnitOfWork.joining(conn).history.ping_body(check_id, n)
    if body is None:
        raise NotFound("n: no stored body for this ping")
    return body


@dataclass(frozen=True, kw_only=True, slots=True)
class FlipWindow:
    """Which flips to list: ``since <= created_at < until`` (either bound may be open)."""

    since: datetime | None = None
    until: datetime | None = None


FLIP_MAX_SECONDS = 31_536_000
FLIP_MAX_TIMESTAMP = 10_000_000_000  # year 2286: Healthchecks' sanity bound


def _whole(name: str, value: str, high: int) -> int:
    text = value.strip()
    if not (text.isascii() and text.lstrip("+-").isdigit()):  # "٦٠" is no number here
        raise ValidationError(name, f"must be an integer, got {value!r}")
    number = int(text)
    if not 0 <= number <= high:
        raise ValidationError(name, f"must be between 0 and {high}, got {value}")
    return number


def flip_window(*, now: datetime, seconds: str | None, start: str | None, end: str | None) -> FlipWindow:
    """Healthchecks' flip filters (``FlipsFiltersForm``): ``seconds`` (the last N seconds,
    0-31 536 000), ``start`` (at or after) and ``end`` (before), UNIX timestamps 0-10^10.
    An empty value is no filter, as a Django form treats it.

    Raises:
        ValidationError: naming ``seconds``, ``start`` or ``end``.
    """
    since: datetime | None = None
    until: datetime | None = None
    if start:
        since = datetime.fromtimestamp(_whole("start", start, FLIP_MAX_TIMESTAMP), UTC)
    if end:
        until = datetime.fromtimestamp(_whole("end", end, FLIP_MAX_TIMESTAMP), UTC)
    if seconds:
        threshold = now - timedelta(seconds=_whole("seconds", seconds, FLIP_MAX_SECONDS))
        since = threshold if since is None else max(since, threshold)
    return FlipWindow(since=since, until=until)


async def list_flips(
    conn: Connection, check_id: int, limit: int, window: FlipWindow | None = None
) -> list[dict[str, Any]]:
    """The check's flips, newest first (at most ``limit``): ``{"timestamp", "up", "reason"}``."""
    return (await flips_page(conn, check_id, limit, window=window))[0]


async def flips_page(
    conn: Connection,
    check_id: int,
    limit: int,
    before: int | None = None,
    *,
    window: FlipWindow | None = None,
) -> tuple[list[dict[str, Any]], list[int]]:
    """Flips newest first with ids below ``before`` inside ``window``; returns (flips, their ids
    as cursor keys). Timestamps in whole seconds, as Healthchecks shows them (``Flip.to_dict``
    strips microseconds)."""
    window = window or FlipWindow()
    rows = await UnitOfWork.joining(conn).history.flips(
        check_id, limit, since=window.since, until=window.until, before=before
    )
    flips = [{"timestamp": _tick(r["created_at"]), "up": r["up"], "reason": r["reason"]} for r in rows]
    return flips, [int(r["id"]) for r in rows]


async def list_runs(
    conn: Connection,
    check_id: int,
    limit: int,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[dict[str, Any]]:
    """The check's runs by scheduled time, newest first (at most ``limit``)."""
    return (await runs_page(conn, check_id, limit, since, until))[0]


async def runs_page(
    conn: Connection,
    check_id: int,
    limit: int,
    since: datetime | None = None,
    until: datetime | None = None,
    after: tuple[datetime, datetime, str] | None = None,
) -> tuple[list[dict[str, Any]], list[tuple[datetime, datetime, str]]]:
    """Runs by scheduled time, newest first (then by first ping, then id), after the
    ``(scheduled, first_ping_at, id)`` of the previous page's last run; returns (runs, their keys)."""
    rows = await UnitOfWork.joining(conn).history.runs(check_id, limit, since=since, until=until, after=after)
    out = []
    for r in rows:
        duration = None
        if r["started_at"] is not None and r["finished_at"] is not None:
            duration = round((r["finished_at"] - r["started_at"]).total_seconds(), 3)
        out.append(
            {
                "id": r["id"],
                "rid": r["rid"],
                "scheduled": _tick(r["scheduled"]),
                "started": _iso(r["started_at"]),
                "finished": _iso(r["finished_at"]),
                "outcome": r["outcome"],
                "exit_status": r["exit_status"],
                "duration": duration,
            }
        )
    return out, [(r["scheduled"], r["first_ping_at"], r["id"]) for r in rows]


async def list_alerts(
    conn: Connection, check_id: int, limit: int, *, before: int | None = None
) -> list[dict[str, Any]]:
    """The check's alerts, newest first: at most ``limit``, ids below ``before`` if given."""
    reads = UnitOfWork.joining(conn).history
    rows = await reads.alerts(check_id, limit, before=before)
    notes: dict[int, list[dict[str, Any]]] = {int(r["id"]): [] for r in rows}
    for alert_id, channel, status, attempts, error in await reads.notifications(list(notes)):
        notes[alert_id].append(
            {"channel": channel, "status": status, "attempts": attempts, "last_error": error}
        )
    return [
        {
            "id": r["id"],
            "kind": r["kind"],
            "scheduled": _tick(r["scheduled"]),
            "rid": r["rid"],
            "run_id": r["run_id"],
            "count": r["count"],
            "created": _iso(r["created_at"]),
            "title": text[0],
            "message": text[1],
            "notifications": notes[r["id"]],
        }
        for r in rows
        for text in [templates.stored_text(r["title"], r["message"], r["facts"])]
    ]
