"""Managing checks: validation of the v3 API fields, create/upsert, update, pause, resume, delete.

Validation errors are :class:`ValidationError` naming the field (``schedule: field 5 (day of
week): 8 is out of range 0-7``); the HTTP layer turns them into 400 JSON.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from monitor.domain import detection, keywords
from monitor.domain.checks import CheckKind
from monitor.domain.cron import schedules
from monitor.domain.errors import Conflict, NotFound, ScheduleError, ValidationError, ZoneError
from monitor.domain.runs import simple_due, tick_after
from monitor.services import hints as hint_service
from monitor.services import history, zone_names
from monitor.services.effects import PendingWrites
from monitor.services.ingest import lock_checks, new_check_values
from monitor.settings import Settings
from monitor.storage import cluster, repositories
from monitor.storage.ports import DuplicateKey
from monitor.storage.unit_of_work import Connection, Engine, UnitOfWork

SLUG = re.compile(r"^[a-z0-9_-]*$")
UUID_TEXT = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
UNIQUE_KEY_TEXT = re.compile(r"^[0-9a-f]{40}$")
MAX_SECONDS = 31_536_000
UNIQUE_FIELDS = ("name", "slug", "tags", "timeout", "grace")
SCHEDULE_FIELDS = ("schedule", "tz", "dialect", "timeout")


def _int(data: Mapping[str, Any], name: str, low: int, high: int) -> int:
    """``data[name]`` as an integer in ``low..high``. JSON has one number type: ``60.0`` is the
    integer 60 (JSON Schema's ``integer`` includes it; Python's ``json.dumps(60.0)`` writes it),
    ``60.5`` is refused.

    Raises:
        ValidationError: naming ``name``.
    """
    value = data[name]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(
            name,
            f"must be a whole number of seconds, got {value!r}"
            if name in ("timeout", "grace", "max_runtime", "early_tolerance", "min_runtime")
            else f"must be an integer, got {value!r}",
        )
    if not low <= value <= high:
        # as sent: 1e308 is a whole number, and its integer would be 309 digits long
        raise ValidationError(name, f"must be between {low} and {high}, got {data[name]!r}")
    return value


def _str(data: Mapping[str, Any], name: str, limit: int) -> str:
    value = data[name]
    if not isinstance(value, str):
        raise ValidationError(name, f"must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise ValidationError(name, f"must be at most {limit} characters, got {len(value)}")
    if "\x00" in value:  # PostgreSQL text cannot store U+0000
        raise ValidationError(name, "must not contain NUL characters")
    return value


def _bool(data: Mapping[str, Any], name: str) -> bool:
    value = data[name]
    if not isinstance(value, bool):
        raise ValidationError(name, f"must be true or false, got {value!r}")
    return value


def parse_check_fields(data: Any) -> dict[str, Any]:
    """Validate a create/update JSON body; returns the given fields as column values.

    Only fields present in ``data`` are returned (partial update semantics). ``channels`` and
    ``unique`` are returned as given for the caller to apply. Unknown fields are ignored, as
    Healthchecks does (``api_key`` in the body included).

    Raises:
        ValidationError: a field has the wrong type or range (the error names it).

    Long because a create/update body's fields are validated in turn, each with its own message.
    """
    if not isinstance(data, dict):
        raise ValidationError("body", "must be a JSON object")
    out: dict[str, Any] = {}
    if "name" in data:
        out["name"] = _str(data, "name", 100)
    if "slug" in data:
        slug = _str(data, "slug", 100)
        if not SLUG.match(slug):
            raise ValidationError("slug", "may contain only a-z, 0-9, '-' and '_'")
        out["slug"] = slug or None
    if "tags" in data:
        out["tags"] = " ".join(_str(data, "tags", 500).split())
    if "desc" in data:
        out["desc"] = _str(data, "desc", 10_000)
    if "timeout" in data:
        out["timeout"] = _int(data, "timeout", 1, MAX_SECONDS)
    if "grace" in data:
        out["grace"] = _int(data, "grace", 1, MAX_SECONDS)
    if "max_runtime" in data:
        out["max_runtime"] = _int(data, "max_runtime", 1, MAX_SECONDS)
    # null: the default (early window min(grace, 5 min); no lower bound on run time)
    if "early_tolerance" in data:
        out["early_tolerance"] = (
            None if data["early_tolerance"] is None else _int(data, "early_tolerance", 0, 86_400)
        )
    if "min_runtime" in data:
        value = data["min_runtime"]
        out["min_runtime"] = None if value is None else _int(data, "min_runtime", 1, MAX_SECONDS)
    if "expected_runs" in data:  # null: the default, 1
        out["expected_runs"] = 1 if data["expected_runs"] is None else _int(data, "expected_runs", 1, 1000)
    for name in ("failure_threshold", "recovery_threshold"):
        if name in data:
            out[name] = _int(data, name, 1, 1000)
    if "schedule" in data:
        out["schedule"] = _str(data, "schedule", 200).strip()
        if not out["schedule"]:
            raise ValidationError("schedule", "must not be empty")
    if "tz" in data:
        out["tz"] = zone_names.canonical_zone(_str(data, "tz", 64))
    if "dialect" in data:
        dialect = _str(data, "dialect", 10).strip().lower()
        if dialect not in {d.value for d in schedules.Dialect}:
            names = ", ".join(d.value for d in schedules.Dialect)
            raise ValidationError("dialect", f"must be one of {names}, got {dialect!r}")
        out["dialect"] = dialect
    if "manual_resume" in data:
        out["manual_resume"] = _bool(data, "manual_resume")
    if "methods" in data:
        methods = _str(data, "methods", 10)
        if methods not in ("", "POST"):
            raise ValidationError("methods", 'must be "" or "POST"')
        out["methods"] = methods
    if "channels" in data:
        out["channels"] = _str(data, "channels", 10_000)
    _parse_keyword_fields(data, out)
    # reminders ("nag") and escalation; null or 0 switches them off
    for name in ("nag_interval", "escalate_after"):
        if name in data:
            out[name] = None if data[name] is None else (_int(data, name, 0, MAX_SECONDS) or None)
    if "escalate_to" in data:
        out["escalate_to"] = _str(data, "escalate_to", 2000)
    if "unique" in data:
        unique = data["unique"]
        if not isinstance(unique, list) or not all(isinstance(u, str) for u in unique):
            raise ValidationError("unique", "must be a list of field names")
        for name in unique:
            if name not in UNIQUE_FIELDS:
                raise ValidationError("unique", f"{name!r} is not one of {', '.join(UNIQUE_FIELDS)}")
        out["unique"] = unique
    return out


def field_errors(data: Mapping[str, Any], now: datetime) -> list[ValidationError]:
    """Every field's error in a create/update body at once, for a form that shows each next to
    its field (:func:`create_or_upsert` stops at the first).

    Each field is judged alone by :func:`parse_check_fields`; then, when ``schedule``, ``tz``
    and ``dialect`` each pass, the schedule with its zone and dialect (as the check service
    plans it), and ``min_runtime`` against ``max_runtime``. Rules that need the database
    (channel names, a free slug, escalation targets) are left to the write itself.

    Args:
        data: the body as :func:`parse_check_fields` takes it; now: the instant a schedule
            must still fire after.

    Returns:
        The errors in the order of ``data``'s fields; empty when every field passes.
    """
    errors: list[ValidationError] = []
    parsed: dict[str, Any] = {}
    for name, value in data.items():
        try:
            parsed.update(parse_check_fields({name: value}))
        except ValidationError as error:
            errors.append(error)
    failed = {e.field for e in errors}
    try:
        if "schedule" in data and not failed & {"schedule", "tz", "dialect"}:
            _validate_schedule(
                {
                    "kind": "cron",
                    "schedule": parsed["schedule"],
                    "tz": parsed.get("tz", "UTC"),
                    "dialect": parsed.get("dialect", "unix"),
                },
                now,
            )
        elif "tz" in parsed and "tz" not in failed:
            _validate_schedule({"kind": "simple", "tz": parsed["tz"]}, now)
    except ValidationError as error:
        errors.append(error)
    if not failed & {"min_runtime", "max_runtime"}:
        try:
            _check_runtimes(parsed)
        except ValidationError as error:
            errors.append(error)
    return errors


KEYWORD_FLAGS = ("filter_subject", "filter_body", "filter_http_body", "filter_default_fail")
KEYWORD_LISTS = ("start_kw", "success_kw", "failure_kw")
LEGACY_SUBJECT = "_legacy_subject"
"""Marker in parsed fields: ``subject``/``subject_fail`` were given, so ``filter_subject``
follows whether any success or failure keyword is left (Healthchecks' mapping)."""


def _parse_keyword_fields(data: Mapping[str, Any], out: dict[str, Any]) -> None:
    """Keyword filters (:mod:`monitor.domain.keywords`), and the deprecated ``subject`` and
    ``subject_fail``, which Healthchecks maps onto ``success_kw`` / ``failure_kw`` with
    ``filter_subject`` on while either list is non-empty. A new-style field given in the same
    body wins over its deprecated alias.
    """
    for name in KEYWORD_FLAGS:
        if name in data:
            out[name] = _bool(data, name)
    legacy = False
    for old, new in (("subject", "success_kw"), ("subject_fail", "failure_kw")):
        if old in data:
            out[new] = _str(data, old, keywords.KEYWORDS_LIMIT)
            legacy = True
    for name in KEYWORD_LISTS:
        if name in data:
            out[name] = _str(data, name, keywords.KEYWORDS_LIMIT)
    if legacy and "filter_subject" not in data:
        out[LEGACY_SUBJECT] = True


def _apply_legacy_subject(values: dict[str, Any], fields: dict[str, Any]) -> None:
    """``subject``/``subject_fail`` given: ``filter_subject`` = any success or failure keyword."""
    if fields.pop(LEGACY_SUBJECT, False):
        values.pop(LEGACY_SUBJECT, None)
        on = bool(values.get("success_kw") or values.get("failure_kw"))
        values["filter_subject"] = fields["filter_subject"] = on


def _validate_schedule(values: Mapping[str, Any], now: datetime) -> None:
    if values["kind"] != "cron":
        # A simple check keeps tz for a later switch to cron and for display: it must be valid too.
        try:
            schedules.validate_zone(values["tz"])
        except ZoneError as error:
            raise ValidationError("tz", str(error)) from None
        return
    try:
        schedule = schedules.parse_cron(values["schedule"], values["dialect"], values["tz"])
        schedules.ensure_fires_after(schedule, now)  # e.g. a quartz year list in the past
    except ZoneError as error:
        raise ValidationError("tz", str(error)) from None
    except ScheduleError as error:
        raise ValidationError("schedule", str(error)) from None


def _apply_kind(values: dict[str, Any], given: Mapping[str, Any]) -> None:
    if "schedule" in given:
        values["kind"] = "cron"
    elif "timeout" in given:
        values["kind"] = "simple"
    if "tz" in given or "dialect" in given or "schedule" in given:
        values.setdefault("tz", "UTC")


async def _project_channels(conn: Connection, project_id: int) -> list[tuple[str, str]]:
    # locked: the check about to link them must not race a channel's delete (a foreign key)
    return await UnitOfWork.joining(conn).channels.names(project_id, lock=True)


async def _resolve_channels(
    conn: Connection,
    project_id: int,
    text: str,
    field: str = "channels",
    *,
    rows: Sequence[tuple[str, str]] | None = None,
) -> list[str]:
    """Channel ids for ``text``: ``"*"`` (all), ``""`` (none) or comma-separated ids or names.

    Raises:
        ValidationError: naming ``field`` (``channels`` or ``escalate_to``): an unknown
            channel, or a name two or more channels share ("ambiguous"; use the id).
    """
    if rows is None:
        rows = await _project_channels(conn, project_id)
    if text.strip() == "*":
        return [r[0] for r in rows]
    wanted = [p.strip() for p in text.split(",")] if text.strip() else []
    if any(not item for item in wanted):
        # as Healthchecks: "a,,b", "a," and "," name no channel ("empty channel identifier")
        raise ValidationError(field, f"empty channel identifier in {text!r}")
    by_id = {r[0]: r[0] for r in rows}
    by_name: dict[str, list[str]] = {}
    for channel_id, name in rows:
        if name:
            by_name.setdefault(name, []).append(channel_id)
    out = []
    for item in wanted:
        channel = by_id.get(item)
        if channel is None:
            named = by_name.get(item, [])
            if len(named) > 1:
                raise ValidationError(
                    field, f"channel name {item!r} is ambiguous: {len(named)} channels have it; use the id"
                )
            if not named:
                raise ValidationError(field, f"no channel {item!r} in this project")
            channel = named[0]
        out.append(channel)
    return list(dict.fromkeys(out))


def _check_runtimes(values: Mapping[str, Any]) -> None:
    """A ``min_runtime`` at or above ``max_runtime`` would make every run too fast or timed out.

    Raises:
        ValidationError: naming ``min_runtime``.
    """
    low, high = values.get("min_runtime"), values.get("max_runtime")
    if low is not None and high is not None and low >= high:
        raise ValidationError("min_runtime", f"must be less than max_runtime ({high} s), got {low}")


def _check_escalation(values: Mapping[str, Any]) -> None:
    """``escalate_after`` needs somewhere to escalate to.

    Raises:
        ValidationError: ``escalate_after`` set while ``escalate_to`` is empty.
    """
    if values.get("escalate_after") and not values.get("escalate_to"):
        raise ValidationError("escalate_after", "needs escalate_to: the channels to escalate to")


async def _set_channels(
    conn: Connection, check_id: int, channel_ids: Sequence[str], *, new: bool = False
) -> None:
    """Link the check to exactly ``channel_ids`` (``new``: it has no links yet)."""
    await UnitOfWork.joining(conn).channels.assign(check_id, channel_ids, replace=not new)


async def create_or_upsert(
    conn: Connection, project_id: int, data: Any, now: datetime, *, shards: int
) -> tuple[int, bool]:
    """Create a check, or with ``unique`` update the first match.

    A new check stores its evaluator shard, computed with the shard count stored in the
    database (DESIGN §6, :mod:`monitor.storage.cluster`); ``shards`` (``MONITOR_SHARDS``) is
    recorded only if the database has none yet.

    Returns:
        ``(check id, created)``.

    Raises:
        ValidationError: bad fields; Conflict: the slug is taken by another check.
    """
    fields = parse_check_fields(data)
    unique = fields.pop("unique", None)
    channels = fields.pop("channels", None)
    if "escalate_to" in fields:
        fields["escalate_to"] = ",".join(
            await _resolve_channels(conn, project_id, fields["escalate_to"], "escalate_to")
        )
    uow = UnitOfWork.joining(conn)
    if unique:
        # Replicas upserting one check at once (DESIGN §8) must see each other's row: serialise
        # upserts per project (PostgreSQL locks the project row; SQLite's BEGIN IMMEDIATE already does).
        await uow.projects.lock(project_id)
        match = {name: fields[name] for name in unique if name in fields}
        if match:
            existing = await uow.checks.first_match(project_id, match)
            if existing is not None:
                await update_check(conn, project_id, existing, {**data, **{"unique": []}}, now)
                return existing, False
    count = await cluster.shard_count_for_insert(conn, shards, now)
    values = new_check_values(project_id=project_id, now=now, shards=count)
    values.update(fields)
    _apply_legacy_subject(values, fields)
    _apply_kind(values, fields)
    if values["kind"] == "cron" and not values.get("schedule"):
        raise ValidationError("schedule", "is required for a cron check")
    _validate_schedule(values, now)
    _check_runtimes(values)
    _check_escalation(values)
    if values.get("slug") and not unique:  # an upsert took it already
        await uow.projects.lock(project_id)
    await _check_slug_free(conn, project_id, values.get("slug"), None)
    try:
        check_id = await uow.checks.insert(values)
    except DuplicateKey:  # a concurrent transaction took the slug after our check
        raise _slug_taken(values.get("slug")) from None
    if channels is not None:
        await _set_channels(conn, check_id, await _resolve_channels(conn, project_id, channels), new=True)
    else:  # the project's default channels
        await _set_channels(conn, check_id, await _default_channels(conn, project_id), new=True)
    return int(check_id), True


MAX_BULK = 1000
"""Most checks one ``POST /api/v3/checks/`` with a list creates."""


async def create_many(
    conn: Connection, project_id: int, items: Sequence[Any], now: datetime, *, shards: int
) -> list[int]:
    """Create several checks in the caller's transaction, all or none (a list body).

    The project's channels, its default channels and the shard count are read once, each
    distinct schedule (with its zone and dialect) is judged once, the checks inserted in one
    multi-row statement and their channel links in another: the cost per check is its
    validation, not a round trip per column of work.

    Args:
        items: check fields as for :func:`create_or_upsert`, without ``unique`` (1 to
            :data:`MAX_BULK` of them).

    Returns:
        The new checks' ids, in the order given.

    Raises:
        ValidationError: ``checks`` (not 1-1000 items) or ``[<index>].<field>: <problem>``.
        Conflict: a slug is taken, in the project or twice in the list.

    Long because a list body is validated and created all or none in one transaction, with
    each item's error named by index.
    """
    if not 1 <= len(items) <= MAX_BULK:
        raise ValidationError("checks", f"give a list of 1 to {MAX_BULK} checks")
    channel_rows = await _project_channels(conn, project_id)
    defaults: list[str] | None = None
    count = await cluster.shard_count_for_insert(conn, shards, now)
    rows: list[dict[str, Any]] = []
    links: list[list[str]] = []
    # (kind, schedule, dialect, tz) already judged valid at ``now`` in this list
    valid_schedules: set[tuple[Any, ...]] = set()
    for index, item in enumerate(items):
        try:
            fields = parse_check_fields(item)
            if fields.pop("unique", None):
                raise ValidationError("unique", "is not accepted in a list; create or upsert one at a time")
            channels = fields.pop("channels", None)
            if "escalate_to" in fields:
                fields["escalate_to"] = ",".join(
                    await _resolve_channels(
                        conn, project_id, fields["escalate_to"], "escalate_to", rows=channel_rows
                    )
                )
            values = new_check_values(project_id=project_id, now=now, shards=count)
            values.update(fields)
            _apply_legacy_subject(values, fields)
            _apply_kind(values, fields)
            if values["kind"] == "cron" and not values.get("schedule"):
                raise ValidationError("schedule", "is required for a cron check")
            schedule_key = (values["kind"], values.get("schedule"), values["dialect"], values["tz"])
            if schedule_key not in valid_schedules:  # a list often repeats one schedule
                _validate_schedule(values, now)
                valid_schedules.add(schedule_key)
            _check_runtimes(values)
            _check_escalation(values)
            if channels is not None:
                wanted = await _resolve_channels(conn, project_id, channels, rows=channel_rows)
            else:
                if defaults is None:
                    defaults = await _default_channels(conn, project_id)
                wanted = defaults
        except ValidationError as error:
            raise ValidationError(f"[{index}].{error.field}", error.problem) from None
        rows.append(values)
        links.append(wanted)
    slugs = [r["slug"] for r in rows if r.get("slug")]
    first_with: dict[str, int] = {}
    for index, row in enumerate(rows):
        slug = row.get("slug")
        if slug and slug in first_with:
            raise Conflict(f"[{index}].slug: {slug!r} is also the slug of [{first_with[slug]}]")
        if slug:
            first_with[slug] = index
    uow = UnitOfWork.joining(conn)
    if slugs:
        # as every creator of slugs (an upsert, a ping's auto-creation): one lock per project,
        # taken before the insert fills the slug index (in list order), so two creators never
        # hold one slug each and wait for the other's
        await uow.projects.lock(project_id)
    taken = await uow.checks.first_taken_slug(project_id, slugs)
    if taken is not None:
        where = f"[{first_with[taken]}]." if taken in first_with else ""
        raise Conflict(f"{where}{_slug_taken(taken)}")
    try:
        ids = await uow.checks.insert_many(rows)
    except DuplicateKey:  # a concurrent transaction took a slug after our check
        raise Conflict("slug: a slug in the list was taken meanwhile") from None
    await uow.channels.assign_many(
        [(check_id, c) for check_id, wanted in zip(ids, links, strict=True) for c in dict.fromkeys(wanted)]
    )
    return ids


async def _default_channels(conn: Connection, project_id: int) -> list[str]:
    """The project's default channels (``"default": true``), routed to checks created without
    a ``channels`` field."""
    return await UnitOfWork.joining(conn).channels.default_ids(project_id, lock=True)


def _slug_taken(slug: str | None) -> Conflict:
    return Conflict(f"slug: {slug!r} is already used by another check in this project")


async def _check_slug_free(conn: Connection, project_id: int, slug: str | None, check_id: int | None) -> None:
    if not slug:
        return
    if await UnitOfWork.joining(conn).checks.slug_taken(project_id, slug, except_id=check_id):
        raise _slug_taken(slug)


def slugify(name: str) -> str:
    """The slug Healthchecks' v1/v2 API derives from a name (Django's ``slugify``): ASCII,
    lower case, runs of spaces and hyphens as one ``-``, other punctuation dropped."""
    text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text.lower())
    return re.sub(r"[-\s]+", "-", text).strip("-_")[:100]


