"""The OpenAPI document's parts that no route handler's types can state (served at ``/schema``).

* The ping API (DESIGN §5) is a raw ASGI app mounted at ``/ping`` (the hot path skips the
  framework's layers), so Litestar sees none of its routes: :func:`ping_paths` describes them —
  every ``/ping/…`` URL, its query parameters, its plain-text answers and their status codes.
* Every error of the HTTP edge answers ``{"error": "<field>: <problem>"}``
  (``monitor.http.errors``): :func:`amend` declares that body (:class:`ErrorBody`) for each
  error status a management route can answer, in place of Litestar's default 400 body
  (``{status_code, detail, extra}``, which this app never sends), and the ``X-Api-Key``
  security requirement on every route that needs it.

:func:`amend` runs once on the built document (``monitor.app.create_app``).
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar.openapi.spec import (
    Components,
    OpenAPI,
    OpenAPIHeader,
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Operation,
    Parameter,
    PathItem,
    Reference,
    RequestBody,
    Schema,
    SecurityScheme,
)

from monitor.http.api.check_bodies import CHECK_BODY_SCHEMA_NAME, CheckIn
from monitor.http.api.common import ERROR_DESCRIPTIONS
from monitor.http.api.paging import CURSOR_PATTERN, LIMIT_PATTERN, MAX_CURSOR_LENGTH

__all__ = ["API_KEY_SCHEME", "amend", "ping_paths"]

API_KEY_SCHEME = SecurityScheme(
    type="apiKey",
    name="X-Api-Key",
    security_scheme_in="header",
    description="The project's API key (read-write, or read-only for reading); Healthchecks' "
    "`api_key` field in a JSON body is accepted too.",
)

ERROR_SCHEMA = Schema(
    type=OpenAPIType.OBJECT,
    properties={"error": Schema(type=OpenAPIType.STRING, description="`<field>: <problem>`")},
    required=["error"],
    title="ErrorBody",
)

MANAGEMENT_ERRORS = (400, 401, 403, 404, 409, 413, 422)
"""What a management route can answer besides its success, unless its handler declares its own
(``monitor.http.api.common.error_responses``): bad input, key, read-only key, unknown id,
conflict, body too large, refused."""

PUBLIC_PREFIXES = ("/api/v3/cron/", "/api/v1/status/", "/api/v2/status/", "/api/v3/status/")
"""Management paths that need no API key."""


def _error(code: int) -> OpenAPIResponse:
    return OpenAPIResponse(
        description=ERROR_DESCRIPTIONS[code],
        content={
            "application/json": OpenAPIMediaType(schema=Reference(ref="#/components/schemas/ErrorBody"))
        },
    )


def amend(document: OpenAPI) -> OpenAPI:
    """Declare the error body, the ``X-Api-Key`` scheme and the ping API in ``document``
    (changed in place and returned)."""
    components = document.components if isinstance(document.components, Components) else Components()
    document.components = components
    components.schemas = {**(components.schemas or {}), "ErrorBody": ERROR_SCHEMA}
    components.security_schemes = {**(components.security_schemes or {}), "apiKey": API_KEY_SCHEME}
    for path, item in (document.paths or {}).items():
        for operation in _operations(item):
            _declare_errors(path, operation)
            for parameter in operation.parameters or []:
                if isinstance(parameter, Parameter) and parameter.param_in == "query":
                    _query_parameter(parameter)
            if (
                path.startswith("/api/")
                and operation.security is None
                and not path.startswith(PUBLIC_PREFIXES)
            ):
                operation.security = [{"apiKey": []}]
    _one_of_window_kinds(components)
    metrics = (document.paths or {}).get("/metrics")
    if metrics is not None and metrics.get is not None:
        metrics.get.responses = {
            "200": OpenAPIResponse(
                description="Prometheus text exposition (OpenMetrics when the Accept header asks for it)",
                content={
                    "text/plain": OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING)),
                    "application/openmetrics-text": OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING)),
                },
            ),
            "401": _error(401),
        }
    _declare_check_bodies(document, components)
    document.paths = {**(document.paths or {}), **ping_paths()}
    return document


_JSON_SCHEMA_WORDS = {
    "anyOf": "any_of",
    "oneOf": "one_of",
    "maxLength": "max_length",
    "minLength": "min_length",
    "maxItems": "max_items",
    "minItems": "min_items",
}


def _schema(value: dict[str, Any]) -> Schema | Reference:
    """A JSON Schema dict as msgspec writes it (``msgspec.json.schema_components``), as
    Litestar's spec objects: the checks' body is decoded by hand, so no handler states its type."""
    if "$ref" in value:
        return Reference(ref=value["$ref"])
    fields: dict[str, Any] = {}
    for word, given in value.items():
        name = _JSON_SCHEMA_WORDS.get(word, word)
        if word == "type":
            given = OpenAPIType(given)
        elif word in ("anyOf", "oneOf"):
            given = [_schema(v) for v in given]
        elif word == "items":
            given = _schema(given)
        elif word == "properties":
            given = {k: _schema(v) for k, v in given.items()}
        elif word == "required" and not given:
            continue
        fields[name] = given
    return Schema(**fields)


def _declare_check_bodies(document: OpenAPI, components: Components) -> None:
    """``POST /api/v3/checks`` takes a :class:`CheckIn` or a list of 1-1000 of them;
    ``POST /api/v3/checks/{uuid}`` one :class:`CheckIn` (the fields to change)."""
    _, found = msgspec.json.schema_components([CheckIn], ref_template="#/components/schemas/{name}")
    declared = {name: _schema(value) for name, value in found.items()}
    components.schemas = {
        **(components.schemas or {}),
        **{name: schema for name, schema in declared.items() if isinstance(schema, Schema)},
    }
    one = Reference(ref=f"#/components/schemas/{CHECK_BODY_SCHEMA_NAME}")
    bodies: dict[str, Schema | Reference] = {
        "/api/v3/checks": Schema(
            one_of=[one, Schema(type=OpenAPIType.ARRAY, items=one, min_items=1, max_items=1000)]
        ),
        "/api/v3/checks/{uuid}": one,
    }
    for path, schema in bodies.items():
        item = (document.paths or {}).get(path)
        if item is not None and item.post is not None:
            item.post.request_body = RequestBody(
                content={"application/json": OpenAPIMediaType(schema=schema)}, required=False
            )


def _query_parameter(parameter: Parameter) -> None:
    """A query parameter is a string (or repeated strings), absent rather than null: drop the
    ``null`` branch Litestar writes for an optional parameter (``str | None``), and state what
    the shared readers accept for every list's ``limit`` (``common.limit_param``) and ``cursor``
    (``paging.decode_cursor``)."""
    schema = parameter.schema
    if isinstance(schema, Schema) and schema.one_of:
        kept = [s for s in schema.one_of if not (isinstance(s, Schema) and s.type == OpenAPIType.NULL)]
        if len(kept) == 1 and isinstance(kept[0], Schema):
            single = kept[0]
            for name in ("pattern", "max_length", "min_length", "enum", "description", "any_of"):
                if getattr(single, name) is None and getattr(schema, name) is not None:
                    setattr(single, name, getattr(schema, name))
            parameter.schema = single
        else:
            schema.one_of = kept
    if parameter.name == "limit":
        parameter.schema = Schema(type=OpenAPIType.STRING, pattern=LIMIT_PATTERN)
    elif parameter.name == "cursor":
        parameter.schema = Schema(
            type=OpenAPIType.STRING, pattern=CURSOR_PATTERN, max_length=MAX_CURSOR_LENGTH
        )


def _one_of_window_kinds(components: Components) -> None:
    """A maintenance window is one-off (``start``, ``end``) or recurring (``schedule``,
    ``duration``), never both (``monitor.services.maintenance.validate_window``): the body's
    schema says so (msgspec has no untagged union of structs to state it in the type)."""
    schemas = components.schemas or {}
    window = schemas.get("WindowIn")
    if not isinstance(window, Schema) or not window.properties:
        return
    common = {k: v for k, v in window.properties.items() if k in ("name", "check", "tz", "api_key")}
    one_off = {**common, **{k: v for k, v in window.properties.items() if k in ("start", "end")}}
    recurring = {
        **common,
        **{k: v for k, v in window.properties.items() if k in ("schedule", "dialect", "duration")},
    }
    window.properties = None
    window.required = None
    window.type = None
    window.one_of = [
        Schema(
            type=OpenAPIType.OBJECT,
            title="OneOffWindow",
            properties=one_off,
            required=["start", "end"],
            additional_properties=False,
        ),
        Schema(
            type=OpenAPIType.OBJECT,
            title="RecurringWindow",
            properties=recurring,
            required=["schedule", "duration"],
            additional_properties=False,
        ),
    ]


def _declare_errors(path: str, operation: Operation) -> None:
    """Error answers as answered: a handler that declares its own (``error_responses``) keeps
    them, with Litestar's default 400 body corrected; one that does not (``monitor.http.api.checks``,
    the dashboard's badges) gets every error a route of its kind can answer."""
    responses = operation.responses or {}
    operation.responses = responses
    own = any(_is_error_body(r) for code, r in responses.items() if code.startswith("4"))
    for code, response in list(responses.items()):
        if code in ("400", "422") and not _is_error_body(response):
            responses[code] = _error(int(code))
    if own:
        return
    if path.startswith("/api/"):
        for status in MANAGEMENT_ERRORS:
            if status in (401, 403) and path.startswith(PUBLIC_PREFIXES):
                continue
            responses.setdefault(str(status), _error(status))
    elif "{" in path:
        responses.setdefault("404", _error(404))  # a path parameter that names nothing


