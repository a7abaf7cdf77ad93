"""Channels: Apprise URLs a project's alerts go to (DESIGN §7, §9)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid as uuid_module
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from monitor.domain import messages
from monitor.domain.checks import AlertKind
from monitor.domain.errors import Conflict, NotFound, ValidationError
from monitor.domain.messages import Message
from monitor.notify.base import ChannelUrls, DeliveryResult, Notifier
from monitor.services import checks as check_service
from monitor.storage.unit_of_work import Connection, Engine, UnitOfWork

#: What a channel's ``kinds`` filter may name: the alert kinds (DESIGN §2) plus the reminders,
#: escalations and maintenance summaries.
ALERT_KINDS = {k.value for k in AlertKind} | set(messages.EXTRA_KINDS)


def _kinds(value: Any) -> str:
    if value is None:
        return ""  # null: every kind, like an empty list
    if isinstance(value, str):
        items = [k.strip() for k in value.split(",") if k.strip()]
    elif isinstance(value, list) and all(isinstance(k, str) for k in value):
        items = [k.strip() for k in value]
    else:
        raise ValidationError("kinds", "must be a list of alert kinds, a comma-separated string or null")
    for kind in items:
        if kind not in ALERT_KINDS:
            raise ValidationError(
                "kinds", f"{kind!r} is not an alert kind ({', '.join(sorted(ALERT_KINDS))})"
            )
    return ",".join(dict.fromkeys(items))


def default_name(url: str, urls: ChannelUrls) -> str:
    """A channel name for ``url`` when none is given: the Apprise service's name and the host it
    delivers to (``"JSON hooks.example.com"``, ``"Telegram"``); never a secret part of the URL.
    ``urls``: the channel URL rules (the edge passes Apprise's)."""
    return urls.label(url)[:100]


async def validate_channel(
    data: Any, *, partial: bool, allow_private: bool, urls: ChannelUrls, stored_url: str | None = None
) -> dict[str, Any]:
    """Validate a channel body: ``name`` (≤ 100), ``url`` (Apprise must parse it), ``kinds``,
    ``default``.

    ``url`` must parse in Apprise and, unless ``allow_private``, its host must not resolve to a
    private/loopback/link-local address (DESIGN §7). ``kinds``: a list (or comma-separated
    string) of alert kinds, duplicates dropped; empty or ``null`` = all. ``default``: a project
    default channel, routed to every check created without a ``channels`` field. A missing or
    empty ``name`` on create (an empty one on update) becomes :func:`default_name` of the URL.

    Masked URLs: every answer shows the URL with its secrets as ``****``. An update
    whose ``url`` is exactly the stored URL's masked form (a client sending back what it read)
    keeps the stored URL, secrets included; any other URL containing ``****`` is refused —
    the real secret cannot be recovered from it.

    Args:
        data: the decoded JSON body.
        partial: an update (only the given fields change).
        allow_private: ``MONITOR_ALLOW_PRIVATE_TARGETS``.
        urls: the channel URL rules (the edge passes Apprise's, ``monitor.notify.apprise``).
        stored_url: the channel's current URL, on update.

    Raises:
        ValidationError: naming ``body``, ``name``, ``url``, ``kinds`` or ``default``
            (``url: contains masked secrets (****); send the full URL``).

    Long because a channel body's fields are validated in turn, each with its own message.
    """
    if not isinstance(data, dict):
        raise ValidationError("body", "must be a JSON object")
    out: dict[str, Any] = {}
    if "name" in data and data["name"] is not None:
        if not isinstance(data["name"], str) or len(data["name"]) > 100 or "\x00" in data["name"]:
            raise ValidationError("name", "must be a string of at most 100 characters (no NUL)")
        out["name"] = data["name"].strip()
    if "url" in data or not partial:
        url = data.get("url")
        if not isinstance(url, str) or not url.strip():
            raise ValidationError("url", "is required: an Apprise URL such as json://host/path or mailto://…")
        if "\x00" in url or len(url) > 2000:
            raise ValidationError("url", "must be at most 2000 characters, without NUL")
        url = url.strip()
        if stored_url is not None and url == urls.mask(stored_url):
            url = stored_url  # the masked form sent back: keep the real secrets
        elif urls.has_masked_secrets(url):
            raise ValidationError("url", "contains masked secrets (****); send the full URL")
        else:
            urls.validate(url)
            await asyncio.to_thread(urls.check_target, url, allow_private)
        out["url"] = url
    if not out.get("name") and ("name" in data or not partial):
        source = out.get("url") or stored_url
        if source:
            out["name"] = default_name(source, urls)
    if "kinds" in data:
        out["kinds"] = _kinds(data["kinds"])
    if "default" in data:
        if not isinstance(data["default"], bool):
            raise ValidationError("default", f"must be true or false, got {data['default']!r}")
        out["is_default"] = data["default"]
    return out


# Healthchecks' integration kinds (``Channel.kind``) of the Apprise schemes that mean the same
# service; any other Apprise URL is Healthchecks' own ``apprise`` kind.
HEALTHCHECKS_KINDS = {
    "mailto": "email",
    "mailtos": "email",
    "json": "webhook",
    "jsons": "webhook",
    "xml": "webhook",
    "xmls": "webhook",
    "form": "webhook",
    "forms": "webhook",
    "slack": "slack",
    "discord": "discord",
    "tgram": "telegram",
    "mmost": "mattermost",
    "mmosts": "mattermost",
    "msteams": "msteams",
    "pagerduty": "pd",
    "opsgenie": "opsgenie",
    "pover": "po",
    "pbul": "pushbullet",
    "matrix": "matrix",
    "matrixs": "matrix",
    "rocket": "rocketchat",
    "rockets": "rocketchat",
    "gotify": "gotify",
    "gotifys": "gotify",
    "ntfy": "ntfy",
    "ntfys": "ntfy",
    "zulip": "zulip",
    "signal": "signal",
    "signals": "signal",
    "spike": "spike",
    "victorops": "victorops",
    "splunk": "victorops",
    "pagertree": "pagertree",
    "line": "linenotify",
    "gchat": "googlechat",
}


def healthchecks_kind(url: str) -> str:
    """The Healthchecks integration kind of an Apprise URL (``mailtos://…`` → ``email``);
    ``apprise`` for schemes Healthchecks has no integration of its own for."""
    scheme = url.partition("://")[0].lower()
    return HEALTHCHECKS_KINDS.get(scheme, "apprise")


def channel_to_dict(row: Any, urls: ChannelUrls) -> dict[str, Any]:
    """A channel's JSON (DESIGN §9): ``id, name, url`` (secrets masked), ``kinds``, ``default``,
    and Healthchecks' ``kind`` (its integration shape ``{id, name, kind}``, which clients such
    as ``healthchecks-io`` validate)."""
    return {
        "id": row["id"],
        "name": row["name"],
        "kind": healthchecks_kind(row["url"]),
        "url": urls.mask(row["url"]),
        "kinds": [k for k in row["kinds"].split(",") if k],
        "default": bool(row["is_default"]),
    }


async def create_channel(conn: Connection, project_id: int, values: dict[str, Any], now: datetime) -> str:
    """Store a validated channel (:func:`validate_channel`'s values); returns its new id."""
    channel_id = str(uuid_module.uuid4())
    await UnitOfWork.joining(conn).channels.insert(
        {
            "id": channel_id,
            "project_id": project_id,
            "name": values.get("name", ""),
            "url": values["url"],
            "kinds": values.get("kinds", ""),
            "is_default": values.get("is_default", False),
            "created_at": now,
        }
    )
    return channel_id


async def get_channel(conn: Connection, project_id: int, channel_id: str) -> dict[str, Any]:
    if "\x00" in channel_id:  # PostgreSQL text cannot hold it; no channel has it
        raise NotFound("id: no channel with this id in this project")
    row = await UnitOfWork.joining(conn).channels.get(project_id, channel_id)
    if row is None:
        raise NotFound("id: no channel with this id in this project")
    return row


async def list_channels(conn: Connection, project_id: int, urls: ChannelUrls) -> list[dict[str, Any]]:
    """The project's channels as JSON (:func:`channel_to_dict`), oldest first."""
    rows = await UnitOfWork.joining(conn).channels.of_project(project_id)
    return [channel_to_dict(r, urls) for r in rows]


async def update_channel(conn: Connection, channel_id: str, values: dict[str, Any]) -> None:
    """Set the validated columns of one channel (nothing when ``values`` is empty)."""
    await UnitOfWork.joining(conn).channels.update(channel_id, values)


async def delete_channel(conn: Connection, project_id: int, channel_id: str) -> None:
    """Delete a channel, its routes and its delivery history.

    A channel's notifications (and their attempts) go with it: the outbox rows reference the
    channel, and keeping them would need a nullable reference plus a name snapshot (a schema
    change). Check the alerts' history (``GET /checks/<uuid>/alerts/``) before deleting.

    Raises:
        Conflict: a check escalates to this channel (``escalate_to``); the error names the
            checks — change their ``escalate_to`` first, so escalation is never switched off
            silently.
    """
    uow = UnitOfWork.joining(conn)
    escalating = await uow.checks.escalating_to(project_id, channel_id)
    names = [name or uuid for uuid, name, targets in escalating if channel_id in targets.split(",")]
    if names:
        raise Conflict(
            f"id: checks escalate to this channel ({', '.join(repr(n) for n in names[:10])}"
            f"{', …' if len(names) > 10 else ''}); change their escalate_to first"
        )
    await uow.channels.delete(channel_id)


async def test_channel(notifier: Notifier, row: dict[str, Any], *, timeout: float) -> DeliveryResult:  # noqa: ASYNC109
    """Deliver a test message synchronously (bounded by ``timeout`` seconds)."""
    message = Message(
        title=f"{row['name'] or 'channel'}: test notification from monitor",
        body="This is a test notification from monitor. If you can read it, the channel works.\n",
        body_markdown="This is a **test notification** from monitor. If you can read it, it works.\n",
        json_fields={
            "kind": "test",
            "check_uuid": "",
            "slug": "",
            "scheduled": "",
            "status": "",
            "name": row["name"] or "",
            "url": "",
        },
    )
    return await notifier.send(row["url"], message, timeout=timeout)


# -- the dashboard's channel pages: one unit of work each ---------------------------------------


async def own_channel(conn: Connection, project_ids: Sequence[int], channel_id: str) -> dict[str, Any]:
    """The channel's row plus ``project_id``, when it belongs to one of ``project_ids``.

    Raises:
        NotFound: no such channel in these projects.
    """
    for project_id in project_ids:
        try:
            row = await get_channel(conn, project_id, channel_id)
        except NotFound:
            continue
        return {**row, "project_id": project_id}
    raise NotFound("id: no channel with this id in your projects")


async def find_own_channel(engine: Engine, project_ids: Sequence[int], channel_id: str) -> dict[str, Any]:
    """:func:`own_channel` in a read of its own."""
    async with UnitOfWork.read(engine) as uow:
        return await own_channel(uow.connection, project_ids, channel_id)


async def channels_overview(
    engine: Engine, project_ids: Sequence[int], urls: ChannelUrls
) -> tuple[dict[int, str], list[dict[str, Any]]]:
    """``({project id: name}, channels)``: the channels of ``project_ids``, project by project,
    each as :func:`list_channels` gives it plus ``project`` (its name) and ``checks`` (how many
    checks notify it)."""
    async with UnitOfWork.read(engine) as uow:
        names = await uow.dashboard.project_names(project_ids)
        listed = []
        for project_id in project_ids:
            for channel in await list_channels(uow.connection, project_id, urls):
                listed.append({**channel, "project": names.get(project_id, "")})
        counts = await uow.dashboard.channel_check_counts([c["id"] for c in listed])
    for channel in listed:
        channel["checks"] = counts.get(channel["id"], 0)
    return names, listed


async def add_channel(
    engine: Engine, project_id: int, values: dict[str, Any], now: datetime
) -> dict[str, Any]:
    """:func:`create_channel` (``values`` validated) in a transaction of its own; the new
    channel's row."""
    async with UnitOfWork.begin(engine) as uow:
        channel_id = await create_channel(uow.connection, project_id, values, now)
        return await get_channel(uow.connection, project_id, channel_id)


CHANGED_SINCE_OPENED = "form: this channel was changed since you opened the form; review and save again"


def channel_version(row: Any, routed: set[int]) -> str:
    """A short hex digest of what the channel's edit form changes: the stored ``row``'s name,
    URL, kinds and default flag, and ``routed`` (ids of the checks that notify it). Two forms
    loaded from the same state carry the same version; any save changes it."""
    state = [row["name"], row["url"], row["kinds"], bool(row["is_default"]), sorted(routed)]
    return hashlib.sha256(json.dumps(state).encode()).hexdigest()[:16]


async def channel_with_checks(
    engine: Engine, project_ids: Sequence[int], channel_id: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(row, checks)``: the channel (:func:`own_channel`) and its project's checks
    (``id, uuid, name, slug``, by name then id) each with ``routed`` (it notifies the channel).

    Raises:
        NotFound: no such channel in these projects.
    """
    async with UnitOfWork.read(engine) as uow:
        row = await own_channel(uow.connection, project_ids, channel_id)
        checks = await uow.dashboard.check_names(row["project_id"])
        routed = await uow.dashboard.routed_checks(channel_id)
    return row, [{**c, "routed": c["id"] in routed} for c in checks]


async def channel_with_count(
    engine: Engine, project_ids: Sequence[int], channel_id: str
) -> tuple[dict[str, Any], int]:
    """``(row, checks notifying it)`` of the channel (:func:`own_channel`).

    Raises:
        NotFound: no such channel in these projects.
    """
    async with UnitOfWork.read(engine) as uow:
        row = await own_channel(uow.connection, project_ids, channel_id)
        counts = await uow.dashboard.channel_check_counts([channel_id])
    return row, counts.get(channel_id, 0)


async def remove_own_channel(engine: Engine, project_ids: Sequence[int], channel_id: str) -> None:
    """Delete the channel (:func:`delete_channel`) if it belongs to one of ``project_ids``.

    Raises:
        NotFound: no such channel in these projects. Conflict: as :func:`delete_channel`.
    """
    async with UnitOfWork.begin(engine) as uow:
        row = await own_channel(uow.connection, project_ids, channel_id)
        await delete_channel(uow.connection, row["project_id"], channel_id)


async def edit_channel(
    engine: Engine,
    project_ids: Sequence[int],
    channel_id: str,
    body: dict[str, Any],
    *,
    allow_private: bool,
    urls: ChannelUrls,
    routed: set[int],
    now: datetime,
    expected: str = "",
) -> None:
    """Change a channel from the dashboard's form in one transaction: ``body`` validated as a
    partial update (:func:`validate_channel`; a masked URL keeps the stored secrets), and the
    checks of its project that notify it made exactly ``routed`` (check ids), each changed
    through :func:`monitor.services.checks.update_check` as the API's ``channels`` field would.
    A non-empty ``expected`` is the :func:`channel_version` the form was loaded with: when the
    stored channel's differs (another tab or user saved since), nothing is written.

    Raises:
        NotFound: no such channel in these projects. ValidationError, Conflict: a bad field,
            a check's change refused, or :data:`CHANGED_SINCE_OPENED`.
    """
    async with UnitOfWork.begin(engine) as uow:
        conn = uow.connection
        row = await own_channel(conn, project_ids, channel_id)
        if expected and expected != channel_version(row, await uow.dashboard.routed_checks(channel_id)):
            raise Conflict(CHANGED_SINCE_OPENED)
        clean = await validate_channel(
            body, partial=True, allow_private=allow_private, urls=urls, stored_url=row["url"]
        )
        await update_channel(conn, channel_id, clean)
        project_id = row["project_id"]
        ids = [int(r["id"]) for r in await uow.checks.query(project_id)]
        routes = await check_service.channels_of(conn, ids)
        for check_id in ids:
            if (channel_id in routes[check_id]) == (check_id in routed):
                continue
            new = [c for c in routes[check_id] if c != channel_id]
            if check_id in routed:
                new.append(channel_id)
            await check_service.update_check(conn, project_id, check_id, {"channels": ",".join(new)}, now)


# -- the management API's channel use cases: one unit of work each ------------------------------


async def channels_of_project(engine: Engine, project_id: int, urls: ChannelUrls) -> list[dict[str, Any]]:
    """:func:`list_channels` in a read of its own."""
    async with UnitOfWork.read(engine) as uow:
        return await list_channels(uow.connection, project_id, urls)


async def find_channel(engine: Engine, project_id: int, channel_id: str) -> dict[str, Any]:
    """:func:`get_channel` in a read of its own.

    Raises:
        NotFound: no such channel in the project.
    """
    async with UnitOfWork.read(engine) as uow:
        return await get_channel(uow.connection, project_id, channel_id)


async def change_channel(
    engine: Engine, project_id: int, channel_id: str, values: dict[str, Any]
) -> dict[str, Any]:
    """Set the validated ``values`` of the project's channel (:func:`update_channel`) in one
    transaction; its new row.

    Raises:
        NotFound: no such channel in the project (deleted meanwhile, say).
    """
    async with UnitOfWork.begin(engine) as uow:
        await get_channel(uow.connection, project_id, channel_id)
        await update_channel(uow.connection, channel_id, values)
        return await get_channel(uow.connection, project_id, channel_id)


async def remove_channel(engine: Engine, project_id: int, channel_id: str) -> dict[str, Any]:
    """Delete the project's channel (:func:`delete_channel`); its row as it was.

    Raises:
        NotFound: no such channel in the project. Conflict: as :func:`delete_channel`.
    """
    async with UnitOfWork.begin(engine) as uow:
        row = await get_channel(uow.connection, project_id, channel_id)
        await delete_channel(uow.connection, project_id, channel_id)
        return row
