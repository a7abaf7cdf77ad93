"""``python -m monitor.workers.ingest_child PARENT_PID``: the entry point of the ingest process
(:mod:`monitor.workers.ingest_process`, which starts it and does its work).

The child must not outlive the process that started it: a child stopped (SIGSTOP) cannot read
its pipe close, so the kernel is asked to kill it when that process ends
(:mod:`monitor.parent_death`). The parent asks for it between fork and exec
(:func:`armed_at_fork`): a child stopped before its first statement, on a busy host, was left
behind otherwise. The child asks again before anything else (importing the storage and the
services takes seconds), and exits if its parent has ended already. It ignores SIGINT and
SIGTERM: a terminal's Ctrl-C reaches the whole process group, and the parent ends the child by
closing its pipe once the batches in flight are answered.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable

from monitor.parent_death import at_fork, die_with


def armed_at_fork(parent: int) -> Callable[[], None] | None:
    """The ``preexec_fn`` to start this module with from process ``parent`` (the caller):
    :func:`monitor.parent_death.at_fork`, exiting with status 0 if ``parent`` has ended already."""
    return at_fork(parent, exit_status=0)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    die_with(int(sys.argv[1]))
    from monitor.workers.ingest_process import run_child  # the heavy imports, once safe

    run_child()


if __name__ == "__main__":
    main()
