"""Cursor paging for the ``/api/v3`` list endpoints.

``?limit=N`` (1–1000) caps a page; when more rows follow, the answer carries one extra key,
``"next"``: the same URL with ``cursor=<opaque>`` (and the same ``limit``) for the next page.
Healthchecks-shaped answers keep their keys; ``next`` is only added. A cursor names the last
row of the page by its sort key (keyset paging), so rows created while a client pages never
shift a page: each existing row is returned exactly once, in order.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from litestar import Request
from litestar.params import Parameter

from monitor.domain.errors import ValidationError
from monitor.http.api.common import limit_param
from monitor.services.history import MAX_LIMIT

MAX_CURSOR_LENGTH = 512

LIMIT_PATTERN = "^0{0,5}([1-9][0-9]{0,2}|1000)$"
"""``limit`` as :func:`monitor.http.api.common.limit_param` accepts it: 1-1000 in ASCII digits."""
assert MAX_LIMIT == 1000, "LIMIT_PATTERN spells the largest page out"

LIMIT_PARAMETER = Parameter(
    description=f"Largest page (1-{MAX_LIMIT}); the answer's `next` links the following one",
    schema_extra={"pattern": LIMIT_PATTERN},
)
CURSOR_PATTERN = "^[A-Za-z0-9_-]*$"
"""What :func:`encode_cursor` writes (unpadded URL-safe base64)."""
CURSOR_PARAMETER = Parameter(
    description="From the previous page's `next` link (opaque)",
    schema_extra={"maxLength": MAX_CURSOR_LENGTH, "pattern": CURSOR_PATTERN},
)


def list_name(request: Request[Any, Any, Any]) -> str:
    """The list a request pages: its path's last segment (``checks``, ``pings``, ``flips``, …)."""
    return request.url.path.rstrip("/").rsplit("/", 1)[-1]


def encode_cursor(key: Sequence[Any], of: str) -> str:
    """An opaque cursor for a row's sort key (ints, strings, aware datetimes) in the list ``of``
    (:func:`list_name`), which it names so that no other list accepts it."""
    plain = [of, *({"t": v.isoformat()} if isinstance(v, datetime) else v for v in key)]
    return base64.urlsafe_b64encode(json.dumps(plain, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(
    value: str | None,
    shape: Sequence[type],
    request: Request[Any, Any, Any],
    *,
    int_max: int = 2**62,
) -> list[Any] | None:
    """The sort key in a ``cursor=`` parameter, checked against ``shape`` (types per position).

    Args:
        value: the parameter (``None`` or empty: no cursor).
        shape: the key's types, per position (``int``, ``str``, ``datetime``).
        request: the list's request: the cursor must name its list (:func:`list_name`).
        int_max: the largest integer a key may hold (the sort column's range: a ping number is a
            32-bit ``INTEGER``; a larger one would fail to bind on PostgreSQL).

    Raises:
        ValidationError: ``cursor`` is not one this endpoint issued.
    """
    if value is None or value == "":
        return None
    problem = ValidationError("cursor", "is not a cursor this list issued (use the next link)")
    if len(value) > MAX_CURSOR_LENGTH:
        raise problem
    try:
        raw = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    except (ValueError, binascii.Error):
        raise problem from None
    if not isinstance(raw, list) or len(raw) != len(shape) + 1 or raw[0] != list_name(request):
        raise problem
    key: list[Any] = []
    for item, kind in zip(raw[1:], shape, strict=True):
        if kind is datetime:
            if not (isinstance(item, dict) and isinstance(item.get("t"), str)):
                raise problem
            try:
                instant = datetime.fromisoformat(item["t"])
                if instant.tzinfo is None:
                    raise problem
                # a key the database can bind: a UTC instant (none for year 1 at +14:00)
                key.append(instant.astimezone(UTC))
            except (ValueError, OverflowError):
                raise problem from None
        elif kind is int:
            if not isinstance(item, int) or isinstance(item, bool) or abs(item) > int_max:
                raise problem
            key.append(item)
        else:
            if not isinstance(item, str) or not _bindable(item):
                raise problem
            key.append(item)
    return key


def _bindable(text: str) -> bool:
    """Whether ``text`` can be bound as a database string: UTF-8 encodable (no lone surrogate,
    which JSON escapes allow) and without NUL (PostgreSQL's text refuses it)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def next_link(request: Request[Any, Any, Any], base_url: str, key: Sequence[Any]) -> str:
    """The request's URL (under ``base_url``) with ``cursor`` set to ``key``'s cursor."""
    params = [(k, v) for k, v in request.query_params.multi_items() if k != "cursor"]
    params.append(("cursor", encode_cursor(key, list_name(request))))
    return f"{base_url}{request.url.path}?{urlencode(params)}"


def paged(
    request: Request[Any, Any, Any],
    base_url: str,
    items: list[Any],
    limit: int | None,
    key_of: Any,
) -> tuple[list[Any], dict[str, Any]]:
    """Split one row more than ``limit`` off ``items`` (fetched with ``limit + 1``).

    Returns:
        (the page's rows, the extra answer keys: ``{"next": url}`` when more rows follow).
    """
    if limit is None or len(items) <= limit:
        return items, {}
    page = items[:limit]
    return page, {"next": next_link(request, base_url, key_of(page[-1]))}


def page_in_order(
    request: Request[Any, Any, Any],
    base_url: str,
    items: list[dict[str, Any]],
    limit: str | None,
    cursor: str | None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Page a short, fully loaded list in its stable order (oldest first) by each item's ``id``.

    For per-project lists that stay small (channels, maintenance windows): the cursor names
    the last item shown; items created meanwhile are appended at the end, so none repeats.

    Raises:
        ValidationError: ``limit`` out of range; ``cursor`` not issued here, or its item was
            deleted meanwhile.
    """
    most = limit_param(limit) if limit is not None else None
    after = decode_cursor(cursor, (str,), request)
    if after is not None:
        ids = [str(item["id"]) for item in items]
        if after[0] not in ids:
            raise ValidationError("cursor", "its item no longer exists; start again without cursor")
        items = items[ids.index(after[0]) + 1 :]
    if most is None:
        return items, {}
    return paged(request, base_url, items[: most + 1], most, lambda item: [str(item["id"])])
