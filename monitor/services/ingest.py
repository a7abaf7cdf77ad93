"""Ping ingest with group commit (DESIGN §6).

HTTP handlers validate a ping and :meth:`IngestWriter.submit` it; one writer task per process
takes what is queued (up to ``MONITOR_INGEST_BATCH``, waiting at most ``MONITOR_INGEST_WAIT_MS``),
processes the pings in arrival order in **one transaction** (:func:`ingest_pings`), commits,
and only then answers every waiting request: acknowledged means committed. A failed batch is
retried ping by ping so one bad ping cannot sink its neighbours.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import uuid as uuid_module
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from monitor.domain import detection, keywords
from monitor.domain.checks import CheckSpec, CheckState, FlipReason, PingKind, SimpleSchedule
from monitor.domain.errors import ValidationError
from monitor.domain.pings import IDEMPOTENCY_WINDOW
from monitor.domain.runs import RunBook, ping_needed_since
from monitor.domain.shards import shard_of
from monitor.failures import FailureLog
from monitor.services import outages
from monitor.services.effects import CheckIdentity, PendingWrites, record_alerts
from monitor.settings import Settings
from monitor.storage import cluster, repositories
from monitor.storage.ports import DuplicateKey
from monitor.storage.unit_of_work import Connection, Engine, UnitOfWork

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class PingRequest:
    """A validated ping, as the HTTP layer hands it over.

    Exactly one of ``uuid`` and (``ping_key``, ``slug``) names the check. ``received`` is the
    arrival instant (aware UTC); ``body`` is already cut to the body limit. ``scheme`` is
    ``http``, ``https`` or ``email``; an email ping also carries its decoded subject and text
    (``email_subject``, ``email_text``), which the check's keyword filters read
    (:mod:`monitor.domain.keywords`).
    """

    kind: PingKind
    received: datetime
    uuid: str | None = None
    ping_key: str | None = None
    slug: str | None = None
    create: bool = False
    scheduled: datetime | None = None
    finished: datetime | None = None
    """A finish's ``finished=`` (aware UTC): when its run really ended, for a finish delivered
    late; bounded and applied by :func:`monitor.domain.detection.apply_ping`."""
    started: datetime | None = None
    """A start's ``started=`` (aware UTC): when its run really started, for a start delivered
    late; bounded and applied by :func:`monitor.domain.detection.apply_ping`."""
    rid: str | None = None
    exit_status: int | None = None
    method: str = "GET"
    remote_addr: str = ""
    ua: str = ""
    body: bytes | None = None
    body_size: int = 0
    idempotency_key: str | None = None
    scheme: str = "http"
    email_subject: str | None = None
    email_text: str | None = None
    duration: float | None = None
    """Seconds the client measured for a finish (Sentry check-ins carry it); it wins over the
    duration the run's start and finish pings give."""


_NONE: frozenset[datetime] = frozenset()


class AppliedHere:
    """The arrivals of the pings one process applied, per check, within the last
    :data:`~monitor.domain.detection.REORDER_WINDOW` of each check's newest: what
    :attr:`monitor.domain.detection.PingIn.applied_here` tells a start, so a start this
    process stamped after a start-less finish it applied itself opens a run of its own (that
    finish really came first), while one stamped shortly after another process's finish may be
    that run's start (docs/design.md §5, a start applied after its own finish).

    Kept in memory, by the process's :class:`IngestWriter`: a restarted process knows none,
    and judges its first starts as another process's would be. At most ``checks`` checks are
    kept, the least recently pinged dropped first (an arrival matters for a tenth of a second).
    """

    def __init__(self, checks: int = 10_000) -> None:
        self._checks = checks
        self._by_check: collections.OrderedDict[int, list[datetime]] = collections.OrderedDict()

    def of(self, check_id: int) -> frozenset[datetime]:
        """The arrivals (aware UTC) of ``check_id``'s pings applied here within the window."""
        arrivals = self._by_check.get(check_id)
        return frozenset(arrivals) if arrivals else _NONE

    def add(self, check_id: int, received: datetime) -> None:
        """Record that a ping of ``check_id`` that arrived at ``received`` was applied here."""
        horizon = received - detection.REORDER_WINDOW
        arrivals = [at for at in self._by_check.pop(check_id, ()) if at >= horizon]
        arrivals.append(received)
        self._by_check[check_id] = arrivals
        if len(self._by_check) > self._checks:
            self._by_check.popitem(last=False)


