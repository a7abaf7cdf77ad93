"""OutageStore (monitor.storage.ports) on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.storage import tables as t
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import NOW, add_project


async def test_last_renewal_is_none_without_liveness_rows(uow: UnitOfWork) -> None:
    assert await uow.outages.last_renewal() is None


async def test_renew_inserts_then_updates_the_row_of_its_name(uow: UnitOfWork) -> None:
    await uow.outages.renew("a:1", "api", NOW - timedelta(seconds=30))
    await uow.outages.renew("b:2", "api", NOW - timedelta(seconds=20))
    await uow.outages.renew("a:1", "api,evaluator", NOW)
    rows = (
        await uow.connection.execute(
            select(t.liveness.c.name, t.liveness.c.roles, t.liveness.c.renewed_at).order_by(t.liveness.c.name)
        )
    ).all()
    assert [tuple(r) for r in rows] == [
        ("a:1", "api,evaluator", NOW),
        ("b:2", "api", NOW - timedelta(seconds=20)),
    ]
    assert await uow.outages.last_renewal() == NOW


async def test_insert_records_an_outage_once_per_start(uow: UnitOfWork) -> None:
    started = NOW - timedelta(minutes=10)
    first = await uow.outages.insert(started, NOW - timedelta(minutes=5))
    assert first is not None
    assert await uow.outages.insert(started, NOW) is None
    assert await uow.outages.spans_since(NOW - timedelta(days=1)) == [(started, NOW - timedelta(minutes=5))]


async def test_spans_since_leaves_out_outages_ended_before(uow: UnitOfWork) -> None:
    await uow.outages.insert(NOW - timedelta(days=40), NOW - timedelta(days=39))
    await uow.outages.insert(NOW - timedelta(hours=2), NOW - timedelta(hours=1))
    assert await uow.outages.spans_since(NOW - timedelta(days=31)) == [
        (NOW - timedelta(hours=2), NOW - timedelta(hours=1))
    ]
    assert await uow.outages.spans_since(NOW - timedelta(hours=1)) == [
        (NOW - timedelta(hours=2), NOW - timedelta(hours=1))
    ]


async def test_mergeable_is_the_latest_ending_outage_started_before_and_ended_since(uow: UnitOfWork) -> None:
    older = await uow.outages.insert(NOW - timedelta(minutes=30), NOW - timedelta(minutes=20))
    latest = await uow.outages.insert(NOW - timedelta(minutes=15), NOW - timedelta(minutes=10))
    assert older is not None and latest is not None
    started = NOW - timedelta(minutes=5)
    assert await uow.outages.mergeable(started, NOW - timedelta(minutes=25)) == (
        latest,
        NOW - timedelta(minutes=15),
    )
    # ended before the merge window: nothing to extend
    assert await uow.outages.mergeable(started, NOW - timedelta(minutes=9)) is None
    # an outage starting at (or after) the new one's start is not a predecessor
    assert await uow.outages.mergeable(NOW - timedelta(minutes=15), NOW - timedelta(minutes=25)) == (
        older,
        NOW - timedelta(minutes=30),
    )


async def test_extend_moves_the_end_forward_only(uow: UnitOfWork) -> None:
    started = NOW - timedelta(minutes=30)
    outage = await uow.outages.insert(started, NOW - timedelta(minutes=20))
    assert outage is not None
    await uow.outages.extend(outage, NOW)
    await uow.outages.extend(outage, NOW - timedelta(minutes=25))
    assert await uow.outages.spans_since(NOW - timedelta(days=1)) == [(started, NOW)]


async def test_project_ids_lists_every_project_ascending(uow: UnitOfWork) -> None:
    assert await uow.outages.project_ids() == []
    first = await add_project(uow, "a")
    second = await add_project(uow, "b")
    assert await uow.outages.project_ids() == [first, second]


async def test_renewal_is_committed_with_the_unit_of_work(engine: AsyncEngine) -> None:
    async with UnitOfWork.begin(engine) as uow:
        await uow.outages.renew("a:1", "api", NOW)
    async with UnitOfWork.read(engine) as uow:
        assert await uow.outages.last_renewal() == NOW


async def test_guard_reads_are_the_last_renewal_and_the_spans_since_in_one(uow: UnitOfWork) -> None:
    since = NOW - timedelta(days=31)
    assert await uow.outages.guard_reads(since) == (None, [])
    recent = (NOW - timedelta(hours=2), NOW - timedelta(hours=1))
    await uow.outages.insert(*recent)
    assert await uow.outages.guard_reads(since) == (None, [])  # no renewal: nothing to guard
    await uow.outages.renew("a:1", "api", NOW - timedelta(seconds=5))
    assert await uow.outages.guard_reads(since) == (NOW - timedelta(seconds=5), [recent])
    assert await uow.outages.guard_reads(NOW) == (NOW - timedelta(seconds=5), [])
    await uow.outages.renew("b:2", "api", NOW)
    await uow.outages.insert(NOW - timedelta(days=40), NOW - timedelta(days=39))
    earlier = (NOW - timedelta(hours=5), NOW - timedelta(hours=4))
    await uow.outages.insert(*earlier)
    assert await uow.outages.guard_reads(since) == (NOW, [earlier, recent])
    assert await uow.outages.last_renewal() == NOW
    assert sorted(await uow.outages.spans_since(since)) == [earlier, recent]
