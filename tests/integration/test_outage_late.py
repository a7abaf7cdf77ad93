"""A ping that waited out a monitor outage is not ``late`` (DESIGN §2, §6).

A stalled API process (SIGSTOP longer than 2 x TTL) ingests the job's on-time pings from the
kernel's queue after it resumes, before its liveness loop has recorded the outage. A tick whose
grace ended inside the outage gets outcome ``unknown`` and no alert; the run is still stored.
Clock-driven through the real app and services.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from monitor.services.evaluator import evaluate_due
from monitor.storage import tables as t
from monitor.workers.liveness import renew_liveness
from tests.conftest import Api


async def _setup(api: Api, grace: int = 30) -> str:
    check = (
        await api.client.post(
            "/api/v3/checks/",
            json={"name": "minutely", "schedule": "* * * * *", "grace": grace},
            headers=api.headers,
        )
    ).json()
    uuid = str(check["uuid"])
    await renew_liveness(api.engine, "web:1", "http", api.clock, api.settings)
    assert (await api.client.get(f"/ping/{uuid}")).status_code == 200  # 02:00:00, the first run
    return uuid


async def _up_for(api: Api, seconds: int, *, sweep: bool = True) -> None:
    """The monitor is up: liveness renewed (and the evaluator sweeping), every second."""
    for _ in range(seconds):
        api.clock.advance(1)
        await renew_liveness(api.engine, "web:1", "http", api.clock, api.settings)
        if sweep:
            await evaluate_due(api.engine, api.clock.now(), settings=api.settings)


async def _check_alerts(api: Api, uuid: str) -> list[str]:
    r = await api.client.get(f"/api/v3/checks/{uuid}/alerts/", headers=api.headers)
    return [a["kind"] for a in r.json()["alerts"]]


async def _marks(api: Api) -> dict[datetime, str]:
    async with api.engine.connect() as conn:
        rows = (await conn.execute(select(t.tick_marks.c.scheduled, t.tick_marks.c.outcome))).all()
    return {s.replace(tzinfo=None): o for s, o in rows}


async def test_ping_queued_during_a_stall_is_unknown_not_late(api: Api) -> None:
    # grace 20 s: the early window of the next tick is then 20 s (min(grace, 5 min)), so a ping
    # 30 s after 02:01 still belongs to 02:01 (DESIGN §5, rule 4)
    uuid = await _setup(api, grace=20)
    await _up_for(api, 65)  # to 02:01:05; tick 02:01's grace ends 02:01:20
    # SIGSTOP for 25 s (> 2 x TTL = 20 s): the job's 02:01:00 ping waited in the kernel's queue
    api.clock.advance(25)
    # ingested at 02:01:30, before the liveness loop has recorded the outage
    assert (await api.client.get(f"/ping/{uuid}")).status_code == 200
    await _up_for(api, 2)  # the outage is recorded; the evaluator sweeps
    assert await _check_alerts(api, uuid) == []
    marks = await _marks(api)
    assert marks == {datetime(2026, 7, 18, 2, 1): "unknown"}
    runs = (await api.client.get(f"/api/v3/checks/{uuid}/runs/", headers=api.headers)).json()["runs"]
    assert [r["scheduled"] for r in runs][:1] == ["2026-07-18T02:01:00Z"]  # stored and bound
    assert runs[0]["outcome"] != "late"
    async with api.engine.connect() as conn:
        outages = (await conn.execute(select(t.outages.c.id))).scalars().all()
    assert len(outages) == 1
    # the next tick is judged as usual: a late ping for 02:02 is late
    await _up_for(api, 55, sweep=False)  # 02:02:27 > 02:02:20, before the evaluator judged it
    assert (await api.client.get(f"/ping/{uuid}")).status_code == 200
    assert await _check_alerts(api, uuid) == ["late"]


async def test_ping_after_a_recorded_outage_is_unknown_not_late(api: Api) -> None:
    uuid = await _setup(api)
    await _up_for(api, 80)
    api.clock.advance(25)
    await _up_for(api, 1)  # liveness first this time: the outage is recorded, 02:01 judged unknown
    assert (await api.client.get(f"/ping/{uuid}")).status_code == 200
    assert await _check_alerts(api, uuid) == []
    assert await _marks(api) == {datetime(2026, 7, 18, 2, 1): "unknown"}


async def test_late_ping_after_a_restart_is_still_late(api: Api) -> None:
    """A tick whose grace ended after the outage was over: the job really was late."""
    uuid = await _setup(api, grace=20)  # early window 20 s: 02:01:29 still belongs to 02:01
    await _up_for(api, 50)  # 02:00:50
    api.clock.advance(25)  # down 02:00:50-02:01:15, then a plain restart
    await _up_for(api, 14, sweep=False)  # 02:01:29: grace of 02:01 ended at 02:01:20, the monitor was up
    assert (await api.client.get(f"/ping/{uuid}")).status_code == 200
    assert await _check_alerts(api, uuid) == ["late"]
    assert await _marks(api) == {}


async def test_a_flapping_monitor_pages_once_per_episode(api: Api) -> None:
    """Outages separated by less than 2 x TTL are one (extended), so the guard cannot
    storm; an outage after the monitor was back for longer is a new one."""
    await renew_liveness(api.engine, "web:1", "http", api.clock, api.settings)
    for _ in range(6):  # down 25 s (> 2 x TTL = 20 s), up 3 s, again and again
        api.clock.advance(25)
        await _up_for(api, 3, sweep=False)
    async with api.engine.connect() as conn:
        spans = (await conn.execute(select(t.outages.c.started_at, t.outages.c.ended_at))).all()
        unavailable = (
            (await conn.execute(select(t.alerts.c.id).where(t.alerts.c.kind == "monitor_unavailable")))
            .scalars()
            .all()
        )
    assert len(spans) == 1 and len(unavailable) == 1
    assert (spans[0][1] - spans[0][0]).total_seconds() == 28 * 5 + 26  # extended to the last one
    await _up_for(api, 30, sweep=False)  # back for longer than 2 x TTL
    api.clock.advance(25)
    await _up_for(api, 1, sweep=False)
    async with api.engine.connect() as conn:
        count = len(
            (await conn.execute(select(t.alerts.c.id).where(t.alerts.c.kind == "monitor_unavailable")))
            .scalars()
            .all()
        )
    assert count == 2
