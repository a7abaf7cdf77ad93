"""Shared pieces of the management API: the request context, key checks and JSON bodies."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from litestar import Request
from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.domain.clock import Clock
from monitor.domain.errors import ValidationError
from monitor.http.errors import Forbidden, NotAuthenticated, PayloadTooLarge
from monitor.notify.base import Notifier
from monitor.services import projects
from monitor.services.history import DEFAULT_LIMIT, MAX_LIMIT
from monitor.settings import Settings

MAX_JSON_BODY = 1_000_000


@dataclass(frozen=True, kw_only=True, slots=True)
class Services:
    """What handlers need, put on ``app.state.services`` by the app's lifespan."""

    engine: AsyncEngine
    settings: Settings
    clock: Clock
    notifier: Notifier


def services_of(state: State) -> Services:
    services: Services = state.services
    return services


API_VERSIONS = (1, 2, 3)


def api_version(request: Request[Any, Any, Any]) -> int:
    """The management API version a request was addressed to (``/api/v1/…`` → 1).

    Healthchecks serves v1, v2 and v3 from the same views; v1 reports a running check as
    ``status: started`` and v1/v2 derive a check's slug from its name.
    """
    parts = request.url.path.split("/")
    if len(parts) > 2 and parts[1] == "api" and parts[2] in ("v1", "v2"):
        return int(parts[2][1])
    return 3


async def authenticate(
    request: Request[Any, Any, Any], *, write: bool, read_only_allowed: bool = True
) -> projects.ApiKey:
    """Resolve ``X-Api-Key``: missing/wrong → 401; a read-only key writing → 403.

    ``read_only_allowed=False`` marks what Healthchecks keeps from read-only keys even for
    reading — pings, ping bodies, channels (and our alerts, whose messages carry the log
    tail): such a key gets 401 there, as in Healthchecks (its ``@authorize`` views).
    """
    key = request.headers.get("x-api-key") or await _body_api_key(request)
    if not key:
        raise NotAuthenticated("X-Api-Key: missing (send the project's API key in the X-Api-Key header)")
    services = services_of(request.app.state)
    async with services.engine.connect() as conn:
        found = await projects.resolve_api_key(conn, key)
    if found is None:
        raise NotAuthenticated("X-Api-Key: wrong api key")
    if write and found.read_only:
        raise Forbidden("X-Api-Key: a read-only key cannot change anything")
    if not read_only_allowed and found.read_only:
        raise NotAuthenticated(
            "X-Api-Key: a read-only key cannot read this (pings, ping bodies, alerts and channels "
            "need the read-write key)"
        )
    return found


async def _body_api_key(request: Request[Any, Any, Any]) -> str | None:
    """Healthchecks' other way to send the key: ``api_key`` in a JSON object body (its
    ``authorize`` decorators read it when the ``X-Api-Key`` header is absent)."""
    if request.method not in ("POST", "DELETE", "GET"):
        return None
    length = request.headers.get("content-length")
    if not length or not length.isdigit() or not 0 < int(length) <= MAX_JSON_BODY:
        return None
    try:
        data = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None  # the handler reports the bad body; here it only holds no key
    key = data.get("api_key") if isinstance(data, dict) else None
    return key if isinstance(key, str) and key else None


async def json_body(request: Request[Any, Any, Any]) -> Any:
    """The request's JSON body (``{}`` when empty).

    Raises:
        ValidationError: ``body: …`` for invalid JSON; PayloadTooLarge over 1 MB.
    """
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > MAX_JSON_BODY:
        raise PayloadTooLarge(f"body: larger than {MAX_JSON_BODY} bytes")
    raw = await request.body()
    if len(raw) > MAX_JSON_BODY:
        raise PayloadTooLarge(f"body: larger than {MAX_JSON_BODY} bytes")
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise ValidationError("body", f"invalid JSON ({error})") from None
    except RecursionError:
        raise ValidationError("body", "invalid JSON (nested too deeply)") from None
    try:
        # "\ud800" is valid JSON but no valid text: it could be neither stored nor echoed.
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("body", "invalid JSON (unpaired UTF-16 surrogate in a string)") from None
    return data


def limit_param(value: str | None) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if not value.isdigit() or not 1 <= int(value) <= MAX_LIMIT:
        raise ValidationError("limit", f"must be an integer between 1 and {MAX_LIMIT}")
    return int(value)


def instant_param(name: str, value: str | None) -> datetime | None:
    if value is None or value == "":
        return None
    try:
        if value.isdigit():
            return datetime.fromtimestamp(int(value), UTC)
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        raise ValidationError(name, "must be ISO 8601 with offset or unix seconds") from None
    if parsed.tzinfo is None:
        raise ValidationError(name, "needs a UTC offset or Z")
    return parsed.astimezone(UTC)