def _operations(item: PathItem) -> list[Operation]:
    methods = (item.get, item.put, item.post, item.delete, item.options, item.head, item.patch, item.trace)
    return [operation for operation in methods if operation is not None]


def _is_error_body(response: OpenAPIResponse | Reference) -> bool:
    if not isinstance(response, OpenAPIResponse) or not response.content:
        return False
    media = response.content.get("application/json")
    schema = media.schema if media is not None else None
    return isinstance(schema, Reference) and schema.ref.endswith("/ErrorBody")


# --------------------------------------------------------------------------- the ping API

UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
SLUG_PATTERN = "^[a-z0-9_-]{1,100}$"
EXIT_STATUS_PATTERN = "^([0-9]{1,2}|[01][0-9]{2}|2[0-4][0-9]|25[0-5])$"
UNIX_SECONDS_PATTERN = "^[1-9][0-9]{9}$"

ACTIONS = {
    "start": "The job started (opens a run; its duration is measured to the next success or failure)",
    "fail": "The job failed: the check goes down now",
    "log": "A log line: stored, changes no state",
    "skip": "The job skipped the tick named by `scheduled` (required), on purpose",
}

_TEXT = {"text/plain": OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING))}
_BODY_LIMIT = OpenAPIHeader(
    schema=Schema(type=OpenAPIType.STRING, pattern="^[0-9]+$"),
    required=True,
    description="Bytes of a ping's body that are stored (the rest is counted and dropped)",
)
_RETRY_AFTER = OpenAPIHeader(
    schema=Schema(type=OpenAPIType.STRING, pattern="^[0-9]+$"), description="Seconds to wait"
)