def unique_key(uuid: str) -> str:
    """A check's stable public key for read-only API keys: 40 hex digits.

    Healthchecks' rule (``Check.unique_key``): SHA-1 of the first 16 hex digits of the uuid
    (hyphens removed), so it names the check without revealing its ping URL.
    """
    return hashlib.sha1(uuid.replace("-", "").lower()[:16].encode()).hexdigest()


async def find_check_row(
    conn: Connection, project_id: int, ident: str, *, unique_key_allowed: bool = False
) -> dict[str, Any]:
    """The check named by ``ident``: its uuid (any case), or with ``unique_key_allowed`` its
    :func:`unique_key` (what a read-only key sees instead of the uuid).

    Raises:
        NotFound: a malformed identifier (Healthchecks' URL patterns do not match it, so it
            answers 404), no such check, or another project's check (existence is not revealed).
    """
    if UUID_TEXT.match(ident):
        return await get_check_row(conn, project_id, ident.lower())
    if unique_key_allowed and UNIQUE_KEY_TEXT.match(ident):
        # Healthchecks also scans the project's checks: the key is not stored
        for uuid in await UnitOfWork.joining(conn).checks.uuids(project_id):
            if unique_key(uuid) == ident:
                return await get_check_row(conn, project_id, uuid)
        raise NotFound("unique_key: no check with this unique_key in this project")
    raise NotFound("uuid: no check with this uuid in this project")


