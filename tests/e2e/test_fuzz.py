"""Malformed and generated requests at every route: never a 5xx ("Bad input").

Schemathesis generates requests (positive and negative) from the app's own ``/schema``;
they are sent in process through the real app (lifespan, database, clock) on SQLite and on
PostgreSQL. A hand-written loop adds what a schema cannot describe: random bodies, odd
paths, odd methods and huge headers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tests.conftest import Api
from tests.support.app import create_check

MAX_EXAMPLES = 8
SERVER_ERRORS = range(500, 600)


def _collect_cases(schema: Any, real: dict[str, str]) -> list[Any]:
    """Generate cases for every operation (runs in a worker thread: Hypothesis is synchronous)."""
    cases: list[Any] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15, [op.path for op in operations]
    for operation in operations:
        variants: list[dict[str, Any]] = [{}]
        fixed = {name: value for name, value in real.items() if "{" + name + "}" in operation.path}
        if fixed:
            variants.append({"path_parameters": fixed})
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            for variant in variants:
                strategy = operation.as_strategy(generation_mode=mode, **variant)

                @settings(
                    max_examples=MAX_EXAMPLES,
                    database=None,
                    deadline=None,
                    derandomize=True,
                    phases=[Phase.generate],
                    suppress_health_check=list(HealthCheck),
                )
                @given(case=strategy)
                def collect(case: Any) -> None:
                    cases.append(case)

                with contextlib.suppress(Unsatisfiable):  # nothing to make negative
                    collect()
    return cases


def _plain(value: Any) -> Any:
    """Query values as httpx accepts them (generated ones may be nested)."""
    if isinstance(value, list):
        return [v if isinstance(v, str | int | float | bool) or v is None else json.dumps(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return json.dumps(value)


async def _send(api: Api, kwargs: dict[str, Any], *, with_key: bool) -> httpx.Response | None:
    headers = {
        k: v
        for k, v in (kwargs.get("headers") or {}).items()
        if k.lower() not in ("connection", "accept-encoding", "content-length", "host")
    }
    if with_key:
        headers["X-Api-Key"] = api.headers["X-Api-Key"]
    params = {k: _plain(v) for k, v in (kwargs.get("params") or {}).items()}
    body: dict[str, Any] = {}
    if "json" in kwargs:
        body["json"] = kwargs["json"]
    elif kwargs.get("data") is not None:
        data = kwargs["data"]
        body["content"] = data if isinstance(data, bytes | str) else json.dumps(data)
    url = kwargs["url"].replace("http://testserver.local", "")
    try:
        return await api.client.request(kwargs["method"], url, headers=headers, params=params, **body)
    except (httpx.InvalidURL, UnicodeEncodeError, TypeError, ValueError):
        return None  # the client cannot even encode it: never reaches the server


@pytest.mark.slow
async def test_schemathesis_finds_no_server_error(api: Api) -> None:
    response = await api.client.get("/schema/openapi.json")
    assert response.status_code == 200
    schema = schemathesis.openapi.from_dict(response.json())
    check = await create_check(api, name="fuzzed", slug="fuzzed", schedule="*/5 * * * *")
    r = await api.client.post("/api/v3/channels/", json={"url": "json://127.0.0.1:9/x"}, headers=api.headers)
    real = {"uuid": check["uuid"], "channel_id": r.json()["id"], "n": "1"}
    await api.client.post(f"/ping/{check['uuid']}", content=b"body")

    cases = await asyncio.to_thread(_collect_cases, schema, real)
    assert len(cases) > 100
    failures = []
    sent = 0
    for index, case in enumerate(cases):
        kwargs = case.as_transport_kwargs(base_url="http://testserver.local")
        answer = await _send(api, kwargs, with_key=index % 4 != 0)
        if answer is None:
            continue
        sent += 1
        if answer.status_code in SERVER_ERRORS:
            failures.append(
                (kwargs["method"], kwargs["url"], kwargs.get("params"), answer.status_code, answer.text)
            )
    assert sent > 100
    assert failures == []
    # The check survived the onslaught and still answers.
    assert (await api.client.get(f"/api/v3/checks/{check['uuid']}", headers=api.headers)).status_code in (
        200,
        404,
    )


# --------------------------------------------------------------------------- by hand


def _routes(uuid: str, channel_id: str, ping_key: str) -> list[str]:
    return [
        "/health",
        "/ready",
        "/schema/openapi.json",
        "/api/v3/checks/",
        f"/api/v3/checks/{uuid}",
        f"/api/v3/checks/{uuid}/pause",
        f"/api/v3/checks/{uuid}/resume",
        f"/api/v3/checks/{uuid}/pings/",
        f"/api/v3/checks/{uuid}/pings/1/body",
        f"/api/v3/checks/{uuid}/flips/",
        f"/api/v3/checks/{uuid}/runs/",
        f"/api/v3/checks/{uuid}/alerts/",
        "/api/v3/channels/",
        f"/api/v3/channels/{channel_id}",
        f"/api/v3/channels/{channel_id}/test",
        "/api/v3/cron/explain",
        f"/ping/{uuid}",
        f"/ping/{uuid}/start",
        f"/ping/{uuid}/fail",
        f"/ping/{uuid}/log",
        f"/ping/{uuid}/skip",
        f"/ping/{uuid}/7",
        f"/ping/{ping_key}/fuzzed",
        f"/ping/{ping_key}/fuzzed/start",
        f"/ping/{ping_key}/new-one",
    ]


WEIRD_PATHS = [
    "/",
    "//",
    "/ping",
    "/ping/",
    "/ping//",
    "/ping/%00",
    "/ping/%2e%2e/%2e%2e/etc/passwd",
    "/ping/../api/v3/checks/",
    "/ping/" + "a" * 5000,
    "/ping/" + "/".join(["x"] * 200),
    "/ping/ünïcödé/slug",
    "/ping/key/slug/start/more/parts",
    "/ping/6f1c5a4e-0000-4000-8000-000000000000/%ff",
    "/api/v3/checks/%00",
    "/api/v3/checks/" + "f" * 5000,
    "/api/v3/checks/6f1c5a4e-0000-4000-8000-000000000000/pings/99999999999999999999/body",
    "/api/v3/checks/6f1c5a4e-0000-4000-8000-000000000000/pings/-1/body",
    "/api/v3/channels/%00",
    "/api/v3/channels/" + "c" * 5000,
    "/api/v3/cron/explain?schedule=%00&tz=%00",
    "/api/v3/cron/explain?count=99999999999999999999",
    "/api/v3/checks/?tag=%00&slug=%ff",
    "/api/v3/checks/?limit=1e9",
]

QUERIES = [
    "",
    "?rid=%00",
    "?scheduled=%00",
    "?scheduled=99999999999999999999999999",
    "?scheduled=-99999999999",
    "?scheduled=9999-12-31T23:59:59Z",
    "?scheduled=0001-01-01T00:00:00Z",
    "?scheduled=2026-07-18T02:00:00%2B99:00",
    "?create=1&create=1",
    "?limit=0&limit=1",
    "?from=0001-01-01T00:00:00Z&to=9999-12-31T23:59:59Z",
    "?from=99999999999999999999",
    "?" + "a=b&" * 500,
]


async def test_malformed_requests_at_every_route(api: Api) -> None:
    rng = random.Random(20260718)
    check = await create_check(api, name="fuzzed", slug="fuzzed", schedule="*/5 * * * *")
    r = await api.client.post("/api/v3/channels/", json={"url": "json://127.0.0.1:9/x"}, headers=api.headers)
    channel_id = r.json()["id"]
    routes = _routes(check["uuid"], channel_id, str(api.project["ping_key"]))
    bodies: list[bytes] = [
        b"",
        b"{",
        b"null",
        b"[]",
        b'{"name": {"$gt": ""}}',
        b'{"timeout": 1e400}',
        b'{"grace": 99999999999999999999999999999}',
        b'{"schedule": "' + b"* " * 5000 + b'"}',
        b"\xff\xfe\x00\x00",
        b'{"name": "\\ud800"}',
        b"[" * 5000 + b"]" * 5000,
        bytes(rng.getrandbits(8) for _ in range(2048)),
    ]
    bodies += [bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300))) for _ in range(4)]
    content_types = [
        "application/json",
        "application/json; charset=latin-1",
        "text/plain",
        "multipart/form-data; boundary=xyz",
        "application/x-www-form-urlencoded",
    ]
    failures: list[tuple[str, str, int, str]] = []

    async def probe(method: str, url: str, **kwargs: Any) -> None:
        try:
            answer = await api.client.request(method, url, **kwargs)
        except (httpx.InvalidURL, UnicodeEncodeError):
            return
        if answer.status_code in SERVER_ERRORS:
            failures.append((method, url, answer.status_code, answer.text[:200]))

    keys = [api.headers, api.ro_headers, {}, {"X-Api-Key": "x" * 10_000}]
    for index, route in enumerate(routes):
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"):
            body = bodies[(index + len(method)) % len(bodies)]
            headers = {
                **keys[index % len(keys)],
                "Content-Type": content_types[index % len(content_types)],
                "Idempotency-Key": rng.choice(["k", "x" * 300, "é"]),
            }
            await probe(method, route, headers=headers, content=body)
        for body in bodies:
            await probe(
                "POST", route, headers={**api.headers, "Content-Type": "application/json"}, content=body
            )
        for query in QUERIES:
            await probe("GET", route + query, headers=api.headers)
    for path in WEIRD_PATHS:
        for method in ("GET", "POST", "DELETE"):
            await probe(method, path, headers=api.headers)
    # Huge headers, many headers, a big body.
    huge = {"X-Api-Key": api.headers["X-Api-Key"], "User-Agent": "u" * 60_000, "X-Junk": "j" * 60_000}
    many = {**api.headers, **{f"X-H-{i}": str(i) for i in range(500)}}
    for route in routes:
        await probe("GET", route, headers=huge)
        await probe("POST", route, headers=many, content=b"{}")
    big = b'{"name": "' + b"n" * 2_000_000 + b'"}'
    await probe(
        "POST", "/api/v3/checks/", headers={**api.headers, "Content-Type": "application/json"}, content=big
    )
    await probe("POST", f"/ping/{check['uuid']}/log", content=b"z" * 300_000)
    assert failures == []
    # Still healthy afterwards.
    assert (await api.client.get("/ready")).status_code == 200
    assert (await api.client.get(f"/ping/{check['uuid']}")).status_code in (200, 404)  # DELETE was fuzzed too
    fresh = await create_check(api, name="after")
    assert (await api.client.get(f"/ping/{fresh['uuid']}")).status_code == 200
