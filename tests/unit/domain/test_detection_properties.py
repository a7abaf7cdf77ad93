"""Properties of detection over random ping sequences (hypothesis)."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.domain import detection
from monitor.domain.checks import CheckSpec, CheckState, PingKind, SimpleSchedule, Status
from monitor.domain.cron import schedules
from monitor.domain.errors import ValidationError
from monitor.domain.runs import Run, RunBook, holds_older, needed_since, ping_needed_since

T0 = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)
RIDS = [None, "a0000000-0000-4000-8000-00000000000a", "b0000000-0000-4000-8000-00000000000b"]

SPECS = {
    "hourly": lambda: CheckSpec(
        schedule=schedules.parse_cron("0 * * * *"),
        grace=timedelta(minutes=5),
        max_runtime=timedelta(minutes=90),
    ),
    "berlin-0230": lambda: CheckSpec(
        schedule=schedules.parse_cron("30 2 * * *", tz="Europe/Berlin"),
        grace=timedelta(minutes=15),
        max_runtime=timedelta(hours=1),
        failure_threshold=2,
    ),
    "ten-seconds": lambda: CheckSpec(
        schedule=schedules.parse_cron("*/10 * * * * *", "seconds"),
        grace=timedelta(seconds=3),
        max_runtime=timedelta(seconds=25),
    ),
    "simple": lambda: CheckSpec(
        schedule=SimpleSchedule(period=timedelta(minutes=30)),
        grace=timedelta(minutes=5),
        max_runtime=timedelta(minutes=20),
        recovery_threshold=2,
    ),
}

step = st.tuples(
    st.integers(min_value=0, max_value=5400),  # seconds since the previous step
    st.sampled_from(["start", "success", "fail", "log", "skip", "evaluate", "pause", "resume", "3"]),
    st.sampled_from(RIDS),
    st.one_of(st.none(), st.integers(min_value=-7200, max_value=30)),  # scheduled, relative to now
)


def run(
    spec: CheckSpec, steps: list[tuple[int, str, str | None, int | None]]
) -> list[tuple[str, str | None, int]]:
    state, book = CheckState(), RunBook()
    now = T0
    raised: list[tuple[str, str | None, int]] = []
    keys: set[str] = set()

    def record(fx: detection.Effects) -> None:
        for alert in fx.alerts:
            if alert.new:
                assert alert.key not in keys, f"alert key raised twice: {alert.key}"
                keys.add(alert.key)
                raised.append(
                    (alert.kind.value, detection.iso(alert.scheduled) if alert.scheduled else None, 0)
                )

    for delta, action, rid, scheduled in steps:
        now += timedelta(seconds=delta)
        # the evaluator runs whenever something becomes due
        for _ in range(10_000):
            if state.next_due is None or not state.next_due < now:
                break
            record(detection.evaluate(spec, state, book, state.next_due + timedelta(milliseconds=1)))
        if action == "evaluate":
            record(detection.evaluate(spec, state, book, now))
        elif action == "pause":
            record(detection.pause(state, now))
        elif action == "resume":
            if state.paused:
                record(detection.resume(state, now))
        else:
            kind = PingKind.FAIL if action == "3" else PingKind(action)
            if kind is PingKind.SKIP and scheduled is None:
                continue  # the HTTP layer answers 400 before the domain sees it
            ping = detection.PingIn(
                kind=kind,
                received=now,
                rid=rid,
                scheduled=now + timedelta(seconds=scheduled) if scheduled is not None else None,
                exit_status=3 if action == "3" else None,
            )
            try:
                record(detection.apply_ping(spec, state, book, ping))
            except ValidationError as error:
                assert error.field == "scheduled"
        status = detection.status(state, now)
        assert status in set(Status)
        if state.paused or state.is_new:
            assert state.next_due is None
        for tick in {r.scheduled for r in book.runs.values()}:
            runs = book.runs_of(tick)
            assert sum(1 for r in runs if r.duplicate) <= max(0, len(runs) - 1)
    return raised


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(SPECS)), steps=st.lists(step, min_size=1, max_size=40))
def test_random_sequences_never_raise_one_key_twice_and_replay_identically(
    name: str, steps: list[tuple[int, str, str | None, int | None]]
) -> None:
    first = run(SPECS[name](), steps)
    second = run(SPECS[name](), steps)
    assert first == second


def _loaded(
    full: RunBook,
    cutoff: datetime | None,
    rids: set[str] = frozenset(),  # type: ignore[assignment]
    ticks: set[datetime] = frozenset(),  # type: ignore[assignment]
    *,
    newest: bool = False,
) -> RunBook:
    """What the storage loads for a decision (``monitor.storage.repositories.load_books``):
    every open run, the runs and marks bound to a tick ``>= cutoff``, the runs carrying one of
    ``rids``, the runs and marks of one of ``ticks``; with ``newest`` (the ingest asks for it
    for a start that may have been overtaken by its finish), the newest run; and, when those
    hold a run or mark older than the cutoff or a named tick is older, the newest succeeded run
    (supersession compares older ticks with it)."""

    def wanted(scheduled: datetime) -> bool:
        return (cutoff is not None and scheduled >= cutoff) or scheduled in ticks

    book = RunBook(
        runs={
            i: r
            for i, r in full.runs.items()
            if r.outcome is None or wanted(r.scheduled) or (r.rid is not None and r.rid in rids)
        },
        marks={t: m for t, m in full.marks.items() if wanted(t)},
    )
    if newest and full.runs:
        book.add(max(full.runs.values(), key=lambda r: (r.scheduled, r.first_ping_at)))
    if holds_older(book, cutoff, ticks):
        succeeded = [r for r in full.runs.values() if r.succeeded]
        if succeeded:
            book.add(max(succeeded, key=lambda r: (r.scheduled, r.first_ping_at)))
    return book


def _seen(fx: detection.Effects, state: CheckState) -> tuple[object, ...]:
    """What a decision did: its effects and the state it left."""

    def run(r: Run | None) -> tuple[object, ...] | None:
        return None if r is None else dataclasses.astuple(r)

    return (
        fx.tick,
        fx.stored_kind,
        run(fx.run),
        sorted((run(r) for r in fx.new_runs), key=repr),
        sorted((run(r) for r in fx.changed_runs.values()), key=repr),
        [(m.scheduled, m.outcome) for m in fx.new_marks],
        [(a.key, a.kind, a.scheduled, a.count, a.new, a.superseded) for a in fx.alerts],
        [dataclasses.astuple(f) for f in fx.flips],
        dataclasses.astuple(state),
    )


def trace(
    spec: CheckSpec, steps: list[tuple[int, str, str | None, int | None, bool]], *, loaded: bool
) -> list[tuple[object, ...]]:
    """Each step's decisions, with the whole history in the book or (``loaded``) only what the
    evaluator (:func:`needed_since`) and the ingest (:func:`ping_needed_since`) load for it.
    Run ids are numbered (they name the runs in alert keys), not random."""
    numbers = itertools.count()
    random_ids = detection.new_run_id
    detection.new_run_id = lambda at: f"run-{next(numbers)}"
    try:
        return _trace(spec, steps, loaded=loaded)
    finally:
        detection.new_run_id = random_ids


def _trace(
    spec: CheckSpec, steps: list[tuple[int, str, str | None, int | None, bool]], *, loaded: bool
) -> list[tuple[object, ...]]:
    state, full = CheckState(), RunBook()
    now = T0
    seen: list[tuple[object, ...]] = []

    def book_for(
        cutoff: datetime | None, rids: set[str], ticks: set[datetime], newest: bool = False
    ) -> RunBook:
        return _loaded(full, cutoff, rids, ticks, newest=newest) if loaded else full

    def keep(book: RunBook) -> None:
        full.runs.update(book.runs)
        full.marks.update(book.marks)

    def evaluate(at: datetime) -> None:
        book = book_for(needed_since(spec, state), set(), set())
        seen.append(_seen(detection.evaluate(spec, state, book, at), state))
        keep(book)

    for delta, action, rid, scheduled, caught_up in steps:
        now += timedelta(seconds=delta)
        # the evaluator has judged whatever became due, or (an evaluator behind) it has not
        for _ in range(10_000 if caught_up else 0):
            if state.next_due is None or not state.next_due < now:
                break
            evaluate(state.next_due + timedelta(milliseconds=1))
        if action == "evaluate":
            evaluate(now)
            continue
        if action in ("pause", "resume"):
            if action == "pause" or state.paused:
                fx = detection.pause(state, now) if action == "pause" else detection.resume(state, now)
                seen.append(_seen(fx, state))
            continue
        kind = PingKind.FAIL if action == "3" else PingKind(action)
        if kind is PingKind.SKIP and scheduled is None:
            continue
        at = now + timedelta(seconds=scheduled) if scheduled is not None else None
        ticks: set[datetime] = set()
        if at is not None and not isinstance(spec.schedule, SimpleSchedule):
            tick = spec.schedule.tick_at_or_before(at)
            if tick is not None:
                ticks.add(tick)
        # as the ingest (monitor.services.ingest._overtaken_starts) asks for the newest run
        overtaken = (
            kind is PingKind.START
            and rid is None
            and state.last_run_ping_at is not None
            and now < state.last_run_ping_at + detection.REORDER_WINDOW
        )
        book = book_for(ping_needed_since(spec, state, now), {rid} if rid else set(), ticks, overtaken)
        ping = detection.PingIn(
            kind=kind, received=now, rid=rid, scheduled=at, exit_status=3 if action == "3" else None
        )
        try:
            seen.append(_seen(detection.apply_ping(spec, state, book, ping), state))
        except ValidationError as error:
            seen.append(("refused", error.field, dataclasses.astuple(state)))
        keep(book)
    return seen


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(SPECS)),
    steps=st.lists(st.tuples(step, st.booleans()).map(lambda t: (*t[0], t[1])), min_size=1, max_size=40),
)
def test_decisions_on_the_loaded_runs_equal_decisions_on_the_whole_history(
    name: str, steps: list[tuple[int, str, str | None, int | None, bool]]
) -> None:
    """The evaluator and the ingest load only the runs and marks from ``needed_since`` /
    ``ping_needed_since`` on (plus open and named runs): every decision is the one the whole
    history gives."""
    assert trace(SPECS[name](), steps, loaded=True) == trace(SPECS[name](), steps, loaded=False)
