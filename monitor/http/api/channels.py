"""``/api/v3/channels/…``: Apprise destinations (DESIGN §7, §9).

Read-write keys only, reading included: Healthchecks refuses its read-only keys here (401).
Bodies are typed (:class:`ChannelIn`, :class:`ChannelPatch`): Litestar decodes and checks their
shapes (400 ``{"error": "<field>: <problem>"}``); ``monitor.services.channels`` then checks what
no type states (the URL's scheme and target, masked secrets).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, Response, delete, get, post
from litestar.di import Provide
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIType, Schema
from litestar.params import KwargDefinition, Parameter

from monitor.http.api.common import (
    API_KEY,
    API_KEY_SECURITY,
    MAX_JSON_BODY,
    ApiKey,
    error_responses,
    provide_api_key,
    read_write_key_required,
    services_of,
    write_key_required,
)
from monitor.http.api.paging import CURSOR_PARAMETER, LIMIT_PARAMETER, page_in_order
from monitor.services import channels as channel_service

Req = Request[Any, Any, Any]

# The constraints below document what ``validate_channel`` accepts; it enforces them (with its
# own messages), so the types check only the JSON shapes.
KINDS_PATTERN = r"^[ ,]*(({k})[ ,]*)*$".format(k="|".join(sorted(channel_service.ALERT_KINDS)))


def _doc(**schema: Any) -> KwargDefinition:
    """OpenAPI-only constraints (JSON Schema keywords apply only to values of their type)."""
    return KwargDefinition(schema_extra=schema)


URL_DOC = _doc(minLength=1, maxLength=2000)
NAME_DOC = _doc(maxLength=100, pattern="^[^\\x00]*$")
KINDS_DOC = _doc(
    pattern=KINDS_PATTERN, items=Schema(type=OpenAPIType.STRING, enum=sorted(channel_service.ALERT_KINDS))
)


class ChannelPatch(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An update: only the fields given change."""

    url: Annotated[str | msgspec.UnsetType, URL_DOC] = msgspec.UNSET
    """An Apprise URL (``json://host/path``, ``mailto://…``); its masked form as read keeps the
    stored secrets."""
    name: Annotated[str | msgspec.UnsetType | None, NAME_DOC] = msgspec.UNSET
    """Empty or null: a name derived from the URL."""
    kinds: Annotated[list[str] | str | msgspec.UnsetType | None, KINDS_DOC] = msgspec.UNSET
    """Alert kinds routed here (a list or a comma-separated string); empty or null: all."""
    default: bool | msgspec.UnsetType = msgspec.UNSET
    """A project default: routed to every check created without ``channels``."""
    api_key: str | msgspec.UnsetType = msgspec.UNSET
    """Healthchecks' other place for the key (``X-Api-Key`` is preferred)."""


class ChannelIn(ChannelPatch, kw_only=True):
    """A new channel."""

    url: Annotated[str, URL_DOC]


class Channel(msgspec.Struct, frozen=True):
    """A channel as answered (Healthchecks' integration shape ``{id, name, kind}`` plus ours)."""

    id: str
    name: str
    kind: str
    """Healthchecks' integration kind of the URL's scheme (``webhook``, ``email``, ``apprise``…)."""
    url: str
    """The URL with its secrets shown as ``****``."""
    kinds: list[str]
    default: bool


class ChannelList(msgspec.Struct, frozen=True, omit_defaults=True):
    channels: list[Channel]
    next: str | None = None
    """The next page's URL (``cursor=``), while more follow."""


class TestResult(msgspec.Struct, frozen=True):
    ok: bool
    error: str | None


def _values(body: ChannelPatch | None) -> dict[str, Any]:
    """The body's given fields as the JSON object ``validate_channel`` reads."""
    if body is None:
        return {}
    given: dict[str, Any] = msgspec.to_builtins(body)
    given.pop("api_key", None)
    return given


def _channel(row: Any, urls: Any) -> Channel:
    return msgspec.convert(channel_service.channel_to_dict(row, urls), Channel)


