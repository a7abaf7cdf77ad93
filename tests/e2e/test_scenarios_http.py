"""The shared run scenarios through the real HTTP API, with the clock injected (DESIGN §5)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from monitor.services.evaluator import evaluate_due
from monitor.storage import tables as t
from tests.conftest import Api
from tests.scenarios import Scenario, parse_instant, ping_kind_and_status, scenario_files

EPSILON = timedelta(milliseconds=1)


async def _evaluate_until(api: Api, limit: object) -> None:
    for _ in range(10_000):
        async with api.engine.connect() as conn:
            due = (await conn.execute(select(func.min(t.checks.c.next_due)))).scalar_one_or_none()
        if due is None or not due + EPSILON < limit:  # type: ignore[operator]
            return
        await evaluate_due(api.engine, due + EPSILON, settings=api.settings)


@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: p.stem)
async def test_scenario_over_http(api: Api, path: Path) -> None:
    scenario = Scenario.load(path)
    api.clock.set(scenario.created)
    response = await api.client.post(
        "/api/v3/checks/", json={"name": scenario.id, **scenario.check}, headers=api.headers
    )
    assert response.status_code == 201, response.text
    uuid = response.json()["uuid"]
    for step in scenario.steps:
        at = parse_instant(step["at"])
        await _evaluate_until(api, at)
        api.clock.set(at)
        if "ping" in step:
            kind, exit_status = ping_kind_and_status(step["ping"])
            action = (
                ""
                if kind == "success" and exit_status is None
                else f"/{exit_status if exit_status is not None else kind}"
            )
            params = {k: step[k] for k in ("rid", "scheduled") if k in step}
            headers = {"Idempotency-Key": step["idempotency_key"]} if "idempotency_key" in step else {}
            if "body" in step:
                r = await api.client.post(
                    f"/ping/{uuid}{action}", params=params, headers=headers, content=step["body"]
                )
            else:
                r = await api.client.get(f"/ping/{uuid}{action}", params=params, headers=headers)
            assert r.status_code == 200, r.text
        elif step.get("pause"):
            assert (
                await api.client.post(f"/api/v3/checks/{uuid}/pause", headers=api.headers)
            ).status_code == 200
        elif step.get("resume"):
            assert (
                await api.client.post(f"/api/v3/checks/{uuid}/resume", headers=api.headers)
            ).status_code == 200
        else:
            await evaluate_due(api.engine, at, settings=api.settings)
    alerts = (await api.client.get(f"/api/v3/checks/{uuid}/alerts/", headers=api.headers)).json()["alerts"]
    assert sorted((a["kind"], a["scheduled"]) for a in alerts) == scenario.expected_alerts()
    check = (await api.client.get(f"/api/v3/checks/{uuid}", headers=api.headers)).json()
    assert check["status"] == scenario.expect["status"]
    runs = (
        await api.client.get(f"/api/v3/checks/{uuid}/runs/", params={"limit": "1000"}, headers=api.headers)
    ).json()["runs"]
    for tick in scenario.expect.get("ticks", []):
        bound = [r for r in runs if r["scheduled"] == tick["scheduled"]]
        if "runs" in tick:
            assert len(bound) == tick["runs"], tick