async def get_check_row(
    conn: Connection, project_id: int, uuid: str, *, lock: bool = False
) -> dict[str, Any]:
    """The check row, or NotFound (also for another project's check: existence is not revealed)."""
    row = await UnitOfWork.joining(conn).checks.get(project_id, uuid, lock=lock)
    if row is None:
        raise NotFound("uuid: no check with this uuid in this project")
    return row


async def update_check(conn: Connection, project_id: int, check_id: int, data: Any, now: datetime) -> None:
    """Partial update: only the given fields change; a changed schedule re-plans ``next_due``.

    Raises:
        NotFound: the check was deleted since the caller read it (a concurrent delete).
        ValidationError, Conflict: a field's value, a slug in use.
    """
    fields = parse_check_fields(data)
    fields.pop("unique", None)
    channels = fields.pop("channels", None)
    if "escalate_to" in fields:
        fields["escalate_to"] = ",".join(
            await _resolve_channels(conn, project_id, fields["escalate_to"], "escalate_to")
        )
    row = (await lock_checks(conn, [check_id])).get(check_id)
    if row is None:  # deleted by a concurrent request since the caller read it
        raise NotFound("uuid: no check with this uuid in this project")
    values = dict(row)
    values.update(fields)
    _apply_legacy_subject(values, fields)
    _apply_kind(values, fields)
    if values["kind"] == "cron" and not values.get("schedule"):
        raise ValidationError("schedule", "is required for a cron check")
    _validate_schedule(values, now)
    _check_runtimes(values)
    if "escalate_after" in fields or "escalate_to" in fields:
        _check_escalation(values)
    if "slug" in fields:
        await _check_slug_free(conn, project_id, values.get("slug"), check_id)
    spec = repositories.spec_of(values)
    state = repositories.state_of(values)
    if any(name in fields for name in SCHEDULE_FIELDS) and state.watch_from is not None:
        # A new schedule starts being watched now: ticks before the change are not judged by it.
        state.judged_until = max(x for x in (state.judged_until, state.watch_from, now) if x is not None)
    books = await repositories.load_books(conn, {check_id: state.judged_until})
    detection.refresh(spec, state, books[check_id], now)
    changes = {k: v for k, v in values.items() if k in fields or k == "kind"}
    changes.update(repositories.state_values(state))
    try:
        await UnitOfWork.joining(conn).checks.update(check_id, changes)
    except DuplicateKey:  # a concurrent transaction took the slug after our check
        raise _slug_taken(values.get("slug")) from None
    if channels is not None:
        await _set_channels(conn, check_id, await _resolve_channels(conn, project_id, channels))


