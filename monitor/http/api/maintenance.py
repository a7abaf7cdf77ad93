"""``/api/v3/maintenance/…``: maintenance windows."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, delete, get, post

from monitor.http.api.common import authenticate, json_body, services_of
from monitor.http.api.paging import page_in_order
from monitor.services import checks as check_service
from monitor.services import maintenance as maintenance_service

Req = Request[Any, Any, Any]


def _for_key(window: dict[str, Any], read_only: bool) -> dict[str, Any]:
    """A read-only key sees a window's check by its ``unique_key``, never its uuid (the uuid is
    the check's ping credential)."""
    if read_only and window.get("check"):
        window = {**window, "check": None, "check_unique_key": check_service.unique_key(window["check"])}
    return window


class MaintenanceController(Controller):
    path = "/api/v3/maintenance"
    tags = ("maintenance",)

    @get("/", summary="List maintenance windows")
    async def list_windows(
        self, request: Req, limit: str | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """Oldest first; ``?limit=`` pages them (``next`` with ``cursor=`` while more follow)."""
        key = await authenticate(request, write=False)
        services = services_of(request.app.state)
        now = services.clock.now()
        async with services.engine.connect() as conn:
            rows = await maintenance_service.list_windows(conn, key.project_id)
        windows = [_for_key(maintenance_service.window_to_dict(r, now), key.read_only) for r in rows]
        page, extra = page_in_order(request, services.settings.base_url, windows, limit, cursor)
        return {"maintenance": page, **extra}

    @post("/", summary="Create a maintenance window (one-off or recurring)")
    async def create_window(self, request: Req) -> Response[dict[str, Any]]:
        key = await authenticate(request, write=True)
        services = services_of(request.app.state)
        now = services.clock.now()
        body = await json_body(request)
        async with services.engine.begin() as conn:
            values = await maintenance_service.validate_window(conn, key.project_id, body, now)
            window_id = await maintenance_service.create_window(conn, key.project_id, values, now)
            row = await maintenance_service.get_window(conn, key.project_id, window_id)
        return Response(maintenance_service.window_to_dict(row, now), status_code=201)

    @get("/{window_id:str}", summary="Get a maintenance window")
    async def get_window(self, request: Req, window_id: str) -> dict[str, Any]:
        key = await authenticate(request, write=False)
        services = services_of(request.app.state)
        async with services.engine.connect() as conn:
            row = await maintenance_service.get_window(conn, key.project_id, window_id)
        return _for_key(maintenance_service.window_to_dict(row, services.clock.now()), key.read_only)

    @delete("/{window_id:str}", summary="Delete a maintenance window", status_code=200)
    async def delete_window(self, request: Req, window_id: str) -> dict[str, Any]:
        key = await authenticate(request, write=True)
        services = services_of(request.app.state)
        now = services.clock.now()
        async with services.engine.begin() as conn:
            row = await maintenance_service.get_window(conn, key.project_id, window_id)
            await maintenance_service.delete_window(conn, row, now, settings=services.settings)
        return maintenance_service.window_to_dict(row, now)
