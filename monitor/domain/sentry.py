"""Sentry Crons check-ins read as our pings and check settings (pure: no I/O, no clock).

A Sentry SDK reports a job through a *check-in* (``in_progress``, ``ok``, ``error``) to the
project's DSN: in a ``check_in`` item of an envelope (``POST /api/<project_id>/envelope/``) or
through the HTTP check-in endpoint (``/api/<project_id>/cron/<monitor_slug>/<public_key>/``).
This module parses both shapes and maps them onto the monitor:

* ``in_progress`` → a ``start`` ping, ``ok`` → ``success``, ``error`` → ``fail``;
* ``check_in_id`` → ``rid`` (Sentry pairs a start with its finish by it; the nil UUID and an
  absent id mean "no id", so a finish pairs with the run in progress that has none — binding
  rule 3 of DESIGN §5, the nearest thing to Sentry's "the latest in-progress check-in");
* ``duration`` (seconds, measured by the client) → the finish ping's duration;
* ``environment`` (default ``production``, as Sentry's) → one check per (monitor slug,
  environment): slug ``<monitor_slug>`` for ``production``, ``<monitor_slug>--<environment>``
  otherwise, tagged ``env:<environment>``;
* ``monitor_config`` → the check's settings (:meth:`MonitorConfig.check_fields`).

Sentry sends no tick (scheduled time) with a check-in, and the trace context names a trace, not
a tick, so runs are bound by binding rule 4 (DESIGN §5).

Errors are :class:`SentryError`, carrying the HTTP status and a ``<field>: <problem>`` text,
answered as Sentry's ``{"detail": …}``. Limits and field rules follow Sentry's Relay
(``relay-monitors``: slugs of at most 50 characters, environments of at most 64; check-in items
of at most 100 KiB) and Sentry's ``slugify`` (Django's).
"""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from monitor.domain.checks import PingKind
from monitor.domain.cron import schedules
from monitor.domain.errors import ScheduleError, ZoneError

SLUG_LENGTH = 50
ENVIRONMENT_LENGTH = 64
CHECK_IN_LIMIT = 100 * 1024
DEFAULT_ENVIRONMENT = "production"
ENVIRONMENT_SEPARATOR = "--"
NIL_UUID = "00000000-0000-0000-0000-000000000000"
MAX_PERIOD = 31_536_000  # seconds: the longest simple period a check takes (DESIGN §9)
MINUTES_LIMIT = 525_600  # one year of minutes

#: seconds per Sentry interval unit. A month counts 31 days and a year 365 days, so an interval
#: monitor is never judged missed before its real period has passed (it is judged up to a day
#: late in shorter months instead).
INTERVAL_UNITS = {
    "minute": 60,
    "hour": 3600,
    "day": 86_400,
    "week": 604_800,
    "month": 31 * 86_400,
    "year": 365 * 86_400,
}

#: Sentry's defaults for a monitor created without them: 1 minute margin, 30 minutes runtime.
DEFAULT_GRACE = 60
DEFAULT_MAX_RUNTIME = 1800


class SentryError(Exception):
    """A refused check-in or envelope: ``str()`` is ``"<field>: <problem>"``.

    Attributes:
        status: the HTTP status to answer (400, 401, 403, 404, 413, 415).
    """

    def __init__(self, status: int, field_name: str, problem: str) -> None:
        super().__init__(f"{field_name}: {problem}")
        self.status = status
        self.field = field_name


class CheckInStatus(StrEnum):
    """The statuses a client may send (Sentry computes ``missed`` itself)."""

    IN_PROGRESS = "in_progress"
    OK = "ok"
    ERROR = "error"

    @property
    def ping_kind(self) -> PingKind:
        return {
            CheckInStatus.IN_PROGRESS: PingKind.START,
            CheckInStatus.OK: PingKind.SUCCESS,
            CheckInStatus.ERROR: PingKind.FAIL,
        }[self]