@dataclass(frozen=True, slots=True)
class PingAnswer:
    """What the ping endpoint answers: a status code and a plain-text body."""

    status: int
    text: str
    retry_after: int | None = None


OK = PingAnswer(200, "OK")
CREATED = PingAnswer(201, "Created")
NOT_FOUND = PingAnswer(404, "not found")
QUEUE_FULL = PingAnswer(503, "busy: too many pings waiting to be stored, retry", retry_after=1)
STORAGE_UNAVAILABLE = PingAnswer(503, "storage unavailable, retry")
BATCHES_IN_FLIGHT = 2
SPLIT_MIN = 4
"""PostgreSQL: ingest transactions one process runs at once (:class:`IngestWriter`)."""


class RateLimiter:
    """At most ``limit`` pings per check in any 60 s (per process; DESIGN §5)."""

    def __init__(self, limit: int, window: timedelta = timedelta(seconds=60)) -> None:
        self.limit = limit
        self.window = window
        self._seen: dict[int, deque[datetime]] = defaultdict(deque)

    def allow(self, check_id: int, now: datetime) -> bool:
        seen = self._seen[check_id]
        while seen and seen[0] <= now - self.window:
            seen.popleft()
        if len(seen) >= self.limit:
            return False
        seen.append(now)
        if len(self._seen) > 100_000:
            self._seen = defaultdict(deque, {k: v for k, v in self._seen.items() if v})
        return True

    def retry_after(self, check_id: int, now: datetime) -> int:
        seen = self._seen.get(check_id)
        if not seen:
            return 1
        return max(1, int((seen[0] + self.window - now).total_seconds()) + 1)


@dataclass(kw_only=True, slots=True)
class _Context:
    row: dict[str, Any]
    spec: CheckSpec
    state: CheckState
    book: RunBook = field(default_factory=RunBook)
    identity: CheckIdentity | None = None
    touched: bool = False


async def ingest_pings(
    engine: Engine,
    requests: Sequence[PingRequest],
    *,
    settings: Settings,
    limiter: RateLimiter | None = None,
    on_locked: Callable[[], None] | None = None,
    applied_here: AppliedHere | None = None,
) -> list[PingAnswer]:
    """Process ``requests`` in order in one transaction; answers only after commit.

    On SQLite the transaction runs whole in one worker-thread call (:meth:`UnitOfWork.run`).

    Args:
        applied_here: the calling process's record of the pings it applied (its
            :class:`IngestWriter`'s); each ping applied is added to it. ``None``: the pings are
            judged as if another process had applied every earlier one.
        on_locked: called once the batch's checks are read and, on PostgreSQL, locked
            (``FOR UPDATE``, id order): from then on a later transaction touching one of them
            waits for this one's commit.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the transaction failed (nothing was stored).
    """
    return await UnitOfWork.run(
        engine,
        lambda uow: _ingest(
            uow, requests, settings=settings, limiter=limiter, on_locked=on_locked, applied_here=applied_here
        ),
    )


