"""Shared pieces of the management API: the request context, key checks, JSON bodies, and the
typed edge every handler declares (error body, key injection, read-only-key guards).

How a handler uses the typed edge (Litestar dependency injection and guards)::

    from litestar.di import Provide
    from monitor.http.api.common import (
        API_KEY, API_KEY_SECURITY, ApiKey, error_responses, provide_api_key,
        read_write_key_required, write_key_required,
    )

    class ThingsController(Controller):
        path = "/api/v3/things"
        dependencies = {API_KEY: Provide(provide_api_key)}   # handlers take ``key: ApiKey``
        security = API_KEY_SECURITY                           # documents ``X-Api-Key`` (401 probes)

        @get("/", responses=error_responses(400, 401))
        async def list_things(self, key: ApiKey) -> ThingList: ...        # any key may read

        @post("/", guards=[write_key_required], responses=error_responses(400, 401, 403, 422))
        async def create_thing(self, key: ApiKey, data: ThingIn) -> Thing: ...  # read-only → 403

        @get("/secret", guards=[read_write_key_required], responses=error_responses(401))
        async def secret(self, key: ApiKey) -> Secret: ...   # read-only key → 401 even to read

- ``provide_api_key`` resolves ``X-Api-Key`` (or Healthchecks' ``api_key`` in a JSON body)
  once per request; a guard that already resolved it leaves it on ``request.state`` and the
  provider reuses it. Missing/unknown key → 401 ``{"error": "X-Api-Key: …"}``.
- ``write_key_required`` (guard): a read-only key → 403, as :func:`authenticate` with ``write``.
- ``read_write_key_required`` (guard): a read-only key → 401, as ``read_only_allowed=False``.
- ``error_responses(*codes)`` declares each status code's answer as :class:`ErrorBody`
  (``{"error": "<field>: <problem>"}``), the shape ``monitor.http.errors`` answers.
- Request bodies typed as ``msgspec.Struct`` (``data: ThingIn``) are decoded and validated by
  Litestar; a wrong type answers 400 ``{"error": "<field>: <problem>"}``
  (``monitor.http.errors.handle_litestar_validation``). To keep a service's own messages, type
  the JSON shape only and state the rest for OpenAPI alone:
  ``Annotated[str | UnsetType, KwargDefinition(schema_extra={"maxLength": 100})]`` (see
  ``monitor.http.api.channels``); ``msgspec.UNSET`` tells an absent field from ``null``.
- Until a handler declares ``error_responses``, ``monitor.http.openapi.amend`` declares every
  management error (400/401/403/404/409/413/422) for it; once it does, exactly its own stand.
  ``tests/e2e/test_openapi_conformance.py`` (``EXPECTED``) lists what still fails there.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import msgspec
from litestar import Request
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import SecurityRequirement

from monitor.domain.errors import ValidationError
from monitor.edge import Services, authenticate, check_key, resolve_api_key, services_of
from monitor.http.errors import PayloadTooLarge
from monitor.services.history import DEFAULT_LIMIT, MAX_LIMIT
from monitor.services.projects import ApiKey

__all__ = [
    "API_KEY",
    "API_KEY_SECURITY",
    "ERROR_DESCRIPTIONS",
    "FLIP_SECONDS",
    "FLIP_TIMESTAMP",
    "INSTANT",
    "MAX_JSON_BODY",
    "ApiKey",
    "ErrorBody",
    "Services",
    "api_version",
    "authenticate",
    "error_responses",
    "instant_param",
    "json_body",
    "limit_param",
    "provide_api_key",
    "read_write_key_required",
    "services_of",
    "write_key_required",
]

MAX_JSON_BODY = 1_000_000


class ErrorBody(msgspec.Struct, frozen=True):
    """Every error answer of the HTTP edge: ``{"error": "<field>: <problem>"}``
    (``monitor.http.errors``; Healthchecks answers ``{"error": …}`` too)."""

    error: str
    """The field at fault, a colon, and the problem (``"X-Api-Key: wrong api key"``)."""


ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "Bad input: the body, a parameter or a field is malformed (the message names it)",
    401: "X-Api-Key missing or wrong (or a read-only key where the read-write key is needed)",
    403: "A read-only key tried to change something",
    404: "No such resource in the key's project",
    405: "Method not allowed on this path (see the Allow header)",
    409: "Conflicts with the current state",
    413: "Body larger than the limit",
    422: "Well-formed but refused",
    429: "Too many requests; retry after Retry-After seconds",
    503: "The database does not answer",
}


def error_responses(*codes: int) -> dict[int, ResponseSpec]:
    """``responses=`` for a route handler: each of ``codes`` (keys of :data:`ERROR_DESCRIPTIONS`)
    answered as :class:`ErrorBody`, so the OpenAPI document declares it as answered."""
    return {
        code: ResponseSpec(
            data_container=ErrorBody, description=ERROR_DESCRIPTIONS[code], generate_examples=False
        )
        for code in codes
    }


API_KEY = "key"
"""The dependency name handlers take the resolved :class:`ApiKey` by (``key: ApiKey``)."""

API_KEY_SECURITY: list[SecurityRequirement] = [{"apiKey": []}]
"""``security=`` for a controller whose routes need ``X-Api-Key`` (the ``apiKey`` scheme is
declared by the composition root's OpenAPI config)."""

_STATE_KEY = "monitor_api_key"


async def _resolve(
    connection: ASGIConnection[Any, Any, Any, Any], *, write: bool, read_only_allowed: bool
) -> ApiKey:
    """The connection's key, resolved once per request (kept on ``connection.state``)."""
    found: ApiKey | None = connection.state.get(_STATE_KEY)
    if found is None:
        found = await resolve_api_key(connection)  # type: ignore[arg-type]
        connection.state[_STATE_KEY] = found
    check_key(found, write=write, read_only_allowed=read_only_allowed)
    return found


async def provide_api_key(request: Request[Any, Any, Any]) -> ApiKey:
    """Dependency: the request's :class:`ApiKey` (read-only keys included).

    Raises:
        NotAuthenticated: the key is missing or wrong (401).
    """
    return await _resolve(request, write=False, read_only_allowed=True)


async def write_key_required(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Guard for writes: the read-write key only.

    Raises:
        NotAuthenticated: missing or wrong key (401). Forbidden: a read-only key (403).
    """
    await _resolve(connection, write=True, read_only_allowed=True)


async def read_write_key_required(
    connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler
) -> None:
    """Guard for what Healthchecks keeps from read-only keys even for reading (pings, ping
    bodies, channels, alerts).

    Raises:
        NotAuthenticated: missing or wrong key, or a read-only key (401).
    """
    await _resolve(connection, write=False, read_only_allowed=False)


API_VERSIONS = (1, 2, 3)


def api_version(request: Request[Any, Any, Any]) -> int:
    """The management API version a request was addressed to (``/api/v1/…`` → 1).

    Healthchecks serves v1, v2 and v3 from the same views; v1 reports a running check as
    ``status: started`` and v1/v2 derive a check's slug from its name.
    """
    parts = request.url.path.split("/")
    if len(parts) > 2 and parts[1] == "api" and parts[2] in ("v1", "v2"):
        return int(parts[2][1])
    return 3


async def json_body(request: Request[Any, Any, Any]) -> Any:
    """The request's JSON body (``{}`` when empty).

    Raises:
        ValidationError: ``body: …`` for invalid JSON; PayloadTooLarge over 1 MB.
    """
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > MAX_JSON_BODY:
        raise PayloadTooLarge(f"body: larger than {MAX_JSON_BODY} bytes")
    raw = await request.body()
    if len(raw) > MAX_JSON_BODY:
        raise PayloadTooLarge(f"body: larger than {MAX_JSON_BODY} bytes")
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise ValidationError("body", f"invalid JSON ({error})") from None
    except RecursionError:
        raise ValidationError("body", "invalid JSON (nested too deeply)") from None
    try:
        # "\ud800" is valid JSON but no valid text: it could be neither stored nor echoed.
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("body", "invalid JSON (unpaired UTF-16 surrogate in a string)") from None
    return data


def limit_param(value: str | None) -> int:
    if value is None:
        return DEFAULT_LIMIT
    # ASCII digits only: str.isdigit() also holds for "²", which int() refuses
    if not re.fullmatch(r"[0-9]{1,9}", value) or not 1 <= int(value) <= MAX_LIMIT:
        raise ValidationError("limit", f"must be an integer between 1 and {MAX_LIMIT}")
    return int(value)


FLIP_SECONDS: dict[str, Any] = {
    "pattern": "^0*([0-9]{1,7}|[12][0-9]{7}|30[0-9]{6}|31[0-4][0-9]{5}|315[0-2][0-9]{4}"
    "|3153[0-5][0-9]{3}|31536000)$"
}
"""The OpenAPI schema of the flips filter ``seconds``: 0-31 536 000 in ASCII digits, as
:func:`monitor.services.history.flip_window` reads it (``FLIP_MAX_SECONDS``)."""

FLIP_TIMESTAMP: dict[str, Any] = {"pattern": "^0*([0-9]{1,10}|10000000000)$"}
"""The OpenAPI schema of the flips filters ``start`` and ``end``: unix seconds 0-10^10 in ASCII
digits, as :func:`monitor.services.history.flip_window` reads them (``FLIP_MAX_TIMESTAMP``)."""

INSTANT: dict[str, Any] = {
    "anyOf": [{"type": "string", "format": "date-time"}, {"type": "string", "pattern": "^[0-9]{1,11}$"}]
}
"""The OpenAPI schema of an instant query parameter read by :func:`instant_param`: RFC 3339 with
an offset, or whole unix seconds."""


def instant_param(name: str, value: str | None) -> datetime | None:
    """``value`` as a UTC instant: RFC 3339 / ISO 8601 with an offset (``Z`` or ``±hh:mm``), or
    whole unix seconds; ``None`` or empty is no bound.

    Raises:
        ValidationError: naming ``name``, when the value is neither.
    """
    if value is None or value == "":
        return None
    try:
        if value.isdigit():
            return datetime.fromtimestamp(int(value), UTC)
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        raise ValidationError(name, "must be ISO 8601 with offset or unix seconds") from None
    if parsed.tzinfo is None:
        raise ValidationError(name, "needs a UTC offset or Z")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+14:00 and 9999-12-31T23:59-14:00 have no UTC instant
        raise ValidationError(name, "is out of range (no UTC instant)") from None
