"""``/api/v3/checks/…``: checks, their pings, flips, runs and alerts (DESIGN §9).

The same controller serves ``/api/v1/`` and ``/api/v2/`` (Healthchecks' older versions, with
their differences: :func:`monitor.http.api.common.api_version`). A check is addressed by its
uuid, or — for reading the check, its flips and runs — by its ``unique_key``, which is all a
read-only key sees. A malformed identifier answers 404, as Healthchecks' URL patterns do.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from litestar import Controller, Request, Response, delete, get, post
from litestar.di import Provide
from litestar.params import Parameter

from monitor.domain.errors import ValidationError
from monitor.http.api.check_types import (
    AlertOut,
    AlertsPage,
    CheckOut,
    ChecksPage,
    FlipOut,
    FlipsPage,
    PingOut,
    PingsPage,
    RunOut,
    RunsPage,
    check_out,
    checks_out,
    next_of,
    typed,
)
from monitor.http.api.common import (
    API_KEY,
    API_KEY_SECURITY,
    FLIP_SECONDS,
    FLIP_TIMESTAMP,
    INSTANT,
    ApiKey,
    api_version,
    instant_param,
    json_body,
    limit_param,
    provide_api_key,
    read_write_key_required,
    services_of,
    write_key_required,
)
from monitor.http.api.paging import decode_cursor, paged
from monitor.services import checks as check_service
from monitor.services import history

Req = Request[Any, Any, Any]


def _view(request: Req, *, readonly: bool = False) -> check_service.View:
    services = services_of(request.app.state)
    return check_service.View(
        now=services.clock.now(), settings=services.settings, readonly=readonly, version=api_version(request)
    )


def _versioned(request: Req, data: Any) -> Any:
    """v1 and v2 derive the slug from the name on create and update (Healthchecks' ``_update``);
    a slug given explicitly wins."""
    if api_version(request) < 3 and isinstance(data, dict) and isinstance(data.get("name"), str):
        data = {"slug": check_service.slugify(data["name"]), **data}
    return data


async def _state_change_body(request: Req) -> None:
    """``/pause`` and ``/resume`` take no fields, but a body they get must be a JSON object
    (Healthchecks: ``json validation error: value is not an object``)."""
    data = await json_body(request)
    if not isinstance(data, dict):
        raise ValidationError("body", "must be a JSON object")


class ChecksController(Controller):
    path = "/api/v3/checks"
    tags = ("checks",)
    dependencies = {API_KEY: Provide(provide_api_key)}  # noqa: RUF012 (Litestar reads it)
    security = API_KEY_SECURITY

    @get("/", summary="List checks")
    async def list_checks(
        self,
        request: Req,
        key: ApiKey,
        tag: list[str] | None = Parameter(query="tag", default=None, required=False),
        slug: str | None = Parameter(query="slug", default=None, required=False),
        limit: str | None = None,
        cursor: str | None = None,
    ) -> ChecksPage:
        """Every check of the project, oldest first, as Healthchecks lists them; ``?limit=``
        (1-1000) pages them: the answer then has ``next`` (with ``cursor=``) while more follow."""
        most = limit_param(limit) if limit is not None else None
        after = decode_cursor(cursor, (int,), request)
        services = services_of(request.app.state)
        found = await check_service.list_checks(
            services.engine,
            key.project_id,
            _view(request, readonly=key.read_only),
            tags=list(dict.fromkeys(tag or ())),
            slug=slug,
            after_id=after[0] if after else None,
            limit=most + 1 if most is not None else None,
        )
        shown, extra = paged(request, services.settings.base_url, found, most, lambda r: [r[0]])
        return ChecksPage(checks=checks_out([body for _, body in shown]), next=next_of(extra))

    @post(
        "/",
        summary="Create a check (or upsert with unique); a list creates several",
        guards=[write_key_required],
    )
    async def create_check(self, request: Req, key: ApiKey) -> Response[CheckOut | ChecksPage]:
        """One check (201, or 200 for an upsert match), or with a JSON list of up to 1000
        checks all of them in one transaction: 201 ``{"checks": [...]}`` in the order given,
        or nothing and 400 ``{"error": "[<index>].<field>: <problem>"}``."""
        data = _versioned(request, await json_body(request))
        services = services_of(request.app.state)
        shards = services.settings.shards
        if isinstance(data, list):
            if not any(isinstance(item, dict) for item in data):  # not a list of checks at all
                raise ValidationError(
                    "body", "must be a JSON object, or a non-empty list of JSON objects (several checks)"
                )
            for index, item in enumerate(data):  # a list of checks, one of them not a check
                if not isinstance(item, dict):
                    raise ValidationError(
                        f"[{index}]", f"must be a JSON object (a check), got {type(item).__name__}"
                    )
            bodies = await check_service.create_checks(
                services.engine, key.project_id, data, _view(request), shards=shards
            )
            return Response(ChecksPage(checks=checks_out(bodies)), status_code=201)
        body, created = await check_service.create_check(
            services.engine, key.project_id, data, _view(request), shards=shards
        )
        return Response(check_out(body), status_code=201 if created else 200)

    @get("/{uuid:str}", summary="Get a check (by uuid or unique_key)")
    async def get_check(self, request: Req, key: ApiKey, uuid: str) -> CheckOut:
        services = services_of(request.app.state)
        return check_out(
            await check_service.show_check(
                services.engine, key.project_id, uuid, _view(request, readonly=key.read_only)
            )
        )

    @post(
        "/{uuid:str}",
        summary="Update a check (only the given fields)",
        status_code=200,
        guards=[write_key_required],
    )
    async def update_check(self, request: Req, key: ApiKey, uuid: str) -> CheckOut:
        services = services_of(request.app.state)
        uuid = await check_service.check_uuid(services.engine, key.project_id, uuid)
        data = _versioned(request, await json_body(request))
        return check_out(
            await check_service.change_check(services.engine, key.project_id, uuid, data, _view(request))
        )

    @delete("/{uuid:str}", summary="Delete a check", status_code=200, guards=[write_key_required])
    async def delete_check(self, request: Req, key: ApiKey, uuid: str) -> CheckOut:
        services = services_of(request.app.state)
        uuid = await check_service.check_uuid(services.engine, key.project_id, uuid)
        return check_out(
            await check_service.remove_check(services.engine, key.project_id, uuid, _view(request))
        )

    @post("/{uuid:str}/pause", summary="Pause a check", status_code=200, guards=[write_key_required])
    async def pause(self, request: Req, key: ApiKey, uuid: str) -> CheckOut:
        return await self._set_paused(request, key, uuid, paused=True)

    @post(
        "/{uuid:str}/resume",
        summary="Resume a paused check (409 if not paused)",
        status_code=200,
        guards=[write_key_required],
    )
    async def resume(self, request: Req, key: ApiKey, uuid: str) -> CheckOut:
        return await self._set_paused(request, key, uuid, paused=False)

    async def _set_paused(self, request: Req, key: ApiKey, uuid: str, *, paused: bool) -> CheckOut:
        services = services_of(request.app.state)
        uuid = await check_service.check_uuid(services.engine, key.project_id, uuid)
        await _state_change_body(request)
        return check_out(
            await check_service.set_paused(
                services.engine, key.project_id, uuid, _view(request), paused=paused
            )
        )

    @get("/{uuid:str}/pings/", summary="The check's pings, newest first", guards=[read_write_key_required])
    async def pings(
        self, request: Req, key: ApiKey, uuid: str, limit: str | None = None, cursor: str | None = None
    ) -> PingsPage:
        most = limit_param(limit)
        after = decode_cursor(cursor, (int,), request, int_max=history.MAX_PING_NUMBER)
        services = services_of(request.app.state)
        base_url = services.settings.base_url
        pings = await check_service.pings_of(
            services.engine, key.project_id, uuid, base_url, most + 1, before=after[0] if after else None
        )
        pings, extra = paged(request, base_url, pings, most, lambda p: [p["n"]])
        return PingsPage(pings=typed(pings, PingOut), next=next_of(extra))

    @get(
        "/{uuid:str}/pings/{n:int}/body",
        summary="A ping's stored body",
        media_type="text/plain",
        guards=[read_write_key_required],
    )
    async def ping_body(self, request: Req, key: ApiKey, uuid: str, n: int) -> Response[bytes]:
        services = services_of(request.app.state)
        body = await check_service.ping_body_of(services.engine, key.project_id, uuid, n)
        return Response(body, media_type="text/plain")

    @get("/{uuid:str}/flips/", summary="The check's flips, newest first (by uuid or unique_key)")
    async def flips(
        self,
        request: Req,
        key: ApiKey,
        uuid: str,
        limit: str | None = None,
        seconds: str | None = Parameter(default=None, required=False, schema_extra=FLIP_SECONDS),
        start: str | None = Parameter(default=None, required=False, schema_extra=FLIP_TIMESTAMP),
        end: str | None = Parameter(default=None, required=False, schema_extra=FLIP_TIMESTAMP),
        cursor: str | None = None,
    ) -> FlipsPage:
        """``?seconds=`` (0-31536000: the last N seconds), ``?start=`` (flips at or after) and
        ``?end=`` (flips before) UNIX timestamps (0-10000000000), as Healthchecks' FlipsFiltersForm;
        a bad value is a 400 naming the parameter. ``?limit=`` pages them (``next``/``cursor=``)."""
        most = limit_param(limit)
        after = decode_cursor(cursor, (int,), request)
        services = services_of(request.app.state)
        window = history.flip_window(now=services.clock.now(), seconds=seconds, start=start, end=end)
        flips, ids = await check_service.flips_of(
            services.engine, key.project_id, uuid, most + 1, after[0] if after else None, window=window
        )
        keyed, extra = paged(
            request, services.settings.base_url, list(zip(flips, ids, strict=True)), most, lambda f: [f[1]]
        )
        return FlipsPage(flips=typed([f for f, _ in keyed], FlipOut), next=next_of(extra))

    @get("/{uuid:str}/runs/", summary="The check's runs by scheduled time, newest first")
    async def runs(
        self,
        request: Req,
        key: ApiKey,
        uuid: str,
        limit: str | None = None,
        from_: str | None = Parameter(query="from", default=None, required=False, schema_extra=INSTANT),
        to: str | None = Parameter(default=None, required=False, schema_extra=INSTANT),
        cursor: str | None = None,
    ) -> RunsPage:
        most = limit_param(limit)
        after = decode_cursor(cursor, (datetime, datetime, str), request)
        services = services_of(request.app.state)
        runs, keys = await check_service.runs_of(
            services.engine,
            key.project_id,
            uuid,
            most + 1,
            instant_param("from", from_),
            instant_param("to", to),
            (after[0], after[1], after[2]) if after else None,
        )
        keyed, extra = paged(
            request,
            services.settings.base_url,
            list(zip(runs, keys, strict=True)),
            most,
            lambda r: list(r[1]),
        )
        return RunsPage(runs=typed([r for r, _ in keyed], RunOut), next=next_of(extra))

    @get(
        "/{uuid:str}/alerts/",
        summary="The check's alerts with their notifications, newest first",
        guards=[read_write_key_required],
    )
    async def alerts(
        self, request: Req, key: ApiKey, uuid: str, limit: str | None = None, cursor: str | None = None
    ) -> AlertsPage:
        # an alert's message carries the last ping's log tail: read-write keys only, as pings
        most = limit_param(limit)
        after = decode_cursor(cursor, (int,), request)
        services = services_of(request.app.state)
        alerts = await check_service.alerts_of(
            services.engine, key.project_id, uuid, most + 1, before=after[0] if after else None
        )
        alerts, extra = paged(request, services.settings.base_url, alerts, most, lambda a: [a["id"]])
        return AlertsPage(alerts=typed(alerts, AlertOut), next=next_of(extra))