async def stored(engine: Engine, requests: Sequence[PingRequest]) -> list[bool]:
    """Whether each of ``requests`` is stored, for a batch whose transaction may or may not
    have committed (its writer died between the two): a ping is known by its check and its
    arrival instant, which its writer stamped to the microsecond. A ping addressed to a check
    that does not exist (yet) is not stored.
    """
    async with UnitOfWork.read(engine) as uow:
        by_uuid = await uow.pings.ids_by_uuid(r.uuid for r in requests if r.uuid)
        by_slug = await uow.pings.ids_by_slug((r.ping_key, r.slug) for r in requests if r.ping_key and r.slug)
        targets = [
            by_uuid.get(r.uuid) if r.uuid else by_slug.get((r.ping_key or "", r.slug or "")) for r in requests
        ]
        found = await uow.pings.arrived(
            (cid, r.received) for cid, r in zip(targets, requests, strict=True) if cid is not None
        )
    return [cid is not None and (cid, r.received) in found for cid, r in zip(targets, requests, strict=True)]


async def _resolve(
    uow: UnitOfWork, requests: Sequence[PingRequest], now: datetime, *, shards: int
) -> tuple[list[int | None], dict[int, dict[str, Any]], set[int]]:
    """Each request's check id (``None``: unknown), the locked rows of those checks, and the
    ids of the slug checks created here (``create``).

    A batch addressed by uuid alone is resolved and locked in one statement; otherwise the ids
    are resolved first and locked together, in id order.
    """
    if all(r.uuid for r in requests):
        by_row = await uow.pings.lock_by_uuid(r.uuid for r in requests if r.uuid)
        targets = [int(by_row[r.uuid]["id"]) if r.uuid in by_row else None for r in requests]
        return targets, {int(row["id"]): row for row in by_row.values()}, set()
    by_uuid = await uow.pings.ids_by_uuid(r.uuid for r in requests if r.uuid)
    by_slug = await uow.pings.ids_by_slug((r.ping_key, r.slug) for r in requests if r.ping_key and r.slug)
    missing = {(r.ping_key, r.slug) for r in requests if r.create and r.ping_key and r.slug} - by_slug.keys()
    created = await _create_missing(uow, sorted(missing), by_slug, now, shards=shards) if missing else set()
    targets = [
        by_uuid.get(r.uuid) if r.uuid else by_slug.get((r.ping_key or "", r.slug or "")) for r in requests
    ]
    rows = await uow.pings.lock(cid for cid in targets if cid is not None)
    return targets, rows, created


async def _create_missing(
    uow: UnitOfWork,
    missing: Sequence[tuple[str, str]],
    by_slug: dict[tuple[str, str], int],
    now: datetime,
    *,
    shards: int,
) -> set[int]:
    """Create the slug checks ``missing`` names ((ping key, slug), sorted), adding their ids to
    ``by_slug``; returns the ids of those this transaction created.

    Their projects are locked first, in id order (PostgreSQL ``FOR NO KEY UPDATE``; SQLite's
    ``BEGIN IMMEDIATE`` already excludes other writers), as an API upsert does before its insert
    (:func:`monitor.services.checks.create_or_upsert`): every creator of a project's checks
    then waits at that one lock. Without it, the insert takes the project row through its
    foreign key only after its slug is in the unique index, and two creators of the same slugs
    could each wait for the other. Slugs another transaction created meanwhile are found
    again after the lock, not inserted.
    """
    projects: dict[str, int] = {}
    for ping_key in sorted({key for key, _ in missing}):
        project_id = await uow.pings.project_by_ping_key(ping_key)
        if project_id is not None:
            projects[ping_key] = project_id
    for project_id in sorted(set(projects.values())):
        await uow.projects.lock(project_id)
    by_slug.update(await uow.pings.ids_by_slug(k for k in missing if k[0] in projects))
    created: set[int] = set()
    for key in missing:
        if key in by_slug or key[0] not in projects:
            continue
        check_id, made = await _create_or_find(uow, projects[key[0]], key, now, shards=shards)
        by_slug[key] = check_id
        if made:
            created.add(check_id)
    return created


