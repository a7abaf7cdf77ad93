"""``/api/v3/channels/…``: Apprise destinations (DESIGN §7, §9).

Read-write keys only, reading included: Healthchecks refuses its read-only keys here (401).
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, delete, get, post

from monitor.http.api.common import authenticate, json_body, services_of
from monitor.http.api.paging import page_in_order
from monitor.services import channels as channel_service

Req = Request[Any, Any, Any]


class ChannelsController(Controller):
    path = "/api/v3/channels"
    tags = ("channels",)

    @get("/", summary="List channels (secrets masked)")
    async def list_channels(
        self, request: Req, limit: str | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """Oldest first; ``?limit=`` pages them (``next`` with ``cursor=`` while more follow)."""
        key = await authenticate(request, write=False, read_only_allowed=False)
        services = services_of(request.app.state)
        async with services.engine.connect() as conn:
            channels = await channel_service.list_channels(conn, key.project_id, services.channel_urls)
        page, extra = page_in_order(request, services.settings.base_url, channels, limit, cursor)
        return {"channels": page, **extra}

    @post("/", summary="Create a channel")
    async def create_channel(self, request: Req) -> Response[dict[str, Any]]:
        key = await authenticate(request, write=True)
        services = services_of(request.app.state)
        values = await channel_service.validate_channel(
            await json_body(request),
            partial=False,
            allow_private=services.settings.allow_private_targets,
            urls=services.channel_urls,
        )
        async with services.engine.begin() as conn:
            channel_id = await channel_service.create_channel(
                conn, key.project_id, values, services.clock.now()
            )
            row = await channel_service.get_channel(conn, key.project_id, channel_id)
        return Response(channel_service.channel_to_dict(row, services.channel_urls), status_code=201)

    @get("/{channel_id:str}", summary="Get a channel")
    async def get_channel(self, request: Req, channel_id: str) -> dict[str, Any]:
        key = await authenticate(request, write=False, read_only_allowed=False)
        services = services_of(request.app.state)
        async with services.engine.connect() as conn:
            return channel_service.channel_to_dict(
                await channel_service.get_channel(conn, key.project_id, channel_id), services.channel_urls
            )

    @post("/{channel_id:str}", summary="Update a channel", status_code=200)
    async def update_channel(self, request: Req, channel_id: str) -> dict[str, Any]:
        key = await authenticate(request, write=True)
        services = services_of(request.app.state)
        async with services.engine.connect() as conn:
            stored = await channel_service.get_channel(conn, key.project_id, channel_id)
        values = await channel_service.validate_channel(
            await json_body(request),
            partial=True,
            allow_private=services.settings.allow_private_targets,
            urls=services.channel_urls,
            stored_url=stored["url"],
        )
        async with services.engine.begin() as conn:
            await channel_service.get_channel(conn, key.project_id, channel_id)
            await channel_service.update_channel(conn, channel_id, values)
            return channel_service.channel_to_dict(
                await channel_service.get_channel(conn, key.project_id, channel_id), services.channel_urls
            )

    @delete("/{channel_id:str}", summary="Delete a channel", status_code=200)
    async def delete_channel(self, request: Req, channel_id: str) -> dict[str, Any]:
        key = await authenticate(request, write=True)
        services = services_of(request.app.state)
        async with services.engine.begin() as conn:
            row = await channel_service.get_channel(conn, key.project_id, channel_id)
            await channel_service.delete_channel(conn, key.project_id, channel_id)
        return channel_service.channel_to_dict(row, services.channel_urls)

    @post("/{channel_id:str}/test", summary="Send a test notification now", status_code=200)
    async def test_channel(self, request: Req, channel_id: str) -> Response[dict[str, Any]]:
        key = await authenticate(request, write=True)
        services = services_of(request.app.state)
        async with services.engine.connect() as conn:
            row = await channel_service.get_channel(conn, key.project_id, channel_id)
        result = await channel_service.test_channel(
            services.notifier, row, timeout=services.settings.notify_timeout
        )
        if result.ok:
            return Response({"ok": True, "error": None}, status_code=200)
        error = result.error or "delivery failed"
        # a refusal already names the field ("url: <host> resolves to a private ... address")
        message = error if error.startswith("url: ") else f"url: delivery failed: {error}"
        return Response({"ok": False, "error": message}, status_code=400)