def _text(description: str, *, retry: bool = False) -> OpenAPIResponse:
    headers: dict[str, OpenAPIHeader | Reference] = {"Ping-Body-Limit": _BODY_LIMIT}
    if retry:
        headers["Retry-After"] = _RETRY_AFTER
    return OpenAPIResponse(description=description, content=_TEXT, headers=headers)


def _path(name: str, description: str, pattern: str | None = None) -> Parameter:
    return Parameter(
        name=name,
        param_in="path",
        required=True,
        description=description,
        schema=Schema(type=OpenAPIType.STRING, pattern=pattern),
    )


def _query(name: str, description: str, pattern: str | None = None, *, required: bool = False) -> Parameter:
    return Parameter(
        name=name,
        param_in="query",
        required=required,
        description=description,
        schema=Schema(type=OpenAPIType.STRING, pattern=pattern),
    )


UUID_PARAM = _path("uuid", "The check's uuid (its ping credential)", UUID_PATTERN)
PING_KEY_PARAM = _path(
    "ping_key",
    "The project's ping key. (A check's uuid here makes the next segment an exit status "
    "0-255 or an action: `/ping/<uuid>/<exit_status>`.)",
)
SLUG_PARAM = _path("slug", "The check's slug", SLUG_PATTERN)
EXIT_PARAM = _path(
    "exit_status", "The job's exit status: 0 is a success, 1-255 a failure", EXIT_STATUS_PATTERN
)
RID_PARAM = _query("rid", "Run id: pairs a start with its end when runs overlap", UUID_PATTERN)
IDEMPOTENCY_PARAM = Parameter(
    name="Idempotency-Key",
    param_in="header",
    description="A retried ping with the same key (1-200 characters) is stored once",
    schema=Schema(type=OpenAPIType.STRING, min_length=1, max_length=200, pattern="^[!-~]+$"),
)
CREATE_PARAM = _query(
    "create", "`1`: create the check (slug URLs only) when the project has none with this slug"
)


def _scheduled(*, required: bool) -> Parameter:
    return _query(
        "scheduled",
        "The tick this ping is for (logical run time). Documented here as unix seconds; ISO 8601 "
        "with an offset and unix milliseconds are accepted too (2000-01-01 to 9000-01-01).",
        UNIX_SECONDS_PATTERN,
        required=required,
    )


