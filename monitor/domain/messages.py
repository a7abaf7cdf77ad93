"""The words a person on call reads about an alert (DESIGN §7).

Pure: no Apprise, no I/O, never reads the clock. :func:`context` computes every sentence
and detail from :class:`AlertFacts`; the template files of :mod:`monitor.notify.templates`
arrange them into a :class:`Message`. The notifier decides which rendering to send (plain
``body`` for email and JSON, ``body_markdown`` for chat services) and adds ``json_fields``
to ``json://`` payloads as top-level fields. Facts are stored with each alert
(:func:`facts_to_json`) so that delivery renders with the templates configured then.

Every title starts with the check's name and contains the alert kind verbatim::

    nightly-billing: missed — the 03:00 run did not report

and every body gives the tick in ISO 8601 UTC and in the check's zone, the numbers that
matter for the kind (how late, how long, how many runs or ticks), the last ping's log
tail and a link to the check's page.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

#: The longest log tail put into a message, in characters (the end is kept).
LOG_TAIL_LIMIT = 1000

#: Run ids are shortened to this many characters in prose ("3f2a9c1e…").
RUN_ID_PREFIX = 8

KINDS = (
    "missed",
    "late",
    "failed",
    "timeout",
    "overlap",
    "duplicate",
    "recovered",
    "incomplete",
    "too_fast",
)

#: Notification kinds beyond the alert kinds of DESIGN §2: a reminder while a check
#: stays down, an escalation to more channels, and the summary when a maintenance window ends.
NAG, ESCALATION, MAINTENANCE = "nag", "escalation", "maintenance"
EXTRA_KINDS = (NAG, ESCALATION, MAINTENANCE)


@dataclass(frozen=True, kw_only=True, slots=True)
class AlertFacts:
    """What happened, as plain values; the input of :func:`render`.

    Attributes:
        kind: the alert kind: ``missed``, ``late``, ``failed``, ``timeout``, ``overlap``,
            ``duplicate`` or ``recovered`` (other values render generically).
        check_name: the check's name; every title starts with it.
        check_uuid: the check's public id.
        slug: the check's slug, or ``None``.
        tz: the IANA zone of the check (``"UTC"`` for simple checks).
        status: the check's status after the alert (``up``, ``down``, ...).
        scheduled: the tick the alert is about, aware (any zone; shown in UTC and ``tz``),
            or ``None`` when there is no tick.
        count: ticks missed in the episode (missed), runs of the tick (duplicate), or bad
            outcomes in a row (failed / timeout).
        late_by_s: how late the first run ping was, in seconds (late).
        duration_s: the run's duration, or how long it has been running, in seconds
            (failed, timeout, overlap, recovered).
        exit_status: the run's exit status 0-255, or ``None``.
        run_ids: the run ids involved (duplicate, overlap: the earlier run first).
        log_tail: the last ping's body; only its last :data:`LOG_TAIL_LIMIT` characters
            are shown.
        check_url: a link to the check's page.
        other_scheduled: overlap only: the tick of the earlier run that was still running.
        episode_kind: nag / escalation: the kind of the alert that opened the down episode.
        down_for_s: nag / escalation: how long the check has been down, seconds.
        reminder: nag: which reminder this is (1, 2, ...).
        window_name / window_start / window_end: maintenance: the window and its occurrence.
        held: maintenance: one line per alert held back during the occurrence (at most 50,
            then a "… and N more" line; ``count`` holds the total).
        down_checks: project maintenance: the names of the project's checks that are down.
        simple: the check is a simple (period) check: its "tick" is the due instant that was
            current at the run's first ping, so messages name the run by that deadline.
        superseded: missed: the ticks were judged after a newer run had succeeded; the check
            stays up (DESIGN §5, supersession). ``count`` is how many consecutive ticks.
        runs_seen / runs_expected: incomplete: distinct runs that reported, and how many the
            check expects per tick (``expected_runs``).
        min_runtime_s: too_fast: the check's ``min_runtime``, seconds.
    """

    kind: str
    check_name: str
    check_uuid: str
    slug: str | None
    tz: str
    status: str
    scheduled: datetime | None
    count: int = 1
    late_by_s: float | None = None
    duration_s: float | None = None
    exit_status: int | None = None
    run_ids: tuple[str, ...] = ()
    log_tail: str | None = None
    check_url: str
    other_scheduled: datetime | None = None
    episode_kind: str | None = None
    down_for_s: float | None = None
    reminder: int | None = None
    window_name: str | None = None
    window_start: datetime | None = None
    window_end: datetime | None = None
    held: tuple[str, ...] = ()
    down_checks: tuple[str, ...] = ()
    simple: bool = False
    superseded: bool = False
    runs_seen: int | None = None
    runs_expected: int | None = None
    min_runtime_s: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    """A rendered notification.

    Attributes:
        title: one line: ``"<check name>: <kind> — <what happened>"``.
        body: plain text (email, JSON payloads, logs).
        body_markdown: the same content as Markdown (chat services).
        json_fields: top-level fields for JSON payloads: ``kind``, ``check_uuid``, ``slug``,
            ``scheduled`` (ISO 8601 UTC with ``Z``, or ``""``), ``status``, ``name`` and
            ``url``; all strings.
    """

    title: str
    body: str
    body_markdown: str
    json_fields: dict[str, str]


def humanize_duration(seconds: float) -> str:
    """Say a duration the way a person would, at a sensible precision.

    Args:
        seconds: a non-negative duration in seconds (negative values are treated as 0).

    Returns:
        ``"45 s"`` below a minute, ``"25 min"`` below an hour, ``"1 h 10 min"`` below a
        day, and ``"3 days"`` / ``"1 day 4 h"`` beyond. Each form is rounded to its
        smallest unit.
    """
    total = max(0, round(seconds))
    if total < 60:
        return f"{total} s"
    minutes = round(total / 60)
    if minutes < 60:
        return f"{minutes} min"
    if minutes < 24 * 60:
        hours, mins = divmod(minutes, 60)
        return f"{hours} h" + (f" {mins} min" if mins else "")
    days, hours = divmod(round(minutes / 60), 24)
    day_word = "day" if days == 1 else "days"
    return f"{days} {day_word}" + (f" {hours} h" if hours else "")


@functools.lru_cache(maxsize=4096)
def format_utc(instant: datetime) -> str:
    """Format an aware instant as ISO 8601 UTC with ``Z``: ``"2026-07-19T03:00:00Z"``.

    Memoized: a sweep formats the same few ticks for thousands of alerts, and ``strftime`` cost
    a thirtieth of the sweep.

    Args:
        instant: an aware datetime (naive values are taken as UTC).
    """
    return _as_utc(instant).strftime("%Y-%m-%dT%H:%M:%SZ")


def tick_url(check_url: str, scheduled: datetime | None) -> str | None:
    """The link to one tick on the check's page: ``<check_url>#tick-2026-07-19T03:00:00Z``.

    Args:
        check_url: ``{MONITOR_BASE_URL}/checks/{uuid}``, the check's dashboard page.
        scheduled: the tick, or ``None`` (then there is no tick link).
    """
    return f"{check_url}#tick-{format_utc(scheduled)}" if scheduled is not None else None


def json_fields(facts: AlertFacts) -> dict[str, str]:
    """Top-level fields for ``json://`` payloads (DESIGN §7): ``kind, check_uuid, slug,
    scheduled, status`` plus ``name`` (the check's name) and ``url`` (its page); all strings."""
    return {
        "kind": facts.kind,
        "check_uuid": facts.check_uuid,
        "slug": facts.slug or "",
        "scheduled": format_utc(facts.scheduled) if facts.scheduled else "",
        "status": facts.status,
        "name": facts.check_name,
        "url": facts.check_url,
    }


def context(facts: AlertFacts) -> dict[str, Any]:
    """Everything a message template needs, computed from ``facts`` (pure).

    The templates (``monitor/notify/templates/``, overridable) only arrange these values.

    Args:
        facts: what happened.

    Returns:
        A dict with ``kind``, ``name``, ``title_sentence`` (after ``"<name>: <kind> — "``),
        ``sentence`` (the body's first sentence, after ``"<name>: "``), ``details`` (list of
        ``(label, value)`` pairs: tick in UTC and local, how late / long / many, status),
        ``log_tail`` (bounded, control characters removed; ``""`` when none), ``check_url``,
        ``tick_url`` (or ``None``), ``scheduled_utc`` / ``scheduled_local`` (or ``None``),
        ``held`` (maintenance summaries: lines naming the alerts held back) and ``facts``.
        Never raises for odd input: an unknown zone is shown as UTC, an unknown kind gets a
        generic sentence.
    """
    zone = _zone(facts.tz)
    title_sentence, sentence = _SENTENCES.get(facts.kind, _generic)(facts, zone)
    if facts.superseded and facts.kind != "missed":
        # DESIGN §5, supersession: an old tick's bad run after a newer run succeeded
        title_sentence += "; a later run succeeded"
        sentence += f" A later run succeeded, so the check stays {facts.status}."
    return {
        "kind": facts.kind,
        "name": facts.check_name,
        "title_sentence": title_sentence,
        "sentence": sentence,
        "details": _details(facts, zone),
        "log_tail": _tail(facts.log_tail),
        "check_url": facts.check_url,
        "tick_url": tick_url(facts.check_url, facts.scheduled),
        "scheduled_utc": format_utc(facts.scheduled) if facts.scheduled else None,
        "scheduled_local": _local(facts.scheduled, zone) if facts.scheduled and not _is_utc(zone) else None,
        "held": list(facts.held),
        "facts": facts,
    }


def md_escape(text: str) -> str:
    """Escape Markdown's special characters (``\\ ` * _ [ ] < >``) in ``text``."""
    return text.translate(_MD_SPECIAL)


_INSTANT_FIELDS = ("scheduled", "other_scheduled", "window_start", "window_end")
_REQUIRED = object()
_FACT_FIELDS = tuple(
    (field.name, _REQUIRED if field.default is MISSING else field.default, field.name in _INSTANT_FIELDS)
    for field in fields(AlertFacts)
)
"""(name, default or ``_REQUIRED``, is an instant) of each :class:`AlertFacts` field."""
_FACT_NAMES = frozenset(name for name, _, _ in _FACT_FIELDS)
_FACT_PLACES = {
    name: (place, default, instant) for place, (name, default, instant) in enumerate(_FACT_FIELDS)
}
"""name → (position among the fields, default or ``_REQUIRED``, is an instant)."""
_REQUIRED_FACTS = frozenset(name for name, default, _ in _FACT_FIELDS if default is _REQUIRED)
_FACTS_ENCODER = json.JSONEncoder(ensure_ascii=False)


def facts_to_json(facts: AlertFacts) -> str:
    """Serialise facts for storage with the alert (instants as ISO 8601 UTC with ``Z``).

    Fields that hold their default are left out (:func:`facts_from_json` restores them): an
    evaluator sweep stores one of these per alert, thousands at a time.
    """
    return encode_facts({name: getattr(facts, name) for name, _, _ in _FACT_FIELDS})


def encode_facts(values: Mapping[str, Any]) -> str:
    """:func:`facts_to_json` of the facts ``values`` names (field → value; a field it leaves
    out holds its default), without building the :class:`AlertFacts` first: what a sweep
    stores per alert. The keys come out in the fields' order, whatever the order of ``values``.

    Raises:
        ValueError: ``values`` names a field :class:`AlertFacts` does not have, or leaves out
            one without a default.
    """
    # walks the dozen values a sweep's alert gives, not the thirty fields a fact may have
    kept: list[tuple[int, str, Any]] = []
    for name, value in values.items():
        place = _FACT_PLACES.get(name)
        if place is None:
            raise ValueError(f"facts: no such field {sorted(values.keys() - _FACT_NAMES)[0]!r}")
        index, default, instant = place
        if value is default or (default is not _REQUIRED and value == default):
            continue
        if instant and value is not None:
            value = format_utc(value)
        elif type(value) is tuple:
            value = list(value)
        kept.append((index, name, value))
    missing = _REQUIRED_FACTS - values.keys()
    if missing:
        raise ValueError(f"facts: {min(missing, key=lambda n: _FACT_PLACES[n][0])} is required")
    kept.sort()
    return _FACTS_ENCODER.encode({name: value for _, name, value in kept})


def facts_from_json(text: str) -> AlertFacts:
    """The inverse of :func:`facts_to_json`; unknown keys are ignored (older/newer rows).

    Raises:
        ValueError: ``text`` is not a JSON object of facts.
    """
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("facts: not a JSON object")
    known = set(AlertFacts.__slots__)
    values: dict[str, Any] = {}
    for name, value in data.items():
        if name not in known:
            continue
        if name in _INSTANT_FIELDS and value is not None:
            value = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        elif name in ("run_ids", "held", "down_checks") and value is not None:
            value = tuple(value)
        values[name] = value
    return AlertFacts(**values)


# --------------------------------------------------------------------------- helpers


def _as_utc(instant: datetime) -> datetime:
    if instant.tzinfo is None:
        return instant.replace(tzinfo=UTC)
    return instant.astimezone(UTC)


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        # A message must still go out; the check's zone was validated when it was saved.
        return ZoneInfo("UTC")


def _is_utc(zone: ZoneInfo) -> bool:
    return zone.key in ("UTC", "Etc/UTC", "Etc/Universal", "Universal", "Zulu", "Etc/Zulu")


def _clock(local: datetime) -> str:
    """``"03:00"``, or ``"03:00:30"`` when the tick has seconds (sub-minute schedules)."""
    return local.strftime("%H:%M:%S" if local.second else "%H:%M")


def _run_label(instant: datetime | None, zone: ZoneInfo, simple: bool = False) -> str:
    """``"the 03:00 run"`` (UTC checks) or ``"the 05:00 CEST run"`` (check's zone), for titles.

    A simple check's "tick" is the deadline that was current when the run began (DESIGN §2),
    usually still ahead at that moment: ``"the run due by 14:07:26"``.
    """
    if instant is None:
        return "the last run"
    local = _as_utc(instant).astimezone(zone)
    if simple:
        return f"the run due by {_clock(_as_utc(instant))}"
    if _is_utc(zone):
        return f"the {_clock(local)} run"
    return f"the {_clock(local)} {local.strftime('%Z')} run"


def _run_label_both(instant: datetime | None, zone: ZoneInfo, simple: bool = False) -> str:
    """``"the 03:00 UTC (05:00 Europe/Berlin) run"``, for body sentences (simple checks:
    ``"the run due by 14:07:26 UTC"``)."""
    if instant is None:
        return "the last run"
    utc = _as_utc(instant)
    if simple:
        return f"the run due by {_clock(utc)} UTC"
    if _is_utc(zone):
        return f"the {_clock(utc)} UTC run"
    return f"the {_clock(utc)} UTC ({_clock(utc.astimezone(zone))} {zone.key}) run"


def _local(instant: datetime, zone: ZoneInfo) -> str:
    """``"2026-07-19 05:00 CEST (Europe/Berlin)"``; the abbreviation tells DST apart."""
    local = _as_utc(instant).astimezone(zone)
    fmt = "%Y-%m-%d %H:%M:%S %Z" if local.second else "%Y-%m-%d %H:%M %Z"
    return f"{local.strftime(fmt)} ({zone.key})"


def _short(run_id: str) -> str:
    return run_id if len(run_id) <= RUN_ID_PREFIX else run_id[:RUN_ID_PREFIX] + "…"


def _runs(run_ids: tuple[str, ...]) -> str:
    return ", ".join(_short(r) for r in run_ids)


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _tail(log: str | None) -> str:
    if not log or not log.strip():
        return ""
    text = log.rstrip()
    if len(text) > LOG_TAIL_LIMIT:
        text = "…" + text[-LOG_TAIL_LIMIT:]
    # Keep newlines and tabs; drop terminal colour codes and other control characters.
    text = _ANSI.sub("", text)
    return "".join(ch for ch in text if ch in "\n\t" or ch >= " ")


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<>"})


def _details(facts: AlertFacts, zone: ZoneInfo) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    if facts.scheduled is not None:
        rows.append(("Scheduled", format_utc(facts.scheduled)))
        if not _is_utc(zone):
            rows.append(("Scheduled (local)", _local(facts.scheduled, zone)))
    if facts.kind == "missed" and facts.count > 1:
        rows.append(("Ticks missed", str(facts.count)))
    if facts.runs_expected is not None:
        rows.append(("Runs reported", f"{facts.runs_seen or 0} of {facts.runs_expected}"))
    if facts.min_runtime_s is not None:
        rows.append(("Minimum run time", humanize_duration(facts.min_runtime_s)))
    if facts.late_by_s is not None:
        rows.append(("Late by", humanize_duration(facts.late_by_s)))
    if facts.duration_s is not None:
        label = "Running for" if facts.kind in ("timeout", "overlap") else "Duration"
        rows.append((label, humanize_duration(facts.duration_s)))
    if facts.kind == "duplicate":
        rows.append(("Runs", str(facts.count)))
    elif facts.kind in ("failed", "timeout") and facts.count > 1:
        rows.append(("Bad outcomes in a row", str(facts.count)))
    if facts.down_for_s is not None:
        rows.append(("Down for", humanize_duration(facts.down_for_s)))
    if facts.episode_kind:
        rows.append(("Down since", f"{_a(facts.episode_kind)} alert"))
    if facts.reminder is not None:
        rows.append(("Reminder", str(facts.reminder)))
    if facts.window_start is not None and facts.window_end is not None:
        rows.append(("Window", f"{format_utc(facts.window_start)} – {format_utc(facts.window_end)}"))
        if not _is_utc(zone):
            rows.append(
                ("Window (local)", f"{_local(facts.window_start, zone)} – {_local(facts.window_end, zone)}")
            )
        rows.append(("Alerts held back", str(max(facts.count, len(facts.held)) if facts.held else 0)))
    if facts.exit_status is not None:
        rows.append(("Exit status", str(facts.exit_status)))
    if facts.run_ids:
        rows.append(("Run ids" if len(facts.run_ids) > 1 else "Run id", ", ".join(facts.run_ids)))
    if facts.status:  # project-level messages have no check, hence no status
        rows.append(("Status", facts.status))
    return rows


# Each function returns (title sentence, body sentence); the body sentence follows
# "<check name>: " and names the tick in UTC and in the check's zone.
_Sentences = Callable[[AlertFacts, ZoneInfo], tuple[str, str]]


def _missed(f: AlertFacts, z: ZoneInfo) -> tuple[str, str]:
    if f.superseded:
        if f.count > 1:
            after = "the run after it" if f.count == 2 else f"the {f.count - 1} runs after it"
            return (
                f"{_run_label(f.scheduled, z, f.simple)} and {after} never reported; later runs succeeded",
                f"{_run_label_both(f.scheduled, z, f.simple)} and {after} never reported"
                f" ({f.count} ticks); later runs succeeded, so the check stays {f.status}.",
            )
        return (
            f"{_run_label(f.scheduled, z, f.simple)} never reported; later runs succeeded",
            f"{_run_label_both(f.scheduled, z, f.simple)} never reported; a later run succeeded,"
            f" so the check stays {f.status}.",
        )
    if f.count > 1:
        before = "the run" if f.count == 2 else f"the {f.count - 1} runs"
        return (
            f"{_run_label(f.scheduled, z, f.simple)} and {before} before it did not report",
            f"{_run_label_both(f.scheduled, z, f.simple)} and {before} before it did not report"
            f" ({f.count} ticks missed).",
        )
    return (
        f"{_run_label(f.scheduled, z, f.simple)} did not report",
        f"{_run_label_both(f.scheduled, z, f.simple)} did not report.",
    )


def _late(f: AlertFacts, z: ZoneInfo) -> tuple[str, str]:
    by = f" {humanize_duration(f.late_by_s)}" if f.late_by_s is not None else ""
    return (
        f"{_run_label(f.scheduled, z, f.simple)} was{by} late",
        f"{_run_label_both(f.scheduled, z, f.simple)} was{by} late:"
        " its first ping came after the grace period.",
    )


def _failed(f: AlertFacts, z: ZoneInfo) -> tuple[str, str]:
    how = f"exited with status {f.exit_status}" if f.exit_status is not None else "reported failure"
    after = f" after {humanize_duration(f.duration_s)}" if f.duration_s is not None else ""
    again = f" ({f.count} bad outcomes in a row)" if f.count > 1 else ""
    return (
        f"{_run_label(f.scheduled, z, f.simple)} {how}",
        f"{_run_label_both(f.scheduled, z, f.simple)} {how}{after}{again}.",
    )


def _timeout(f: AlertFacts, z: ZoneInfo) -> tuple[str, str]:
    if f.duration_s is not None:
        took = f"has been running for {humanize_duration(f.duration_s)}"
    else:
        took = "exceeded its max runtime"
    return (
        f"{_run_label(f.scheduled, z, f.simple)} {took}",
        f"{_run_label_both(f.scheduled, z, f.simple)} {took}, past its max runtime.",
    )


def _overlap(f: AlertFacts, z: ZoneInfo) -> tuple[str, str]:
    notes = [f"{humanize_duration(f.duration_s)} so far"] if f.duration_s is not None else []
    if f.run_ids:
        notes.append(f"runs {_runs(f.run_ids)}")
    so_far = f" ({'; '.join(notes)})" if notes else ""
    if f.other_scheduled is not None:
        earlier, earlier_both = (
            _run_label(f.other_scheduled, z, f.simple),
            _run_label_both(f.other_scheduled, z, f.simple),
        )
    else:
        earlier = earlier_both = "an earlier run"
    return (
        f"{_run_label(f.scheduled, z, f.simple)} started while {earlier} was still running",
        f"{_run_label_both(f.scheduled, z, f.simple)} started while {earlier_both}"
        f" was still running{so_far}.",
    )


def _duplicate(f: AlertFacts, z: ZoneInfo) -> tuple[str, str]:
    runs = f" (runs {_runs(f.run_ids)})" if f.run_ids else ""
    return (
        f"{_run_label(f.scheduled, z, f.simple)} ran {_times(f.count)}",
        f"{_run_label_both(f.scheduled, z, f.simple)} ran {_times(f.count)}{runs}.",
    )


def _recovered(f: AlertFacts, z: ZoneInfo) -> tuple[str, str]:
    took = f" in {humanize_duration(f.duration_s)}" if f.duration_s is not None else ""
    return (
        f"{_run_label(f.scheduled, z, f.simple)} succeeded",
        f"{_run_label_both(f.scheduled, z, f.simple)} succeeded{took}; the check is up again.",
    )


def _incomplete(f: AlertFacts, z: ZoneInfo) -> tuple[str, str]:
    seen = f.runs_seen if f.runs_seen is not None else 0
    of = f" of {f.runs_expected}" if f.runs_expected is not None else ""
    return (
        f"{_run_label(f.scheduled, z, f.simple)}: {seen}{of} runs reported",
        f"{_run_label_both(f.scheduled, z, f.simple)} is incomplete: {seen}{of} expected runs"
        " reported by the end of its grace period.",
    )


def _too_fast(f: AlertFacts, z: ZoneInfo) -> tuple[str, str]:
    took = f" in {humanize_duration(f.duration_s)}" if f.duration_s is not None else ""
    floor = (
        f", sooner than its minimum run time of {humanize_duration(f.min_runtime_s)}"
        if f.min_runtime_s is not None
        else ", sooner than its minimum run time"
    )
    return (
        f"{_run_label(f.scheduled, z, f.simple)} finished too fast{took}",
        f"{_run_label_both(f.scheduled, z, f.simple)} succeeded{took}{floor}: it may not have done its work.",
    )


def _a(kind: str | None) -> str:
    """``"a missed"``, ``"a failed"``, ``"a timeout"``; ``"an"`` when the kind is unknown."""
    return f"a {kind}" if kind else "an"


def _nag(f: AlertFacts, z: ZoneInfo) -> tuple[str, str]:
    down = humanize_duration(f.down_for_s) if f.down_for_s is not None else "a while"
    since = (
        f"{f.episode_kind} {_run_label(f.scheduled, z, f.simple)}"
        if f.episode_kind
        else _run_label(f.scheduled, z, f.simple)
    )
    nth = f", reminder {f.reminder}" if f.reminder else ""
    return (
        f"still down after {down} ({since}{nth})",
        f"still down after {down}: the down episode began with {_a(f.episode_kind)} alert for"
        f" {_run_label_both(f.scheduled, z, f.simple)} and no run has succeeded since.",
    )


def _escalation(f: AlertFacts, z: ZoneInfo) -> tuple[str, str]:
    down = humanize_duration(f.down_for_s) if f.down_for_s is not None else "too long"
    return (
        f"down for {down} ({f.episode_kind or 'down'}: {_run_label(f.scheduled, z, f.simple)})",
        f"has been down for {down} and is escalated to you: the down episode began with"
        f" {_a(f.episode_kind)} alert for {_run_label_both(f.scheduled, z, f.simple)}.",
    )


def _maintenance(f: AlertFacts, z: ZoneInfo) -> tuple[str, str]:
    listed = len([line for line in f.held if not line.startswith("… and ")])
    n = max(f.count, listed)
    held = "no alerts were held back" if n == 0 else f"{n} alert{'s' if n != 1 else ''} held back"
    name = f" “{f.window_name}”" if f.window_name else ""
    if not f.check_uuid:  # a project-wide window: no one check's status to report
        now = f" Down now: {', '.join(f.down_checks)}." if f.down_checks else " No check is down now."
        return (
            f"window{name} ended, {held}",
            f"project-wide maintenance window{name} ended; {held} during it.{now}",
        )
    return (
        f"window{name} ended, {held}",
        f"maintenance window{name} ended; {held} during it. The check is {f.status} now.",
    )


def _generic(f: AlertFacts, z: ZoneInfo) -> tuple[str, str]:
    return (
        f"{_run_label(f.scheduled, z, f.simple)}",
        f"{f.kind} for {_run_label_both(f.scheduled, z, f.simple)}.",
    )


_SENTENCES: dict[str, _Sentences] = {
    "missed": _missed,
    "late": _late,
    "failed": _failed,
    "timeout": _timeout,
    "overlap": _overlap,
    "duplicate": _duplicate,
    "recovered": _recovered,
    "incomplete": _incomplete,
    "too_fast": _too_fast,
    NAG: _nag,
    ESCALATION: _escalation,
    MAINTENANCE: _maintenance,
}
