"""The scheduler's planning rules (DESIGN §8), pure: policies, catch-up, starting deadline.

Table-driven cases pin each rule down; hypothesis checks the invariants over any input
(every tick is accounted for exactly once, starts are in order, Forbid never overlaps, …);
a small simulation with an injected clock replays 10 ticks of downtime under each catch-up
setting.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.domain.cron import schedules
from monitor.domain.jobs import Catchup, ConcurrencyPolicy
from monitor.domain.planning import Due, Plan, Rules, SkipReason, overdue_ticks, plan

T0 = datetime(2026, 7, 18, 2, 0, tzinfo=UTC)
WINDOW = timedelta(seconds=2)
EVERY_2S = schedules.parse_cron("*/2 * * * * *", "seconds")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def due(*seconds: float, attempt: int = 1) -> tuple[Due, ...]:
    return tuple(Due(tick=at(s), attempt=attempt) for s in seconds)


def ticks(p: Plan) -> dict[str, object]:
    return {
        "start": [int((d.tick - T0).total_seconds()) for d in p.start],
        "skip": [(int((d.tick - T0).total_seconds()), r.value) for d, r in p.skip],
        "queue": [int((d.tick - T0).total_seconds()) for d in p.queue],
        "terminate": p.terminate_running,
    }


def run_plan(
    policy: str, running: int, queued: tuple[Due, ...], backlog: tuple[Due, ...], now: float, **rules: object
) -> dict[str, object]:
    r = Rules(policy=ConcurrencyPolicy(policy), **rules)  # type: ignore[arg-type]
    return ticks(
        plan(r, running=running, queued=queued, backlog=backlog, now=at(now), handover_window=WINDOW)
    )


@pytest.mark.parametrize(
    ("policy", "running", "queued", "backlog", "expected"),
    [
        pytest.param(
            "Allow",
            0,
            (),
            due(10),
            {"start": [10], "skip": [], "queue": [], "terminate": False},
            id="allow-idle",
        ),
        pytest.param(
            "Allow",
            2,
            (),
            due(14),
            {"start": [14], "skip": [], "queue": [], "terminate": False},
            id="allow-overlaps",
        ),
        pytest.param(
            "Forbid",
            0,
            (),
            due(10),
            {"start": [10], "skip": [], "queue": [], "terminate": False},
            id="forbid-idle",
        ),
        pytest.param(
            "Forbid",
            1,
            (),
            due(10),
            {"start": [], "skip": [(10, "forbid")], "queue": [], "terminate": False},
            id="forbid-busy",
        ),
        pytest.param(
            "Forbid",
            0,
            (),
            due(8, 10),
            {"start": [8], "skip": [(10, "forbid")], "queue": [], "terminate": False},
            id="forbid-two-due",
        ),
        pytest.param(
            "Replace",
            1,
            (),
            due(10),
            {"start": [10], "skip": [], "queue": [], "terminate": True},
            id="replace-busy",
        ),
        pytest.param(
            "Replace",
            0,
            (),
            due(10),
            {"start": [10], "skip": [], "queue": [], "terminate": False},
            id="replace-idle",
        ),
        pytest.param(
            "Replace",
            0,
            (),
            due(8, 10),
            {"start": [10], "skip": [(8, "replaced")], "queue": [], "terminate": False},
            id="replace-newest-wins",
        ),
        pytest.param(
            "BufferOne",
            1,
            (),
            due(10),
            {"start": [], "skip": [], "queue": [10], "terminate": False},
            id="buffer-one-queues",
        ),
        pytest.param(
            "BufferOne",
            1,
            due(10),
            due(12),
            {"start": [], "skip": [(12, "buffer_full")], "queue": [10], "terminate": False},
            id="buffer-one-full",
        ),
        pytest.param(
            "BufferOne",
            0,
            due(10),
            (),
            {"start": [10], "skip": [], "queue": [], "terminate": False},
            id="buffer-one-dequeues",
        ),
        pytest.param(
            "BufferOne",
            0,
            due(10),
            due(12, 14),
            {"start": [10], "skip": [(14, "buffer_full")], "queue": [12], "terminate": False},
            id="buffer-one-dequeue-and-buffer",
        ),
        pytest.param(
            "BufferAll",
            1,
            due(10),
            due(12),
            {"start": [], "skip": [], "queue": [10, 12], "terminate": False},
            id="buffer-all-queues",
        ),
        pytest.param(
            "BufferAll",
            0,
            due(10, 12),
            due(14),
            {"start": [10], "skip": [], "queue": [12, 14], "terminate": False},
            id="buffer-all-in-order",
        ),
    ],
)
def test_policies(
    policy: str, running: int, queued: tuple[Due, ...], backlog: tuple[Due, ...], expected: dict[str, object]
) -> None:
    assert run_plan(policy, running, queued, backlog, now=14.5) == expected


def test_starting_deadline_skips_a_tick_that_starts_too_late() -> None:
    result = run_plan("BufferAll", 0, due(2, 10), due(14), now=14.5, starting_deadline=timedelta(seconds=5))
    assert result == {"start": [10], "skip": [(2, "starting_deadline")], "queue": [14], "terminate": False}


@pytest.mark.parametrize(
    ("catchup", "start", "skipped"),
    [
        pytest.param("all", list(range(2, 22, 2)), [], id="all"),
        pytest.param("latest", [20], [(s, "catchup") for s in range(2, 20, 2)], id="latest"),
        pytest.param("none", [], [(s, "catchup") for s in range(2, 22, 2)], id="none"),
    ],
)
def test_catchup_after_downtime(catchup: str, start: list[int], skipped: list[tuple[int, str]]) -> None:
    backlog = due(*range(2, 22, 2))  # 10 ticks missed
    result = run_plan("Allow", 0, (), backlog, now=21, catchup=Catchup(catchup))
    assert result["start"] + result["queue"] == start  # type: ignore[operator]
    assert len(result["start"]) <= 1  # type: ignore[arg-type]  # one catch-up run at a time
    assert result["skip"] == skipped


def test_max_catchup_keeps_the_newest() -> None:
    result = run_plan("Allow", 0, (), due(*range(2, 22, 2)), now=21, max_catchup=3)
    assert (result["start"], result["queue"]) == ([16], [18, 20])
    assert result["skip"] == [(s, "max_catchup") for s in range(2, 16, 2)]


def test_a_handover_is_not_downtime() -> None:
    """Unclaimed ticks younger than the handover window run whatever catchup says."""
    result = run_plan("Allow", 0, (), due(20), now=21, catchup=Catchup.NONE)
    assert result["start"] == [20]


def test_orphan_keeps_its_attempt() -> None:
    p = plan(Rules(), running=0, queued=(), backlog=due(20, attempt=2), now=at(20.5), handover_window=WINDOW)
    assert p.start == (Due(tick=at(20), attempt=2),)


def test_overdue_ticks_is_bounded_and_ordered() -> None:
    found, more = overdue_ticks(EVERY_2S, at(0), at(21), 100)
    assert [int((t - T0).total_seconds()) for t in found] == list(range(2, 22, 2))
    assert not more
    found, more = overdue_ticks(EVERY_2S, at(-86400 * 365), at(21), 5)
    assert [int((t - T0).total_seconds()) for t in found] == [12, 14, 16, 18, 20]
    assert more
    assert overdue_ticks(EVERY_2S, at(20), at(21), 5) == ([], False)


# ---------------------------------------------------------------- properties

policies = st.sampled_from(list(ConcurrencyPolicy))
catchups = st.sampled_from(list(Catchup))
offsets = st.lists(st.integers(min_value=0, max_value=60), unique=True, max_size=12)


@settings(max_examples=400, deadline=None)
@given(
    policy=policies,
    catchup=catchups,
    max_catchup=st.integers(min_value=1, max_value=12),
    deadline=st.none() | st.integers(min_value=1, max_value=30),
    running=st.integers(min_value=0, max_value=3),
    queued_n=st.integers(min_value=0, max_value=4),
    backlog_offsets=offsets,
    now_extra=st.integers(min_value=0, max_value=30),
)
def test_plan_invariants(
    policy: ConcurrencyPolicy,
    catchup: Catchup,
    max_catchup: int,
    deadline: int | None,
    running: int,
    queued_n: int,
    backlog_offsets: list[int],
    now_extra: int,
) -> None:
    queued = tuple(Due(tick=at(i)) for i in range(queued_n))
    backlog = tuple(Due(tick=at(10 + o)) for o in backlog_offsets)
    now = at(10 + max(backlog_offsets, default=0) + now_extra)
    rules = Rules(
        policy=policy,
        catchup=catchup,
        max_catchup=max_catchup,
        starting_deadline=None if deadline is None else timedelta(seconds=deadline),
    )
    p = plan(rules, running=running, queued=queued, backlog=backlog, now=now, handover_window=WINDOW)
    everything = [*p.start, *(d for d, _ in p.skip), *p.queue]
    # every tick given is accounted for exactly once
    assert sorted(everything) == sorted([*queued, *backlog])
    assert list(p.start) == sorted(p.start) and list(p.queue) == sorted(p.queue)
    # a started or queued tick is never past its starting deadline
    if rules.starting_deadline is not None:
        assert all(now - d.tick <= rules.starting_deadline for d in [*p.start, *p.queue])
    # catch-up: no more than max_catchup of the backlog survives
    assert sum(1 for d in [*p.start, *p.queue] if d in backlog) <= max_catchup
    if policy is ConcurrencyPolicy.FORBID:
        assert len(p.start) <= (0 if running else 1) and not p.queue
    if policy is ConcurrencyPolicy.REPLACE:
        assert len(p.start) <= 1 and not p.queue
        assert p.terminate_running == (running > 0 and bool(p.start))
    else:
        assert not p.terminate_running
    if policy in (ConcurrencyPolicy.BUFFER_ONE, ConcurrencyPolicy.BUFFER_ALL):
        assert len(p.start) <= (0 if running else 1)
        if p.start and p.queue:
            assert p.start[-1] < p.queue[0]
    if policy is ConcurrencyPolicy.BUFFER_ONE:
        assert len(p.queue) <= 1
    if policy is ConcurrencyPolicy.BUFFER_ALL:
        assert all(
            r in (SkipReason.CATCHUP, SkipReason.MAX_CATCHUP, SkipReason.STARTING_DEADLINE) for _, r in p.skip
        )
    if policy is ConcurrencyPolicy.ALLOW and p.queue:  # ticks wait only behind catch-up, one at a time
        assert len(p.start) <= (0 if running else 1)


def _simulate(
    catchup: Catchup, policy: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
) -> tuple[list[datetime], list[datetime]]:
    """A job on ``*/2 s`` ran up to T0, the scheduler was down for 10 ticks, then rounds every 0.5 s."""
    rules = Rules(policy=policy, catchup=catchup)
    through = T0
    queue: tuple[Due, ...] = ()
    started: list[datetime] = []
    skipped: list[datetime] = []
    now = at(21)
    while now <= at(30):
        found, _ = overdue_ticks(EVERY_2S, through, now, rules.max_catchup)
        p = plan(
            rules,
            running=0,
            queued=queue,
            backlog=[Due(tick=t) for t in found],
            now=now,
            handover_window=WINDOW,
        )
        if found:
            through = found[-1]
        queue = p.queue
        started += [d.tick for d in p.start]
        skipped += [d.tick for d, _ in p.skip]
        while p.start and queue:  # runs end at once: the next queued (catch-up) tick starts
            p = plan(rules, running=0, queued=queue, backlog=[], now=now, handover_window=WINDOW)
            queue = p.queue
            started += [d.tick for d in p.start]
            skipped += [d.tick for d, _ in p.skip]
        now += timedelta(seconds=0.5)
    return started, skipped


@pytest.mark.parametrize(
    ("catchup", "first_started", "skipped"),
    [
        pytest.param(Catchup.ALL, [at(s) for s in range(2, 22, 2)], [], id="all"),
        pytest.param(Catchup.LATEST, [at(20)], [at(s) for s in range(2, 20, 2)], id="latest"),
        pytest.param(Catchup.NONE, [], [at(s) for s in range(2, 22, 2)], id="none"),
    ],
)
def test_downtime_of_ten_ticks_with_an_injected_clock(
    catchup: Catchup, first_started: list[datetime], skipped: list[datetime]
) -> None:
    started, skips = _simulate(catchup)
    after = [at(s) for s in range(22, 31, 2)]  # normal ticks after the restart run on time
    assert started == first_started + after  # in order, with their original times
    assert skips == skipped


def test_catchup_under_allow_runs_one_after_another_then_allow_again() -> None:
    """Ten overdue ticks started together would overlap (a false overlap alert): one at a time."""
    rules = Rules(policy=ConcurrencyPolicy.ALLOW)
    first = plan(
        rules, running=0, queued=(), backlog=due(*range(2, 22, 2)), now=at(21), handover_window=WINDOW
    )
    assert ticks(first)["start"] == [2] and ticks(first)["queue"] == list(range(4, 22, 2))
    busy = plan(rules, running=1, queued=first.queue, backlog=due(22), now=at(22), handover_window=WINDOW)
    assert ticks(busy) == {"start": [], "skip": [], "queue": [*range(4, 22, 2), 22], "terminate": False}
    queue, order = busy.queue, [2]
    while queue:  # each round after the previous run ended
        step = plan(rules, running=0, queued=queue, backlog=(), now=at(22.5), handover_window=WINDOW)
        order += ticks(step)["start"]  # type: ignore[operator]
        queue = step.queue
    assert order == list(range(2, 24, 2))
    # caught up: Allow overlaps again
    normal = plan(rules, running=1, queued=(), backlog=due(24), now=at(24.1), handover_window=WINDOW)
    assert ticks(normal)["start"] == [24]


def test_ticks_dropped_by_max_catchup_are_skipped_for_the_report() -> None:
    """Every tick the runner found is in the plan: those over max_catchup as ``max_catchup`` skips."""
    found, more = overdue_ticks(EVERY_2S, T0, at(2 * 1500 + 1), 5 + 1000)
    assert more and len(found) == 1005
    p = plan(
        Rules(max_catchup=5),
        running=0,
        queued=(),
        backlog=[Due(tick=t) for t in found],
        now=at(3001),
        handover_window=WINDOW,
    )
    assert len(p.skip) == 1000 and {r for _, r in p.skip} == {SkipReason.MAX_CATCHUP}
    assert len(p.start) + len(p.queue) == 5