class ChannelsController(Controller):
    path = "/api/v3/channels"
    tags = ("channels",)
    dependencies = {API_KEY: Provide(provide_api_key)}  # noqa: RUF012 (Litestar reads it)
    security = API_KEY_SECURITY
    request_max_body_size = MAX_JSON_BODY

    @get(
        "/",
        summary="List channels (secrets masked)",
        guards=[read_write_key_required],
        responses=error_responses(400, 401),
    )
    async def list_channels(
        self,
        request: Req,
        key: ApiKey,
        limit: Annotated[str | None, LIMIT_PARAMETER] = None,
        cursor: Annotated[str | None, CURSOR_PARAMETER] = None,
    ) -> ChannelList:
        """Oldest first; ``?limit=`` pages them (``next`` with ``cursor=`` while more follow)."""
        services = services_of(request.app.state)
        channels = await channel_service.channels_of(services.engine, key.project_id, services.channel_urls)
        page, extra = page_in_order(request, services.settings.base_url, channels, limit, cursor)
        return msgspec.convert({"channels": page, **extra}, ChannelList)

    @post(
        "/",
        summary="Create a channel",
        guards=[write_key_required],
        responses=error_responses(400, 401, 403, 413),
    )
    async def create_channel(self, request: Req, key: ApiKey, data: ChannelIn) -> Response[Channel]:
        services = services_of(request.app.state)
        values = await channel_service.validate_channel(
            _values(data),
            partial=False,
            allow_private=services.settings.allow_private_targets,
            urls=services.channel_urls,
        )
        row = await channel_service.add_channel(services.engine, key.project_id, values, services.clock.now())
        return Response(_channel(row, services.channel_urls), status_code=201)

    @get(
        "/{channel_id:str}",
        summary="Get a channel",
        guards=[read_write_key_required],
        responses=error_responses(401, 404),
    )
    async def get_channel(
        self, request: Req, key: ApiKey, channel_id: Annotated[str, Parameter(description="The channel's id")]
    ) -> Channel:
        services = services_of(request.app.state)
        return _channel(
            await channel_service.channel_of(services.engine, key.project_id, channel_id),
            services.channel_urls,
        )

    @post(
        "/{channel_id:str}",
        summary="Update a channel",
        status_code=200,
        guards=[write_key_required],
        responses=error_responses(400, 401, 403, 404, 413),
    )
    async def update_channel(
        self, request: Req, key: ApiKey, channel_id: str, data: ChannelPatch | None = None
    ) -> Channel:
        services = services_of(request.app.state)
        stored = await channel_service.channel_of(services.engine, key.project_id, channel_id)
        values = await channel_service.validate_channel(
            _values(data),
            partial=True,
            allow_private=services.settings.allow_private_targets,
            urls=services.channel_urls,
            stored_url=stored["url"],
        )
        row = await channel_service.change_channel(services.engine, key.project_id, channel_id, values)
        return _channel(row, services.channel_urls)

    @delete(
        "/{channel_id:str}",
        summary="Delete a channel",
        status_code=200,
        guards=[write_key_required],
        responses=error_responses(401, 403, 404, 409),
    )
    async def delete_channel(self, request: Req, key: ApiKey, channel_id: str) -> Channel:
        services = services_of(request.app.state)
        row = await channel_service.remove_channel(services.engine, key.project_id, channel_id)
        return _channel(row, services.channel_urls)

    @post(
        "/{channel_id:str}/test",
        summary="Send a test notification now",
        status_code=200,
        guards=[write_key_required],
        responses={
            **error_responses(401, 403, 404),
            400: ResponseSpec(
                TestResult, description="Not delivered: `error` says why", generate_examples=False
            ),
        },
    )
    async def test_channel(self, request: Req, key: ApiKey, channel_id: str) -> Response[TestResult]:
        """200 ``{"ok": true, "error": null}`` once delivered; 400 ``{"ok": false, "error":
        "url: …"}`` when the destination refused or could not be reached."""
        services = services_of(request.app.state)
        row = await channel_service.channel_of(services.engine, key.project_id, channel_id)
        result = await channel_service.test_channel(
            services.notifier, row, timeout=services.settings.notify_timeout
        )
        if result.ok:
            return Response(TestResult(ok=True, error=None), status_code=200)
        error = result.error or "delivery failed"
        # a refusal already names the field ("url: <host> resolves to a private ... address")
        message = error if error.startswith("url: ") else f"url: delivery failed: {error}"
        return Response(TestResult(ok=False, error=message), status_code=400)
