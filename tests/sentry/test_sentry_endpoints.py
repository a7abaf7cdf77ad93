"""The Sentry Crons endpoints through the real app (in process, injected clock, SQLite and PostgreSQL).

Envelopes are built here byte for byte as the SDKs send them; the real SDKs are driven in
``test_sentry_python.py``, ``test_sentry_js.py`` and ``test_sentry_celery.py``.
"""

from __future__ import annotations

import gzip
import json
import uuid
import zlib
from typing import Any

import brotli
from sqlalchemy import func, select

from monitor.storage import tables as t
from tests.conftest import Api
from tests.support.app import get_check, list_of

CRONTAB = {"schedule": {"type": "crontab", "value": "0 * * * *"}, "checkin_margin": 5, "max_runtime": 30}


async def dsn_parts(api: Api) -> tuple[int, str]:
    response = await api.client.get("/api/v3/project", headers=api.headers)
    assert response.status_code == 200, response.text
    dsn = response.json()["sentry_dsn"]
    key = dsn.split("://", 1)[1].split("@", 1)[0]
    return int(dsn.rsplit("/", 1)[1]), key


def envelope(*items: tuple[str, bytes], header: dict[str, Any] | None = None, lengths: bool = True) -> bytes:
    lines = [json.dumps(header or {"sent_at": "2026-07-18T02:00:00Z"}).encode()]
    for kind, payload in items:
        item_header: dict[str, Any] = {"type": kind}
        if lengths:
            item_header["length"] = len(payload)
        lines += [json.dumps(item_header).encode(), payload]
    return b"\n".join(lines) + b"\n"


def check_in(slug: str, status: str, check_in_id: str | None = None, **extra: Any) -> tuple[str, bytes]:
    body = {"check_in_id": check_in_id or uuid.uuid4().hex, "monitor_slug": slug, "status": status, **extra}
    return "check_in", json.dumps(body).encode()


async def post_envelope(
    api: Api, body: bytes, *, key: str | None, project_id: int, encoding: str | None = None
) -> Any:
    headers = {"Content-Type": "application/x-sentry-envelope"}
    if key is not None:
        headers["X-Sentry-Auth"] = f"Sentry sentry_key={key}, sentry_version=7, sentry_client=test/1.0"
    if encoding:
        headers["Content-Encoding"] = encoding
    return await api.client.post(f"/api/{project_id}/envelope/", content=body, headers=headers)


async def check_by_slug(api: Api, slug: str) -> dict[str, Any] | None:
    response = await api.client.get("/api/v3/checks/", params={"slug": slug}, headers=api.headers)
    found = response.json()["checks"]
    return found[0] if found else None


async def count(api: Api, table: Any) -> int:
    async with api.engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(table))).scalar_one())


async def test_a_check_in_with_monitor_config_creates_the_check_and_pairs_its_run(api: Api) -> None:
    project_id, key = await dsn_parts(api)
    run = uuid.uuid4().hex
    config = {**CRONTAB, "timezone": "Europe/Berlin", "failure_issue_threshold": 2, "recovery_threshold": 3}
    config["owner"] = "team:backend"
    response = await post_envelope(
        api,
        envelope(check_in("Nightly Billing", "in_progress", run, monitor_config=config)),
        key=key,
        project_id=project_id,
    )
    assert (response.status_code, response.json()) == (200, {})
    check = await check_by_slug(api, "nightly-billing")
    assert check is not None
    assert (check["kind"], check["schedule"], check["dialect"], check["tz"]) == (
        "cron",
        "0 * * * *",
        "unix",
        "Europe/Berlin",
    )
    assert (check["grace"], check["max_runtime"]) == (300, 1800)
    assert (check["failure_threshold"], check["recovery_threshold"]) == (2, 3)
    assert set(check["tags"].split()) == {"env:production", "owner:team:backend"}
    assert check["started"] is True

    api.clock.advance(42)
    response = await post_envelope(
        api,
        gzip.compress(envelope(check_in("nightly-billing", "ok", run, duration=41.5, monitor_config=config))),
        key=key,
        project_id=project_id,
        encoding="gzip",
    )
    assert (response.status_code, response.json()) == (200, {})
    runs = await list_of(api, check["uuid"], "runs")
    assert len(runs) == 1 and runs[0]["rid"] == str(uuid.UUID(run)) and runs[0]["outcome"] == "on_time"
    pings = await list_of(api, check["uuid"], "pings")
    assert [p["type"] for p in pings] == ["success", "start"]
    assert pings[0]["duration"] == 41.5 and pings[0]["rid"] == str(uuid.UUID(run))