async def _create_or_find(
    uow: UnitOfWork, project_id: int, key: tuple[str, str], now: datetime, *, shards: int
) -> tuple[int, bool]:
    """The id of the check ``key`` (ping key, slug) auto-provisions, and whether this call
    created it. Another transaction may have created the same slug since this one looked (two
    batches in flight, or two processes): the insert then waits for it and conflicts, and the
    check it committed is used instead of failing the whole batch.

    Raises:
        DuplicateKey: the insert conflicted and no such check is visible.
    """
    try:
        return await create_slug_check(uow.connection, project_id, key[1], now, shards=shards), True
    except DuplicateKey:  # the insert's own savepoint is rolled back; the batch goes on
        found = await uow.pings.ids_by_slug([key])
        if key not in found:
            raise
        return found[key], False


async def create_slug_check(
    conn: Connection, project_id: int, slug: str, now: datetime, *, shards: int
) -> int:
    """Auto-provision a simple check named ``slug``, routed to the project's default channels.

    Healthchecks' ``create=1``: period 1 day, grace 1 hour. Like every check created without a
    ``channels`` field (README "Notifications"), it goes to the channels marked
    ``"default": true`` — not to all of them.
    The check's evaluator shard comes from the shard count stored in the database
    (:func:`monitor.storage.cluster.shard_count_for_insert`); ``shards`` (``MONITOR_SHARDS``)
    is recorded only if the database has none yet.
    """
    uow = UnitOfWork.joining(conn)
    count = await cluster.shard_count_for_insert(conn, shards, now)
    values = new_check_values(project_id=project_id, now=now, shards=count)
    values.update(name=slug, slug=slug)
    check_id = await uow.checks.insert(values)
    channel_ids = await uow.channels.default_ids(project_id, lock=True)
    await uow.channels.assign_many([(check_id, c) for c in channel_ids])
    return check_id


def new_check_values(*, project_id: int, now: datetime, shards: int) -> dict[str, Any]:
    """Column values of a fresh check with DESIGN §9's defaults (simple, 1 day, 1 h grace).

    Args:
        project_id: the owning project.
        now: creation instant (aware UTC).
        shards: ``MONITOR_SHARDS``; the check's shard is ``uuid.int % shards`` (DESIGN §6).
    """
    check_uuid = str(uuid_module.uuid4())
    return {
        "uuid": check_uuid,
        "shard": shard_of(check_uuid, shards),
        "badge_uuid": str(uuid_module.uuid4()),
        "project_id": project_id,
        "name": "",
        "slug": None,
        "tags": "",
        "desc": "",
        "kind": "simple",
        "timeout": 86400,
        "schedule": None,
        "tz": "UTC",
        "dialect": "unix",
        "grace": 3600,
        "max_runtime": 1800,
        "failure_threshold": 1,
        "recovery_threshold": 1,
        "early_tolerance": None,
        "expected_runs": 1,
        "min_runtime": None,
        "methods": "",
        "manual_resume": False,
        "created_at": now,
        "paused": False,
        "bad_streak": 0,
        "good_streak": 0,
        "episode_count": 0,
        "late_in_episode": False,
        "n_pings": 0,
    }


