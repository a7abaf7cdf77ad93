"""``/api/v3/checks/…``: checks, their pings, flips, runs and alerts (DESIGN §9)."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, delete, get, post
from litestar.params import Parameter
from sqlalchemy import select

from monitor.domain.errors import ValidationError
from monitor.edge import UUID_RE
from monitor.http.api.common import authenticate, instant_param, json_body, limit_param, services_of
from monitor.services import checks as check_service
from monitor.services import history
from monitor.storage import tables as t

Req = Request[Any, Any, Any]


def _uuid(value: str) -> str:
    if not UUID_RE.match(value):
        raise ValidationError("uuid", "invalid uuid format")
    return value.lower()


async def _dicts(request: Req, conn: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    services = services_of(request.app.state)
    now = services.clock.now()
    started = await check_service.started_checks(conn, rows, now)
    channels = await check_service.channels_of(conn, [r["id"] for r in rows])
    return [
        check_service.check_to_dict(
            r, now=now, settings=services.settings, started=r["id"] in started, channels=channels[r["id"]]
        )
        for r in rows
    ]


async def _one(request: Req, project_id: int, uuid: str) -> dict[str, Any]:
    services = services_of(request.app.state)
    async with services.engine.connect() as conn:
        row = await check_service.get_check_row(conn, project_id, uuid)
        return (await _dicts(request, conn, [row]))[0]


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
    ) -> dict[str, Any]:
        """Every check of the project, oldest first, as Healthchecks lists them; ``?limit=``
        (1-1000) keeps the first N."""
        key = await authenticate(request, write=False)
        most = limit_param(limit) if limit is not None else None
        services = services_of(request.app.state)
        async with services.engine.connect() as conn:
            query = select(t.checks).where(t.checks.c.project_id == key.project_id)
            if slug is not None:
                if "\x00" in slug:
                    raise ValidationError("slug", "must not contain NUL characters")
                query = query.where(t.checks.c.slug == slug)
            rows = [dict(r) for r in (await conn.execute(query.order_by(t.checks.c.id))).mappings().all()]
            if tag:
                wanted = set(tag)
                rows = [r for r in rows if wanted <= set(r["tags"].split())]
            if most is not None:
                rows = rows[:most]
            return {"checks": await _dicts(request, conn, rows)}

    @post("/", summary="Create a check (or upsert with unique)")
    async def create_check(self, request: Req) -> Response[dict[str, Any]]:
        key = await authenticate(request, write=True)
        data = await json_body(request)
        services = services_of(request.app.state)
        now = services.clock.now()
        async with services.engine.begin() as conn:
            check_id, created = await check_service.create_or_upsert(
                conn, key.project_id, data, now, shards=services.settings.shards
            )
            uuid = (await conn.execute(select(t.checks.c.uuid).where(t.checks.c.id == check_id))).scalar_one()
        return Response(await _one(request, key.project_id, uuid), status_code=201 if created else 200)

    @get("/{uuid:str}", summary="Get a check")
    async def get_check(self, request: Req, uuid: str) -> dict[str, Any]:
        key = await authenticate(request, write=False)
        return await _one(request, key.project_id, _uuid(uuid))

    @post("/{uuid:str}", summary="Update a check (only the given fields)", status_code=200)
    async def update_check(self, request: Req, uuid: str) -> dict[str, Any]:
        key = await authenticate(request, write=True)
        uuid = _uuid(uuid)
        data = await json_body(request)
        services = services_of(request.app.state)
        async with services.engine.begin() as conn:
            row = await check_service.get_check_row(conn, key.project_id, uuid)
            await check_service.update_check(conn, key.project_id, row["id"], data, services.clock.now())
        return await _one(request, key.project_id, uuid)

    @delete("/{uuid:str}", summary="Delete a check", status_code=200)
    async def delete_check(self, request: Req, uuid: str) -> dict[str, Any]:
        key = await authenticate(request, write=True)
        uuid = _uuid(uuid)
        services = services_of(request.app.state)
        body = await _one(request, key.project_id, uuid)
        async with services.engine.begin() as conn:
            row = await check_service.get_check_row(conn, key.project_id, uuid, lock=True)
            await check_service.delete_check(conn, row["id"])
        return body

    @post("/{uuid:str}/pause", summary="Pause a check", status_code=200)
    async def pause(self, request: Req, uuid: str) -> dict[str, Any]:
        key = await authenticate(request, write=True)
        uuid = _uuid(uuid)
        services = services_of(request.app.state)
        async with services.engine.begin() as conn:
            await check_service.pause_check(conn, key.project_id, uuid, services.clock.now())
        return await _one(request, key.project_id, uuid)

    @post("/{uuid:str}/resume", summary="Resume a paused check (409 if not paused)", status_code=200)
    async def resume(self, request: Req, uuid: str) -> dict[str, Any]:
        key = await authenticate(request, write=True)
        uuid = _uuid(uuid)
        services = services_of(request.app.state)
        async with services.engine.begin() as conn:
            await check_service.resume_check(conn, key.project_id, uuid, services.clock.now())
        return await _one(request, key.project_id, uuid)

    @get("/{uuid:str}/pings/", summary="The check's pings, newest first")
    async def pings(self, request: Req, uuid: str, limit: str | None = None) -> dict[str, Any]:
        key = await authenticate(request, write=False)
        uuid = _uuid(uuid)
        services = services_of(request.app.state)
        async with services.engine.connect() as conn:
            row = await check_service.get_check_row(conn, key.project_id, uuid)
            return {
                "pings": await history.list_pings(
                    conn, row["id"], uuid, services.settings.base_url, limit_param(limit)
                )
            }

    @get("/{uuid:str}/pings/{n:int}/body", summary="A ping's stored body", media_type="text/plain")
    async def ping_body(self, request: Req, uuid: str, n: int) -> Response[bytes]:
        key = await authenticate(request, write=False)
        uuid = _uuid(uuid)
        services = services_of(request.app.state)
        async with services.engine.connect() as conn:
            row = await check_service.get_check_row(conn, key.project_id, uuid)
            body = await history.ping_body(conn, row["id"], n)
        return Response(body, media_type="text/plain; charset=utf-8")

    @get("/{uuid:str}/flips/", summary="The check's flips, newest first")
    async def flips(self, request: Req, uuid: str, limit: str | None = None) -> dict[str, Any]:
        key = await authenticate(request, write=False)
        uuid = _uuid(uuid)
        services = services_of(request.app.state)
        async with services.engine.connect() as conn:
            row = await check_service.get_check_row(conn, key.project_id, uuid)
            return {"flips": await history.list_flips(conn, row["id"], limit_param(limit))}

    @get("/{uuid:str}/runs/", summary="The check's runs by scheduled time, newest first")
    async def runs(
        self,
        request: Req,
        uuid: str,
        limit: str | None = None,
        from_: str | None = Parameter(query="from", default=None, required=False),
        to: str | None = None,
    ) -> dict[str, Any]:
        key = await authenticate(request, write=False)
        uuid = _uuid(uuid)
        services = services_of(request.app.state)
        async with services.engine.connect() as conn:
            row = await check_service.get_check_row(conn, key.project_id, uuid)
            runs = await history.list_runs(
                conn, row["id"], limit_param(limit), instant_param("from", from_), instant_param("to", to)
            )
            return {"runs": runs}

    @get("/{uuid:str}/alerts/", summary="The check's alerts with their notifications, newest first")
    async def alerts(self, request: Req, uuid: str, limit: str | None = None) -> dict[str, Any]:
        key = await authenticate(request, write=False)
        uuid = _uuid(uuid)
        services = services_of(request.app.state)
        async with services.engine.connect() as conn:
            row = await check_service.get_check_row(conn, key.project_id, uuid)
            return {"alerts": await history.list_alerts(conn, row["id"], limit_param(limit))}
