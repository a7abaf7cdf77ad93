"""The evaluator's early sweep instant (DESIGN §6): just after the earliest deadline of the
shards it holds, when that comes before its next beat; the clock of the judged instants is
driven, the sleep's own clock is the process's monotonic one."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from monitor.domain.shards import lease_name
from monitor.storage import tables as t
from monitor.workers.evaluator import EARLY_MARGIN, ShardedEvaluator
from tests.conftest import Api
from tests.support.app import create_check

T0 = datetime(2026, 7, 18, 2, 0, 5, tzinfo=UTC)
DEADLINE = datetime(2026, 7, 18, 2, 1, 10, tzinfo=UTC)
"""Pinged at 02:00:05, an every-minute check with 10 s of grace is next due at 02:01:10."""


async def test_the_early_sweep_comes_just_after_the_next_deadline_within_the_interval(api: Api) -> None:
    evaluator = ShardedEvaluator(api.engine, api.settings, api.clock, holder="host:a")
    try:
        api.clock.set(T0)
        check = await create_check(api, name="etl", schedule="* * * * *", grace=10)
        assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200
        assert len(await evaluator.rebalance()) == api.settings.shards
        plan = dict(evaluator.leases.held)

        api.clock.set(DEADLINE - timedelta(seconds=0.4))
        before = time.monotonic()
        at = await evaluator.early_sweep_at(plan, within=1.0)
        assert at is not None
        assert before + 0.4 + EARLY_MARGIN <= at <= time.monotonic() + 0.4 + EARLY_MARGIN

        api.clock.set(DEADLINE - timedelta(seconds=1.5))  # after the next beat: the beat sweeps it
        assert await evaluator.early_sweep_at(plan, within=1.0) is None
        api.clock.set(DEADLINE + timedelta(seconds=0.2))  # passed: left to the beat, no busy loop
        assert await evaluator.early_sweep_at(plan, within=1.0) is None
        assert await evaluator.early_sweep_at({}, within=1.0) is None

        # only the shards of the plan count
        api.clock.set(DEADLINE - timedelta(seconds=0.4))
        async with api.engine.connect() as conn:
            shard = (await conn.execute(select(t.checks.c.shard))).scalar_one()
        own = lease_name(shard)
        others = {name: token for name, token in plan.items() if name != own}
        assert await evaluator.early_sweep_at(others, within=1.0) is None
        assert await evaluator.early_sweep_at({own: plan[own]}, within=1.0) is not None
    finally:
        await evaluator.close()


async def test_a_check_left_due_does_not_hide_the_deadlines_after_it(api: Api) -> None:
    """A check a sweep left due (the self-outage guard deferred it, a ping's batch held its row)
    is the beat's; the early sweep still comes just after the next deadline still to come."""
    evaluator = ShardedEvaluator(api.engine, api.settings, api.clock, holder="host:a")
    try:
        api.clock.set(T0)
        for name, grace in (("left-due", 10), ("next", 40)):
            check = await create_check(api, name=name, schedule="* * * * *", grace=grace)
            assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200
        assert len(await evaluator.rebalance()) == api.settings.shards
        plan = dict(evaluator.leases.held)

        # the first check's deadline (02:01:10) has passed, unjudged; the second's is 02:01:40
        api.clock.set(DEADLINE + timedelta(seconds=29.6))
        before = time.monotonic()
        at = await evaluator.early_sweep_at(plan, within=1.0)
        assert at is not None
        assert before + 0.4 + EARLY_MARGIN <= at <= time.monotonic() + 0.4 + EARLY_MARGIN
    finally:
        await evaluator.close()


async def test_a_deadline_that_passed_while_the_last_sweep_ran_is_swept_at_once(api: Api) -> None:
    """The last sweep judged at its start: a deadline after that instant, passed by the time the
    evaluator plans, was not judged, and waits neither for the next deadline nor for the beat."""
    evaluator = ShardedEvaluator(api.engine, api.settings, api.clock, holder="host:a")
    try:
        api.clock.set(T0)
        check = await create_check(api, name="etl", schedule="* * * * *", grace=10)
        assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200
        api.clock.set(DEADLINE - timedelta(seconds=0.2))  # leases taken now, live a TTL
        assert len(await evaluator.rebalance()) == api.settings.shards
        plan = dict(evaluator.leases.held)

        assert await evaluator.sweep(plan) == 0  # judged at 02:01:09.8: not due yet
        api.clock.set(DEADLINE + timedelta(seconds=0.3))  # the sweep took half a second
        at = await evaluator.early_sweep_at(plan, within=1.0)
        assert at is not None
        assert at <= time.monotonic()

        assert await evaluator.sweep(plan) == 1  # judged: missed
        assert await evaluator.early_sweep_at(plan, within=1.0) is None  # next deadline 02:02:10
    finally:
        await evaluator.close()
