"""A start never finished times out at start + max_runtime, within one evaluator interval."""

from __future__ import annotations

from datetime import datetime, timedelta

from monitor.services.evaluator import evaluate_due
from tests.conftest import Api


async def test_timeout_is_raised_one_interval_after_start_plus_max_runtime_at_most(api: Api) -> None:
    body = {"name": "etl", "schedule": "0 * * * *", "grace": 300, "max_runtime": 600}
    uuid = (await api.client.post("/api/v3/checks/", json=body, headers=api.headers)).json()["uuid"]
    api.clock.set(datetime.fromisoformat("2026-07-18T03:00:05+00:00"))
    started = api.clock.now()
    assert (await api.client.get(f"/ping/{uuid}/start")).status_code == 200
    interval = 1.0  # MONITOR_EVALUATE_INTERVAL
    for _ in range(700):
        api.clock.advance(interval)
        await evaluate_due(api.engine, api.clock.now(), settings=api.settings)
    alerts = (await api.client.get(f"/api/v3/checks/{uuid}/alerts/", headers=api.headers)).json()["alerts"]
    [timeout] = [a for a in alerts if a["kind"] == "timeout"]
    created = datetime.fromisoformat(timeout["created"].replace("Z", "+00:00"))
    deadline = started + timedelta(seconds=600)
    assert deadline < created <= deadline + timedelta(seconds=interval)
    assert timeout["scheduled"] == "2026-07-18T03:00:00Z"
    runs = (await api.client.get(f"/api/v3/checks/{uuid}/runs/", headers=api.headers)).json()["runs"]
    assert [r["outcome"] for r in runs] == ["timed_out"]
