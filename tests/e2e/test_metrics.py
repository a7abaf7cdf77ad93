"""``GET /metrics`` over the in-process app, on SQLite and PostgreSQL (DESIGN §6, §9).

Prometheus text built per scrape from the database: leases held (lease, holder, token), shard
count, evaluator lag, liveness and outages; open unless ``MONITOR_METRICS_KEY`` is set, then
``Authorization: Bearer <key>``.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import httpx
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from monitor.services import outages
from monitor.storage import tables as t
from monitor.storage.engine import make_engine
from tests.conftest import Api
from tests.support.app import create_check, open_api

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(response: httpx.Response) -> Samples:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain"), response.headers
    found: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: Samples, name: str, **labels: str) -> float:
    return found[(name, tuple(sorted(labels.items())))]


def series(found: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: v for (n, labels), v in found.items() if n == name}


async def scrape(api: Api, **headers: str) -> Samples:
    return samples(await api.client.get("/metrics", headers=headers))


async def test_open_without_a_key_shards_database_and_version(api: Api) -> None:
    found = await scrape(api)
    assert value(found, "monitor_shards") == api.settings.shards
    assert value(found, "monitor_database_up") == 1
    assert len(series(found, "monitor_build_info")) == 1
    assert value(found, "monitor_evaluator_lag_seconds") == 0
    assert value(found, "monitor_checks_due") == 0
    assert value(found, "monitor_shards_unheld") == api.settings.shards
    assert series(found, "monitor_lease_held") == {}
    assert value(found, "monitor_outages_total") == 0
    assert value(found, "monitor_outage_ongoing") == 0


async def test_leases_held_per_lease_holder_and_token(api: Api) -> None:
    now = api.clock.now()
    async with api.engine.begin() as conn:
        await conn.execute(
            t.leases.insert(),
            [
                {
                    "name": "shard-0",
                    "holder": "host-a:11",
                    "token": 7,
                    "expires_at": now + timedelta(seconds=5),
                },
                {
                    "name": "shard-1",
                    "holder": "host-a:11",
                    "token": 2,
                    "expires_at": now + timedelta(seconds=5),
                },
                {
                    "name": "shard-2",
                    "holder": "host-b:22",
                    "token": 4,
                    "expires_at": now - timedelta(seconds=1),
                },
                {"name": "shard-3", "holder": None, "token": 9, "expires_at": None},
                {"name": "job-backup", "holder": "host-b:22", "token": 1, "expires_at": now + timedelta(1)},
            ],
        )
    found = await scrape(api)
    held = series(found, "monitor_lease_held")
    assert held == {
        (("holder", "host-a:11"), ("lease", "shard-0")): 1,
        (("holder", "host-a:11"), ("lease", "shard-1")): 1,
        (("holder", "host-b:22"), ("lease", "shard-2")): 0,  # expired: not held
        (("holder", ""), ("lease", "shard-3")): 0,
        (("holder", "host-b:22"), ("lease", "job-backup")): 1,
    }
    assert value(found, "monitor_lease_token", lease="shard-0") == 7
    assert value(found, "monitor_lease_token", lease="shard-3") == 9
    assert (
        value(found, "monitor_lease_expires_timestamp_seconds", lease="shard-1")
        == (now + timedelta(seconds=5)).timestamp()
    )
    assert ("monitor_lease_expires_timestamp_seconds", (("lease", "shard-3"),)) not in found
    assert value(found, "monitor_leases_held", holder="host-a:11") == 2
    assert value(found, "monitor_leases_held", holder="host-b:22") == 1  # the job lease
    assert value(found, "monitor_shards_unheld") == api.settings.shards - 2


async def test_evaluator_lag_is_age_of_oldest_overdue_deadline(api: Api) -> None:
    check = await create_check(api, name="lagging", timeout=60, grace=30)
    other = await create_check(api, name="fresh", timeout=3600, grace=60)
    for uuid in (check["uuid"], other["uuid"]):
        assert (await api.client.get(f"/ping/{uuid}")).status_code == 200
    async with api.engine.connect() as conn:
        due = (
            await conn.execute(select(t.checks.c.next_due).where(t.checks.c.uuid == check["uuid"]))
        ).scalar_one()
    assert due is not None
    found = await scrape(api)
    assert value(found, "monitor_evaluator_lag_seconds") == 0  # nothing overdue yet
    assert value(found, "monitor_checks_due") == 0
    api.clock.set(due + timedelta(seconds=42.5))
    found = await scrape(api)
    assert value(found, "monitor_evaluator_lag_seconds") == 42.5
    assert value(found, "monitor_checks_due") == 1


async def test_liveness_processes_replicas_and_recorded_outages(api: Api) -> None:
    ttl = timedelta(seconds=api.settings.lease_ttl)
    start = api.clock.now()
    await outages.renew(api.engine, "host-a:1", "http", start, ttl)
    await outages.renew(api.engine, "host-b:2", "http,evaluator", start, ttl)
    async with api.engine.begin() as conn:
        await conn.execute(
            t.replicas.insert(),
            [
                {"name": "host-b:2", "role": "evaluator", "renewed_at": start},
                {"name": "host-c:3", "role": "evaluator", "renewed_at": start - 2 * ttl},  # dead
            ],
        )
    found = await scrape(api)
    assert value(found, "monitor_live_processes") == 2
    assert value(found, "monitor_evaluator_replicas") == 1
    assert value(found, "monitor_liveness_age_seconds") == 0
    assert value(found, "monitor_outage_ongoing") == 0

    api.clock.advance(10 * ttl.total_seconds())  # every monitor process gone quiet
    found = await scrape(api)
    assert value(found, "monitor_live_processes") == 0
    assert value(found, "monitor_outage_ongoing") == 1
    assert value(found, "monitor_liveness_age_seconds") == 10 * ttl.total_seconds()

    assert await outages.renew(api.engine, "host-a:1", "http", api.clock.now(), ttl)  # records it
    found = await scrape(api)
    assert value(found, "monitor_outages_total") == 1
    assert value(found, "monitor_outage_ongoing") == 0
    assert value(found, "monitor_live_processes") == 1


async def test_metrics_key_requires_bearer(api: Api) -> None:
    settings = api.settings.replace(metrics_key="metrics-secret-0123")
    async with api.engine.begin() as conn:
        await conn.execute(t.projects.delete())  # open_api creates its own project
    async with open_api(api.engine, api.clock, settings) as keyed:
        for headers in (
            {},
            {"Authorization": "Bearer wrong-key"},
            {"Authorization": "Basic bWV0cmljczpzZWNyZXQ="},
            {"Authorization": "Bearer "},
            {"X-Api-Key": "metrics-secret-0123"},
        ):
            refused = await keyed.client.get("/metrics", headers=headers)
            assert refused.status_code == 401, (headers, refused.text)
            assert refused.headers["content-type"].startswith("application/json")
            body: dict[str, Any] = refused.json()
            assert list(body) == ["error"] and body["error"].startswith("Authorization: "), body
            assert refused.headers["www-authenticate"].startswith("Bearer")
        found = await scrape(keyed, Authorization="Bearer metrics-secret-0123")
        assert value(found, "monitor_shards") == settings.shards
        # the scheme is case-insensitive, as RFC 7235 says
        assert (
            await keyed.client.get("/metrics", headers={"Authorization": "bearer metrics-secret-0123"})
        ).status_code == 200


async def test_openmetrics_on_request_and_no_global_registry_state(api: Api) -> None:
    answer = await api.client.get(
        "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/openmetrics-text")
    assert answer.text.rstrip().endswith("# EOF")
    assert "monitor_shards " in answer.text
    assert b"monitor_shards" not in generate_latest(REGISTRY)  # nothing registered globally


async def test_database_unreachable_is_database_up_zero(api: Api) -> None:
    services = api.client.app.state.services
    bad = (
        "sqlite+aiosqlite:////nonexistent-dir/never/monitor.db"
        if services.engine.dialect.name == "sqlite"
        else "postgresql+asyncpg://postgres@127.0.0.1:1/none"
    )
    broken = make_engine(bad)
    api.client.app.state.services = dataclasses.replace(services, engine=broken)
    try:
        found = await scrape(api)
    finally:
        api.client.app.state.services = services
        await broken.dispose()
    assert value(found, "monitor_database_up") == 0
    assert value(found, "monitor_shards") == api.settings.shards
    assert series(found, "monitor_evaluator_lag_seconds") == {}
