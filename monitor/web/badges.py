"""Status badges (DESIGN §9): public and unguessable, no API key.

* ``GET /b/<badge_uuid>.svg`` / ``.json`` — one check (``badge_uuid`` is a random UUID of its
  own, separate from the check's uuid, so a badge never reveals the ping URL).
* ``GET /badge/<badge_key>/<tag>.svg`` / ``.json`` — every check of the project carrying
  ``tag`` (``*``: every check), with the project's random ``badge_key``.
* ``GET /b/<2|3>/<badge_uuid>.<svg|json|shields>`` — the same in Healthchecks' URL form:
  ``2`` is the two-state badge (``late`` shown as ``up``), ``3`` the three-state one.
* ``.json`` is Healthchecks' ``{"status", "total", "grace", "down"}`` (for one check: total 1,
  grace/down 0 or 1) merged with shields.io's endpoint format ``{"schemaVersion": 1, "label",
  "message", "color"}`` (https://shields.io/badges/endpoint-badge); ``.shields`` is the shields.io
  format alone, as Healthchecks' ``shields`` badges. ``?states=2`` folds ``late`` into ``up``
  (Healthchecks' two-state badges; its tag badges spell that ``-2`` in the signature).
* ``GET /api/v3/badges/`` (any key of the project) lists the badge URLs per tag, as Healthchecks.

States follow Healthchecks: ``down`` if any check is down, else ``late`` if any is in its
grace period, else ``up``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from litestar import Controller, MediaType, Request, Response, get

from monitor.domain.errors import NotFound
from monitor.edge import authenticate, services_of
from monitor.services import dashboard
from monitor.web.svg import SHIELDS_COLORS, badge_svg

Req = Request[Any, Any, Any]
HEADERS = {"Cache-Control": "no-cache, max-age=0", "Access-Control-Allow-Origin": "*"}


def _split(file: str) -> tuple[str, str]:
    stem, dot, fmt = file.rpartition(".")
    if not dot or fmt not in ("svg", "json", "shields"):
        raise NotFound("badge: use .svg, .json or .shields")
    return stem, fmt


def _render(label: str, status: str, fmt: str, states: str | None, extra: dict[str, Any]) -> Response[Any]:
    if states == "2" and status == "late":
        status = "up"
    if fmt == "svg":
        return Response(badge_svg(label, status), media_type="image/svg+xml", headers=HEADERS)
    body: dict[str, Any] = {
        "schemaVersion": 1,
        "label": label,
        "message": status,
        "color": SHIELDS_COLORS[status],
    }
    if fmt == "json":
        body.update(status=status, **extra)
    return Response(body, media_type=MediaType.JSON, headers=HEADERS)


async def _check_badge(request: Req, file: str, states: str | None) -> Response[Any]:
    badge_uuid, fmt = _split(file)
    services = services_of(request.app.state)
    found = await dashboard.badge_of_check(services.engine, badge_uuid.lower(), services.clock.now())
    if found is None:
        raise NotFound("badge: no such badge")
    return _render(found["name"], found["status"], fmt, states, _one_check_counts(found["status"]))


class BadgeController(Controller):
    path = "/"
    tags = ("badges",)

    @get("/b/{file:str}", summary="One check's badge (.svg, .json or .shields)")
    async def check_badge(self, request: Req, file: str, states: str | None = None) -> Response[Any]:
        return await _check_badge(request, file, states)

    @get("/b/{states:int}/{file:str}", summary="One check's badge, Healthchecks' URL form (2 or 3 states)")
    async def check_badge_by_states(self, request: Req, states: int, file: str) -> Response[Any]:
        if states not in (2, 3):
            raise NotFound("badge: states must be 2 or 3")
        return await _check_badge(request, file, "2" if states == 2 else None)

    @get("/badge/{badge_key:str}/{file:str}", summary="A tag's badge over a project's checks")
    async def tag_badge(
        self, request: Req, badge_key: str, file: str, states: str | None = None
    ) -> Response[Any]:
        tag, fmt = _split(file)
        services = services_of(request.app.state)
        found = await dashboard.badge_of_tag(services.engine, badge_key, tag, services.clock.now())
        if found is None:
            raise NotFound("badge: no such badge")
        extra = {k: found[k] for k in ("total", "grace", "down")}
        return _render("checks" if tag == "*" else tag, found["status"], fmt, states, extra)


def _one_check_counts(status: str) -> dict[str, int]:
    """Healthchecks' counts for a single check's JSON badge: ``total`` 1, ``grace`` and ``down``
    1 when the check is late (in its grace period) or down."""
    return {"total": 1, "grace": 1 if status == "late" else 0, "down": 1 if status == "down" else 0}


def badge_urls(base_url: str, badge_key: str, tag: str) -> dict[str, str]:
    """Healthchecks' six badge URLs of a tag (``svg``/``json``/``shields``: two-state;
    the ``…3`` variants: three-state with ``late``)."""
    root = f"{base_url}/badge/{quote(badge_key, safe='')}/{quote(tag, safe='*')}"
    return {
        "svg": f"{root}.svg?states=2",
        "svg3": f"{root}.svg",
        "json": f"{root}.json?states=2",
        "json3": f"{root}.json",
        "shields": f"{root}.shields?states=2",
        "shields3": f"{root}.shields",
    }


class BadgesApiController(Controller):
    path = "/api/v3/badges"
    tags = ("badges",)

    @get("/", summary="Badge URLs per tag (and * for all checks)")
    async def list_badges(self, request: Req) -> dict[str, Any]:
        key = await authenticate(request, write=False)
        services = services_of(request.app.state)
        badge_key, tags = await dashboard.badge_listing(services.engine, key.project_id)
        base = services.settings.base_url
        badges = {tag: badge_urls(base, badge_key, tag) for tag in tags}
        badges["*"] = badge_urls(base, badge_key, "*")
        return {"badges": badges}