async def lock_checks(conn: Connection, check_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """Read check rows; on PostgreSQL lock them ``FOR UPDATE`` in id order (no deadlocks)."""
    return await UnitOfWork.joining(conn).pings.lock(check_ids)


async def _ingest(
    uow: UnitOfWork,
    requests: Sequence[PingRequest],
    *,
    settings: Settings,
    limiter: RateLimiter | None,
    on_locked: Callable[[], None] | None = None,
    applied_here: AppliedHere | None = None,
) -> list[PingAnswer]:
    """
    Long because a batch's transaction resolves, binds, judges and writes in one sequence whose
    steps share its rows.
    """
    now = max(r.received for r in requests)
    conn = uow.connection
    targets, rows, created = await _resolve(uow, requests, now, shards=settings.shards)
    if on_locked is not None:
        on_locked()
    answers: list[PingAnswer | None] = [None] * len(requests)

    # Idempotency-Key: scope (check, kind), remembered 7 days; a repeat stores nothing.
    remembered: dict[tuple[int, str, str], int] = {}
    keyed = [
        (cid, r) for cid, r in zip(targets, requests, strict=True) if cid is not None and r.idempotency_key
    ]
    if keyed:
        found = await uow.pings.remembered(
            {cid for cid, _ in keyed},
            {r.idempotency_key for _, r in keyed if r.idempotency_key},
            now - IDEMPOTENCY_WINDOW,
        )
        for seen_id, kind, key, status in found:
            remembered.setdefault((seen_id, kind, key), status)

    contexts: dict[int, _Context] = {}
    for found_id in {cid for cid in targets if cid is not None and cid in rows}:
        row = rows[found_id]
        contexts[found_id] = _Context(
            row=row, spec=repositories.spec_of(row), state=repositories.state_of(row)
        )
    await _load_books(uow, contexts, requests, targets)
    outage_guard = await outages.load_ingest_guard(conn, now, timedelta(seconds=settings.lease_ttl))

    ping_rows: list[dict[str, Any]] = []
    announced: set[int] = set()
    pending = PendingWrites.empty()
    alert_work: list[tuple[_Context, detection.Effects, str | None]] = []
    for index, (request, cid) in enumerate(zip(requests, targets, strict=True)):
        if cid is None or cid not in contexts:
            answers[index] = NOT_FOUND
            continue
        ctx = contexts[cid]
        if limiter is not None and not limiter.allow(cid, request.received):
            wait = limiter.retry_after(cid, request.received)
            answers[index] = PingAnswer(429, f"rate limited: retry after {wait} s", retry_after=wait)
            continue
        # 201 answers the ping that created the check (Healthchecks), not its batch-mates
        success = CREATED if cid in created and cid not in announced else OK
        if request.idempotency_key:
            memo = (cid, request.kind.value, request.idempotency_key)
            if memo in remembered:
                status = remembered[memo]
                answers[index] = CREATED if status == 201 else OK
                continue
            remembered[memo] = success.status
        kind = _filtered_kind(ctx.row, request)
        earlier = _NONE if applied_here is None or kind is not PingKind.START else applied_here.of(cid)
        ping = detection.PingIn(
            kind=kind,
            received=request.received,
            scheduled=request.scheduled,
            rid=request.rid,
            exit_status=request.exit_status,
            finished=request.finished,
            started=request.started,
            # methods=POST guards against link-preview bots fetching ping URLs; email pings
            # are not subject to it (Healthchecks' smtpd does not apply it either)
            post=request.method == "POST" or request.scheme == "email",
            applied_here=earlier,
        )
        try:
            fx = detection.apply_ping(
                ctx.spec, ctx.state, ctx.book, ping, guard=outage_guard.at(request.received)
            )
        except ValidationError as error:
            answers[index] = PingAnswer(400, str(error))
            if request.idempotency_key:
                remembered.pop((cid, request.kind.value, request.idempotency_key), None)
            continue
        if applied_here is not None:
            applied_here.add(cid, request.received)
        ctx.touched = True
        ctx.row["n_pings"] += 1
        stored_kind = fx.stored_kind or kind
        # as Healthchecks: a start records the run's start, not a ping of the check's schedule,
        # so last_ping keeps the last finish (or skip)
        if stored_kind not in (PingKind.LOG, PingKind.IGN, PingKind.START):
            ctx.row["last_ping_at"] = request.received
        run = fx.run
        duration = None
        if run is not None and stored_kind.is_finish and run.started_at is not None and run.finished_at:
            duration = (run.finished_at - run.started_at).total_seconds()
        finished_at = None
        if request.finished is not None and run is not None and stored_kind.is_finish:
            finished_at = run.finished_at  # the bounded real end the run was given
        started_at = None
        if request.started is not None and run is not None and stored_kind is PingKind.START:
            started_at = run.started_at  # the bounded real start the run was given
        if request.duration is not None and stored_kind.is_finish:
            duration = request.duration
        ping_rows.append(
            {
                "check_id": cid,
                "n": ctx.row["n_pings"],
                "kind": stored_kind.value,
                "received_at": request.received,
                "scheduled": fx.tick,
                "rid": request.rid,
                "run_id": run.id if run is not None else None,
                "exit_status": request.exit_status,
                "duration": duration,
                "finished_at": finished_at,
                "started_at": started_at,
                "method": request.method,
                "remote_addr": request.remote_addr,
                "ua": request.ua,
                "scheme": request.scheme,
                "body": request.body,
                "body_size": request.body_size,
                "idempotency_key": request.idempotency_key,
                "response_status": success.status,
            }
        )
        pending.add(cid, fx)
        if fx.alerts:
            tail = request.body.decode("utf-8", "replace") if request.body else None
            alert_work.append((ctx, fx, tail))
        answers[index] = success
        announced.add(cid)

    touched = {cid: ctx for cid, ctx in contexts.items() if ctx.touched}
    # only the state columns some check of the batch changed (each row is as read, locked, in
    # this transaction): a ping moves a few of them, and binding and writing every one cost
    # more than the comparison. Every check writes that same union, so the batch's state is
    # still one UPDATE (one round trip, one prepared statement), not one per set of changes.
    changed: set[str] = set()
    for ctx in touched.values():
        changed.update(repositories.state_changes(ctx.row, ctx.state))
    columns = [name for name in repositories.STATE_COLUMNS if name in changed]
    updates = [
        {
            **{name: getattr(ctx.state, name) for name in columns},
            "b_id": cid,
            "n_pings": ctx.row["n_pings"],
            "last_ping_at": ctx.row["last_ping_at"],
        }
        for cid, ctx in touched.items()
    ]
    # the pings, runs, marks, flips and states in one statement on PostgreSQL (a round trip each
    # cost more than writing them); then the alerts, which read none of them
    await pending.write(conn, pings=ping_rows, states=updates)
    for ctx, fx, tail in alert_work:
        ctx.identity = ctx.identity or CheckIdentity.of(ctx.row)
        await record_alerts(
            conn,
            ctx.identity,
            fx.alerts,
            now=now,
            status=detection.status(ctx.state, now),
            base_url=settings.base_url,
            log_tail=tail,
            # DESIGN §5: a late that closes a down episode is the recovery notice
            recovering=any(f.up is True and f.reason is FlipReason.LATE for f in fx.flips),
        )
    return [a if a is not None else NOT_FOUND for a in answers]


def _filtered_kind(row: dict[str, Any], request: PingRequest) -> PingKind:
    """The ping's kind after the check's keyword filters (:mod:`monitor.domain.keywords`)."""
    rules = repositories.keyword_filter_of(row)
    if request.scheme == "email":
        return keywords.classify_email(rules, request.email_subject or "", request.email_text or "")
    return keywords.classify_http(rules, request.kind, request.exit_status, request.body)


async def _load_books(
    uow: UnitOfWork,
    contexts: dict[int, _Context],
    requests: Sequence[PingRequest],
    targets: Sequence[int | None],
) -> None:
    earliest: dict[int, datetime] = {}
    rids: dict[int, set[str]] = defaultdict(set)
    ticks: dict[int, set[datetime]] = defaultdict(set)
    for request, cid in zip(requests, targets, strict=True):
        if cid is None or cid not in contexts:
            continue
        # a late finish's real end: the runs started since then may need judging again
        # (or a late start's real start: the ticks and runs it binds to as of then)
        first = min(request.received, request.finished or request.received)
        first = min(first, request.started or request.received)
        earliest[cid] = min(earliest.get(cid, first), first)
        if request.rid:
            rids[cid].add(request.rid)
        if request.scheduled is not None and not isinstance(contexts[cid].spec.schedule, SimpleSchedule):
            try:
                tick = contexts[cid].spec.schedule.tick_at_or_before(request.scheduled)  # type: ignore[union-attr]
            except Exception:  # bad input is judged (and answered 400) later
                tick = None
            if tick is not None:
                ticks[cid].add(tick)
    cutoffs = {cid: ping_needed_since(ctx.spec, ctx.state, earliest[cid]) for cid, ctx in contexts.items()}
    books = await uow.runs.books(
        cutoffs, rids=rids, ticks=ticks, newest=_overtaken_starts(contexts, requests, targets)
    )
    for cid, book in books.items():
        contexts[cid].book = book


def _overtaken_starts(
    contexts: Mapping[int, _Context], requests: Sequence[PingRequest], targets: Sequence[int | None]
) -> set[int]:
    """The checks with a start without ``rid`` stamped before their last applied run ping, or
    within :data:`~monitor.domain.detection.REORDER_WINDOW` after it: the start may belong to
    the run that ping opened (another process stamped and committed it first;
    :func:`monitor.domain.detection.apply_ping`), so the book must hold that run, the newest."""
    found: set[int] = set()
    for request, cid in zip(requests, targets, strict=True):
        if cid is None or cid not in contexts or request.kind is not PingKind.START or request.rid:
            continue
        applied = contexts[cid].state.last_run_ping_at
        if applied is not None and request.received < applied + detection.REORDER_WINDOW:
            found.add(cid)
    return found


class IngestWriter:
    """The process's ingest queue and its writer task (group commit).

    On SQLite one batch is processed at a time (one writer). On PostgreSQL up to
    :data:`BATCHES_IN_FLIGHT` batches run at once, each in its own transaction: a batch waits
    for the database during most of its transaction, and the next batch is collected and
    started meanwhile — but only once the previous one holds its checks' rows, so a later ping
    of the same check waits for the earlier one's commit and pings of a check are still
    processed in arrival order.

    Args:
        store: stores each batch (default: :class:`BatchIngest`, in this process); another
            process's store (``monitor.workers.ingest_process``) must store the batches in the
            order it is handed them and call ``on_locked`` once that order is fixed.
        in_flight: batches handed to ``store`` at once (default: :data:`BATCHES_IN_FLIGHT` on
            PostgreSQL, 1 on SQLite).
    """

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        store: BatchStore | None = None,
        *,
        in_flight: int | None = None,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self._store: BatchStore = store if store is not None else BatchIngest(engine, settings)
        self._queue: asyncio.Queue[tuple[PingRequest, asyncio.Future[PingAnswer]]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        if in_flight is None:
            in_flight = BATCHES_IN_FLIGHT if engine.dialect.name == "postgresql" else 1
        self._in_flight_limit = in_flight
        self._in_flight: set[asyncio.Task[None]] = set()
        self._carry: list[tuple[PingRequest, asyncio.Future[PingAnswer]]] = []

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="ingest-writer")

    async def stop(self) -> None:
        """Finish what is queued, then stop."""
        if self._task is None:
            return
        await self._queue.join()
        if self._in_flight:
            await asyncio.wait(self._in_flight)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def submit(self, request: PingRequest) -> PingAnswer:
        """Queue a ping; returns once its batch has committed (or failed).

        Back-pressure: with ``MONITOR_INGEST_QUEUE`` pings already waiting, the ping is not
        queued and the answer is ``503`` with ``Retry-After: 1`` (nothing was stored, so the
        client's retry loses nothing), instead of letting the queue grow without bound.
        """
        if self._task is None:
            raise RuntimeError("IngestWriter.start() has not been called")
        if self._queue.qsize() >= self.settings.ingest_queue:
            return QUEUE_FULL
        future: asyncio.Future[PingAnswer] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((request, future))
        return await future

    async def _run(self) -> None:
        while True:
            batch = await self._collect()
            if self._in_flight_limit == 1:
                await self._finish(batch, None)
                continue
            while len(self._in_flight) >= self._in_flight_limit:
                await asyncio.wait(self._in_flight, return_when=asyncio.FIRST_COMPLETED)
            await self._launch(batch)  # the next batch starts once this one holds its rows

    def _launch(self, batch: list[tuple[PingRequest, asyncio.Future[PingAnswer]]]) -> asyncio.Future[None]:
        """Start ``batch`` in a task of its own; the returned future completes once that batch
        holds its checks' rows, or has ended (failed or committed) — that batch's, no other's."""
        locked: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def mark_locked() -> None:
            if not locked.done():
                locked.set_result(None)

        task = asyncio.create_task(self._finish(batch, mark_locked))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)
        task.add_done_callback(lambda _: mark_locked())
        return locked

    async def _collect(self) -> list[tuple[PingRequest, asyncio.Future[PingAnswer]]]:
        """What is queued, up to ``ingest_batch`` pings, and what arrives within ``ingest_wait``
        of the first."""
        loop = asyncio.get_running_loop()
        if self._carry:
            batch, self._carry = self._carry, []
            while len(batch) < self.settings.ingest_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            return batch
        batch = [await self._queue.get()]
        deadline = loop.time() + self.settings.ingest_wait
        while len(batch) < self.settings.ingest_batch:
            if not self._queue.empty():
                batch.append(self._queue.get_nowait())
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                batch.append(await asyncio.wait_for(self._queue.get(), remaining))
            except TimeoutError:
                break
        if self._in_flight_limit > 1 and not self._in_flight and len(batch) >= 2 * SPLIT_MIN:
            half = len(batch) // 2
            batch, self._carry = batch[:half], batch[half:]
        return batch

    async def _finish(
        self,
        batch: list[tuple[PingRequest, asyncio.Future[PingAnswer]]],
        on_locked: Callable[[], None] | None,
    ) -> None:
        try:
            await self._process(batch, on_locked)
        finally:
            for _ in batch:
                self._queue.task_done()

    async def _process(
        self,
        batch: list[tuple[PingRequest, asyncio.Future[PingAnswer]]],
        on_locked: Callable[[], None] | None,
    ) -> None:
        answers = await self._store([r for r, _ in batch], on_locked)
        for (_, future), answer in zip(batch, answers, strict=True):
            if not future.done():
                future.set_result(answer)


