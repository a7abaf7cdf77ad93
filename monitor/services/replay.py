"""Replay a run scenario (``tests/cases/runs`` format) through the real services.

Used by ``monitor replay FILE`` and by the tests: a temporary database, an injected clock,
pings through :func:`ingest_pings`, and the evaluator run at every instant at which something
becomes due between steps, as the scenario format prescribes.
"""

from __future__ import annotations

import json
import sys
import tempfile
import uuid as uuid_module
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from monitor.domain import detection, pings
from monitor.domain.checks import Outcome, PingKind
from monitor.domain.errors import ValidationError
from monitor.domain.runs import RunBook, TickMark, tick_outcome
from monitor.services import checks as check_service
from monitor.services import projects
from monitor.services.evaluator import evaluate_due
from monitor.services.ingest import PingRequest, ingest_pings
from monitor.settings import Settings
from monitor.storage import repositories
from monitor.storage.engine import make_engine, migrate
from monitor.storage.unit_of_work import Engine, UnitOfWork

EPSILON = timedelta(milliseconds=1)
MAX_EVALUATIONS = 100_000


def parse_instant(text: str) -> datetime:
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValidationError("at", f"{text!r} needs a UTC offset or Z")
    return parsed.astimezone(UTC)


def _ping(step: dict[str, Any], uuid: str, at: datetime) -> PingRequest:
    """A step's ping, validated as the ping endpoint validates it (field named on error)."""
    value = step["ping"]
    exit_status: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= 255:
            raise ValidationError("ping", f"exit status {value} is outside 0-255")
        kind = PingKind.SUCCESS if value == 0 else PingKind.FAIL
        exit_status = value
    else:
        try:
            kind = PingKind(str(value))
        except ValueError:
            raise ValidationError(
                "ping", f"{value!r} is not start, success, fail, log, skip or 0-255"
            ) from None
    rid = step.get("rid")
    if rid is not None:
        try:
            rid = str(uuid_module.UUID(str(rid)))
        except ValueError:
            raise ValidationError("rid", f"{rid!r} is not a UUID") from None
    scheduled = step.get("scheduled")
    body = step.get("body")
    data = body.encode() if isinstance(body, str) else None
    return PingRequest(
        kind=kind,
        received=at,
        uuid=uuid,
        scheduled=pings.parse_logical_time(scheduled) if scheduled not in (None, "") else None,
        rid=rid,
        exit_status=exit_status,
        method="POST" if data else "GET",
        body=data,
        body_size=len(data or b""),
        idempotency_key=step.get("idempotency_key"),
    )


async def replay(scenario: dict[str, Any], database_url: str | None = None) -> dict[str, Any]:
    """Run ``scenario``; returns ``{"alerts": [{"kind", "scheduled"}], "status", "ticks": [...]}``."""
    with tempfile.TemporaryDirectory(prefix="monitor-replay-") as folder:
        url = database_url or f"sqlite+aiosqlite:///{Path(folder) / 'replay.db'}"
        engine = make_engine(url)
        try:
            return await _replay(engine, scenario)
        finally:
            await engine.dispose()


async def _replay(engine: Engine, scenario: dict[str, Any]) -> dict[str, Any]:
    settings = Settings(database_url=str(engine.url))
    await migrate(engine)
    created = parse_instant(scenario["created"])
    fields = {k: v for k, v in scenario["check"].items()}
    fields.setdefault("name", scenario.get("id", "scenario"))
    async with UnitOfWork.begin(engine) as uow:
        project = await projects.create_project(uow.connection, "replay", created)
        project_id = int(project["id"])  # type: ignore[call-overload]
        check_id, _ = await check_service.create_or_upsert(
            uow.connection, project_id, fields, created, shards=settings.shards
        )
        uuid = str((await uow.checks.by_ids([check_id]))[check_id]["uuid"])

    async def evaluate_until(limit: datetime) -> None:
        for _ in range(MAX_EVALUATIONS):
            async with UnitOfWork.read(engine) as uow:
                due = await uow.checks.oldest_due()
            if due is None:
                return
            due = due if due.tzinfo else due.replace(tzinfo=UTC)
            if not due + EPSILON < limit:
                return
            await evaluate_due(engine, due + EPSILON, settings=settings)

    now = created
    for number, step in enumerate(scenario["steps"], start=1):
        at = parse_instant(step["at"])
        if at < now:
            raise ValidationError("at", f"step {number} ({step['at']}) is earlier than the step before it")
        now = at
        await evaluate_until(now)
        if "ping" in step:
            [answer] = await ingest_pings(engine, [_ping(step, uuid, now)], settings=settings)
            if answer.status >= 400:
                # the ping endpoint would have refused it too: say so, as it would
                print(f"step {number}: ping refused: {answer.status} {answer.text}", file=sys.stderr)
        elif step.get("pause"):
            async with UnitOfWork.begin(engine) as uow:
                await check_service.pause_check(uow.connection, project_id, uuid, now)
        elif step.get("resume"):
            async with UnitOfWork.begin(engine) as uow:
                await check_service.resume_check(uow.connection, project_id, uuid, now)
        else:
            await evaluate_due(engine, now, settings=settings)
    return await _report(engine, check_id, now)


async def _report(engine: Engine, check_id: int, now: datetime) -> dict[str, Any]:
    async with UnitOfWork.read(engine) as uow:
        row = (await uow.checks.by_ids([check_id]))[check_id]
        alerts = await uow.history.alert_ticks(check_id)
        runs = await uow.history.all_runs(check_id)
        marks = await uow.history.tick_marks(check_id)
    book = RunBook.of(repositories.run_of(r) for r in runs)
    for m in marks:
        book.marks[m["scheduled"]] = TickMark(scheduled=m["scheduled"], outcome=Outcome(m["outcome"]))
    ticks = sorted({r.scheduled for r in book.runs.values()} | set(book.marks))
    state = repositories.state_of(row)
    return {
        "alerts": [{"kind": kind, "scheduled": detection.iso(s) if s else None} for kind, s in alerts],
        "status": detection.status(state, now).value,
        "ticks": [
            {
                "scheduled": detection.iso(tick),
                "outcome": (o.value if (o := tick_outcome(book, tick)) is not None else None),
                "runs": len(book.runs_of(tick)),
            }
            for tick in ticks
        ],
    }


def load_scenario(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data
