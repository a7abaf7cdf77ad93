"""Domain errors → JSON HTTP answers, in one place (``{"error": "<field>: <problem>"}``)."""

from __future__ import annotations

import logging
import re
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, SerializationException
from litestar.exceptions import ValidationException as LitestarValidation
from litestar.response import Template

from monitor.domain.errors import Conflict, NotFound, ScheduleError, ValidationError, ZoneError
from monitor.edge import Forbidden, NotAuthenticated, PayloadTooLarge
from monitor.services.status import concurrency_failure, storage_unavailable

__all__ = ["EXCEPTION_HANDLERS", "Forbidden", "NotAuthenticated", "PayloadTooLarge"]

logger = logging.getLogger(__name__)


def _json(status: int, message: str, headers: dict[str, str] | None = None) -> Response[dict[str, str]]:
    return Response({"error": message}, status_code=status, media_type=MediaType.JSON, headers=headers)


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
    """A typed parameter or body (a msgspec Struct) Litestar refused: the first problem, named
    and worded as our own errors are (``url: must be a string, got int``, ``body: must be a
    JSON object``, ``url: is required``)."""
    detail = exc.extra if isinstance(exc.extra, list) and exc.extra else None
    if detail and isinstance(detail[0], dict):
        key = str(detail[0].get("key") or detail[0].get("source") or "request")
        message = str(detail[0].get("message", exc.detail))
        body = detail[0].get("source") == "body" or key == "data"
        missing = MISSING_FIELD_RE.match(message)
        if missing:
            key, message = (missing[1] if key in ("data", "body") else f"{key}.{missing[1]}"), "is required"
        elif body and key in ("data", "body"):
            key = "body"
            if message.startswith("Expected `object`"):
                message = "must be a JSON object"
            elif message == "'data'":  # no body at all
                message = "is required: a JSON object"
        message = _worded(message)
        field, bracket, rest = key.partition("[")
        if bracket:  # kinds[0] → "kinds: [0] must be …": the field first, as everywhere else
            key, message = field, f"[{rest} {message}"
        return _json(400, f"{key}: {message}")
    return _json(400, f"request: {exc.detail}")


MISSING_FIELD_RE = re.compile(r"^Object missing required field `([^`]+)`")
EXPECTED_RE = re.compile(r"^Expected `([^`]+)`(.*)$", re.DOTALL)
TYPE_WORDS = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "object": "a JSON object",
    "array": "a list",
    "null": "null",
}
"""msgspec's type names in its messages, as the checks API words them."""


def _worded(message: str) -> str:
    """msgspec's ``Expected `str | null`, got `int``` as ``must be a string or null, got int``
    (and ``Expected `int` >= 1`` as ``must be an integer >= 1``); other messages unchanged."""
    expected = EXPECTED_RE.match(message)
    if expected is None:
        return message
    types = " or ".join(TYPE_WORDS.get(name.strip(), name.strip()) for name in expected[1].split("|"))
    return f"must be {types}{expected[2].replace('`', '')}"


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
    if isinstance(exc.__cause__, SerializationException):  # a typed body that is no JSON
        return _json(400, f"body: invalid JSON ({exc.detail})")
    if exc.status_code == 405:
        # RFC 9110 §15.5.6: a 405 names the methods the resource has (Litestar's routing puts them in
        # the exception's headers)
        allow = (exc.headers or {}).get("allow") or (exc.headers or {}).get("Allow")
        return _json(
            405,
            f"method: {request.method} is not allowed on {request.url.path}",
            {"Allow": allow} if allow else None,
        )
    headers = {k: v for k, v in (exc.headers or {}).items() if k.lower() in ("retry-after", "allow")}
    return _json(exc.status_code, f"request: {str(exc.detail).lower()}", headers or None)


def handle_recursion(request: Request[Any, Any, Any], exc: RecursionError) -> Response[dict[str, str]]:
    """msgspec decoding a typed body nested thousands deep overflows the stack before any
    handler runs: that body is bad input (as ``json_body`` says), not a server error."""
    if request.headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in request.headers:
        return _json(400, "body: invalid JSON (nested too deeply)")
    return handle_unexpected(request, exc)


def handle_unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, str]]:
    """A database that cannot be used just then (restarting, unreachable, out of connections)
    is ``503`` with ``Retry-After: 1`` and one warning line, as the ping endpoints answer it;
    so is a transaction PostgreSQL rolled back for a concurrent one (a deadlock). Anything else
    is a ``500`` whose traceback goes to the log, never to the client."""
    if storage_unavailable(exc):
        logger.warning(
            "database unavailable: %s: %s",
            type(exc).__name__,
            str(exc).splitlines()[0] if str(exc) else "",
            extra={"action": "database_unavailable", "path": request.url.path},
        )
        return _json(503, "database unavailable; retry", {"Retry-After": "1"})
    if concurrency_failure(exc):
        logger.warning(
            "transaction rolled back for a concurrent one: %s",
            str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
            extra={"action": "concurrency_failure", "path": request.url.path},
        )
        return _json(503, "a concurrent request conflicted with this one; retry", {"Retry-After": "1"})
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
    RecursionError: handle_recursion,
    Exception: handle_unexpected,
}
