"""``python -m monitor.workers.ingest_child PARENT_PID``: the entry point of the ingest process
(:mod:`monitor.workers.ingest_process`, which starts it and does its work).

Before anything else (importing the storage and the services takes seconds on a busy host) the
child makes sure it cannot outlive the process that started it: a child stopped (SIGSTOP)
cannot read its pipe close, so the kernel is asked to kill it (SIGKILL, which ends a stopped
process too) when that process ends, with Linux's ``PR_SET_PDEATHSIG``. It ignores SIGINT and
SIGTERM: a terminal's Ctrl-C reaches the whole process group, and the parent ends the child
by closing its pipe once the batches in flight are answered.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
"""``prctl`` option: the signal this process gets when its parent ends (Linux, ``<sys/prctl.h>``)."""


def die_with(parent: int) -> None:
    """Be killed (SIGKILL) when process ``parent`` (this one's parent) ends; exit at once if it
    has ended already. Elsewhere than Linux only the latter holds."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        sys.exit(0)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    die_with(int(sys.argv[1]))
    from monitor.workers.ingest_process import run_child  # the heavy imports, once safe

    run_child()


if __name__ == "__main__":
    main()
