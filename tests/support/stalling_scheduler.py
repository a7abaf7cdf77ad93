"""``python -m tests.support.stalling_scheduler scheduler --jobs …``: ``monitor scheduler`` that
waits ``MONITOR_TEST_PRE_SPAWN_DELAY`` seconds between recording a run's start and spawning it,
and ``MONITOR_TEST_IN_FENCE_DELAY`` seconds after a spawn before its fence transaction ends.

The pauses open windows in which a failover test stalls (SIGSTOP) a replica after its start
record, or while the spawn's fence transaction is open on the server; production settings carry
no such hook, so the first delay reaches :func:`monitor.scheduler.serve` through its
``pre_spawn_delay`` argument here, in the process, the second wraps
:func:`monitor.scheduler.executor.spawn` (which the runner calls inside that transaction), and
the command line, settings and shutdown are the real ``monitor`` CLI's.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
from typing import Any

from monitor import cli, scheduler
from monitor.scheduler import executor

DELAY_ENV = "MONITOR_TEST_PRE_SPAWN_DELAY"
FENCE_DELAY_ENV = "MONITOR_TEST_IN_FENCE_DELAY"


def main() -> int:
    delay = float(os.environ.get(DELAY_ENV, "0"))
    scheduler.serve = functools.partial(scheduler.serve, pre_spawn_delay=delay)  # type: ignore[assignment]
    fence_delay = float(os.environ.get(FENCE_DELAY_ENV, "0"))
    if fence_delay:
        spawn = executor.spawn

        async def spawn_then_wait(*args: Any, **kwargs: Any) -> executor.Outcome | None:
            outcome = await spawn(*args, **kwargs)
            await asyncio.sleep(fence_delay)  # the fence transaction stays open meanwhile
            return outcome

        executor.spawn = spawn_then_wait
    return cli.main(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
