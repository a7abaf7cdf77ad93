"""``started=`` on a start ping (docs/design.md §5, an extension of DESIGN §5) over the
in-process app, on SQLite and PostgreSQL: a start delivered late says when its run started.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import select

from monitor.storage import tables as t
from tests.conftest import Api
from tests.support.app import create_check, list_of

RID_A = "5d0e8e58-1111-4222-8333-444455556661"


async def ping(api: Api, path: str, **params: str) -> httpx.Response:
    return await api.client.post(f"/ping/{path}", params=params)


def at(clock_text: str) -> str:
    return f"2026-07-18T{clock_text}Z"


async def test_a_late_start_with_its_real_start_keeps_the_runs_real_duration(api: Api) -> None:
    # the clock starts at 02:00:00; the run started at 02:00:01 and ended at 02:00:03, and both
    # its pings went out at 02:00:08 (its reporter was stopped meanwhile)
    check = await create_check(api, name="minutely", schedule="* * * * *", grace=20)
    uuid = check["uuid"]
    api.clock.advance(8)
    r = await ping(api, f"{uuid}/start", rid=RID_A, started=at("02:00:01"))
    assert (r.status_code, r.text) == (200, "OK")
    r = await ping(api, f"{uuid}/0", rid=RID_A, finished=at("02:00:03"))
    assert (r.status_code, r.text) == (200, "OK")
    [run] = await list_of(api, uuid, "runs")
    assert (run["started"], run["finished"], run["duration"]) == (at("02:00:01"), at("02:00:03"), 2.0)
    async with api.engine.connect() as conn:
        stored = (
            await conn.execute(
                select(t.pings.c.started_at, t.pings.c.received_at).where(t.pings.c.kind == "start")
            )
        ).one()
    assert stored.started_at == datetime(2026, 7, 18, 2, 0, 1, tzinfo=UTC)
    assert stored.received_at == datetime(2026, 7, 18, 2, 0, 8, tzinfo=UTC)


async def test_started_in_unix_seconds_on_a_slug_start(api: Api) -> None:
    check = await create_check(api, name="nightly", slug="nightly", schedule="* * * * *", grace=20)
    uuid = check["uuid"]
    api.clock.advance(30)
    started = str(int(datetime(2026, 7, 18, 2, 0, 10, tzinfo=UTC).timestamp()))
    r = await ping(api, f"{api.project['ping_key']}/nightly/start", rid=RID_A, started=started)
    assert (r.status_code, r.text) == (200, "OK")
    [run] = await list_of(api, uuid, "runs")
    assert run["started"] == at("02:00:10")


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("/start", {"started": "yesterday"}, "started: not ISO 8601, unix seconds or unix milliseconds"),
    ("/start", {"started": "2026-07-18T02:00:00"}, "started: needs a UTC offset or Z"),
    ("/start", {"started": "1999-12-31T23:59:59Z"}, "started: out of range (2000-01-01 to 9000-01-01)"),
    ("/start", {"started": "2026-07-18T02:00:06Z"}, "started: is later than the ping's arrival"),
    # a client whose clock was reset: a run that began then would have timed out long ago
    (
        "/start",
        {"started": "2000-01-02T00:00:00Z"},
        "started: is more than the check's max_runtime (1800 s) before the ping's arrival",
    ),
    ("", {"started": "2026-07-18T02:00:00Z"}, "started: only for a start ping"),
    ("/fail", {"started": "2026-07-18T02:00:00Z"}, "started: only for a start ping"),
    ("/0", {"started": "2026-07-18T02:00:00Z"}, "started: only for a start ping"),
    ("/log", {"started": "2026-07-18T02:00:00Z"}, "started: only for a start ping"),
    (
        "/start",
        {"started": ["2026-07-18T02:00:00Z", "2026-07-18T01:59:00Z"]},
        "started: given more than once",
    ),
]


async def test_a_bad_started_is_400_and_stores_nothing(api: Api) -> None:
    check = await create_check(api, name="minutely", schedule="* * * * *")
    uuid = check["uuid"]
    for action, params, text in BAD:
        r = await api.client.post(f"/ping/{uuid}{action}", params=params)
        assert r.status_code == 400, (action, params, r.text)
        assert r.text.startswith(text), r.text
    assert await list_of(api, uuid, "pings") == []
    assert await list_of(api, uuid, "runs") == []


async def test_a_scheduled_tick_after_a_late_starts_real_start_names_started(api: Api) -> None:
    # the start binds at its real start (02:00:30), so a scheduled= of 02:05 is in its future
    # although the ping arrived at 02:10: the answer names started, not the arrival
    check = await create_check(api, name="five", schedule="*/5 * * * *", grace=20)
    uuid = check["uuid"]
    api.clock.advance(600)
    r = await ping(api, f"{uuid}/start", started=at("02:00:30"), scheduled=at("02:05:00"))
    assert (r.status_code, r.text) == (
        400,
        "scheduled: is later than started (the run's start) plus the early tolerance",
    )
    r = await ping(api, f"{uuid}/start", scheduled=at("02:05:00"))
    assert r.status_code == 200, r.text
