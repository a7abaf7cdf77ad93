"""Random ping sequences through the real HTTP app: never a 5xx, never two alerts
with one key, and the same sequence replayed gives the same alerts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.services.evaluator import evaluate_due
from tests.conftest import Api

RIDS = [None, "a0000000-0000-4000-8000-00000000000a", "b0000000-0000-4000-8000-00000000000b", "not-a-uuid"]
T0 = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)

step = st.tuples(
    st.integers(min_value=0, max_value=4000),
    st.sampled_from(["", "/start", "/fail", "/log", "/skip", "/3", "/0", "/256", "/bogus"]),
    st.sampled_from(RIDS),
    st.one_of(st.none(), st.integers(min_value=-7200, max_value=120).map(str), st.just("garbage")),
)


async def _run(
    api: Api, schedule: dict[str, object], steps: list[tuple[int, str, str | None, str | None]]
) -> list[tuple[str, str | None]]:
    api.clock.set(T0)
    check = (await api.client.post("/api/v3/checks/", json=schedule, headers=api.headers)).json()
    uuid = check["uuid"]
    for delta, action, rid, scheduled in steps:
        api.clock.advance(delta)
        await evaluate_due(api.engine, api.clock.now(), settings=api.settings)
        params: dict[str, str] = {}
        if rid is not None:
            params["rid"] = rid
        if scheduled is not None:
            if scheduled == "garbage":
                params["scheduled"] = scheduled
            else:
                at = api.clock.now() + timedelta(seconds=int(scheduled))
                params["scheduled"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        r = await api.client.post(f"/ping/{uuid}{action}", params=params, content=b"output")
        assert r.status_code < 500, (action, params, r.text)
        assert r.headers["content-type"].startswith("text/plain")
    await evaluate_due(api.engine, api.clock.now() + timedelta(hours=2), settings=api.settings)
    r = await api.client.get(f"/api/v3/checks/{uuid}/alerts/", params={"limit": "1000"}, headers=api.headers)
    assert r.status_code == 200
    alerts = r.json()["alerts"]
    return sorted((a["kind"], a["scheduled"]) for a in alerts)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    schedule=st.sampled_from(
        [
            {"name": "hourly", "schedule": "0 * * * *", "grace": 300, "max_runtime": 5400},
            {
                "name": "berlin",
                "schedule": "30 2 * * *",
                "tz": "Europe/Berlin",
                "grace": 900,
                "failure_threshold": 2,
            },
            {"name": "simple", "timeout": 1800, "grace": 300, "max_runtime": 1200},
        ]
    ),
    steps=st.lists(step, min_size=1, max_size=15),
)
async def test_random_ping_sequences(
    api: Api, schedule: dict[str, object], steps: list[tuple[int, str, str | None, str | None]]
) -> None:
    first = await _run(api, schedule, steps)
    second = await _run(api, schedule, steps)
    assert first == second