async def test_envelopes_in_brotli_deflate_and_without_item_lengths_are_read(api: Api) -> None:
    project_id, key = await dsn_parts(api)
    config = {"schedule": {"type": "interval", "value": 10, "unit": "minute"}}
    plain = envelope(check_in("compressed", "ok", monitor_config=config), lengths=False)
    for encoding, body in (("br", brotli.compress(plain)), ("deflate", zlib.compress(plain)), (None, plain)):
        response = await post_envelope(api, body, key=key, project_id=project_id, encoding=encoding)
        assert (response.status_code, response.json()) == (200, {}), encoding
        api.clock.advance(600)
    check = await check_by_slug(api, "compressed")
    assert check is not None and check["kind"] == "simple" and check["timeout"] == 600
    assert check["grace"] == 60  # Sentry's default margin: one minute
    assert check["n_pings"] == 3


async def test_other_item_types_are_accepted_and_dropped(api: Api) -> None:
    project_id, key = await dsn_parts(api)
    event = json.dumps({"event_id": uuid.uuid4().hex, "message": "boom"}).encode()
    body = envelope(("event", event), ("session", b'{"sid": "x"}'), ("attachment", b"\x00\x01binary\n"))
    response = await post_envelope(api, body, key=key, project_id=project_id)
    assert (response.status_code, response.json()) == (200, {})
    assert await count(api, t.checks) == 0 and await count(api, t.pings) == 0


async def test_the_key_comes_from_the_auth_header_the_query_or_the_envelope_dsn(api: Api) -> None:
    project_id, key = await dsn_parts(api)
    config = {"schedule": {"type": "crontab", "value": "*/5 * * * *"}}
    body = envelope(check_in("auth-forms", "ok", monitor_config=config))
    response = await api.client.post(
        f"/api/{project_id}/envelope/?sentry_key={key}&sentry_version=7", content=body
    )
    assert response.status_code == 200, response.text
    with_dsn = envelope(
        check_in("auth-forms", "ok", monitor_config=config),
        header={"dsn": f"http://{key}@127.0.0.1:8000/{project_id}"},
    )
    response = await api.client.post(f"/api/{project_id}/envelope/", content=with_dsn)
    assert response.status_code == 200, response.text

    response = await api.client.post(f"/api/{project_id}/envelope/", content=body)
    assert response.status_code == 401 and response.json()["detail"].startswith("sentry_key: missing")
    response = await post_envelope(api, body, key="0" * 32, project_id=project_id)
    assert (response.status_code, response.json()) == (403, {"detail": "sentry_key: unknown public key"})
    response = await post_envelope(api, body, key=key, project_id=project_id + 1)
    assert response.status_code == 403 and "does not belong" in response.json()["detail"]
    response = await api.client.get(f"/api/{project_id}/cron/auth-forms/{'f' * 32}/?status=ok")
    assert response.status_code == 403
    check = await check_by_slug(api, "auth-forms")
    assert check is not None and check["n_pings"] == 2  # the refused ones stored nothing


