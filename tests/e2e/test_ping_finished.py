"""``finished=`` on a finish ping (docs/design.md §5, an extension of DESIGN §5) over the
in-process app, on SQLite and PostgreSQL: a finish delivered late says when its run ended.
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
RID_B = "5d0e8e58-1111-4222-8333-444455556662"
RID_C = "5d0e8e58-1111-4222-8333-444455556663"


async def ping(api: Api, path: str, **params: str) -> httpx.Response:
    return await api.client.post(f"/ping/{path}", params=params)


def at(clock_text: str) -> str:
    return f"2026-07-18T{clock_text}Z"


async def test_a_late_finish_with_its_real_end_does_not_overlap_the_next_run(api: Api) -> None:
    # the clock starts at 02:00:00; a check every minute, one run per tick with scheduled and rid
    check = await create_check(api, name="minutely", schedule="* * * * *", grace=20)
    uuid = check["uuid"]
    api.clock.advance(1)
    assert (await ping(api, f"{uuid}/start", rid=RID_A, scheduled=at("02:00:00"))).status_code == 200
    api.clock.advance(2)
    assert (await ping(api, f"{uuid}/0", rid=RID_A, scheduled=at("02:00:00"))).status_code == 200
    api.clock.advance(58)  # 02:01:01
    assert (await ping(api, f"{uuid}/start", rid=RID_B, scheduled=at("02:01:00"))).status_code == 200
    api.clock.advance(60)  # 02:02:01: the next tick's run starts while B's finish is held up
    assert (await ping(api, f"{uuid}/start", rid=RID_C, scheduled=at("02:02:00"))).status_code == 200
    api.clock.advance(29)  # 02:02:30: B's finish arrives, saying B ended at 02:01:06
    r = await ping(api, f"{uuid}/0", rid=RID_B, scheduled=at("02:01:00"), finished=at("02:01:06"))
    assert (r.status_code, r.text) == (200, "OK")
    api.clock.advance(5)
    assert (await ping(api, f"{uuid}/0", rid=RID_C, scheduled=at("02:02:00"))).status_code == 200

    runs = {r["rid"]: r for r in await list_of(api, uuid, "runs")}
    assert runs[RID_B]["finished"] == at("02:01:06")
    assert runs[RID_B]["duration"] == 5.0
    assert runs[RID_B]["outcome"] == "on_time"
    assert runs[RID_C]["outcome"] == "on_time"  # not overlapped: B had ended before C started
    pings = {(p["rid"], p["type"]): p for p in await list_of(api, uuid, "pings")}
    assert pings[(RID_B, "success")]["duration"] == 5.0
    async with api.engine.connect() as conn:
        stored = (
            await conn.execute(
                select(t.pings.c.finished_at, t.pings.c.received_at)
                .where(t.pings.c.rid == RID_B)
                .where(t.pings.c.kind == "success")
            )
        ).one()
    assert stored.finished_at == datetime(2026, 7, 18, 2, 1, 6, tzinfo=UTC)
    assert stored.received_at == datetime(2026, 7, 18, 2, 2, 30, tzinfo=UTC)


async def test_finished_in_unix_seconds_is_read_as_scheduled_is(api: Api) -> None:
    check = await create_check(api, name="minutely", schedule="* * * * *")
    uuid = check["uuid"]
    assert (await ping(api, f"{uuid}/start", rid=RID_A)).status_code == 200
    api.clock.advance(30)
    finished = str(int(datetime(2026, 7, 18, 2, 0, 10, tzinfo=UTC).timestamp()))
    assert (await ping(api, uuid, rid=RID_A, finished=finished)).status_code == 200
    [run] = await list_of(api, uuid, "runs")
    assert (run["finished"], run["duration"]) == (at("02:00:10"), 10.0)


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("", {"finished": "yesterday"}, "finished: not ISO 8601, unix seconds or unix milliseconds"),
    ("", {"finished": "2026-07-18T02:00:00"}, "finished: needs a UTC offset or Z"),
    ("", {"finished": "2026-07-18T02:00:06Z"}, "finished: is later than the ping's arrival"),
    ("/start", {"finished": "2026-07-18T02:00:00Z"}, "finished: only for a finish ping"),
    ("/log", {"finished": "2026-07-18T02:00:00Z"}, "finished: only for a finish ping"),
    ("", {"finished": ["2026-07-18T02:00:00Z", "2026-07-18T01:59:00Z"]}, "finished: given more than once"),
]


async def test_a_bad_finished_is_400_and_stores_nothing(api: Api) -> None:
    check = await create_check(api, name="minutely", schedule="* * * * *")
    uuid = check["uuid"]
    for action, params, text in BAD:
        r = await api.client.post(f"/ping/{uuid}{action}", params=params)
        assert r.status_code == 400, (action, params, r.text)
        assert r.text.startswith(text), r.text
    assert await list_of(api, uuid, "pings") == []


async def test_a_skip_ping_checks_finished_in_the_same_order_and_words_as_a_finish(api: Api) -> None:
    """``/skip`` reads its query as the other ping URLs do (rid, scheduled, then finished): an
    unreadable ``finished=`` gets the finish ping's 400 text; a readable one is refused as on
    ``/start`` and ``/log`` (no finish), and a missing ``scheduled`` comes first, as a bad
    ``scheduled`` does on a finish."""
    check = await create_check(api, name="minutely", schedule="* * * * *")
    uuid = check["uuid"]
    tick = at("02:00:00")
    for bad in ("yesterday", "2026-07-18T02:00:00", ["2026-07-18T02:00:00Z", "2026-07-18T01:59:00Z"]):
        finish = await api.client.post(f"/ping/{uuid}", params={"finished": bad})
        skip = await api.client.post(f"/ping/{uuid}/skip", params={"scheduled": tick, "finished": bad})
        assert (skip.status_code, skip.text) == (400, finish.text), (bad, skip.text, finish.text)
        assert finish.status_code == 400 and finish.text.startswith("finished: "), finish.text
    for action in ("/start", "/log", "/skip"):
        r = await api.client.post(f"/ping/{uuid}{action}", params={"scheduled": tick, "finished": tick})
        assert r.status_code == 400 and r.text.startswith("finished: only for a finish ping"), r.text
    finish = await api.client.post(f"/ping/{uuid}", params={"scheduled": "soon", "finished": "yesterday"})
    skip = await api.client.post(f"/ping/{uuid}/skip", params={"finished": "yesterday"})
    assert finish.text.startswith("scheduled: "), finish.text
    assert skip.text.startswith("scheduled: "), skip.text
    assert await list_of(api, uuid, "pings") == []