FINISHED_PARAM = _query(
    "finished",
    "Finish pings only (an extension of DESIGN §5, docs/design.md §5): when the run really ended, "
    "for a finish delivered late (queued behind an outage, a stalled reporter). Read as "
    "`scheduled` is (documented here as unix seconds; ISO 8601 with an offset and unix "
    "milliseconds are accepted too); later than the arrival plus 5 s is a 400 `finished: …`, "
    "within that the arrival is taken, and before the run's start the start is taken.",
    UNIX_SECONDS_PATTERN,
)
FINISHES = frozenset({"ping_uuid", "ping_slug", "ping_slug_exit_status", "ping_uuid_fail", "ping_slug_fail"})
"""The ping items whose action ends a run, and so take ``finished``."""
STARTED_PARAM = _query(
    "started",
    "Start pings only (an extension of DESIGN §5, docs/design.md §5): when the run really "
    "started, for a start delivered late (queued behind an outage, a stalled reporter). Read as "
    "`scheduled` is (documented here as unix seconds; ISO 8601 with an offset and unix "
    "milliseconds are accepted too); later than the arrival plus 5 s is a 400 `started: …`, "
    "within that the arrival is taken. The start binds to a tick, and its run is judged, as if "
    "it had arrived then; on any other ping it is a 400 `started: only for a start ping`.",
    UNIX_SECONDS_PATTERN,
)
STARTS = frozenset({"ping_uuid_start", "ping_slug_start"})
"""The ping items whose action starts a run, and so take ``started``."""


def _ping_item(
    name: str, summary: str, parameters: list[Parameter], *, slug: bool, skip: bool = False
) -> PathItem:
    query = [RID_PARAM, _scheduled(required=skip), IDEMPOTENCY_PARAM]
    if name in FINISHES:
        query.append(FINISHED_PARAM)
    if name in STARTS:
        query.append(STARTED_PARAM)
    if slug:
        query.append(CREATE_PARAM)
    responses: dict[str, OpenAPIResponse | Reference] = {
        "200": _text("`OK`: the ping is stored"),
        "400": _text("Malformed ping: `invalid uuid format`, `invalid url format`, or `<field>: <problem>`"),
        "404": _text("`not found`: no such check (or ping key)"),
        "429": _text("`rate limited: retry after <n> s`", retry=True),
        "503": _text("Busy or storage unavailable: retry (after Retry-After seconds when given)", retry=True),
    }
    if slug:
        responses["201"] = _text("`Created`: the check was created (`create=1`) and the ping stored")
        responses["409"] = _text("`<field>: <problem>`: the check cannot be created as asked")

    def operation(method: str) -> Operation:
        return Operation(
            tags=["ping"],
            summary=summary,
            operation_id=f"{method}_{name}",
            parameters=[*parameters, *query],
            responses=responses,
            description="Plain-text answers. GET, POST and HEAD are the same ping; a POST body "
            "(up to Ping-Body-Limit bytes) is stored with it. No API key: the URL is the credential.",
        )

    return PathItem(get=operation("get"), post=operation("post"))


def ping_paths() -> dict[str, PathItem]:
    """Every ``/ping/…`` route (``monitor.http.ping``), as OpenAPI path items."""
    paths: dict[str, PathItem] = {
        "/ping/{uuid}": _ping_item("ping_uuid", "Success ping by uuid", [UUID_PARAM], slug=False),
        "/ping/{ping_key}/{slug}": _ping_item(
            "ping_slug",
            "Success ping by slug (or an exit status by uuid)",
            [PING_KEY_PARAM, SLUG_PARAM],
            slug=True,
        ),
        "/ping/{ping_key}/{slug}/{exit_status}": _ping_item(
            "ping_slug_exit_status",
            "Exit status ping by slug",
            [PING_KEY_PARAM, SLUG_PARAM, EXIT_PARAM],
            slug=True,
        ),
    }
    for action, summary in ACTIONS.items():
        paths[f"/ping/{{uuid}}/{action}"] = _ping_item(
            f"ping_uuid_{action}",
            f"{action} by uuid: {summary}",
            [UUID_PARAM],
            slug=False,
            skip=action == "skip",
        )
        paths[f"/ping/{{ping_key}}/{{slug}}/{action}"] = _ping_item(
            f"ping_slug_{action}",
            f"{action} by slug: {summary}",
            [PING_KEY_PARAM, SLUG_PARAM],
            slug=True,
            skip=action == "skip",
        )
    return paths