@dataclass(frozen=True, kw_only=True, slots=True)
class MonitorConfig:
    """A check-in's ``monitor_config``, validated; ``None`` fields were not given.

    Attributes:
        schedule: ``("crontab", expression)`` or ``("interval", seconds)``.
        grace: ``checkin_margin`` in seconds.
        max_runtime: ``max_runtime`` in seconds.
        tz: ``timezone`` (an IANA name).
        failure_threshold / recovery_threshold: ``failure_issue_threshold`` /
            ``recovery_threshold``.
        owner: ``owner`` (``user:…`` or ``team:…``), kept as the tag ``owner:<owner>``.
    """

    schedule: tuple[str, str | int]
    grace: int | None = None
    max_runtime: int | None = None
    tz: str | None = None
    failure_threshold: int | None = None
    recovery_threshold: int | None = None
    owner: str | None = None

    def schedule_fields(self) -> dict[str, Any]:
        """The schedule as check fields: a crontab is a ``unix`` cron check, an interval a simple one."""
        kind, value = self.schedule
        if kind == "crontab":
            return {"schedule": value, "dialect": "unix"}
        return {"timeout": value}

    def check_fields(self) -> dict[str, Any]:
        """Every given setting as a field of the check API (DESIGN §9), tags excepted."""
        out = self.schedule_fields()
        for name in ("grace", "max_runtime", "failure_threshold", "recovery_threshold"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.tz is not None:
            out["tz"] = self.tz
        return out

    @property
    def owner_tag(self) -> str | None:
        return f"owner:{self.owner}" if self.owner else None


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckIn:
    """One validated check-in.

    Attributes:
        monitor_slug: slugified as Sentry does (at most 50 characters).
        status: the check-in's status.
        check_in_id: the canonical UUID text, or ``None`` (absent or the nil UUID).
        environment: the environment (``production`` when none was sent).
        duration: seconds the client measured, or ``None``.
        config: the ``monitor_config``, or ``None``.
        payload: the check-in's JSON as received (stored as the ping's body).
    """

    monitor_slug: str
    status: CheckInStatus
    check_in_id: str | None = None
    environment: str = DEFAULT_ENVIRONMENT
    duration: float | None = None
    config: MonitorConfig | None = None
    payload: bytes = b""

    @property
    def check_slug(self) -> str:
        return check_slug(self.monitor_slug, self.environment)

    @property
    def check_name(self) -> str:
        if self.environment == DEFAULT_ENVIRONMENT:
            return self.monitor_slug
        return f"{self.monitor_slug} ({self.environment})"[:100]

    @property
    def environment_tag(self) -> str:
        return f"env:{self.environment}"

    @property
    def answer_id(self) -> str:
        """The id the HTTP endpoint answers: the check-in id in Sentry's simple (hex) form."""
        return uuid.UUID(self.check_in_id or NIL_UUID).hex


@dataclass(frozen=True, kw_only=True, slots=True)
class EnvelopeItem:
    """One item: its header's ``type`` and its payload bytes."""

    type: str
    payload: bytes


@dataclass(frozen=True, kw_only=True, slots=True)
class Envelope:
    """A parsed envelope: its header (``dsn``, ``sdk``, …) and items in order."""

    header: dict[str, Any]
    items: list[EnvelopeItem] = field(default_factory=list)

    @property
    def check_ins(self) -> list[EnvelopeItem]:
        return [item for item in self.items if item.type == "check_in"]


# -- slugs, environments, DSNs ----------------------------------------------------------------


def slugify(text: str) -> str:
    """Django's ``slugify`` (what Sentry applies to monitor slugs): ASCII, lower case, words
    joined by ``-``, other characters dropped; e.g. ``"Nightly Billing (EU)"`` → ``"nightly-billing-eu"``."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    words = re.sub(r"[^\w\s-]", "", ascii_text.lower())
    return re.sub(r"[-\s]+", "-", words).strip("-_")


def check_slug(monitor_slug: str, environment: str) -> str:
    """The slug of the check for (monitor slug, environment).

    ``production`` (Sentry's default) keeps the monitor's slug; another environment is appended
    after ``--``, which a slugified monitor slug never contains, so two pairs never share a check.
    """
    if environment == DEFAULT_ENVIRONMENT:
        return monitor_slug
    return f"{monitor_slug}{ENVIRONMENT_SEPARATOR}{slugify(environment) or 'env'}"[:100]


def dsn(base_url: str, public_key: str, project_id: int) -> str:
    """The project's Sentry DSN: ``<scheme>://<public_key>@<host[:port]><path>/<project_id>``.

    An SDK given this DSN sends envelopes to ``<base_url>/api/<project_id>/envelope/``.
    """
    parts = urlsplit(base_url.rstrip("/"))
    return f"{parts.scheme}://{public_key}@{parts.netloc}{parts.path}/{project_id}"


def auth_key(header: str | None) -> str | None:
    """``sentry_key`` from an ``X-Sentry-Auth`` (or ``Authorization: Sentry …``) header.

    Also reads the legacy ``Authorization: DSN <dsn>`` form. ``None`` when the header is absent.

    Raises:
        SentryError: 401, the header is present but names no key.
    """
    if header is None:
        return None
    text = header.strip()
    if text.lower().startswith("dsn "):
        key = dsn_key(text[4:].strip())
        if key is None:
            raise SentryError(401, "X-Sentry-Auth", "the DSN names no public key")
        return key
    if text.lower().startswith("sentry "):
        text = text[7:]
    for part in text.split(","):
        name, _, value = part.strip().partition("=")
        if name.strip() == "sentry_key" and value.strip():
            return value.strip()
    raise SentryError(401, "X-Sentry-Auth", "missing sentry_key")


def dsn_key(text: str) -> str | None:
    """The public key of a DSN (``https://<key>@host/1``), or ``None``."""
    try:
        key = urlsplit(text).username
    except ValueError:
        return None
    return key or None


# -- envelopes --------------------------------------------------------------------------------


def parse_envelope(body: bytes) -> Envelope:
    """Split an envelope (``header\\n`` then ``item header\\n payload\\n`` pairs).

    An item header's ``length`` gives its payload size in bytes; without it the payload ends at
    the next newline (or the end). Empty trailing lines are allowed.

    Raises:
        SentryError: 400 naming the envelope header or item that is malformed; 413 for a
            ``check_in`` item over 100 KiB.
    """
    newline = body.find(b"\n")
    head, rest = (body, b"") if newline < 0 else (body[:newline], body[newline + 1 :])
    header = _json_object(head, "envelope", "header")
    items: list[EnvelopeItem] = []
    position = 0
    number = 0
    while position < len(rest):
        end = rest.find(b"\n", position)
        line = rest[position:] if end < 0 else rest[position:end]
        position = len(rest) if end < 0 else end + 1
        if not line.strip():
            continue
        number += 1
        item_header = _json_object(line, f"item {number}", "header")
        item_type = item_header.get("type")
        if not isinstance(item_type, str) or not item_type:
            raise SentryError(400, f"item {number}", "header has no type")
        length = item_header.get("length")
        if length is not None:
            if isinstance(length, bool) or not isinstance(length, int) or length < 0:
                raise SentryError(400, f"item {number}", f"length must be a whole number, got {length!r}")
            if position + length > len(rest):
                raise SentryError(400, f"item {number}", f"length {length} runs past the end of the envelope")
            payload = rest[position : position + length]
            position += length
            if position < len(rest):
                if rest[position : position + 1] != b"\n":
                    raise SentryError(400, f"item {number}", f"payload is longer than its length {length}")
                position += 1
        else:
            end = rest.find(b"\n", position)
            payload = rest[position:] if end < 0 else rest[position:end]
            position = len(rest) if end < 0 else end + 1
        if item_type == "check_in":
            _check_size(payload)
        items.append(EnvelopeItem(type=item_type, payload=payload))
    return Envelope(header=header, items=items)


def _check_size(payload: bytes) -> None:
    if len(payload) > CHECK_IN_LIMIT:
        raise SentryError(
            413, "check_in", f"item of {len(payload)} bytes is over the {CHECK_IN_LIMIT}-byte limit"
        )


def _json_object(raw: bytes, where: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise SentryError(400, where, f"{what} is not valid JSON") from None
    if not isinstance(value, dict):
        raise SentryError(400, where, f"{what} must be a JSON object")
    return value


# -- check-ins ----------------------------------------------------------------------------------


def parse_check_in_payload(payload: bytes, *, monitor_slug: str | None = None) -> CheckIn:
    """A ``check_in`` item's (or the HTTP endpoint's JSON body's) check-in.

    Args:
        payload: the JSON bytes.
        monitor_slug: the slug from the URL path, which wins over the body's (HTTP endpoint).

    Raises:
        SentryError: 400 naming the field; 413 over 100 KiB.
    """
    _check_size(payload)
    data = _json_object(payload, "check_in", "payload")
    if monitor_slug is not None:
        data = {**data, "monitor_slug": monitor_slug}
    return check_in_from_fields(data, payload=payload)


def check_in_from_fields(data: dict[str, Any], *, payload: bytes = b"") -> CheckIn:
    """Validate check-in fields (a JSON object, or the HTTP endpoint's query parameters).

    ``duration`` may be a number or numeric text (query parameters are text).

    Raises:
        SentryError: 400 naming the field (``status``, ``check_in_id``, ``monitor_slug``,
            ``environment``, ``duration``, ``monitor_config.…``).
    """
    raw_slug = data.get("monitor_slug")
    if not isinstance(raw_slug, str):
        raise SentryError(400, "monitor_slug", "is required (a string)")
    slug = slugify(raw_slug)[:SLUG_LENGTH].strip("-")
    if not slug:
        raise SentryError(400, "monitor_slug", f"{raw_slug!r} is empty or invalid")
    raw_status = data.get("status")
    try:
        status = CheckInStatus(str(raw_status))
    except ValueError:
        raise SentryError(
            400, "status", f"must be one of in_progress, ok, error, got {raw_status!r}"
        ) from None
    return CheckIn(
        monitor_slug=slug,
        status=status,
        check_in_id=_check_in_id(data.get("check_in_id")),
        environment=_environment(data.get("environment")),
        duration=_duration(data.get("duration")),
        config=parse_monitor_config(data["monitor_config"]) if data.get("monitor_config") else None,
        payload=payload,
    )


def _check_in_id(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise SentryError(400, "check_in_id", f"must be a UUID string, got {value!r}")
    try:
        parsed = str(uuid.UUID(value))
    except ValueError:
        raise SentryError(400, "check_in_id", f"invalid UUID {value!r}") from None
    return None if parsed == NIL_UUID else parsed


def _environment(value: Any) -> str:
    if value is None or value == "":
        return DEFAULT_ENVIRONMENT
    if not isinstance(value, str):
        raise SentryError(400, "environment", f"must be a string, got {value!r}")
    if len(value) > ENVIRONMENT_LENGTH:
        raise SentryError(400, "environment", f"must be at most {ENVIRONMENT_LENGTH} characters")
    if any(c.isspace() for c in value) or "/" in value:
        raise SentryError(400, "environment", "must not contain whitespace or '/'")
    if not value.isprintable() or not _encodable(value):
        raise SentryError(400, "environment", "must be printable text")
    return value


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\ud800") is valid JSON but no text
        return False
    return True


def _duration(value: Any) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise SentryError(400, "duration", f"must be a number of seconds, got {value!r}")
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise SentryError(400, "duration", f"must be a number of seconds, got {value!r}") from None
    if not 0 <= seconds < 10**9:
        raise SentryError(400, "duration", f"must be between 0 and 10^9 seconds, got {value!r}")
    return seconds


def _whole(config: dict[str, Any], name: str, low: int, high: int) -> int | None:
    value = config.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SentryError(400, f"monitor_config.{name}", f"must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise SentryError(400, f"monitor_config.{name}", f"must be between {low} and {high}, got {value}")
    return value


def parse_monitor_config(config: Any) -> MonitorConfig:
    """Validate ``monitor_config``; minutes become seconds.

    The crontab is checked as our ``unix`` dialect reads it (DESIGN §4), so an expression
    Sentry would take but the monitor cannot judge (one that never fires, ``@reboot``, six
    fields) is refused here, before anything is stored.

    Raises:
        SentryError: 400 naming the field, e.g. ``monitor_config.schedule.value: …``.
    """
    if not isinstance(config, dict):
        raise SentryError(400, "monitor_config", "must be a JSON object")
    schedule = config.get("schedule")
    if not isinstance(schedule, dict):
        raise SentryError(400, "monitor_config.schedule", "is required (an object with type and value)")
    kind = schedule.get("type")
    tz = _config_zone(config)
    parsed: tuple[str, str | int]
    if kind == "crontab":
        parsed = ("crontab", _crontab_value(schedule, tz))
    elif kind == "interval":
        parsed = ("interval", _interval_seconds(schedule))
    else:
        raise SentryError(400, "monitor_config.schedule.type", f"must be crontab or interval, got {kind!r}")
    margin = _whole(config, "checkin_margin", 0, MINUTES_LIMIT)
    runtime = _whole(config, "max_runtime", 1, MINUTES_LIMIT)
    owner = _owner(config)
    return MonitorConfig(
        schedule=parsed,
        # our grace is at least one second: a margin of 0 minutes is the smallest we have
        grace=None if margin is None else max(1, margin * 60),
        max_runtime=None if runtime is None else runtime * 60,
        tz=tz,
        failure_threshold=_whole(config, "failure_issue_threshold", 1, 1000),
        recovery_threshold=_whole(config, "recovery_threshold", 1, 1000),
        owner=owner or None,
    )


def _config_zone(config: dict[str, Any]) -> str | None:
    """``monitor_config.timezone``: an IANA zone name, or ``None`` when absent."""
    tz = config.get("timezone")
    if tz is not None:
        if not isinstance(tz, str):
            raise SentryError(400, "monitor_config.timezone", f"must be a string, got {tz!r}")
        try:
            schedules.validate_zone(tz)
        except ZoneError as error:
            raise SentryError(400, "monitor_config.timezone", str(error)) from None
    return tz


def _crontab_value(schedule: dict[str, Any], tz: str | None) -> str:
    """A ``crontab`` schedule's expression (white space folded), as our ``unix`` dialect reads it."""
    value = schedule.get("value")
    if not isinstance(value, str) or not value.strip():
        raise SentryError(400, "monitor_config.schedule.value", "must be a crontab expression (a string)")
    expression = " ".join(value.split())
    try:
        schedules.parse_cron(expression, "unix", tz or "UTC")
    except ScheduleError as error:
        raise SentryError(400, "monitor_config.schedule.value", str(error)) from None
    except ZoneError as error:  # pragma: no cover - the zone was validated above
        raise SentryError(400, "monitor_config.timezone", str(error)) from None
    return expression


def _interval_seconds(schedule: dict[str, Any]) -> int:
    """An ``interval`` schedule's period in seconds (``value`` times ``unit``), at most a year."""
    value = schedule.get("value")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)  # Sentry's docs show "value": "2"
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SentryError(
            400, "monitor_config.schedule.value", f"must be a whole number at least 1, got {value!r}"
        )
    unit = schedule.get("unit")
    if unit not in INTERVAL_UNITS:
        raise SentryError(
            400,
            "monitor_config.schedule.unit",
            f"must be one of {', '.join(INTERVAL_UNITS)}, got {unit!r}",
        )
    seconds = value * INTERVAL_UNITS[unit]
    if seconds > MAX_PERIOD:
        raise SentryError(400, "monitor_config.schedule", "an interval may be at most one year")
    return seconds


def _owner(config: dict[str, Any]) -> str | None:
    """``monitor_config.owner``: ``user:…`` or ``team:…`` without spaces, or ``None``."""
    owner = config.get("owner")
    if owner is not None and (
        not isinstance(owner, str)
        or len(owner) > 200
        or any(c.isspace() for c in owner)
        or not owner.isprintable()
        or not _encodable(owner)
    ):
        raise SentryError(400, "monitor_config.owner", "must be a string without spaces (user:… or team:…)")
    return owner


def query_check_in(monitor_slug: str, query: dict[str, str]) -> CheckIn:
    """The HTTP check-in endpoint's query form (``?status=…&check_in_id=…&environment=…&duration=…``).

    Raises:
        SentryError: 400 naming the parameter.
    """
    if "status" not in query:
        raise SentryError(400, "status", "is required: in_progress, ok or error")
    fields = {name: query.get(name) for name in ("status", "check_in_id", "environment", "duration")}
    return check_in_from_fields({**fields, "monitor_slug": monitor_slug})


def config_changes(config: MonitorConfig, row: dict[str, Any]) -> dict[str, Any]:
    """The check fields ``config`` changes on the check ``row`` (a ``checks`` row mapping).

    Only differing fields are returned: re-sending the same schedule must not restart the
    check's watch (a changed schedule is watched from the change on, DESIGN §5).
    """
    wanted = config.check_fields()
    changes: dict[str, Any] = {}
    if "schedule" in wanted:
        if row["kind"] != "cron" or row["schedule"] != wanted["schedule"] or row["dialect"] != "unix":
            changes.update(schedule=wanted["schedule"], dialect="unix")
    elif row["kind"] != "simple" or row["timeout"] != wanted["timeout"]:
        changes["timeout"] = wanted["timeout"]
    for name in ("tz", "grace", "max_runtime", "failure_threshold", "recovery_threshold"):
        if name in wanted and row[name] != wanted[name]:
            changes[name] = wanted[name]
    tags = merge_tags(row["tags"], config.owner_tag)
    if tags != row["tags"]:
        changes["tags"] = tags
    return changes


def merge_tags(tags: str, owner_tag: str | None, environment_tag: str | None = None) -> str:
    """``tags`` with ``owner_tag`` replacing any other ``owner:`` tag, and ``environment_tag`` added."""
    words = tags.split()
    if owner_tag is not None:
        words = [w for w in words if not w.startswith("owner:")] + [owner_tag]
    if environment_tag is not None and environment_tag not in words:
        words.append(environment_tag)
    return " ".join(dict.fromkeys(words))