async def test_an_unknown_monitor_without_config_is_404_and_creates_nothing(api: Api) -> None:
    project_id, key = await dsn_parts(api)
    response = await post_envelope(
        api, envelope(check_in("never-seen", "ok")), key=key, project_id=project_id
    )
    assert response.status_code == 404
    assert response.json()["detail"].startswith("monitor_slug: no monitor 'never-seen'")
    response = await api.client.get(f"/api/{project_id}/cron/never-seen/{key}/?status=in_progress")
    assert response.status_code == 404
    assert await count(api, t.checks) == 0


async def test_a_check_created_through_the_api_takes_check_ins_without_config(api: Api) -> None:
    project_id, key = await dsn_parts(api)
    created = await api.client.post(
        "/api/v3/checks/",
        json={"name": "backup", "slug": "backup", "schedule": "0 3 * * *"},
        headers=api.headers,
    )
    assert created.status_code == 201
    response = await api.client.get(f"/api/{project_id}/cron/backup/{key}/?status=in_progress")
    assert (response.status_code, response.json()) == (202, {"id": "0" * 32})
    api.clock.advance(5)
    response = await api.client.get(f"/api/{project_id}/cron/backup/{key}/?status=ok")
    assert response.status_code == 202
    runs = await list_of(api, created.json()["uuid"], "runs")
    assert len(runs) == 1 and runs[0]["finished"] is not None  # start and finish paired without ids


async def test_each_environment_is_its_own_check_tagged_with_it(api: Api) -> None:
    project_id, key = await dsn_parts(api)
    config = {"schedule": {"type": "crontab", "value": "30 2 * * *"}, "checkin_margin": 10}
    for environment in ("production", "staging"):
        response = await post_envelope(
            api,
            envelope(check_in("etl", "ok", environment=environment, monitor_config=config)),
            key=key,
            project_id=project_id,
        )
        assert response.status_code == 200
    production = await check_by_slug(api, "etl")
    staging = await check_by_slug(api, "etl--staging")
    assert production is not None and staging is not None
    assert production["tags"] == "env:production" and staging["tags"] == "env:staging"
    assert staging["name"] == "etl (staging)" and staging["grace"] == 600
    # a new environment without config takes the monitor's settings (as Sentry adds it to the monitor)
    response = await api.client.get(f"/api/{project_id}/cron/etl/{key}/?status=ok&environment=dev")
    assert response.status_code == 202
    dev = await check_by_slug(api, "etl--dev")
    assert dev is not None and (dev["schedule"], dev["grace"], dev["tags"]) == ("30 2 * * *", 600, "env:dev")


async def test_http_check_in_answers_the_check_in_id_and_pairs_by_it(api: Api) -> None:
    project_id, key = await dsn_parts(api)
    await api.client.post(
        "/api/v3/checks/", json={"name": "shell", "slug": "shell", "timeout": 3600}, headers=api.headers
    )
    run = str(uuid.uuid4())
    base = f"/api/{project_id}/cron/shell/{key}/"
    response = await api.client.get(base, params={"status": "in_progress", "check_in_id": run})
    assert (response.status_code, response.json()) == (202, {"id": uuid.UUID(run).hex})
    api.clock.advance(3)
    response = await api.client.post(base + f"?status=error&check_in_id={run}&duration=2.5")
    assert response.status_code == 202
    check = await check_by_slug(api, "shell")
    assert check is not None
    runs = await list_of(api, check["uuid"], "runs")
    assert [(r["rid"], r["outcome"]) for r in runs] == [(run, "failed")]
    alerts = await list_of(api, check["uuid"], "alerts")
    assert [a["kind"] for a in alerts] == ["failed"]
    pings = await list_of(api, check["uuid"], "pings")
    assert pings[0]["duration"] == 2.5


async def test_http_check_in_with_a_json_body_upserts_the_monitor(api: Api) -> None:
    project_id, key = await dsn_parts(api)
    body = {
        "status": "ok",
        "monitor_config": {"schedule": {"type": "interval", "value": "2", "unit": "hour"}},
    }
    response = await api.client.post(f"/api/{project_id}/cron/json-job/{key}/", json=body)
    assert response.status_code == 202, response.text
    check = await check_by_slug(api, "json-job")
    assert check is not None and check["timeout"] == 7200


