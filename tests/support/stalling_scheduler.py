"""``python -m tests.support.stalling_scheduler scheduler --jobs …``: ``monitor scheduler`` that
waits ``MONITOR_TEST_PRE_SPAWN_DELAY`` seconds between recording a run's start and spawning it.

The pause opens a window in which a failover test stalls (SIGSTOP) a replica after its start
record; production settings carry no such hook, so the delay reaches
:func:`monitor.scheduler.serve` through its ``pre_spawn_delay`` argument here, in the
process, and the command line, settings and shutdown are the real ``monitor`` CLI's.
"""

from __future__ import annotations

import functools
import os
import sys

from monitor import cli, scheduler

DELAY_ENV = "MONITOR_TEST_PRE_SPAWN_DELAY"


def main() -> int:
    delay = float(os.environ.get(DELAY_ENV, "0"))
    scheduler.serve = functools.partial(scheduler.serve, pre_spawn_delay=delay)  # type: ignore[assignment]
    return cli.main(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
