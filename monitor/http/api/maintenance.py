"""``/api/v3/maintenance/…``: maintenance windows.

The body is typed (:class:`WindowIn`): Litestar decodes and checks each field's shape (400
``{"error": "<field>: <problem>"}``); ``monitor.services.maintenance`` then checks what no type
states (one-off or recurring, end after start, the schedule's grammar, the check's existence).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, Response, delete, get, post
from litestar.di import Provide
from litestar.params import KwargDefinition

from monitor.http.api.common import (
    API_KEY,
    API_KEY_SECURITY,
    MAX_JSON_BODY,
    ApiKey,
    error_responses,
    provide_api_key,
    services_of,
    write_key_required,
)
from monitor.http.api.paging import CURSOR_PARAMETER, LIMIT_PARAMETER, page_in_order
from monitor.http.cron import DIALECT_PATTERN, ZONES
from monitor.services import checks as check_service
from monitor.services import maintenance as maintenance_service

Req = Request[Any, Any, Any]

UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
INSTANT_PATTERN = (
    r"^20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9])$"
)


def _doc(**schema: Any) -> KwargDefinition:
    """OpenAPI-only constraints: ``validate_window`` enforces them, with its own messages (JSON
    Schema keywords apply only to values of their type, so the JSON shapes stay the types')."""
    return KwargDefinition(schema_extra=schema)


class WindowIn(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A new window: ``start`` and ``end`` (one-off), or ``schedule`` and ``duration`` (recurring)."""

    name: Annotated[str | msgspec.UnsetType, _doc(maxLength=100)] = msgspec.UNSET
    check: Annotated[str | msgspec.UnsetType | None, _doc(pattern=UUID_PATTERN)] = msgspec.UNSET
    """A check's uuid: the window mutes that check only; null or absent: every check."""
    start: Annotated[str | msgspec.UnsetType, _doc(pattern=INSTANT_PATTERN)] = msgspec.UNSET
    """One-off: ISO 8601 with an offset or Z (2000-01-01 to 9000-01-01)."""
    end: Annotated[str | msgspec.UnsetType, _doc(pattern=INSTANT_PATTERN)] = msgspec.UNSET
    """One-off: after ``start``, at most 366 days later."""
    schedule: Annotated[str | msgspec.UnsetType, _doc(maxLength=200)] = msgspec.UNSET
    """Recurring: when each occurrence starts (a cron expression in ``dialect``)."""
    dialect: Annotated[str | msgspec.UnsetType, _doc(pattern=DIALECT_PATTERN)] = msgspec.UNSET
    tz: Annotated[str | msgspec.UnsetType, _doc(enum=ZONES)] = msgspec.UNSET
    duration: Annotated[
        int | msgspec.UnsetType, _doc(minimum=1, maximum=maintenance_service.MAX_DURATION_S)
    ] = msgspec.UNSET
    """Recurring: seconds each occurrence lasts (shorter than the schedule's gap between ticks)."""
    api_key: str | msgspec.UnsetType = msgspec.UNSET
    """Healthchecks' other place for the key (``X-Api-Key`` is preferred)."""


class Occurrence(msgspec.Struct, frozen=True):
    start: str
    end: str


class Window(msgspec.Struct, frozen=True, omit_defaults=True):
    """A window as answered; ``start``/``end`` (one-off) or ``schedule``/``dialect``/``duration``
    (recurring). A read-only key sees ``check_unique_key`` instead of the check's uuid."""

    id: str
    name: str
    check: str | None
    tz: str
    active: bool
    next: Occurrence | None
    """The occurrence going on or coming next."""
    start: str | None = None
    end: str | None = None
    schedule: str | None = None
    dialect: str | None = None
    duration: int | None = None
    check_unique_key: str | None = None


class WindowList(msgspec.Struct, frozen=True, omit_defaults=True):
    maintenance: list[Window]
    next: str | None = None
    """The next page's URL (``cursor=``), while more follow."""


def _for_key(window: dict[str, Any], read_only: bool) -> dict[str, Any]:
    """A read-only key sees a window's check by its ``unique_key``, never its uuid (the uuid is
    the check's ping credential)."""
    if read_only and window.get("check"):
        window = {**window, "check": None, "check_unique_key": check_service.unique_key(window["check"])}
    return window


class MaintenanceController(Controller):
    path = "/api/v3/maintenance"
    tags = ("maintenance",)
    dependencies = {API_KEY: Provide(provide_api_key)}  # noqa: RUF012 (Litestar reads it)
    security = API_KEY_SECURITY
    request_max_body_size = MAX_JSON_BODY

    @get("/", summary="List maintenance windows", responses=error_responses(400, 401))
    async def list_windows(
        self,
        request: Req,
        key: ApiKey,
        limit: Annotated[str | None, LIMIT_PARAMETER] = None,
        cursor: Annotated[str | None, CURSOR_PARAMETER] = None,
    ) -> WindowList:
        """Oldest first; ``?limit=`` pages them (``next`` with ``cursor=`` while more follow)."""
        services = services_of(request.app.state)
        now = services.clock.now()
        rows = await maintenance_service.windows_of(services.engine, key.project_id)
        windows = [_for_key(maintenance_service.window_to_dict(r, now), key.read_only) for r in rows]
        page, extra = page_in_order(request, services.settings.base_url, windows, limit, cursor)
        return msgspec.convert({"maintenance": page, **extra}, WindowList)

    @post(
        "/",
        summary="Create a maintenance window (one-off or recurring)",
        guards=[write_key_required],
        responses=error_responses(400, 401, 403, 413),
    )
    async def create_window(self, request: Req, key: ApiKey, data: WindowIn) -> Response[Window]:
        services = services_of(request.app.state)
        now = services.clock.now()
        body: dict[str, Any] = msgspec.to_builtins(data)
        body.pop("api_key", None)
        row = await maintenance_service.add_window(services.engine, key.project_id, body, now)
        return Response(
            msgspec.convert(maintenance_service.window_to_dict(row, now), Window), status_code=201
        )

    @get("/{window_id:str}", summary="Get a maintenance window", responses=error_responses(401, 404))
    async def get_window(self, request: Req, key: ApiKey, window_id: str) -> Window:
        services = services_of(request.app.state)
        row = await maintenance_service.find_window(services.engine, key.project_id, window_id)
        window = maintenance_service.window_to_dict(row, services.clock.now())
        return msgspec.convert(_for_key(window, key.read_only), Window)

    @delete(
        "/{window_id:str}",
        summary="Delete a maintenance window",
        status_code=200,
        guards=[write_key_required],
        responses=error_responses(401, 403, 404),
    )
    async def delete_window(self, request: Req, key: ApiKey, window_id: str) -> Window:
        services = services_of(request.app.state)
        now = services.clock.now()
        row = await maintenance_service.remove_window(
            services.engine, key.project_id, window_id, now, settings=services.settings
        )
        return msgspec.convert(maintenance_service.window_to_dict(row, now), Window)
