"""Sender threads: a pool of reusable *daemon* threads for blocking sends.

:class:`concurrent.futures.ThreadPoolExecutor` would reuse threads, but the interpreter joins
its threads at exit, so a process told to stop stays alive until a send blocked on a hung
target (an unreachable SMTP host) times out. Starting a daemon thread per send avoided that,
but ``Thread.start`` waits until the new thread runs, and on a busy process (sixty-odd sender
threads taking turns at the GIL) the event loop spent over a third of a 1000-notice burst
blocked in it. :class:`DaemonPool` starts its threads once, as a burst first needs them, and
hands them calls through a queue; it never holds more threads than ``size``.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

__all__ = ["DaemonPool"]

logger = logging.getLogger(__name__)


class DaemonPool:
    """Up to ``size`` daemon threads, started on demand, each running submitted calls in turn.

    Args:
        size: the most threads (≥ 1). The caller bounds the calls outstanding (queued or
            running) to ``size`` if no call should wait for a thread: a thread is started
            whenever more calls are waiting than threads are idle.
        name: the threads' name.

    Raises:
        ValueError: ``size`` < 1.
    """

    def __init__(self, size: int, *, name: str) -> None:
        if size < 1:
            raise ValueError(f"size: must be at least 1, got {size}")
        self.size = size
        self.name = name
        self._calls: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._waiting = 0
        self._closed = False

    @property
    def threads(self) -> int:
        """Threads started and not stopped."""
        return self._threads

    @property
    def idle(self) -> int:
        """Threads waiting for a call."""
        return self._idle

    def submit(self, call: Callable[[], object]) -> None:
        """Run ``call()`` in one of the threads. The call reports its own outcome; an exception
        escaping it is logged and ends nothing but that call.

        Raises:
            RuntimeError: the pool is closed."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the sender pool is closed")
            self._waiting += 1
            start = self._waiting > self._idle and self._threads < self.size
            if start:
                self._threads += 1
        self._calls.put(call)
        if start:
            threading.Thread(target=self._work, name=self.name, daemon=True).start()

    def close(self) -> None:
        """Stop the idle threads and those that end their call; calls already submitted still
        run. A thread blocked in a call is not waited for (it is a daemon)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = self._threads
        for _ in range(threads):
            self._calls.put(None)

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            call = self._calls.get()
            with self._lock:
                self._idle -= 1
                if call is None:
                    self._threads -= 1
                    return
                self._waiting -= 1
            try:
                call()
            except Exception:
                logger.exception("a sender thread's call raised", extra={"action": "sender_call_failed"})