async def pause_check(conn: Connection, project_id: int, uuid: str, now: datetime) -> None:
    """Pause a check (a no-op if it is paused already): no tick is watched until it resumes.

    Raises:
        NotFound: no such check in the project.
    """
    await _change_state(conn, project_id, uuid, now, resume=False)


async def resume_check(conn: Connection, project_id: int, uuid: str, now: datetime) -> None:
    """Resume a paused check (status ``new``).

    Raises:
        NotFound: no such check in the project. Conflict: the check is not paused.
    """
    await _change_state(conn, project_id, uuid, now, resume=True)


async def _change_state(conn: Connection, project_id: int, uuid: str, now: datetime, *, resume: bool) -> None:
    row = await get_check_row(conn, project_id, uuid, lock=True)
    state = repositories.state_of(row)
    if resume and not state.paused:
        raise Conflict("status: the check is not paused")
    fx = detection.resume(state, now) if resume else detection.pause(state, now)
    pending = PendingWrites.empty()
    pending.add(row["id"], fx)
    await pending.write(conn)
    await UnitOfWork.joining(conn).checks.update(row["id"], repositories.state_values(state))


async def delete_check(conn: Connection, check_id: int) -> None:
    """Delete a check with its history (pings, runs, flips, alerts and their notifications)."""
    await UnitOfWork.joining(conn).checks.delete(check_id)