BatchStore = Callable[[list[PingRequest], Callable[[], None] | None], Awaitable[list[PingAnswer]]]
"""Stores a batch of pings and answers each (in order) once committed: :class:`BatchIngest` in
this process, or another process's (``monitor.workers.ingest_process``). The second argument
is :func:`ingest_pings`' ``on_locked``."""


class BatchIngest:
    """One process's store of ping batches: :func:`ingest_pings` with the process's rate
    limiter and :class:`AppliedHere`, a failed batch retried ping by ping.

    Never raises: a ping whose transaction failed is answered ``503`` (nothing of it stored).
    """

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings
        self.limiter = RateLimiter(settings.ping_rate_limit)
        self.applied_here = AppliedHere()
        self._failures = FailureLog(logger, "ping ingest", action="ingest_batch_failed")

    async def __call__(
        self, requests: list[PingRequest], on_locked: Callable[[], None] | None = None
    ) -> list[PingAnswer]:
        try:
            answers = await ingest_pings(
                self.engine,
                requests,
                settings=self.settings,
                limiter=self.limiter,
                on_locked=on_locked,
                applied_here=self.applied_here,
            )
        except Exception as error:
            # retried ping by ping; a database outage logs one traceback, then a counted
            # line every 30 s (F4), not one per ping
            self._failures.failed(error)
            answers = []
            for request in requests:
                try:
                    answers.extend(
                        await ingest_pings(
                            self.engine, [request], settings=self.settings, applied_here=self.applied_here
                        )
                    )
                except Exception as single:
                    self._failures.failed(single)
                    answers.append(STORAGE_UNAVAILABLE)
        else:
            self._failures.succeeded()
        return answers
