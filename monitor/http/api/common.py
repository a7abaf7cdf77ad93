"""Shared pieces of the management API: the request context, key checks and JSON bodies."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from litestar import Request

from monitor.domain.errors import ValidationError
from monitor.edge import Services, authenticate, services_of
from monitor.http.errors import PayloadTooLarge
from monitor.services.history import DEFAULT_LIMIT, MAX_LIMIT

__all__ = [
    "MAX_JSON_BODY",
    "Services",
    "api_version",
    "authenticate",
    "instant_param",
    "json_body",
    "limit_param",
    "services_of",
]

MAX_JSON_BODY = 1_000_000


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
    if not value.isdigit() or not 1 <= int(value) <= MAX_LIMIT:
        raise ValidationError("limit", f"must be an integer between 1 and {MAX_LIMIT}")
    return int(value)


def instant_param(name: str, value: str | None) -> datetime | None:
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
    return parsed.astimezone(UTC)
