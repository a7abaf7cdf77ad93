"""The self-outage guard through the services, clock-driven (DESIGN §6)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from monitor.services.evaluator import evaluate_due
from monitor.storage import tables as t
from monitor.workers.liveness import renew_liveness
from tests.conftest import Api
from tests.support.receivers import HttpReceiver


async def _alerts(api: Api, uuid: str) -> list[dict[str, object]]:
    r = await api.client.get(f"/api/v3/checks/{uuid}/alerts/", headers=api.headers)
    return list(r.json()["alerts"])


async def test_ten_minutes_down_gives_unknown_ticks_and_one_project_alert(
    api: Api, http_receiver: HttpReceiver
) -> None:
    settings = api.settings.replace(lease_ttl=10.0)
    clock = api.clock
    channel = (
        await api.client.post("/api/v3/channels/", json={"url": http_receiver.url}, headers=api.headers)
    ).json()["id"]
    check = (
        await api.client.post(
            "/api/v3/checks/",
            json={"name": "every-minute", "schedule": "* * * * *", "grace": 30, "channels": channel},
            headers=api.headers,
        )
    ).json()
    uuid = check["uuid"]

    async def tick(seconds: float) -> None:
        """The monitor is up: liveness renewed and the evaluator sweeping, every second."""
        for _ in range(int(seconds)):
            clock.advance(1)
            await renew_liveness(api.engine, "web:1", "http,evaluator", clock, settings)
            await evaluate_due(api.engine, clock.now(), settings=settings)

    await renew_liveness(api.engine, "web:1", "http,evaluator", clock, settings)
    assert (await api.client.get(f"/ping/{uuid}")).status_code == 200
    await tick(5)
    clock.advance(600)  # the whole monitor is down for ten minutes: nothing renews, nothing sweeps
    await tick(2)

    kinds = [a["kind"] for a in await _alerts(api, uuid)]
    assert kinds == []  # not ten missed alerts, not one
    async with api.engine.connect() as conn:
        marks = (await conn.execute(select(t.tick_marks.c.outcome))).scalars().all()
        project_alerts = (
            await conn.execute(
                select(t.alerts.c.kind, t.alerts.c.message).where(t.alerts.c.check_id.is_(None))
            )
        ).all()
        queued = (await conn.execute(select(t.notifications.c.id))).scalars().all()
    # down 02:00:05-02:10:05: the ticks 02:01 … 02:09 had their grace end inside
    assert set(marks) == {"unknown"} and len(marks) == 9
    assert [k for k, _ in project_alerts] == ["monitor_unavailable"]
    assert "unavailable from" in project_alerts[0][1]
    assert len(queued) == 1  # to the project's channel
    status = (await api.client.get(f"/api/v3/checks/{uuid}", headers=api.headers)).json()["status"]
    assert status != "down"

    # back up, and the job is really silent: the next tick is missed as usual
    await tick(90)
    assert [a["kind"] for a in await _alerts(api, uuid)] == ["missed"]


async def test_no_liveness_at_all_means_no_guard(api: Api) -> None:
    """Tests and replays that drive the services directly never see an outage."""
    check = (
        await api.client.post(
            "/api/v3/checks/", json={"schedule": "* * * * *", "grace": 30}, headers=api.headers
        )
    ).json()
    assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200
    api.clock.advance(timedelta(minutes=5).total_seconds())
    await evaluate_due(api.engine, api.clock.now(), settings=api.settings)
    alerts = (await api.client.get(f"/api/v3/checks/{check['uuid']}/alerts/", headers=api.headers)).json()[
        "alerts"
    ]
    assert [a["kind"] for a in alerts] == ["missed"]


async def test_a_sweep_judges_a_deferred_check_once_not_once_per_batch(api: Api) -> None:
    """A deadline after the last liveness renewal waits for the next one; the sweep does not
    select the waiting checks again and again (they stay due) until it runs out of batches."""
    clock = api.clock
    settings = api.settings.replace(lease_ttl=120.0)  # 95 s without a renewal is no outage
    uuids = []
    for i in range(3):
        body = {"name": f"job-{i}", "schedule": "* * * * *", "grace": 30}
        created = await api.client.post("/api/v3/checks/", json=body, headers=api.headers)
        uuids.append(created.json()["uuid"])
    await renew_liveness(api.engine, "web:1", "http,evaluator", clock, settings)
    for uuid in uuids:
        assert (await api.client.get(f"/ping/{uuid}")).status_code == 200
    await renew_liveness(api.engine, "web:1", "http,evaluator", clock, settings)
    clock.advance(95)  # every check's next tick + grace has passed; no renewal since
    judged = await evaluate_due(api.engine, clock.now(), settings=settings, batch=2)
    assert judged <= len(uuids)  # each at most once (it was 100 batches of the same checks)
    async with api.engine.connect() as conn:
        assert (await conn.execute(select(t.tick_marks.c.outcome))).scalars().all() == []

    await renew_liveness(api.engine, "web:1", "http,evaluator", clock, settings)
    assert await evaluate_due(api.engine, clock.now(), settings=settings, batch=2) == len(uuids)
    for uuid in uuids:
        assert [a["kind"] for a in await _alerts(api, uuid)] == ["missed"]
