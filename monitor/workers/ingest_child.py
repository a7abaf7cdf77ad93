"""``python -m monitor.workers.ingest_child PARENT_PID``: the entry point of the ingest process
(:mod:`monitor.workers.ingest_process`, which starts it and does its work).

The child must not outlive the process that started it: a child stopped (SIGSTOP) cannot read
its pipe close, so the kernel is asked to kill it (SIGKILL, which ends a stopped process too)
when that process ends, with Linux's ``PR_SET_PDEATHSIG``. The parent asks for it between fork
and exec (:func:`armed_at_fork`): a child stopped before its first statement, on a busy host,
was left behind otherwise. The child asks again before anything else (importing the storage
and the services takes seconds), and exits if its parent has ended already. It ignores SIGINT and
SIGTERM: a terminal's Ctrl-C reaches the whole process group, and the parent ends the child
by closing its pipe once the batches in flight are answered.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
"""``prctl`` option: the signal this process gets when its parent ends (Linux, ``<sys/prctl.h>``)."""


def die_with(parent: int) -> None:
    """Be killed (SIGKILL) when process ``parent`` (this one's parent) ends; exit at once if it
    has ended already. Elsewhere than Linux only the latter holds."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        sys.exit(0)


def armed_at_fork(parent: int) -> Callable[[], None] | None:
    """The ``preexec_fn`` to start this module with from process ``parent`` (the caller): it
    asks for SIGKILL when ``parent`` ends, between fork and exec, and exits if ``parent`` has
    ended already. ``None`` elsewhere than Linux. libc's ``prctl`` is looked up here, in the
    parent: between fork and exec only the call is made."""
    if sys.platform != "linux":
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(0)

    return arm


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    die_with(int(sys.argv[1]))
    from monitor.workers.ingest_process import run_child  # the heavy imports, once safe

    run_child()


if __name__ == "__main__":
    main()