def iso(instant: datetime | None) -> str | None:
    return detection.iso(instant) if instant is not None else None


async def started_checks(conn: Connection, rows: Sequence[Mapping[str, Any]], now: datetime) -> set[int]:
    """Ids of the checks among ``rows`` with a run in progress."""
    ids = [r["id"] for r in rows]
    if not ids:
        return set()
    uow = UnitOfWork.joining(conn)
    found = await uow.checks.started_runs(ids)
    # Pausing forgets runs in progress, as Healthchecks clears last_start: a run started before
    # the check's last pause no longer counts as started (nor before its last resume; a run
    # started at the instant of a resume is the ping that resumed it).
    changed: dict[int, datetime] = {}
    for cid, reason, at in await uow.checks.last_pauses(ids):
        # strictly after a pause; at or after a resume
        bound = at if reason == "paused" else at - timedelta(microseconds=1)
        changed[cid] = max(changed.get(cid, bound), bound)
    max_runtime = {r["id"]: r["max_runtime"] for r in rows}
    return {
        cid
        for cid, started_at in found
        if (now - started_at).total_seconds() <= max_runtime[cid]
        and (changed.get(cid) is None or started_at > changed[cid])
    }


async def channels_of(conn: Connection, ids: Sequence[int]) -> dict[int, list[str]]:
    """Per check id (every one given), the ids of its channels."""
    return await UnitOfWork.joining(conn).channels.of_checks(ids)


