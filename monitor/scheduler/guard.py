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
  groups still running) before the next spawn. A scheduler that stops closes the socket itself
  and waits for the guard (:meth:`RunGuard.close`).
* the guard watches each registered run's process (Linux ``pidfd_open``; the scheduler, not the
  guard, is its parent and reads its exit status) and writes ``=<pid> <unix s> <monotonic s>``
  back on the socket when it exits. The guard is not stopped with the scheduler (SIGSTOP, a
  stalled event loop), so that is the run's real end even when the scheduler only sees the exit
  on waking (:meth:`RunGuard.ended`); the finish then carries it as ``finished=``.

The guard costs one interpreter start per scheduler process (about 20 ms, once) and one short
write per run; it runs this file as a script (``python -I -S``: no site packages, nothing but
the standard library), never importing :mod:`monitor`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)
"""``send`` flag: a dead guard is an ``EPIPE`` error, not a SIGPIPE (the run's process has the
default SIGPIPE action when it registers)."""
EXITS_KEPT = 1000
"""Exit reports kept unclaimed (a run that failed to ``exec`` is never asked for); beyond it the
oldest are forgotten."""
CLOSE_WAIT = 2.0
"""Seconds :meth:`RunGuard.close` waits for the guard to exit before it SIGKILLs it."""


class RunGuard:
    """The scheduler-side end of the guard (one per process, :func:`shared`; thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None
        self._owner = 0
        self._groups: set[int] = set()
        self._exits: dict[int, tuple[float, float]] = {}
        self._inbox = b""
        self._users = 0

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
        self._exits.clear()
        self._inbox = b""
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

    def ended(self, pid: int, since: float) -> tuple[float, float] | None:
        """When the guard saw the run's process ``pid`` exit: ``(unix seconds, monotonic
        seconds)``, or ``None`` when it has not told (yet, or no ``pidfd_open``: not Linux 5.3+,
        or the process was gone before it could watch it). A report from before ``since``
        (monotonic seconds, the run's spawn) is an earlier process with that pid and is ignored.
        Never blocks."""
        with self._lock:
            if self._socket is None or self._owner != os.getpid():
                return None
            self._receive()
            found = self._exits.pop(pid, None)
        return found if found is not None and found[1] >= since else None

    def _receive(self) -> None:
        """Read the guard's pending exit reports (with the lock held)."""
        assert self._socket is not None
        while True:
            try:
                data = self._socket.recv(65536, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
            if not data:
                break
            *complete, self._inbox = (self._inbox + data).split(b"\n")
            for line in complete:
                report = _exit_report(line)
                if report is not None:
                    self._exits[report[0]] = report[1:]
        while len(self._exits) > EXITS_KEPT:
            del self._exits[next(iter(self._exits))]

    def acquire(self) -> None:
        """A scheduler in this process starts using the guard (paired with :meth:`release`)."""
        with self._lock:
            self._users += 1

    def release(self) -> None:
        """A scheduler stopped; the last one stops the guard (:meth:`close`)."""
        with self._lock:
            self._users = max(0, self._users - 1)
            last = self._users == 0
        if last:
            self.close()

    def close(self) -> None:
        """Stop the guard: close our end of its socket (it SIGKILLs the groups still registered,
        then exits) and reap it, SIGKILLing it after :data:`CLOSE_WAIT` seconds. The next spawn
        starts a new one. A forked child's copy of its parent's guard is only forgotten."""
        with self._lock:
            proc, channel = self._proc, self._socket
            mine = self._owner == os.getpid()
            self._proc, self._socket, self._owner = None, None, 0
            self._groups.clear()
            self._exits.clear()
        if not mine:
            return
        if channel is not None:
            channel.close()
        if proc is not None:
            try:
                proc.wait(CLOSE_WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

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


def _exit_report(line: bytes) -> tuple[int, float, float] | None:
    """``=<pid> <unix s> <monotonic s>`` parsed, else ``None``."""
    words = line.strip().split()
    if len(words) != 3 or not words[0].startswith(b"=") or not words[0][1:].isdigit():
        return None
    try:
        return int(words[0][1:]), float(words[1]), float(words[2])
    except ValueError:
        return None


_SHARED = RunGuard()
atexit.register(_SHARED.close)  # a process that used the executor without a scheduler


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


def _watch(pid: int) -> int | None:
    """A pidfd for ``pid`` (readable once it exits), ``None`` when it cannot be watched."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def _tell(channel: socket.socket, pid: int) -> None:
    """Report the exit of ``pid`` now; dropped rather than block when the scheduler is not
    reading (the guard must keep reading its socket to notice the scheduler's death)."""
    line = f"={pid} {time.time():.6f} {time.monotonic():.6f}\n".encode()
    with contextlib.suppress(OSError):
        channel.send(line, NOSIGNAL | socket.MSG_DONTWAIT)


def main() -> int:
    """The guard process: read ``+<pgid>`` / ``-<pgid>`` lines on stdin (the socket) until
    end-of-file, reporting each registered process's exit back on it as ``=<pid> <unix s>
    <monotonic s>``; then SIGKILL every group still registered (never a pid reused since it
    registered)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    channel = socket.socket(fileno=os.dup(0))
    groups: dict[int, float | None] = {}
    watched: dict[int, int] = {}  # pidfd -> pid
    selector = selectors.DefaultSelector()
    selector.register(channel, selectors.EVENT_READ)
    pending = b""
    while True:
        ready = selector.select()
        for key, _ in ready:
            if key.fileobj is channel:
                continue
            pidfd = int(key.fd)
            selector.unregister(pidfd)
            os.close(pidfd)
            _tell(channel, watched.pop(pidfd))
        if not any(key.fileobj is channel for key, _ in ready):
            continue
        try:
            data = channel.recv(65536)
        except OSError:
            data = b""
        if not data:
            break
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            text = line.strip()
            if len(text) < 2 or not text[1:].isdigit() or int(text[1:]) <= 1:
                continue
            group = int(text[1:])
            if text[:1] == b"+":
                groups[group] = _uptime()
                watch = _watch(group)
                if watch is not None:
                    watched[watch] = group
                    selector.register(watch, selectors.EVENT_READ)
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
