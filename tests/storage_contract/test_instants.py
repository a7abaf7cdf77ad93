"""Instants (``UTCDateTime``) round-trip and compare alike through Core and the bulk writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import DateTime, select, text
from sqlalchemy.exc import StatementError
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.storage import bulk
from monitor.storage import tables as t
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import add_project, check_values

INSTANTS = [
    datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
    datetime(2026, 3, 29, 3, 0, 0, 1, tzinfo=timezone(timedelta(hours=2))),  # another zone
    datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 0, tzinfo=UTC),
]


async def test_instants_read_back_as_the_same_aware_utc_instant_whichever_way_written(
    engine: AsyncEngine,
) -> None:
    async with UnitOfWork.begin(engine) as uow:
        project = await add_project(uow)
        core = [await uow.checks.insert(check_values(project, next_due=i)) for i in INSTANTS]
        bulked = [await uow.checks.insert(check_values(project)) for _ in INSTANTS]
        await bulk.update_rows(
            uow.connection,
            t.checks,
            "id",
            [{"id": cid, "next_due": i} for cid, i in zip(bulked, INSTANTS, strict=True)],
            ["next_due"],
        )
    async with engine.connect() as conn:
        read = dict((await conn.execute(select(t.checks.c.id, t.checks.c.next_due))).all())
        for ids in (core, bulked):
            assert [read[cid] for cid in ids] == INSTANTS
            assert all(read[cid].utcoffset() == timedelta(0) for cid in ids)
        # comparisons in SQL order the instants as time does, however they were written
        cut = datetime(2026, 3, 29, 1, 0, 0, 1, tzinfo=UTC)
        before = set(
            (await conn.execute(select(t.checks.c.id).where(t.checks.c.next_due < cut))).scalars().all()
        )
    expected = {cid for ids in (core, bulked) for cid, i in zip(ids, INSTANTS, strict=True) if i < cut}
    assert before == expected


async def test_instants_are_stored_as_the_backends_plain_instant_column_stores_them(
    engine: AsyncEngine,
) -> None:
    """SQLite: SQLAlchemy's DATETIME text of the UTC wall time ("2026-03-29 01:00:00.000000");
    PostgreSQL: ``timestamp with time zone``, read raw as the aware UTC instant, and as the UTC
    wall time when converted at UTC (what a query or a dump of the column shows)."""
    async with UnitOfWork.begin(engine) as uow:
        project = await add_project(uow)
        ids = [await uow.checks.insert(check_values(project, next_due=i)) for i in INSTANTS]
    async with engine.connect() as conn:
        stored = dict((await conn.execute(text("SELECT id, next_due FROM checks"))).all())
        if engine.dialect.name == "postgresql":
            kind = (
                await conn.execute(
                    text(
                        "SELECT data_type FROM information_schema.columns WHERE table_name = 'checks'"
                        " AND column_name = 'next_due'"
                    )
                )
            ).scalar_one()
            walls = dict(
                (await conn.execute(text("SELECT id, next_due AT TIME ZONE 'UTC' FROM checks"))).all()
            )
    if engine.dialect.name == "postgresql":
        assert kind == "timestamp with time zone"
        assert [stored[cid] for cid in ids] == INSTANTS
        assert all(stored[cid].tzinfo is UTC for cid in ids)
        assert [walls[cid] for cid in ids] == [i.astimezone(UTC).replace(tzinfo=None) for i in INSTANTS]
        return
    plain = DateTime().dialect_impl(engine.dialect).bind_processor(engine.dialect)
    assert plain is not None
    assert [stored[cid] for cid in ids] == [plain(i.astimezone(UTC).replace(tzinfo=None)) for i in INSTANTS]


async def test_a_naive_instant_is_refused(engine: AsyncEngine) -> None:
    with pytest.raises(StatementError, match="naive datetime"):
        async with UnitOfWork.begin(engine) as uow:
            project = await add_project(uow)
            await uow.checks.insert(check_values(project, next_due=datetime(2026, 3, 29, 1, 0)))


async def test_a_repeated_instant_binds_the_same_text_in_any_zone_and_a_naive_one_still_fails(
    engine: AsyncEngine,
) -> None:
    """SQLite's binds remember the text of instants they formatted: the same instant from
    another zone (an equal key) must still give the UTC text, and a naive datetime with the
    same wall time must still be refused."""
    process = t.UTCDateTime().bind_processor(engine.dialect)
    if engine.dialect.name != "sqlite":
        assert process is None or process(None) is None
        return
    assert process is not None
    utc = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    berlin = utc.astimezone(timezone(timedelta(hours=2)))
    first = [process(utc) for _ in range(3)]
    assert first == ["2026-03-29 01:00:00.000000"] * 3
    assert process(berlin) == "2026-03-29 01:00:00.000000"
    with pytest.raises(ValueError, match="naive"):
        process(datetime(2026, 3, 29, 1, 0))
    # past the bound the remembered texts start again, and stay right
    for second in range(t._BIND_TEXTS + 10):
        instant = utc + timedelta(seconds=second)
        assert process(instant) == instant.isoformat(" ", "microseconds")[:26]


def test_every_instant_column_shares_the_texts_it_formatted(engine: AsyncEngine) -> None:
    """A ping's arrival is bound in its ping, run and check rows, each a column of its own:
    SQLite's binds format it once, whichever column's processor comes first."""
    first = t.UTCDateTime().bind_processor(engine.dialect)
    second = t.UTCDateTime().bind_processor(engine.dialect)
    if engine.dialect.name != "sqlite":
        return
    assert first is not None and second is not None
    instant = datetime(2026, 7, 18, 2, 0, 1, 123456, tzinfo=UTC)
    assert second(instant) is first(instant)


@given(st.datetimes(timezones=st.just(UTC)))
def test_the_sqlite_text_is_sqlalchemys_datetime_text(instant: datetime) -> None:
    """The text formatted for SQLite is SQLAlchemy's own ``DATETIME`` text of the UTC wall time
    (microseconds always present), so stored rows compare as those of a plain column."""
    assert t._sqlite_text(instant) == instant.isoformat(" ", "microseconds")[:26]
