"""A child process that must not outlive its parent: Linux's parent-death signal.

A process stopped (SIGSTOP) or stuck cannot notice that its parent ended, so the kernel is
asked to send it SIGKILL (which ends a stopped process too) when the parent ends
(``prctl(PR_SET_PDEATHSIG)``, ``<linux/prctl.h>``). The request is made in the child between
``fork`` and ``exec`` (:func:`at_fork`, a ``preexec_fn``), so no instant of the child's life is
unguarded, and the child checks that the parent has not ended before it was made (the signal
is then never sent). Elsewhere than Linux there is no such signal; only that check holds.

Used by the scheduler for the runs it starts (``monitor.scheduler.executor``) and by
``monitor serve`` for its SQLite ingest process (``monitor.workers.ingest_child``). This module
imports nothing from ``monitor``: the ingest child imports it before its heavy imports.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
"""``prctl`` option (``<linux/prctl.h>``): the signal a process gets when its parent ends."""


def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` (``None`` elsewhere than Linux, or when libc has none)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    function.restype = ctypes.c_int
    return function


_PRCTL = _prctl()
"""Resolved once, in the parent: between fork and exec the child only makes the call."""


def at_fork(parent: int, *, exit_status: int) -> Callable[[], None] | None:
    """The step to run in a child of ``parent`` between ``fork`` and ``exec``: ask for SIGKILL
    when ``parent`` ends, then ``os._exit(exit_status)`` if it has ended already (the child's
    parent is then another process). ``None`` elsewhere than Linux.

    Args:
        parent: the pid of the process that forks (``os.getpid()`` before the fork).
        exit_status: the child's exit status when its parent had ended before the request.
    """
    prctl = _PRCTL
    if prctl is None:
        return None

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(exit_status)

    return arm


def die_with(parent: int) -> None:
    """In a running process: be killed (SIGKILL) when ``parent`` (its parent's pid) ends, and
    exit at once (status 0) if it has ended already. Elsewhere than Linux only the latter."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        sys.exit(0)
