"""What the two web-facing edges share: the request context, API-key checks, the uuid pattern.

``monitor.http`` (ping and management API) and ``monitor.web`` (dashboard, badges) must not import
each other (docs/architecture.md); both import this module instead. It imports services, domain
and settings only, never an edge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from litestar import Request
from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.domain.clock import Clock
from monitor.notify.base import ChannelUrls, Notifier
from monitor.services import projects
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

    engine: AsyncEngine
    settings: Settings
    clock: Clock
    notifier: Notifier
    channel_urls: ChannelUrls
    """The channel URL rules (Apprise's), handed to ``services.channels``."""


def services_of(state: State) -> Services:
    """The :class:`Services` the lifespan put on ``state`` (the app's ``state``)."""
    services: Services = state.services
    return services


async def authenticate(request: Request[Any, Any, Any], *, write: bool) -> projects.ApiKey:
    """Resolve ``X-Api-Key`` to its project (DESIGN §9).

    Raises:
        NotAuthenticated: the header is missing or names no key (401).
        Forbidden: ``write`` is set and the key is read-only (403).
    """
    key = request.headers.get("x-api-key")
    if not key:
        raise NotAuthenticated("X-Api-Key: missing (send the project's API key in the X-Api-Key header)")
    services = services_of(request.app.state)
    async with services.engine.connect() as conn:
        found = await projects.resolve_api_key(conn, key)
    if found is None:
        raise NotAuthenticated("X-Api-Key: wrong api key")
    if write and found.read_only:
        raise Forbidden("X-Api-Key: a read-only key cannot change anything")
    return found