async def test_resending_the_same_config_changes_nothing(api: Api) -> None:
    project_id, key = await dsn_parts(api)
    config = {**CRONTAB, "schedule": {"type": "crontab", "value": "*/10 * * * *"}}
    await post_envelope(
        api, envelope(check_in("steady", "ok", monitor_config=config)), key=key, project_id=project_id
    )
    check = await check_by_slug(api, "steady")
    assert check is not None
    tuned = await api.client.post(
        f"/api/v3/checks/{check['uuid']}", json={"desc": "tuned"}, headers=api.headers
    )
    assert tuned.status_code == 200
    before = await get_check(api, check["uuid"])
    api.clock.advance(600)
    await post_envelope(
        api, envelope(check_in("steady", "ok", monitor_config=config)), key=key, project_id=project_id
    )
    after = await get_check(api, check["uuid"])
    for name in ("schedule", "tz", "grace", "max_runtime", "tags", "desc", "name"):
        assert after[name] == before[name], name
    # a changed margin changes only the grace
    config["checkin_margin"] = 2
    await post_envelope(
        api, envelope(check_in("steady", "ok", monitor_config=config)), key=key, project_id=project_id
    )
    assert (await get_check(api, check["uuid"]))["grace"] == 120


async def test_bad_input_is_a_clear_4xx_and_stores_nothing(api: Api) -> None:
    project_id, key = await dsn_parts(api)

    async def refused(body: bytes, status: int, starts: str, encoding: str | None = None) -> None:
        response = await post_envelope(api, body, key=key, project_id=project_id, encoding=encoding)
        assert response.status_code == status, response.text
        assert response.json()["detail"].startswith(starts), response.json()

    config = dict(CRONTAB)
    await refused(b"not json\n", 400, "envelope: header is not valid JSON")
    await refused(b'{}\n{"type": "check_in", "length": 500}\n{}\n', 400, "item 1: length 500 runs past")
    await refused(b"{}\n[1]\n", 400, "item 1: header must be a JSON object")
    await refused(b'{}\n{"type": "check_in"}\nnot json\n', 400, "check_in: payload is not valid JSON")
    await refused(b"\x1f\x8bnot gzip", 400, "Content-Encoding:", encoding="gzip")
    await refused(b"{}", 415, "Content-Encoding:", encoding="zstd")
    huge = check_in("big", "ok", monitor_config=config, release="x" * 200_000)
    await refused(envelope(huge), 413, "check_in: item of")
    await refused(envelope(check_in("job", "missed", monitor_config=config)), 400, "status: must be one of")
    await refused(envelope(check_in("!!!", "ok", monitor_config=config)), 400, "monitor_slug:")
    bad_tz = {**config, "timezone": "Mars/Olympus"}
    await refused(envelope(check_in("job", "ok", monitor_config=bad_tz)), 400, "monitor_config.timezone:")
    bad_unit = {"schedule": {"type": "interval", "value": 5, "unit": "fortnight"}}
    await refused(
        envelope(check_in("job", "ok", monitor_config=bad_unit)), 400, "monitor_config.schedule.unit:"
    )
    bad_margin = {**config, "checkin_margin": "soon"}
    await refused(
        envelope(check_in("job", "ok", monitor_config=bad_margin)), 400, "monitor_config.checkin_margin:"
    )
    # croniter (which Sentry validates with) takes these; the unix dialect refuses them
    for expression, problem in (("0 0 30 2 *", "never fires"), ("0 0 * * * *", "6 fields")):
        crontab = {"schedule": {"type": "crontab", "value": expression}}
        response = await post_envelope(
            api, envelope(check_in("job", "ok", monitor_config=crontab)), key=key, project_id=project_id
        )
        assert response.status_code == 400
        detail = response.json()["detail"]
        assert detail.startswith("monitor_config.schedule.value:") and problem in detail, detail
    # one bad check-in in an envelope refuses the whole envelope
    good = check_in("good", "ok", monitor_config=config)
    await refused(
        envelope(good, check_in("bad", "ok", monitor_config=bad_tz)), 400, "monitor_config.timezone:"
    )
    response = await api.client.get(f"/api/{project_id}/cron/job/{key}/?status=finished")
    assert response.status_code == 400 and response.json()["detail"].startswith("status:")
    response = await api.client.get(f"/api/{project_id}/cron/job/{key}/")
    assert response.status_code == 400 and response.json()["detail"].startswith("status: is required")
    response = await api.client.get(f"/api/{project_id}/cron/job/{key}/?status=ok&check_in_id=nope")
    assert response.status_code == 400 and response.json()["detail"].startswith("check_in_id:")
    response = await api.client.get(f"/api/{project_id}/cron/job/{key}/?status=ok&duration=long")
    assert response.status_code == 400 and response.json()["detail"].startswith("duration:")
    assert await count(api, t.checks) == 0 and await count(api, t.pings) == 0


