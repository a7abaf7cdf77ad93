"""The run guard: a scheduler's runs die with it, whatever they forked (DESIGN §8).

A parent-death signal (``PR_SET_PDEATHSIG``) reaches only the process the scheduler started;
``sh -c "echo hi; sleep 42"`` (dash does not ``exec`` the last command) leaves ``sleep``
running, reparented to PID 1, while the next replica starts the next tick. So every scheduler
process keeps one guard process beside it (started on its first run, in a session of its own,
deaf to SIGINT, SIGTERM and SIGHUP):

* every run is a process group of its own (``start_new_session``); the run's process tells the
  guard ``+<pgid>`` between ``fork`` and ``exec`` (so no window is left in which the scheduler
  could die with an unregistered run), and the scheduler tells it ``-<pgid>`` once the run's
  process has exited;
* the scheduler holds the only other end of the guard's socket, so when the scheduler dies —
  ``kill -9`` included — the kernel closes it and the guard reads end-of-file: it SIGKILLs every
  process group still registered, then exits. A guard that died is started again (and told the
  groups still running) before the next spawn.

The guard costs one interpreter start per scheduler process (about 20 ms, once) and one short
write per run; it runs this file as a script (``python -I -S``: no site packages, nothing but
the standard library), never importing :mod:`monitor`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading

NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)
"""``send`` flag: a dead guard is an ``EPIPE`` error, not a SIGPIPE (the run's process has the
default SIGPIPE action when it registers)."""


class RunGuard:
    """The scheduler-side end of the guard (one per process, :func:`shared`; thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None
        self._owner = 0
        self._groups: set[int] = set()

    def ready(self) -> socket.socket:
        """The guard's socket, the guard started (again) first if it is not running; the socket
        is inherited by a run's process (``fork``), which registers itself through
        :func:`register`."""
        with self._lock:
            alive = self._proc is not None and self._proc.poll() is None
            if self._socket is None or self._owner != os.getpid() or not alive:
                self._start()
            assert self._socket is not None
            return self._socket

    def _start(self) -> None:
        if self._socket is not None and self._owner == os.getpid():
            self._socket.close()
        if self._owner != os.getpid():
            self._groups.clear()  # a forked child's parent's runs are not its own
        ours, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__)],
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        finally:
            theirs.close()
        self._socket, self._owner = ours, os.getpid()
        for group in sorted(self._groups):
            self._send(f"+{group}\n")

    def _send(self, line: str) -> None:
        assert self._socket is not None
        with contextlib.suppress(OSError):  # a dead guard is started again before the next spawn
            self._socket.send(line.encode(), NOSIGNAL)

    @property
    def pid(self) -> int | None:
        """The guard process's pid (``None`` before the first run)."""
        return self._proc.pid if self._proc is not None and self._owner == os.getpid() else None

    def spawned(self, pgid: int) -> None:
        """The run ``pgid`` started (it registered itself; remembered for a restarted guard)."""
        with self._lock:
            self._groups.add(pgid)

    def exited(self, pgid: int) -> None:
        """The run's process ``pgid`` has exited: the guard forgets its group."""
        with self._lock:
            if pgid in self._groups:
                self._groups.discard(pgid)
                if self._socket is not None and self._owner == os.getpid():
                    self._send(f"-{pgid}\n")


def register(channel: socket.socket) -> None:
    """In a run's process between ``fork`` and ``exec``: tell the guard its group (its pid)."""
    with contextlib.suppress(OSError):
        channel.send(f"+{os.getpid()}\n".encode(), NOSIGNAL)


_SHARED = RunGuard()


def shared() -> RunGuard:
    """This process's guard."""
    return _SHARED


def _uptime() -> float | None:
    """Seconds since boot (Linux ``/proc/uptime``), ``None`` elsewhere."""
    try:
        with open("/proc/uptime", "rb") as file:
            return float(file.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _born_after(pid: int, instant: float) -> bool:
    """Whether the process ``pid`` started after ``instant`` (seconds since boot): a pid reused
    since its run registered (the run failed to ``exec``, or its exit was not told yet)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()
        return int(fields[19]) / os.sysconf("SC_CLK_TCK") > instant + 0.05
    except (OSError, ValueError, IndexError):
        return False  # gone (its group may live on) or unknown: it is ours


def main() -> int:
    """The guard process: read ``+<pgid>`` / ``-<pgid>`` lines on stdin until end-of-file, then
    SIGKILL every group still registered (never a pid reused since it registered)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    groups: dict[int, float | None] = {}
    for line in sys.stdin.buffer:
        text = line.strip()
        if len(text) < 2 or not text[1:].isdigit() or int(text[1:]) <= 1:
            continue
        group = int(text[1:])
        if text[:1] == b"+":
            groups[group] = _uptime()
        elif text[:1] == b"-":
            groups.pop(group, None)
    for group, registered in groups.items():
        if registered is not None and _born_after(group, registered):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
