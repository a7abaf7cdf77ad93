"""Ping batches stored by the ingest process (``monitor.workers.ingest_process``), a real child
process on a real SQLite file, fed by an :class:`IngestWriter` as ``monitor serve`` feeds it."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.domain.checks import PingKind
from monitor.services import checks as check_service
from monitor.services.ingest import BATCHES_IN_FLIGHT, IngestWriter, PingRequest
from monitor.services.projects import create_project
from monitor.settings import Settings
from monitor.storage import tables as t
from monitor.storage.engine import make_engine
from monitor.workers import ingest_process
from monitor.workers.ingest_process import IngestProcess
from tests.conftest import fresh_sqlite_url

T0 = datetime(2026, 7, 18, 2, 0, tzinfo=UTC)


@pytest.fixture
async def engine(sqlite_template: Path, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(fresh_sqlite_url(sqlite_template, tmp_path))
    yield engine
    await engine.dispose()


@pytest.fixture
async def child(engine: AsyncEngine) -> AsyncIterator[IngestProcess]:
    process = IngestProcess(Settings(database_url=str(engine.url), ingest_wait=0.005), engine)
    await process.start()
    yield process
    await process.stop()


@pytest.fixture
async def writer(engine: AsyncEngine, child: IngestProcess) -> AsyncIterator[IngestWriter]:
    ingest = IngestWriter(engine, child.settings, store=child, in_flight=BATCHES_IN_FLIGHT)
    await ingest.start()
    yield ingest
    await ingest.stop()


async def make_checks(engine: AsyncEngine, count: int) -> list[tuple[int, str]]:
    async with engine.begin() as conn:
        project = await create_project(conn, "p", T0)
        made = []
        for i in range(count):
            fields = {"name": f"c{i}", "timeout": 60}
            check_id, _ = await check_service.create_or_upsert(
                conn, int(project["id"]), fields, T0, shards=16
            )  # type: ignore[call-overload]
            made.append(check_id)
        rows = (await conn.execute(select(t.checks.c.id, t.checks.c.uuid))).all()
    uuids = dict(rows)
    return [(cid, uuids[cid]) for cid in made]


def ping(uuid: str, at: datetime, kind: PingKind = PingKind.SUCCESS) -> PingRequest:
    return PingRequest(kind=kind, received=at, uuid=uuid, method="POST", body=b"done", body_size=4)


def stall(child: IngestProcess, monkeypatch: pytest.MonkeyPatch) -> int:
    """Stop the child (SIGSTOP: it never answers, and is not dead) with the stall timeout cut
    to 0.5 s; its pid."""
    monkeypatch.setattr(ingest_process, "BATCH_TIMEOUT", 0.5)
    stalled = child.pid
    assert stalled is not None
    os.kill(stalled, signal.SIGSTOP)
    return stalled


def _died(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # reaped, perhaps between open and read
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


async def stored(engine: AsyncEngine) -> list[tuple[int, int, datetime]]:
    p = t.pings.c
    async with engine.connect() as conn:
        return [tuple(r) for r in (await conn.execute(select(p.check_id, p.n, p.received_at))).all()]  # type: ignore[misc]


async def test_batches_are_stored_in_order_and_answered_after_commit(
    engine: AsyncEngine, writer: IngestWriter, child: IngestProcess
) -> None:
    checks = await make_checks(engine, 20)
    requests = [ping(checks[i % 20][1], T0 + timedelta(milliseconds=i)) for i in range(400)]
    answers = await asyncio.gather(*(writer.submit(r) for r in requests))
    assert {(a.status, a.text) for a in answers} == {(200, "OK")}
    rows = await stored(engine)
    assert len(rows) == 400
    # each check's pings numbered 1..20 in the order they arrived: no batch overtook another
    for check_id, _ in checks:
        mine = sorted((n, received) for cid, n, received in rows if cid == check_id)
        assert [n for n, _ in mine] == list(range(1, 21))
        assert [received for _, received in mine] == sorted(received for _, received in mine)
    async with engine.connect() as conn:
        assert (await conn.execute(select(func.sum(t.checks.c.n_pings)))).scalar_one() == 400
    assert child.pid is not None and child.pid != os.getpid()


async def test_an_unknown_check_and_a_bad_ping_are_answered_by_the_child(
    engine: AsyncEngine, writer: IngestWriter
) -> None:
    [(_, uuid)] = await make_checks(engine, 1)
    unknown = "00000000-0000-4000-8000-000000000000"
    bad_finish = PingRequest(kind=PingKind.SUCCESS, received=T0, uuid=uuid, finished=T0 + timedelta(hours=1))
    answers = await asyncio.gather(writer.submit(ping(unknown, T0)), writer.submit(bad_finish))
    assert answers[0].status == 404
    assert answers[1].status == 400 and answers[1].text.startswith("finished:")


async def test_a_child_that_dies_with_a_batch_answers_it_503_and_the_next_batch_gets_a_new_child(
    engine: AsyncEngine, writer: IngestWriter, child: IngestProcess
) -> None:
    [(_, uuid)] = await make_checks(engine, 1)
    first = child.pid
    assert first is not None
    os.kill(first, signal.SIGSTOP)  # holds the batch unread in its pipe
    lost = asyncio.ensure_future(writer.submit(ping(uuid, T0)))
    await asyncio.sleep(0.3)
    assert not lost.done()
    os.kill(first, signal.SIGKILL)
    answer = await asyncio.wait_for(lost, 10)
    assert (answer.status, answer.text, answer.retry_after) == (503, "storage unavailable, retry", 1)
    assert await stored(engine) == []  # a 503 stored nothing
    again = await asyncio.wait_for(writer.submit(ping(uuid, T0 + timedelta(seconds=1))), 60)
    assert (again.status, again.text) == (200, "OK")
    assert child.pid not in (None, first)
    assert [n for _, n, _ in await stored(engine)] == [1]


async def test_the_child_ignores_sigterm_and_exits_once_its_pipe_closes(
    engine: AsyncEngine, child: IngestProcess
) -> None:
    [(_, uuid)] = await make_checks(engine, 1)
    pid = child.pid
    assert pid is not None
    os.kill(pid, signal.SIGTERM)  # as a terminal's Ctrl-C reaches the whole process group
    answers = await child([ping(uuid, T0)])
    assert [a.status for a in answers] == [200]
    assert child.pid == pid
    await child.stop()
    assert child.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # exited and reaped


async def test_a_child_that_leaves_a_batch_unanswered_is_killed_and_replaced(
    engine: AsyncEngine, writer: IngestWriter, child: IngestProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    [(_, uuid)] = await make_checks(engine, 1)
    stalled = stall(child, monkeypatch)
    answer = await asyncio.wait_for(writer.submit(ping(uuid, T0)), 10)
    assert (answer.status, answer.text, answer.retry_after) == (503, "storage unavailable, retry", 1)
    again = await asyncio.wait_for(writer.submit(ping(uuid, T0 + timedelta(seconds=1))), 60)
    assert (again.status, again.text) == (200, "OK")
    assert child.pid not in (None, stalled)
    with pytest.raises(ProcessLookupError):
        os.kill(stalled, 0)  # killed and reaped, not left stopped


async def test_a_child_that_died_while_idle_is_replaced_before_the_next_batch(
    engine: AsyncEngine, writer: IngestWriter, child: IngestProcess
) -> None:
    [(_, uuid)] = await make_checks(engine, 1)
    dead = child.pid
    assert dead is not None
    os.kill(dead, signal.SIGKILL)
    for _ in range(2000):  # until it has died: its pipe closed with nothing in flight
        if _died(dead):
            break
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.02)  # the reader's turn to see the pipe close (not its exit status)
    answer = await asyncio.wait_for(writer.submit(ping(uuid, T0)), 60)
    assert (answer.status, answer.text) == (200, "OK")  # not a 503: the ping was never the dead child's
    assert child.pid not in (None, dead)


async def test_a_stopped_child_is_killed_even_when_its_pipe_is_full(
    engine: AsyncEngine, writer: IngestWriter, child: IngestProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    [(_, uuid)] = await make_checks(engine, 1)
    stall(child, monkeypatch)
    body = os.urandom(100_000)  # 8 such pings: a frame far larger than the pipe holds
    big = [
        PingRequest(
            kind=PingKind.LOG,
            received=T0 + timedelta(milliseconds=i),
            uuid=uuid,
            body=body,
            body_size=len(body),
        )
        for i in range(8)
    ]
    answers = await asyncio.wait_for(asyncio.gather(*(writer.submit(r) for r in big)), 10)
    assert {(a.status, a.retry_after) for a in answers} == {(503, 1)}
    again = await asyncio.wait_for(writer.submit(ping(uuid, T0 + timedelta(seconds=1))), 60)
    assert (again.status, again.text) == (200, "OK")
    assert [n for _, n, _ in await stored(engine)] == [1]


async def test_a_failed_batch_is_answered_from_the_database_pings_it_holds_200_the_others_503(
    engine: AsyncEngine, child: IngestProcess
) -> None:
    [(_, uuid)] = await make_checks(engine, 1)
    committed = [ping(uuid, T0), ping(uuid, T0 + timedelta(seconds=1))]
    assert [a.status for a in await child(committed)] == [200, 200]
    # the same batch, as if the child had died between its commit and its answer, with a ping
    # it never stored and one of a check that does not exist
    never = ping(uuid, T0 + timedelta(seconds=1, microseconds=1))
    unknown = ping("00000000-0000-4000-8000-000000000000", T0)
    answers = await child._in_doubt([*committed, never, unknown])
    assert [(a.status, a.retry_after) for a in answers] == [(200, None), (200, None), (503, 1), (503, 1)]


async def test_the_database_is_asked_only_once_the_failed_child_has_exited(
    engine: AsyncEngine, writer: IngestWriter, child: IngestProcess
) -> None:
    [(_, uuid)] = await make_checks(engine, 1)
    stalled = child.pid
    assert stalled is not None
    # the child holds the batch unread; killed, it can no longer commit it once the
    # database is asked (a stopped child dies at SIGKILL too)
    os.kill(stalled, signal.SIGSTOP)
    answer = asyncio.ensure_future(writer.submit(ping(uuid, T0)))
    await asyncio.sleep(0.2)
    os.kill(stalled, signal.SIGKILL)
    assert (await asyncio.wait_for(answer, 10)).status == 503
    with pytest.raises(ProcessLookupError):
        os.kill(stalled, 0)