def check_to_dict(
    row: Mapping[str, Any],
    *,
    now: datetime,
    settings: Settings,
    started: bool,
    channels: Sequence[str],
    readonly: bool = False,
    version: int = 3,
) -> dict[str, Any]:
    """A check's JSON (DESIGN §9) as API ``version`` (1, 2 or 3) shows it.

    ``readonly`` (a read-only key asked): as Healthchecks, no ``uuid``, ``ping_url``,
    ``update_url``, ``pause_url``, ``resume_url`` or ``channels`` (nor our ``escalate_to``,
    channel ids too) — the uuid is the ping credential — but a ``unique_key`` instead.
    Version 1 reports a check with a run in progress as ``status: "started"`` (Healthchecks'
    v1); v2 and v3 give the same fields.

    Long because a check's JSON is assembled field by field per API version (DESIGN §9).
    """
    state = repositories.state_of(row)
    spec = repositories.spec_of(row)
    status = detection.status(state, now)
    next_ping: datetime | None = None
    if not state.paused and not state.is_new:
        # cron: the next tick after now; simple: last run ping + timeout (DESIGN §9)
        next_ping = (
            simple_due(spec, state) if row["kind"] == CheckKind.SIMPLE else tick_after(spec, state, now)
        )
    base = settings.base_url
    uuid = row["uuid"]
    out: dict[str, Any] = {
        "uuid": uuid,
        "name": row["name"],
        "slug": row["slug"] or "",
        "tags": row["tags"],
        "desc": row["desc"],
        "kind": row["kind"],
    }
    if row["kind"] == CheckKind.CRON:
        out.update(schedule=row["schedule"], tz=row["tz"], dialect=row["dialect"])
    else:
        out["timeout"] = row["timeout"]
    out.update(
        grace=row["grace"],
        max_runtime=row["max_runtime"],
        failure_threshold=row["failure_threshold"],
        recovery_threshold=row["recovery_threshold"],
        early_tolerance=row["early_tolerance"],
        expected_runs=row["expected_runs"],
        min_runtime=row["min_runtime"],
        status="started" if version == 1 and started else status.value,
        started=started,
        last_ping=iso(row["last_ping_at"]),
        next_ping=iso(next_ping),
        n_pings=row["n_pings"],
        manual_resume=bool(row["manual_resume"]),
        methods=row["methods"],
        # keyword filters; subject/subject_fail are Healthchecks' deprecated views of them
        subject=row["success_kw"] if row["filter_subject"] else "",
        subject_fail=row["failure_kw"] if row["filter_subject"] else "",
        start_kw=row["start_kw"],
        success_kw=row["success_kw"],
        failure_kw=row["failure_kw"],
        filter_subject=bool(row["filter_subject"]),
        filter_body=bool(row["filter_body"]),
        filter_http_body=bool(row["filter_http_body"]),
        filter_default_fail=bool(row["filter_default_fail"]),
        channels=",".join(channels),
        nag_interval=row["nag_interval"],
        escalate_after=row["escalate_after"],
        escalate_to=row["escalate_to"] or "",
        ping_url=f"{base}/ping/{uuid}",
        update_url=f"{base}/api/v3/checks/{uuid}",
        pause_url=f"{base}/api/v3/checks/{uuid}/pause",
        resume_url=f"{base}/api/v3/checks/{uuid}/resume",
        # public and unguessable: the badge uuid is random and separate from the check's uuid
        badge_url=f"{base}/b/{row['badge_uuid']}.svg",
    )
    if readonly:
        for name in ("uuid", "ping_url", "update_url", "pause_url", "resume_url", "channels", "escalate_to"):
            del out[name]
        out["unique_key"] = unique_key(uuid)
    return out


# -- the management API's use cases: each opens its own unit of work --------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class View:
    """How a caller shows checks (:func:`check_to_dict`): at ``now``, with the service's
    ``settings`` (its ``base_url``), as a ``readonly`` key sees them, as API ``version`` 1-3."""

    now: datetime
    settings: Settings
    readonly: bool = False
    version: int = 3


async def render(conn: Connection, rows: Sequence[Mapping[str, Any]], view: View) -> list[dict[str, Any]]:
    """The checks' JSON (:func:`check_to_dict`) with their ``hints`` (advice from the latest
    runs, :mod:`monitor.domain.hints`), in the order of ``rows``, read in the caller's unit of work."""
    started = await started_checks(conn, rows, view.now)
    channels = await channels_of(conn, [r["id"] for r in rows])
    hints = await hint_service.hints_of(conn, rows)
    return [
        {
            **check_to_dict(
                r,
                now=view.now,
                settings=view.settings,
                started=r["id"] in started,
                channels=channels[r["id"]],
                readonly=view.readonly,
                version=view.version,
            ),
            "hints": hints[r["id"]],
        }
        for r in rows
    ]


