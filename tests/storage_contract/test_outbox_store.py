"""The outbox port (monitor/storage/outbox.py): its contract, the same on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, text, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.services import projects
from monitor.storage import bulk, outbox
from monitor.storage import tables as t
from monitor.storage.outbox import NewAlert, Notice, OutboxStatus, Outcome, Source

NOW = datetime(2026, 7, 18, 2, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=1)


@dataclass
class World:
    engine: AsyncEngine
    project_id: int
    checks: list[int]
    channels: list[str]


@pytest.fixture
async def world(outbox_engine: AsyncEngine) -> AsyncIterator[World]:
    """One project with two checks and three channels; check 0 routes to channels 0 and 1."""
    async with outbox_engine.begin() as conn:
        project = await projects.create_project(conn, "outbox", NOW, api_key="outbox-key-0123456789abcd")
        project_id = int(project["id"])
        channels = [str(uuid.uuid4()) for _ in range(3)]
        await conn.execute(
            t.channels.insert(),
            [
                {
                    "id": cid,
                    "project_id": project_id,
                    "url": f"json://127.0.0.1:9/{i}",
                    "kinds": kinds,
                    "created_at": NOW,
                }
                for i, (cid, kinds) in enumerate(
                    zip(channels, ["", "missed, failed", "recovered"], strict=True)
                )
            ],
        )
        checks = []
        for i in range(2):
            result = await conn.execute(
                t.checks.insert()
                .values(
                    uuid=str(uuid.uuid4()),
                    project_id=project_id,
                    name=f"job-{i}",
                    kind="simple",
                    badge_uuid=str(uuid.uuid4()),
                    created_at=NOW,
                    shard=0,
                )
                .returning(t.checks.c.id)
            )
            checks.append(int(result.scalar_one()))
        await conn.execute(
            t.check_channels.insert(),
            [
                {"check_id": checks[0], "channel_id": channels[0]},
                {"check_id": checks[0], "channel_id": channels[1]},
            ],
        )
    yield World(engine=outbox_engine, project_id=project_id, checks=checks, channels=channels)


def _alert(world: World, key: str, *, check: int | None = 0, kind: str = "missed") -> NewAlert:
    return NewAlert(
        project_id=world.project_id,
        check_id=None if check is None else world.checks[check],
        key=key,
        kind=kind,
        created_at=NOW,
        title=f"title {key}",
        message=f"message {key}",
    )


async def _queue(world: World, keys: list[str], channel: int = 0, check: int = 0) -> list[int]:
    """Raise one alert per key about ``check`` and queue it to ``channel``; the notification ids."""
    async with world.engine.begin() as conn:
        ids = await outbox.insert_alerts(conn, [_alert(world, k, check=check) for k in keys])
        await outbox.enqueue(
            conn, [Notice(alert_id=i, channel_id=world.channels[channel], due_at=NOW) for i in ids if i]
        )
        n = t.notifications.c
        rows = await conn.execute(
            select(n.id).where(n.alert_id.in_([i for i in ids if i])).order_by(n.alert_id)
        )
        return list(rows.scalars().all())


async def _rows(world: World) -> dict[int, dict[str, object]]:
    async with world.engine.connect() as conn:
        rows = (await conn.execute(select(t.notifications))).mappings().all()
    return {r["id"]: dict(r) for r in rows}


async def _attempts(world: World) -> list[int]:
    async with world.engine.connect() as conn:
        n = t.notification_attempts.c
        return list((await conn.execute(select(n.notification_id).order_by(n.id))).scalars().all())


async def _claim(
    world: World, token: str, *, limit: int = 10, now: datetime = NOW, **kwargs: object
) -> list[int]:
    async with world.engine.begin() as conn:
        rows = await outbox.claim(
            conn, now, until=now + timedelta(seconds=30), token=token, limit=limit, **kwargs
        )  # type: ignore[arg-type]
    return [int(r["id"]) for r in rows]


def _outcome(notification_id: int, token: str, **kwargs: object) -> Outcome:
    values: dict[str, object] = {
        "notification_id": notification_id,
        "token": token,
        "attempts": 1,
        "at": NOW,
        "ok": True,
        "error": None,
        "status": OutboxStatus.SENT,
    }
    values.update(kwargs)
    return Outcome(**values)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- raising


async def test_insert_alerts_returns_new_ids_and_none_for_keys_already_raised(world: World) -> None:
    async with world.engine.begin() as conn:
        first = await outbox.insert_alerts(conn, [_alert(world, "a"), _alert(world, "b")])
    async with world.engine.begin() as conn:
        again = await outbox.insert_alerts(conn, [_alert(world, "b"), _alert(world, "c"), _alert(world, "c")])
    assert all(isinstance(i, int) for i in first) and first[0] != first[1]
    # "b" exists, the second "c" repeats the first of the same call
    assert again[0] is None and isinstance(again[1], int) and again[2] is None
    async with world.engine.connect() as conn:
        assert (await conn.execute(select(func.count()).select_from(t.alerts))).scalar() == 3
        assert await outbox.alert_exists(conn, world.project_id, world.checks[0], "c")
        assert not await outbox.alert_exists(conn, world.project_id, world.checks[1], "c")


async def test_insert_alerts_in_one_call_of_many_rows_keeps_the_order_given(world: World) -> None:
    # more rows than one SQLite statement's parameters hold, some of them raised already
    keys = [f"k{i}" for i in range(bulk.SQLITE_VARIABLES // len(outbox.ALERT_COLUMNS) + 500)]
    async with world.engine.begin() as conn:
        before = await outbox.insert_alerts(
            conn, [_alert(world, k, check=i % 2) for i, k in enumerate(keys[:7])]
        )
    async with world.engine.begin() as conn:
        ids = await outbox.insert_alerts(conn, [_alert(world, k, check=i % 2) for i, k in enumerate(keys)])
        rows = dict((await conn.execute(select(t.alerts.c.id, t.alerts.c.key))).all())
    assert ids[:7] == [None] * 7
    assert [rows[i] for i in before + ids if i is not None] == keys


async def test_project_level_alerts_have_no_check(world: World) -> None:
    async with world.engine.begin() as conn:
        (alert_id,) = await outbox.insert_alerts(conn, [_alert(world, "monitor_unavailable:x", check=None)])
        check_id = (await conn.execute(select(t.alerts.c.check_id).where(t.alerts.c.id == alert_id))).scalar()
    assert alert_id is not None and check_id is None


async def test_raise_count_only_raises(world: World) -> None:
    async with world.engine.begin() as conn:
        await outbox.insert_alerts(conn, [_alert(world, "a")])
        await outbox.raise_count(
            conn, project_id=world.project_id, check_id=world.checks[0], key="a", count=5
        )
        await outbox.raise_count(
            conn,
            project_id=world.project_id,
            check_id=world.checks[0],
            key="a",
            count=3,
            text=("x", "y", "{}"),
        )
        count, title = (await conn.execute(select(t.alerts.c.count, t.alerts.c.title))).one()
    assert (count, title) == (5, "title a")


async def test_routes_and_their_kinds_filters(world: World) -> None:
    async with world.engine.connect() as conn:
        routes = await outbox.check_routes(conn, world.checks)
        project = await outbox.project_routes(conn, world.project_id)
        chosen = await outbox.project_routes(conn, world.project_id, [world.channels[2], "not-a-channel"])
        none = await outbox.project_routes(conn, world.project_id, [])
    assert {r.channel_id for r in routes[world.checks[0]]} == set(world.channels[:2])
    assert world.checks[1] not in routes
    assert {r.channel_id for r in project} == set(world.channels)
    assert [r.channel_id for r in chosen] == [world.channels[2]] and none == []
    every, some, recovered = sorted(project, key=lambda r: world.channels.index(r.channel_id))
    assert every.accepts("nag") and some.accepts("failed") and not some.accepts("late")
    assert recovered.accepts("late", also="recovered") and not recovered.accepts("late")


async def test_enqueue_queues_pending_rows_once_per_alert_and_channel(world: World) -> None:
    [notification] = await _queue(world, ["a"])
    row = (await _rows(world))[notification]
    assert row["status"] == OutboxStatus.PENDING and row["attempts"] == 0
    assert row["next_attempt_at"] == NOW and row["claim_token"] is None
    with pytest.raises(IntegrityError):
        async with world.engine.begin() as conn:
            await outbox.enqueue(
                conn, [Notice(alert_id=int(str(row["alert_id"])), channel_id=world.channels[0], due_at=NOW)]
            )


# --------------------------------------------------------------------------- claiming


async def test_a_claim_takes_due_rows_once_until_it_lapses(world: World) -> None:
    ids = await _queue(world, ["a"]) + await _queue(world, ["b"], check=1)
    assert sorted(await _claim(world, "one")) == sorted(ids)
    assert await _claim(world, "two") == []  # claimed by "one"
    assert sorted(await _claim(world, "three", now=NOW + timedelta(seconds=31))) == sorted(ids)


async def test_a_claim_takes_only_the_first_open_notification_per_check_and_channel(world: World) -> None:
    first, second = await _queue(world, ["a", "b"])
    [other] = await _queue(world, ["c"], channel=1)
    assert sorted(await _claim(world, "one")) == sorted([first, other])
    async with world.engine.begin() as conn:
        await outbox.record_attempts(conn, [_outcome(first, "one")])
    assert await _claim(world, "two") == [second]


async def test_a_claim_honours_its_limit_and_skips(world: World) -> None:
    ids = (
        await _queue(world, ["a"])
        + await _queue(world, ["b"], check=1)
        + await _queue(world, ["c"], channel=1)
    )
    assert len(await _claim(world, "one", limit=1)) == 1
    assert await _claim(world, "none", limit=0) == []
    skipped = await _claim(world, "two", skip_channels={world.channels[0]}, skip_notifications={ids[0]})
    assert skipped == [ids[2]]


async def test_a_claim_never_takes_rows_not_yet_due_or_closed(world: World) -> None:
    [notification] = await _queue(world, ["a"])
    async with world.engine.begin() as conn:
        await outbox.record_attempts(
            conn,
            [
                _outcome(
                    notification,
                    "x",
                    ok=False,
                    error="boom",
                    status=OutboxStatus.PENDING,
                    next_attempt_at=LATER,
                )
            ],
        )
    # not claimed by "x": nothing was recorded, so the row is still due
    assert await _claim(world, "one") == [notification]
    async with world.engine.begin() as conn:
        await outbox.record_attempts(
            conn,
            [
                _outcome(
                    notification,
                    "one",
                    ok=False,
                    error="boom",
                    status=OutboxStatus.PENDING,
                    next_attempt_at=LATER,
                )
            ],
        )
    assert await _claim(world, "two") == []
    assert await _claim(world, "three", now=LATER) == [notification]


async def test_release_renew_and_reschedule_act_only_under_the_token(world: World) -> None:
    a, b = await _queue(world, ["a"]) + await _queue(world, ["b"], check=1)
    await _claim(world, "one")
    async with world.engine.begin() as conn:
        assert await outbox.renew(conn, {"other": {a, b}}, until=LATER) == set()
        assert await outbox.renew(conn, {"one": {a, b}}, until=LATER) == {a, b}
        await outbox.release(conn, {"other": {a}})
        await outbox.release(conn, {"one": {a}})
        assert not await outbox.reschedule(conn, b, "other", status=OutboxStatus.HELD, last_error="x")
        assert await outbox.reschedule(
            conn, b, "one", status=OutboxStatus.HELD, last_error="held back", next_attempt_at=LATER
        )
    rows = await _rows(world)
    assert rows[a]["claim_token"] is None and rows[a]["status"] == OutboxStatus.PENDING
    assert rows[b]["claim_token"] is None and rows[b]["status"] == OutboxStatus.HELD
    assert rows[b]["next_attempt_at"] == LATER and rows[b]["last_error"] == "held back"


# --------------------------------------------------------------------------- recording


async def test_record_attempts_records_each_claimed_outcome_exactly_once(world: World) -> None:
    sent, retried, dead = (
        await _queue(world, ["a"])
        + await _queue(world, ["b"], check=1)
        + await _queue(world, ["c"], channel=1)
    )
    await _claim(world, "one")
    outcomes = [
        _outcome(sent, "one"),
        _outcome(sent, "one"),  # the same row twice in one batch: recorded once
        _outcome(retried, "one", ok=False, error="503", status=OutboxStatus.PENDING, next_attempt_at=LATER),
        _outcome(dead, "one", ok=False, error="gone", status=OutboxStatus.FAILED, attempts=8),
    ]
    async with world.engine.begin() as conn:
        recorded = await outbox.record_attempts(conn, outcomes)
    async with world.engine.begin() as conn:
        again = await outbox.record_attempts(conn, outcomes)  # the claims are gone: nothing
    assert recorded == {sent: 1, retried: 1, dead: 1} and again == {}
    assert sorted(await _attempts(world)) == sorted([sent, retried, dead])
    rows = await _rows(world)
    assert (rows[sent]["status"], rows[sent]["sent_at"], rows[sent]["attempts"]) == (
        OutboxStatus.SENT,
        NOW,
        1,
    )
    assert (rows[retried]["status"], rows[retried]["next_attempt_at"]) == (OutboxStatus.PENDING, LATER)
    assert rows[retried]["last_error"] == "503" and rows[retried]["sent_at"] is None
    assert (rows[dead]["status"], rows[dead]["attempts"], rows[dead]["last_error"]) == (
        OutboxStatus.FAILED,
        8,
        "gone",
    )
    assert all(r["claim_token"] is None for r in rows.values())


async def test_a_stale_claim_records_nothing(world: World) -> None:
    [notification] = await _queue(world, ["a"])
    await _claim(world, "stalled")
    await _claim(world, "taker", now=NOW + timedelta(seconds=31))
    async with world.engine.begin() as conn:
        assert await outbox.record_attempts(conn, [_outcome(notification, "stalled")]) == {}
    assert await _attempts(world) == []
    assert (await _rows(world))[notification]["claim_token"] == "taker"


async def test_riders_are_taken_into_a_digest_and_recorded_with_it(world: World) -> None:
    owner, held1, held2 = await _queue(world, ["a", "b", "c"])
    async with world.engine.begin() as conn:
        n = t.notifications.c
        await conn.execute(
            update(t.notifications).where(n.id.in_([held1, held2])).values(status=OutboxStatus.HELD)
        )
    assert await _claim(world, "one") == [owner]
    source = Source(channel_id=world.channels[0], project_id=world.project_id, check_id=world.checks[0])
    async with world.engine.begin() as conn:
        assert await outbox.held_sources(conn, [source]) == {source}
        riders = await outbox.claim_riders(
            conn,
            source,
            owner=owner,
            owner_token="one",
            token="riders",
            until=LATER,
            now=NOW,
            limit=1,
            exclude=(),
        )
        texts = await outbox.alert_texts(conn, [owner, *riders])
        recorded = await outbox.record_attempts(
            conn, [_outcome(owner, "one", riders=tuple(riders), rider_token="riders")]
        )
    assert riders == [held1] and [r["title"] for r in texts] == ["title a", "title b"]
    assert recorded == {owner: 2}
    rows = await _rows(world)
    assert rows[held1]["status"] == OutboxStatus.COALESCED and rows[held2]["status"] == OutboxStatus.HELD
    assert sorted(await _attempts(world)) == sorted([owner, held1])


async def test_recent_sends_count_sent_and_in_flight_rows_per_source(world: World) -> None:
    a, b, c = await _queue(world, ["a", "b", "c"])
    await _claim(world, "one")
    async with world.engine.begin() as conn:
        await outbox.record_attempts(conn, [_outcome(a, "one")])
    await _claim(world, "two")  # b is first in line now
    source = Source(channel_id=world.channels[0], project_id=world.project_id, check_id=world.checks[0])
    quiet = Source(channel_id=world.channels[1], project_id=world.project_id, check_id=world.checks[1])
    async with world.engine.begin() as conn:
        await outbox.mark_sending(conn, [b], NOW)
        counts = await outbox.recent_sends(
            conn, [source, quiet], since=NOW - timedelta(hours=1), now=NOW, exclude=[c]
        )
        without_b = await outbox.recent_sends(
            conn, [source], since=NOW - timedelta(hours=1), now=NOW, exclude=[b]
        )
    assert counts == {source: (2, NOW), quiet: (0, None)}
    assert without_b == {source: (1, NOW)}


async def test_next_due_at_is_the_earliest_open_row(world: World) -> None:
    async with world.engine.connect() as conn:
        assert await outbox.next_due_at(conn) is None
    [notification] = await _queue(world, ["a"])
    async with world.engine.connect() as conn:
        assert await outbox.next_due_at(conn) == NOW
    await _claim(world, "one")
    async with world.engine.begin() as conn:
        await outbox.record_attempts(conn, [_outcome(notification, "one")])
    async with world.engine.connect() as conn:
        assert await outbox.next_due_at(conn) is None


async def test_maintenance_windows_of_projects(world: World) -> None:
    async with world.engine.connect() as conn:
        assert await outbox.maintenance_windows(conn, [world.project_id]) == []
        assert await outbox.maintenance_windows(conn, []) == []


async def test_held_back_alerts_are_those_with_a_suppressed_or_open_notification(world: World) -> None:
    suppressed, sent, _waiting = await _queue(world, ["a", "b", "c"], check=1)
    async with world.engine.begin() as conn:
        n = t.notifications.c
        await conn.execute(
            update(t.notifications).where(n.id == suppressed).values(status=OutboxStatus.SUPPRESSED)
        )
        await conn.execute(update(t.notifications).where(n.id == sent).values(status=OutboxStatus.SENT))
        await outbox.insert_alerts(conn, [_alert(world, "summary", kind="maintenance")])
    async with world.engine.connect() as conn:
        found = await outbox.held_back_alerts(
            conn, world.project_id, None, start=NOW, end=LATER, except_kind="maintenance"
        )
        other_check = await outbox.held_back_alerts(
            conn, world.project_id, world.checks[0], start=NOW, end=LATER, except_kind="maintenance"
        )
        later = await outbox.held_back_alerts(
            conn,
            world.project_id,
            None,
            start=LATER,
            end=LATER + timedelta(hours=1),
            except_kind="maintenance",
        )
    assert [(at, title) for at, title, _message, _facts in found] == [(NOW, "title a"), (NOW, "title c")]
    assert other_check == [] and later == []


async def test_lock_channels_serialises_preparations_per_channel_not_inserts(world: World) -> None:
    """PostgreSQL: a second preparation of the same channel waits (here: times out); another
    channel, and the key-share lock a notification's foreign key takes, do not. SQLite: a no-op
    (one writer at a time already)."""
    first, other = world.channels[0], world.channels[1]
    if world.engine.dialect.name != "postgresql":
        async with world.engine.begin() as conn:
            await outbox.lock_channels(conn, [first, other])
        return
    async with world.engine.begin() as holder:
        await outbox.lock_channels(holder, [first])
        async with world.engine.begin() as inserter:
            await inserter.execute(text("SET LOCAL lock_timeout = '2s'"))
            await inserter.execute(
                select(t.channels.c.id)
                .where(t.channels.c.id == first)
                .with_for_update(read=True, key_share=True)
            )
        with pytest.raises(DBAPIError):
            async with world.engine.begin() as second:
                await second.execute(text("SET LOCAL lock_timeout = '200ms'"))
                await outbox.lock_channels(second, [other])  # another channel: free
                await outbox.lock_channels(second, [first])
