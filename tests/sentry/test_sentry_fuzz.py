"""Malformed requests at the Sentry endpoints: always a 4xx (or 2xx), never a 5xx, nothing stored."""

from __future__ import annotations

import gzip
import random
from typing import Any

from sqlalchemy import func, select

from monitor.storage import tables as t
from tests.conftest import Api
from tests.sentry.test_sentry_endpoints import dsn_parts


async def test_random_envelopes_and_check_ins_never_get_a_server_error(api: Api) -> None:
    project_id, key = await dsn_parts(api)
    rng = random.Random(20261201)
    bodies = [
        b"",
        b"\n\n\n",
        b"{}",
        b"{}\n{}",
        b'{}\n{"type": "check_in", "length": 99999999999999999999}\n',
        b'{}\n{"type": "check_in", "length": 1.5}\nx\n',
        b'{}\n{"type": "check_in"}\n{"monitor_slug": {"a": 1}, "status": ["ok"]}\n',
        b'{}\n{"type": "check_in"}\n{"monitor_slug": "a", "status": "ok", "duration": 1e400}\n',
        b'{}\n{"type": "check_in"}\n{"monitor_slug": "a", "status": "ok", "monitor_config": []}\n',
        b'{}\n{"type": "check_in"}\n{"monitor_slug": "a", "status": "ok", "monitor_config": {"schedule": '
        b'{"type": "interval", "value": 1e308, "unit": "day"}, "checkin_margin": 1e308}}\n',
        b'{}\n{"type": "check_in"}\n{"monitor_slug": "a\\u0000b", "status": "ok", '
        b'"environment": "\\ud800"}\n',
        *(
            b'{}\n{"type": "check_in"}\n{"monitor_slug": "o", "status": "ok", "monitor_config": {"schedule": '
            b'{"type": "crontab", "value": "* * * * *"}, "owner": "' + owner + b'"}}\n'
            for owner in (b"\\ud800", b"a\\u0000b", b"\\u0007")
        ),
        b"[" * 5000 + b"]" * 5000,
        b"\xff\xfe\x00\x00",
        *(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 500))) for _ in range(6)),
    ]
    encodings = [None, "gzip", "br", "deflate", "compress", "gzip, br"]
    auths = [
        {"X-Sentry-Auth": f"Sentry sentry_key={key}"},
        {"X-Sentry-Auth": "garbage"},
        {"X-Sentry-Auth": "Sentry sentry_key=" + "k" * 10_000},
        {"Authorization": "DSN not a url"},
        {},
    ]
    failures: list[tuple[str, int, str]] = []

    async def probe(method: str, url: str, **kwargs: Any) -> None:
        response = await api.client.request(method, url, **kwargs)
        if response.status_code >= 500 or not response.headers.get("content-type", "").startswith(
            "application/json"
        ):
            failures.append((url, response.status_code, response.text[:200]))

    for index, body in enumerate(bodies):
        for encoding in encodings:
            headers = dict(auths[index % len(auths)])
            if encoding:
                headers["Content-Encoding"] = encoding
            content = gzip.compress(body) if encoding == "gzip" and index % 2 else body
            await probe("POST", f"/api/{project_id}/envelope/", content=content, headers=headers)
        await probe(
            "POST",
            f"/api/{project_id}/cron/job/{key}/",
            content=body,
            headers={"Content-Type": "application/json"},
        )
    for query in (
        "?status=ok&duration=nan",
        "?status=ok&duration=inf",
        "?status=ok&duration=1e999",
        "?status=ok&check_in_id=" + "f" * 5000,
        "?status=ok&environment=" + "e" * 5000,
        "?status=ok&status=error",
        "?status=%ff",
    ):
        await probe("GET", f"/api/{project_id}/cron/job/{key}/{query}")
    for path in (
        "/api/99999999999999999999999/envelope/",
        "/api/-1/envelope/",
        f"/api/{project_id}/cron/{'s' * 5000}/{key}/?status=ok",
        f"/api/{project_id}/cron/%00/{key}/?status=ok",
    ):
        await probe("POST", path, content=b"{}", headers={"X-Sentry-Auth": f"Sentry sentry_key={key}"})
    assert failures == []
    async with api.engine.connect() as conn:
        assert (await conn.execute(select(func.count()).select_from(t.pings))).scalar_one() == 0
