"""Domain errors → JSON HTTP answers, in one place (``{"error": "<field>: <problem>"}``)."""

from __future__ import annotations

import logging
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException
from litestar.exceptions import ValidationException as LitestarValidation
from litestar.response import Template

from monitor.domain.errors import Conflict, NotFound, ScheduleError, ValidationError, ZoneError
from monitor.edge import Forbidden, NotAuthenticated, PayloadTooLarge

__all__ = ["EXCEPTION_HANDLERS", "Forbidden", "NotAuthenticated", "PayloadTooLarge"]

logger = logging.getLogger(__name__)


def _json(status: int, message: str) -> Response[dict[str, str]]:
    return Response({"error": message}, status_code=status, media_type=MediaType.JSON)


def handle_validation(_: Request[Any, Any, Any], exc: ValidationError) -> Response[dict[str, str]]:
    return _json(400, str(exc))


def handle_schedule(_: Request[Any, Any, Any], exc: ScheduleError) -> Response[dict[str, str]]:
    return _json(400, f"schedule: {exc}")


def handle_zone(_: Request[Any, Any, Any], exc: ZoneError) -> Response[dict[str, str]]:
    return _json(400, f"tz: {exc}")


def handle_not_found(_: Request[Any, Any, Any], exc: NotFound) -> Response[dict[str, str]]:
    return _json(404, str(exc) or "not found")


def handle_conflict(_: Request[Any, Any, Any], exc: Conflict) -> Response[dict[str, str]]:
    return _json(409, str(exc))


def handle_unauthenticated(_: Request[Any, Any, Any], exc: NotAuthenticated) -> Response[dict[str, str]]:
    return _json(401, str(exc))


def handle_forbidden(_: Request[Any, Any, Any], exc: Forbidden) -> Response[dict[str, str]]:
    return _json(403, str(exc))


def handle_too_large(_: Request[Any, Any, Any], exc: PayloadTooLarge) -> Response[dict[str, str]]:
    return _json(413, str(exc))


def handle_litestar_validation(
    _: Request[Any, Any, Any], exc: LitestarValidation
) -> Response[dict[str, str]]:
    detail = exc.extra if isinstance(exc.extra, list) and exc.extra else None
    if detail and isinstance(detail[0], dict):
        key = detail[0].get("key") or detail[0].get("source") or "request"
        return _json(400, f"{key}: {detail[0].get('message', exc.detail)}")
    return _json(400, f"request: {exc.detail}")


def _wants_page(request: Request[Any, Any, Any]) -> bool:
    """A browser asking for a page (not the API, a ping or a badge): it gets an HTML error page."""
    path = request.url.path
    if path.startswith(("/api/", "/ping/", "/b/", "/badge/", "/metrics", "/health", "/ready", "/schema")):
        return False
    return "text/html" in request.headers.get("accept", "")


def handle_http(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    if exc.status_code == 404 and _wants_page(request):
        return Template(
            template_name="error.html",
            context={
                "title": "Not found",
                "message": f"There is no page at {request.url.path}.",
                "status": 404,
                # set by monitor.web.auth.load_page_session for a signed-in user: the same nav
                "session": (session := request.scope.get("state", {}).get("monitor_session")),
                "csrf_token": getattr(session, "csrf_token", ""),
            },
            status_code=404,
        )
    if exc.status_code == 404:
        return _json(404, f"path: no such resource {request.url.path}")
    if exc.status_code == 405:
        return _json(405, f"method: {request.method} is not allowed on {request.url.path}")
    return _json(exc.status_code, f"request: {str(exc.detail).lower()}")


def handle_unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, str]]:
    logger.exception("unhandled error", extra={"action": "unhandled_error", "path": request.url.path})
    return _json(500, "internal error; it has been logged")


EXCEPTION_HANDLERS = {
    ValidationError: handle_validation,
    ScheduleError: handle_schedule,
    ZoneError: handle_zone,
    NotFound: handle_not_found,
    Conflict: handle_conflict,
    NotAuthenticated: handle_unauthenticated,
    Forbidden: handle_forbidden,
    PayloadTooLarge: handle_too_large,
    LitestarValidation: handle_litestar_validation,
    HTTPException: handle_http,
    Exception: handle_unexpected,
}