def _no_nul(name: str, value: str) -> None:
    if "\x00" in value:  # PostgreSQL text cannot hold U+0000
        raise ValidationError(name, "must not contain NUL characters")


async def list_checks(
    engine: Engine,
    project_id: int,
    view: View,
    *,
    tags: Sequence[str] = (),
    slug: str | None = None,
    after_id: int | None = None,
    limit: int | None = None,
) -> list[tuple[int, dict[str, Any]]]:
    """The project's checks, oldest first, as ``(check id, JSON)``: each of ``tags`` a whole
    word of the check's tags, ``slug`` equal, id above ``after_id`` (a page cursor), at most
    ``limit`` (the filters run in SQL).

    Raises:
        ValidationError: ``slug`` or ``tag`` holds a NUL character.
    """
    if slug is not None:
        _no_nul("slug", slug)
    for tag in tags:
        _no_nul("tag", tag)
    async with UnitOfWork.read(engine) as uow:
        rows = await uow.checks.query(project_id, tags=tags, slug=slug, after_id=after_id, limit=limit)
        shown = await render(uow.connection, rows, view)
    return [(int(r["id"]), d) for r, d in zip(rows, shown, strict=True)]


async def show_check(engine: Engine, project_id: int, ident: str, view: View) -> dict[str, Any]:
    """One check's JSON, named by uuid or (with ``view.readonly`` or not) its ``unique_key``.

    Raises:
        NotFound: see :func:`find_check_row`.
    """
    async with UnitOfWork.read(engine) as uow:
        row = await find_check_row(uow.connection, project_id, ident, unique_key_allowed=True)
        return (await render(uow.connection, [row], view))[0]


async def check_uuid(engine: Engine, project_id: int, ident: str) -> str:
    """The uuid of the project's check ``ident`` (a uuid, any case).

    Raises:
        NotFound: malformed or unknown (:func:`find_check_row`).
    """
    async with UnitOfWork.read(engine) as uow:
        return str((await find_check_row(uow.connection, project_id, ident))["uuid"])


async def create_check(
    engine: Engine, project_id: int, data: Any, view: View, *, shards: int
) -> tuple[dict[str, Any], bool]:
    """Create a check or upsert (:func:`create_or_upsert`) at ``view.now`` in one transaction;
    returns ``(its JSON, created)``."""
    async with UnitOfWork.begin(engine) as uow:
        check_id, created = await create_or_upsert(uow.connection, project_id, data, view.now, shards=shards)
        rows = await uow.checks.by_ids([check_id])
        return (await render(uow.connection, [rows[check_id]], view))[0], created


async def create_checks(
    engine: Engine, project_id: int, items: Sequence[Any], view: View, *, shards: int
) -> list[dict[str, Any]]:
    """Create a list of checks, all or none (:func:`create_many`); their JSON in the order given."""
    async with UnitOfWork.begin(engine) as uow:
        ids = await create_many(uow.connection, project_id, items, view.now, shards=shards)
        by_id = await uow.checks.by_ids(ids)
        return await render(uow.connection, [by_id[i] for i in ids], view)


async def change_check(engine: Engine, project_id: int, uuid: str, data: Any, view: View) -> dict[str, Any]:
    """Update the given fields of a check (:func:`update_check`) at ``view.now``; its new JSON.

    Raises:
        NotFound, ValidationError, Conflict: as :func:`update_check`.
    """
    async with UnitOfWork.begin(engine) as uow:
        row = await get_check_row(uow.connection, project_id, uuid)
        await update_check(uow.connection, project_id, row["id"], data, view.now)
        fresh = await get_check_row(uow.connection, project_id, uuid)
        return (await render(uow.connection, [fresh], view))[0]


async def remove_check(engine: Engine, project_id: int, uuid: str, view: View) -> dict[str, Any]:
    """Delete a check (:func:`delete_check`); its JSON as it was just before.

    Raises:
        NotFound: no such check in the project.
    """
    async with UnitOfWork.begin(engine) as uow:
        row = await get_check_row(uow.connection, project_id, uuid, lock=True)
        body = (await render(uow.connection, [row], view))[0]
        await delete_check(uow.connection, row["id"])
        return body


async def set_paused(
    engine: Engine, project_id: int, uuid: str, view: View, *, paused: bool
) -> dict[str, Any]:
    """Pause (:func:`pause_check`) or resume (:func:`resume_check`) at ``view.now``; the new JSON.

    Raises:
        NotFound: no such check. Conflict: resuming a check that is not paused.
    """
    async with UnitOfWork.begin(engine) as uow:
        change = pause_check if paused else resume_check
        await change(uow.connection, project_id, uuid, view.now)
        row = await get_check_row(uow.connection, project_id, uuid)
        return (await render(uow.connection, [row], view))[0]


async def pings_of(
    engine: Engine, project_id: int, ident: str, base_url: str, limit: int, *, before: int | None = None
) -> list[dict[str, Any]]:
    """The check's (named by uuid) pings, newest first (:func:`monitor.services.history.list_pings`)."""
    async with UnitOfWork.read(engine) as uow:
        row = await find_check_row(uow.connection, project_id, ident)
        return await history.list_pings(
            uow.connection, row["id"], row["uuid"], base_url, limit, before=before
        )


