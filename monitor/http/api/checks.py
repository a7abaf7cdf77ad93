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
from litestar.params import Parameter
from sqlalchemy import literal, select

from monitor.domain.errors import ValidationError
from monitor.http.api.common import (
    api_version,
    authenticate,
    instant_param,
    json_body,
    limit_param,
    services_of,
)
from monitor.http.api.paging import decode_cursor, paged
from monitor.services import checks as check_service
from monitor.services import hints as hint_service
from monitor.services import history
from monitor.storage import tables as t

Req = Request[Any, Any, Any]


async def _dicts(
    request: Req, conn: Any, rows: list[dict[str, Any]], *, readonly: bool = False
) -> list[dict[str, Any]]:
    services = services_of(request.app.state)
    now = services.clock.now()
    started = await check_service.started_checks(conn, rows, now)
    channels = await check_service.channels_of(conn, [r["id"] for r in rows])
    version = api_version(request)
    hints = await hint_service.hints_of(conn, rows)
    return [
        {
            **check_service.check_to_dict(
                r,
                now=now,
                settings=services.settings,
                started=r["id"] in started,
                channels=channels[r["id"]],
                readonly=readonly,
                version=version,
            ),
            "hints": hints[r["id"]],  # advice from the latest runs (monitor.domain.hints)
        }
        for r in rows
    ]


async def _one(request: Req, project_id: int, ident: str, *, readonly: bool = False) -> dict[str, Any]:
    services = services_of(request.app.state)
    async with services.engine.connect() as conn:
        row = await check_service.find_check_row(conn, project_id, ident, unique_key_allowed=True)
        return (await _dicts(request, conn, [row], readonly=readonly))[0]