async def test_sentry_routes_do_not_collide_with_the_management_api(api: Api) -> None:
    project_id, key = await dsn_parts(api)
    listed = await api.client.get("/api/v3/checks/", headers=api.headers)
    assert listed.status_code == 200 and listed.json() == {"checks": []}
    explain = await api.client.get("/api/v3/cron/explain", params={"schedule": "0 3 * * *"})
    assert explain.status_code == 200
    for path in ("/api/v3/envelope/", "/api/v1/envelope/", "/api/abc/envelope/"):
        response = await api.client.post(path, content=envelope(check_in("x", "ok")))
        assert response.status_code in (404, 405), (path, response.status_code)
    response = await api.client.get(f"/api/v3/cron/x/{key}/?status=ok")
    assert response.status_code in (400, 404, 405)
    assert await count(api, t.pings) == 0
    response = await post_envelope(api, envelope(check_in("x", "ok")), key=key, project_id=project_id)
    assert response.status_code == 404  # reached the Sentry endpoint: an unknown monitor


async def test_project_answer_carries_the_sentry_dsn(api: Api) -> None:
    response = await api.client.get("/api/v3/project", headers=api.ro_headers)
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "test"
    key = body["sentry_dsn"].split("://", 1)[1].split("@", 1)[0]
    assert len(key) == 32 and body["sentry_dsn"] == f"http://{key}@127.0.0.1:8000/{body['id']}"
    assert (await api.client.get("/api/v3/project")).status_code == 401


async def test_an_envelope_over_the_limit_is_413_as_sent_and_decompressed(
    engine: Any, clock: Any, settings_factory: Any
) -> None:
    from tests.support.app import open_api

    async with open_api(engine, clock, settings_factory(sentry_envelope_limit=4096)) as api:
        project_id, key = await dsn_parts(api)
        config = {"schedule": {"type": "crontab", "value": "0 * * * *"}}
        padding = ("attachment", b"x" * 5000)
        body = envelope(check_in("limited", "ok", monitor_config=config), padding)
        response = await post_envelope(api, body, key=key, project_id=project_id)
        assert response.status_code == 413
        assert response.json() == {"detail": "envelope: larger than the 4096-byte limit"}
        response = await post_envelope(
            api, gzip.compress(body), key=key, project_id=project_id, encoding="gzip"
        )
        assert response.status_code == 413
        assert response.json()["detail"].endswith("limit once decompressed")
        response = await post_envelope(
            api, brotli.compress(body), key=key, project_id=project_id, encoding="br"
        )
        assert response.status_code == 413
        assert await count(api, t.checks) == 0
        small = envelope(check_in("limited", "ok", monitor_config=config))
        response = await post_envelope(
            api, gzip.compress(small), key=key, project_id=project_id, encoding="gzip"
        )
        assert response.status_code == 200
