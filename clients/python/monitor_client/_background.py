"""A background sender: pings handed over by a scheduler's thread, sent by one daemon thread.

A scheduler (APScheduler's event dispatch, Celery beat) must never wait for the monitor: when
it is down, each call may take the client's ``timeout``, and jobs due together would start one
after another. :meth:`Sender.submit` only puts the call on a bounded queue (never blocks: when
the queue is full the call is dropped with one warning) and returns; one thread sends them in
the order submitted, so a run's ``start`` still precedes its finish. At interpreter exit the
queue is drained for at most ``drain_timeout`` seconds. A forked child (a Celery prefork
worker) starts with an empty queue and its own thread.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("monitor_client")

#: calls waiting at most; a monitor down for long drops the newest beyond this (one warning)
QUEUE_SIZE = 1000


class Sender:
    """One daemon thread running submitted calls in order.

    Args:
        name: the thread's name.
        maxsize: calls queued at most (further ones are dropped, one warning per overflow).
        drain_timeout: seconds to keep sending queued calls at interpreter exit.
    """

    def __init__(self, name: str, maxsize: int = QUEUE_SIZE, drain_timeout: float = 10.0) -> None:
        self.name = name
        self.drain_timeout = drain_timeout
        self._queue: queue.Queue[tuple[Callable[..., Any], tuple[Any, ...]]] = queue.Queue(maxsize)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._dropping = False
        self.dropped = 0
        atexit.register(self.drain)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        """In a forked child: the parent's thread does not exist here, and its queue and lock
        may have been held at the fork."""
        self._queue = queue.Queue(self._queue.maxsize)
        self._lock = threading.Lock()
        self._thread = None

    def submit(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Queue ``fn(*args)``; never blocks. Returns ``False`` when the queue is full (dropped)."""
        self._ensure_thread()
        try:
            self._queue.put_nowait((fn, args))
        except queue.Full:
            self.dropped += 1
            if not self._dropping:
                self._dropping = True
                logger.warning(
                    "%s: %d pings waiting for the monitor; dropping new ones until it catches up",
                    self.name,
                    self._queue.maxsize,
                    extra={"action": "monitor_queue_full"},
                )
            return False
        self._dropping = False
        return True

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every queued call was sent, at most ``timeout`` seconds (default
        ``drain_timeout``); ``True`` when the queue is empty."""
        deadline = time.monotonic() + (self.drain_timeout if timeout is None else timeout)
        while self._queue.unfinished_tasks:
            if time.monotonic() >= deadline or self._thread is None or not self._thread.is_alive():
                return False
            time.sleep(0.01)
        return True

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            fn, args = self._queue.get()
            try:
                fn(*args)
            except Exception:  # a ping never kills the sender
                logger.debug("%s: a background ping failed", self.name, exc_info=True)
            finally:
                self._queue.task_done()
