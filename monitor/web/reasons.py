"""Why a check has its status, in words an on-call engineer reads in one glance.

Pure functions of plain data (a check's dict from :mod:`monitor.services.dashboard`, ``now``
and the zone the reader wants times in); no I/O. ``missed 3 ticks since 03:00``,
``failed: exit 2``, ``timed out after 1 h``, ``late: the 03:00 tick has no ping yet``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo
from typing import Any

EPISODE_WORDS = {
    "missed": "missed",
    "failed": "failed",
    "timeout": "timed out",
    "late": "late",
    "duplicate": "duplicated",
    "overlap": "overlapped",
    "incomplete": "incomplete",
    "too_fast": "finished too fast",
}
"""Alert kinds (DESIGN §2) as the reason of a down episode."""


def duration_words(seconds: float) -> str:
    """``45 s``, ``5 min``, ``1 h``, ``1 h 30 min``, ``2 d 3 h``: the two largest whole units."""
    left = round(seconds)
    if left < 60:
        return f"{left} s"
    parts: list[str] = []
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min"), (1, "s")):
        amount, left = divmod(left, size)
        if amount and len(parts) < 2:
            parts.append(f"{amount} {unit}")
        elif parts:
            break
    return " ".join(parts)


def clock_words(instant: datetime, now: datetime, zone: tzinfo) -> str:
    """``03:00`` on the reader's day of ``now``, else ``07-17 03:00`` (in ``zone``)."""
    here = instant.astimezone(zone)
    if here.date() == now.astimezone(zone).date():
        return here.strftime("%H:%M:%S" if here.second else "%H:%M")
    return here.strftime("%m-%d %H:%M")


def run_result(run: dict[str, Any]) -> str:
    """A run's own result (``run``: :func:`monitor.services.dashboard.latest_run`'s dict):
    ``ok``, ``failed: exit 1``, ``failed`` or ``running``."""
    kind = run.get("finish_kind")
    if kind == "success":
        return "ok"
    if kind == "fail":
        status = run.get("exit_status")
        return f"failed: exit {status}" if status not in (None, 0) else "failed"
    return "running"


def started_words(check: dict[str, Any], now: datetime, zone: tzinfo) -> str:
    """``started 03:00, no finish yet`` when the check's newest run has a start and no finish
    (its ``last_ping`` stays null: a start is not a run ping, as in Healthchecks), else ``""``."""
    run = check.get("latest_run")
    if not run or run.get("finished_at") is not None or not isinstance(run.get("started_at"), datetime):
        return ""
    return f"started {clock_words(run['started_at'], now, zone)}, no finish yet"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def reason(check: dict[str, Any], now: datetime, zone: tzinfo) -> str:
    """Why ``check`` (a list/check page dict) has its status, in a few words."""
    status = check["status"]
    if status == "paused":
        return "paused: no tick is watched, nothing alerts"
    run = check.get("latest_run")
    if status in ("new", "up") and run and run.get("early"):
        # DESIGN §5 rule 4c: an early run counts for no tick; say what it was, never "ok"
        text = f"early run for {clock_words(run['scheduled'], now, zone)} — {run_result(run)}"
        return text + ("; waiting for the first run of a tick" if status == "new" else "")
    if status == "new":
        return "waiting for the first ping"
    if status == "grace":
        tick = check.get("pending_tick")
        if isinstance(tick, datetime):
            ends = tick + timedelta(seconds=int(check.get("grace") or 0))
            at, down = clock_words(tick, now, zone), clock_words(ends, now, zone)
            return f"late: the {at} tick has no ping yet (down at {down})"
        return "late: no ping within the period yet"
    if status == "down":
        return _down_reason(check, now, zone)
    last = check.get("last_ping")
    if isinstance(last, str) and last:
        when = datetime.fromisoformat(last.replace("Z", "+00:00"))
        return f"ok: last ping {duration_words((now - when).total_seconds())} ago"
    return started_words(check, now, zone) or "ok"


def _down_reason(check: dict[str, Any], now: datetime, zone: tzinfo) -> str:
    episode = check.get("episode") or {}
    kind = str(episode.get("kind") or "")
    count = int(episode.get("count") or 1)
    first = episode.get("first_tick")
    if kind == "missed":
        if check.get("kind") != "cron":
            text = f"missed {_plural(count, 'period')}"
        else:
            text = f"missed {_plural(count, 'tick')}"
        return text + (f" since {clock_words(first, now, zone)}" if isinstance(first, datetime) else "")
    if kind == "failed":
        status = check.get("last_exit_status")
        text = f"failed: exit {status}" if status not in (None, 0) else "failed"
        return text + _bad_ticks(count)
    if kind == "timeout":
        return f"timed out after {duration_words(int(check.get('max_runtime') or 0))}"
    words = EPISODE_WORDS.get(kind, kind.replace("_", " ") or "down")
    return words + _bad_ticks(count)


def _bad_ticks(count: int) -> str:
    """An episode's count in words: it counts the episode's bad ticks (a failed run, then each
    missed tick, ...), not runs of the kind that opened it: ``" (21 bad ticks)"``, ``""`` for 1."""
    return f" ({count} bad ticks)" if count > 1 else ""
