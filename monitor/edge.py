"""What the two web-facing edges share: the request context, API-key checks, the uuid pattern.

``monitor.http`` (ping and management API) and ``monitor.web`` (dashboard, badges) must not import
each other (docs/architecture.md); both import this module instead. It imports services, domain
and settings only, never an edge.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from litestar import Request
from litestar.datastructures import State

from monitor.domain.clock import Clock
from monitor.notify.base import ChannelUrls, Notifier
from monitor.services import Engine, projects
from monitor.settings import Settings

UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
"""A check's public id (or a ``rid``): the canonical 8-4-4-4-12 hex form, any case."""


class NotAuthenticated(Exception):
    """Missing or wrong ``X-Api-Key`` (401)."""


class Forbidden(Exception):
    """A read-only key tried to write (403)."""


class PayloadTooLarge(Exception):
    """A management request body over the limit (413)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Services:
    """What handlers need, put on ``app.state.services`` by the app's lifespan."""

    engine: Engine
    settings: Settings
    clock: Clock
    notifier: Notifier
    channel_urls: ChannelUrls
    """The channel URL rules (Apprise's), handed to ``services.channels``."""


def services_of(state: State) -> Services:
    """The :class:`Services` the lifespan put on ``state`` (the app's ``state``)."""
    services: Services = state.services
    return services


async def authenticate(
    request: Request[Any, Any, Any], *, write: bool, read_only_allowed: bool = True
) -> projects.ApiKey:
    """Resolve ``X-Api-Key`` (or Healthchecks' ``api_key`` in a JSON body) to its project (DESIGN §9).

    ``read_only_allowed=False`` marks what Healthchecks keeps from read-only keys even for
    reading — pings, ping bodies, channels (and our alerts, whose messages carry the log
    tail): such a key gets 401 there, as in Healthchecks (its ``@authorize`` views).

    Raises:
        NotAuthenticated: the key is missing or names no key, or a read-only key reads what it
            may not (401).
        Forbidden: ``write`` is set and the key is read-only (403).
    """
    found = await resolve_api_key(request)
    check_key(found, write=write, read_only_allowed=read_only_allowed)
    return found


async def resolve_api_key(request: Request[Any, Any, Any]) -> projects.ApiKey:
    """The project key ``X-Api-Key`` (or a JSON body's ``api_key``) names, whatever its kind.

    Raises:
        NotAuthenticated: the key is missing or names no key (401).
    """
    key = request.headers.get("x-api-key") or await _body_api_key(request)
    if not key:
        raise NotAuthenticated("X-Api-Key: missing (send the project's API key in the X-Api-Key header)")
    services = services_of(request.app.state)
    found = await projects.authenticate_key(services.engine, key)
    if found is None:
        raise NotAuthenticated("X-Api-Key: wrong api key")
    return found


def check_key(found: projects.ApiKey, *, write: bool, read_only_allowed: bool = True) -> None:
    """What a resolved key may do (:func:`authenticate`'s rules).

    Raises:
        Forbidden: ``write`` is set and the key is read-only (403).
        NotAuthenticated: ``read_only_allowed`` is unset and the key is read-only (401).
    """
    if write and found.read_only:
        raise Forbidden("X-Api-Key: a read-only key cannot change anything")
    if not read_only_allowed and found.read_only:
        raise NotAuthenticated(
            "X-Api-Key: a read-only key cannot read this (pings, ping bodies, alerts and channels "
            "need the read-write key)"
        )


BODY_KEY_LIMIT = 1_000_000
"""Largest JSON body searched for an ``api_key`` (the management API's body limit)."""


async def _body_api_key(request: Request[Any, Any, Any]) -> str | None:
    """Healthchecks' other way to send the key: ``api_key`` in a JSON object body (its
    ``authorize`` decorators read it when the ``X-Api-Key`` header is absent)."""
    if request.method not in ("POST", "DELETE", "GET"):
        return None
    length = request.headers.get("content-length")
    if not length or not length.isdigit() or not 0 < int(length) <= BODY_KEY_LIMIT:
        return None
    try:
        data = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None  # the handler reports the bad body; here it only holds no key
    key = data.get("api_key") if isinstance(data, dict) else None
    return key if isinstance(key, str) and key else None