async def _uuid_of(request: Req, project_id: int, ident: str) -> str:
    """The uuid of the project's check ``ident`` (a uuid): 404 when malformed or unknown."""
    services = services_of(request.app.state)
    async with services.engine.connect() as conn:
        return str((await check_service.find_check_row(conn, project_id, ident))["uuid"])


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

    @get("/", summary="List checks")
    async def list_checks(
        self,
        request: Req,
        tag: list[str] | None = Parameter(query="tag", default=None, required=False),
        slug: str | None = Parameter(query="slug", default=None, required=False),
        limit: str | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """Every check of the project, oldest first, as Healthchecks lists them; ``?limit=``
        (1-1000) pages them: the answer then has ``next`` (with ``cursor=``) while more follow."""
        key = await authenticate(request, write=False)
        most = limit_param(limit) if limit is not None else None
        after = decode_cursor(cursor, (int,))
        services = services_of(request.app.state)
        c = t.checks.c
        async with services.engine.connect() as conn:
            query = select(t.checks).where(c.project_id == key.project_id)
            if slug is not None:
                if "\x00" in slug:
                    raise ValidationError("slug", "must not contain NUL characters")
                query = query.where(c.slug == slug)
            for wanted in dict.fromkeys(tag or ()):
                if "\x00" in wanted:  # PostgreSQL text cannot hold U+0000
                    raise ValidationError("tag", "must not contain NUL characters")
                # tags are space-separated words: match a whole word
                query = query.where(
                    (literal(" ") + c.tags + literal(" ")).contains(f" {wanted} ", autoescape=True)
                )
            if after is not None:
                query = query.where(c.id > after[0])
            query = query.order_by(c.id)
            if most is not None:
                query = query.limit(most + 1)
            rows = [dict(r) for r in (await conn.execute(query)).mappings().all()]
            rows, extra = paged(request, services.settings.base_url, rows, most, lambda r: [r["id"]])
            return {"checks": await _dicts(request, conn, rows, readonly=key.read_only), **extra}

    @post("/", summary="Create a check (or upsert with unique); a list creates several")
    async def create_check(self, request: Req) -> Response[dict[str, Any]]:
        """One check (201, or 200 for an upsert match), or with a JSON list of up to 1000
        checks all of them in one transaction: 201 ``{"checks": [...]}`` in the order given,
        or nothing and 400 ``{"error": "[<index>].<field>: <problem>"}``."""
        key = await authenticate(request, write=True)
        data = _versioned(request, await json_body(request))
        services = services_of(request.app.state)
        now = services.clock.now()
        async with services.engine.begin() as conn:
            if isinstance(data, list):
                if not data or not all(isinstance(item, dict) for item in data):
                    raise ValidationError(
                        "body", "must be a JSON object, or a non-empty list of JSON objects (several checks)"
                    )
                ids = await check_service.create_many(
                    conn, key.project_id, data, now, shards=services.settings.shards
                )
                found = await conn.execute(select(t.checks).where(t.checks.c.id.in_(ids)))
                by_id = {r["id"]: dict(r) for r in found.mappings().all()}
                return Response(
                    {"checks": await _dicts(request, conn, [by_id[i] for i in ids])}, status_code=201
                )
            check_id, created = await check_service.create_or_upsert(
                conn, key.project_id, data, now, shards=services.settings.shards
            )
            row = (await conn.execute(select(t.checks).where(t.checks.c.id == check_id))).mappings().one()
            body = (await _dicts(request, conn, [dict(row)]))[0]
        return Response(body, status_code=201 if created else 200)

    @get("/{uuid:str}", summary="Get a check (by uuid or unique_key)")
    async def get_check(self, request: Req, uuid: str) -> dict[str, Any]:
        key = await authenticate(request, write=False)
        return await _one(request, key.project_id, uuid, readonly=key.read_only)

    @post("/{uuid:str}", summary="Update a check (only the given fields)", status_code=200)
    async def update_check(self, request: Req, uuid: str) -> dict[str, Any]:
        key = await authenticate(request, write=True)
        uuid = await _uuid_of(request, key.project_id, uuid)
        data = _versioned(request, await json_body(request))
        services = services_of(request.app.state)
        async with services.engine.begin() as conn:
            row = await check_service.get_check_row(conn, key.project_id, uuid)
            await check_service.update_check(conn, key.project_id, row["id"], data, services.clock.now())
        return await _one(request, key.project_id, uuid)

    @delete("/{uuid:str}", summary="Delete a check", status_code=200)
    async def delete_check(self, request: Req, uuid: str) -> dict[str, Any]:
        key = await authenticate(request, write=True)
        uuid = await _uuid_of(request, key.project_id, uuid)
        services = services_of(request.app.state)
        body = await _one(request, key.project_id, uuid)
        async with services.engine.begin() as conn:
            row = await check_service.get_check_row(conn, key.project_id, uuid, lock=True)
            await check_service.delete_check(conn, row["id"])
        return body

    @post("/{uuid:str}/pause", summary="Pause a check", status_code=200)
    async def pause(self, request: Req, uuid: str) -> dict[str, Any]:
        key = await authenticate(request, write=True)
        uuid = await _uuid_of(request, key.project_id, uuid)
        await _state_change_body(request)
        services = services_of(request.app.state)
        async with services.engine.begin() as conn:
            await check_service.pause_check(conn, key.project_id, uuid, services.clock.now())
        return await _one(request, key.project_id, uuid)

    @post("/{uuid:str}/resume", summary="Resume a paused check (409 if not paused)", status_code=200)
    async def resume(self, request: Req, uuid: str) -> dict[str, Any]:
        key = await authenticate(request, write=True)
        uuid = await _uuid_of(request, key.project_id, uuid)
        await _state_change_body(request)
        services = services_of(request.app.state)
        async with services.engine.begin() as conn:
            await check_service.resume_check(conn, key.project_id, uuid, services.clock.now())
        return await _one(request, key.project_id, uuid)

    @get("/{uuid:str}/pings/", summary="The check's pings, newest first")
    async def pings(
        self, request: Req, uuid: str, limit: str | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        key = await authenticate(request, write=False, read_only_allowed=False)
        most = limit_param(limit)
        after = decode_cursor(cursor, (int,))
        services = services_of(request.app.state)
        async with services.engine.connect() as conn:
            row = await check_service.find_check_row(conn, key.project_id, uuid)
            uuid = row["uuid"]
            pings = await history.list_pings(
                conn,
                row["id"],
                uuid,
                services.settings.base_url,
                most + 1,
                before=after[0] if after else None,
            )
        pings, extra = paged(request, services.settings.base_url, pings, most, lambda p: [p["n"]])
        return {"pings": pings, **extra}

    @get("/{uuid:str}/pings/{n:int}/body", summary="A ping's stored body", media_type="text/plain")
    async def ping_body(self, request: Req, uuid: str, n: int) -> Response[bytes]:
        key = await authenticate(request, write=False, read_only_allowed=False)
        services = services_of(request.app.state)
        async with services.engine.connect() as conn:
            row = await check_service.find_check_row(conn, key.project_id, uuid)
            body = await history.ping_body(conn, row["id"], n)
        return Response(body, media_type="text/plain; charset=utf-8")

    @get("/{uuid:str}/flips/", summary="The check's flips, newest first (by uuid or unique_key)")
    async def flips(
        self,
        request: Req,
        uuid: str,
        limit: str | None = None,
        seconds: str | None = None,
        start: str | None = None,
        end: str | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """``?seconds=`` (0-31536000: the last N seconds), ``?start=`` (flips at or after) and
        ``?end=`` (flips before) UNIX timestamps (0-10000000000), as Healthchecks' FlipsFiltersForm;
        a bad value is a 400 naming the parameter. ``?limit=`` pages them (``next``/``cursor=``)."""
        key = await authenticate(request, write=False)
        most = limit_param(limit)
        after = decode_cursor(cursor, (int,))
        services = services_of(request.app.state)
        window = history.flip_window(now=services.clock.now(), seconds=seconds, start=start, end=end)
        async with services.engine.connect() as conn:
            row = await check_service.find_check_row(conn, key.project_id, uuid, unique_key_allowed=True)
            flips, ids = await history.flips_page(
                conn, row["id"], most + 1, after[0] if after else None, window=window
            )
        keyed, extra = paged(
            request, services.settings.base_url, list(zip(flips, ids, strict=True)), most, lambda f: [f[1]]
        )
        return {"flips": [f for f, _ in keyed], **extra}

    @get("/{uuid:str}/runs/", summary="The check's runs by scheduled time, newest first")
    async def runs(
        self,
        request: Req,
        uuid: str,
        limit: str | None = None,
        from_: str | None = Parameter(query="from", default=None, required=False),
        to: str | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        key = await authenticate(request, write=False)
        most = limit_param(limit)
        after = decode_cursor(cursor, (datetime, datetime, str))
        services = services_of(request.app.state)
        async with services.engine.connect() as conn:
            row = await check_service.find_check_row(conn, key.project_id, uuid, unique_key_allowed=True)
            runs, keys = await history.runs_page(
                conn,
                row["id"],
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
        return {"runs": [r for r, _ in keyed], **extra}

    @get("/{uuid:str}/alerts/", summary="The check's alerts with their notifications, newest first")
    async def alerts(
        self, request: Req, uuid: str, limit: str | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        # an alert's message carries the last ping's log tail: read-write keys only, as pings
        key = await authenticate(request, write=False, read_only_allowed=False)
        most = limit_param(limit)
        after = decode_cursor(cursor, (int,))
        services = services_of(request.app.state)
        async with services.engine.connect() as conn:
            row = await check_service.find_check_row(conn, key.project_id, uuid)
            alerts = await history.list_alerts(conn, row["id"], most + 1, before=after[0] if after else None)
        alerts, extra = paged(request, services.settings.base_url, alerts, most, lambda a: [a["id"]])
        return {"alerts": alerts, **extra}