async def ping_body_of(engine: Engine, project_id: int, ident: str, n: int) -> bytes:
    """Ping ``n``'s stored body (:func:`monitor.services.history.ping_body`)."""
    async with UnitOfWork.read(engine) as uow:
        row = await find_check_row(uow.connection, project_id, ident)
        return await history.ping_body(uow.connection, row["id"], n)


async def flips_of(
    engine: Engine,
    project_id: int,
    ident: str,
    limit: int,
    before: int | None,
    *,
    window: history.FlipWindow,
) -> tuple[list[dict[str, Any]], list[int]]:
    """The check's (uuid or unique_key) flips page (:func:`monitor.services.history.flips_page`)."""
    async with UnitOfWork.read(engine) as uow:
        row = await find_check_row(uow.connection, project_id, ident, unique_key_allowed=True)
        return await history.flips_page(uow.connection, row["id"], limit, before, window=window)


async def runs_of(
    engine: Engine,
    project_id: int,
    ident: str,
    limit: int,
    since: datetime | None,
    until: datetime | None,
    after: tuple[datetime, datetime, str] | None,
) -> tuple[list[dict[str, Any]], list[tuple[datetime, datetime, str]]]:
    """The check's (uuid or unique_key) runs page (:func:`monitor.services.history.runs_page`)."""
    async with UnitOfWork.read(engine) as uow:
        row = await find_check_row(uow.connection, project_id, ident, unique_key_allowed=True)
        return await history.runs_page(uow.connection, row["id"], limit, since, until, after)


async def alerts_of(
    engine: Engine, project_id: int, ident: str, limit: int, *, before: int | None = None
) -> list[dict[str, Any]]:
    """The check's (uuid) alerts with notifications (:func:`monitor.services.history.list_alerts`)."""
    async with UnitOfWork.read(engine) as uow:
        row = await find_check_row(uow.connection, project_id, ident)
        return await history.list_alerts(uow.connection, row["id"], limit, before=before)


# -- the dashboard's check forms: one unit of work each -----------------------------------------


async def _user_check(uow: UnitOfWork, project_ids: Sequence[int], uuid: str) -> dict[str, Any]:
    row = await uow.dashboard.check_in(project_ids, uuid)
    if row is None:
        raise NotFound("uuid: no check with this uuid in your projects")
    return row


def confirm_name(row: Mapping[str, Any]) -> str:
    """What a user types to confirm deleting a check: its name, else slug, else uuid."""
    return str(row["name"] or row["slug"] or row["uuid"])


async def create_from_form(engine: Engine, project_id: int, data: Any, now: datetime, *, shards: int) -> str:
    """Create (or upsert, :func:`create_or_upsert`) a check from the dashboard's form; its uuid.

    Raises:
        ValidationError, Conflict: as :func:`create_or_upsert`.
    """
    async with UnitOfWork.begin(engine) as uow:
        check_id, _ = await create_or_upsert(uow.connection, project_id, data, now, shards=shards)
        return str((await uow.checks.by_ids([check_id]))[check_id]["uuid"])


async def update_unless_changed(
    engine: Engine,
    project_ids: Sequence[int],
    uuid: str,
    data: Any,
    now: datetime,
    *,
    version_of: Callable[[dict[str, Any], list[str]], str],
    expected: str,
) -> str | None:
    """Save the edit form's ``data`` (:func:`update_check`) unless the check changed since the
    form was loaded: ``version_of(row, channel ids)`` of the stored check differs from a
    non-empty ``expected``. Returns ``None`` when saved, else the current version (nothing is
    written; the form shows the stored settings' version with its 409).

    Raises:
        NotFound: no check ``uuid`` in ``project_ids``. ValidationError, Conflict: as
            :func:`update_check`.
    """
    async with UnitOfWork.begin(engine) as uow:
        row = await _user_check(uow, project_ids, uuid)
        current = version_of(row, (await channels_of(uow.connection, [row["id"]]))[row["id"]])
        if expected and expected != current:
            return current
        await update_check(uow.connection, row["project_id"], row["id"], data, now)
    return None


async def delete_confirmed(
    engine: Engine, project_ids: Sequence[int], uuid: str, typed: str
) -> tuple[dict[str, Any], bool]:
    """Delete the check ``uuid`` of one of ``project_ids`` if ``typed`` (stripped) is its
    :func:`confirm_name`; ``(its row, deleted)``.

    Raises:
        NotFound: no such check in these projects.
    """
    async with UnitOfWork.begin(engine) as uow:
        row = await _user_check(uow, project_ids, uuid)
        if typed.strip() != confirm_name(row):
            return row, False
        locked = await get_check_row(uow.connection, row["project_id"], uuid, lock=True)
        await delete_check(uow.connection, locked["id"])
        return row, True


async def set_paused_in(
    engine: Engine, project_ids: Sequence[int], uuid: str, now: datetime, *, paused: bool
) -> None:
    """Pause (:func:`pause_check`) or resume (:func:`resume_check`) the check ``uuid`` of one
    of ``project_ids``.

    Raises:
        NotFound: no such check in these projects. Conflict: resuming a check that is not paused.
    """
    async with UnitOfWork.begin(engine) as uow:
        row = await _user_check(uow, project_ids, uuid)
        change = pause_check if paused else resume_check
        await change(uow.connection, row["project_id"], uuid, now)
