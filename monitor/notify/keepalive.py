"""Keep-alive HTTP connections for Apprise's sends.

Apprise's HTTP plugins (``json://``, ``form://``, ``xml://``, Slack, Discord, ntfy ...) post
with the module-level ``requests.post`` / ``requests.request``, and each of those builds a
new ``requests.Session``: a new connection pool, a new TCP (and TLS) connection and a closed
socket per notification. In a burst of a thousand notices to one webhook that is a sixth of
the sender's CPU and a connection accept per notice for the target. Apprise offers no hook to
hand its plugins a session, so this module routes those module-level calls, *only in a thread
inside* :func:`use_session`, through the session given there; every other caller of
``requests`` in the process (and every thread outside a send) gets the stock behaviour.

:class:`SessionPool` hands each send a session of its own (``requests.Session`` is not meant
to be shared by threads at once) and takes it back afterwards, cookies cleared (a target's
cookies never reach the next send). A session idle for more than ``idle_limit`` seconds is
closed rather than reused: its connections may have been dropped by the target meanwhile, and
a POST written into a connection the server is closing fails (the attempt would be retried,
but burst deliveries are the ones that gain from reuse anyway).

The egress guard (:mod:`monitor.notify.egress`) vets the peer of every connection when it is
opened; a reused connection keeps the peer it was vetted for. Each notifier has its own pool,
so a connection opened by a notifier allowed to reach private targets is never reused by one
that is not.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import requests
import requests.api

__all__ = ["KEEPALIVE_IDLE_S", "SessionPool", "install_session_routing", "use_session"]

KEEPALIVE_IDLE_S = 2.0
"""Seconds a pooled session may sit unused and still be reused (see the module docstring)."""

_local = threading.local()
_stock_request = requests.api.request
_install_lock = threading.Lock()


def _routed_request(method: str, url: Any, **kwargs: Any) -> requests.Response:
    """``requests.request`` (and, through it, ``requests.post``/``get``/...): on the session of
    the send running in this thread, if any; otherwise exactly the stock function."""
    session: requests.Session | None = getattr(_local, "session", None)
    if session is None:
        return _stock_request(method, url, **kwargs)
    return session.request(method=method, url=url, **kwargs)


def install_session_routing() -> None:
    """Route ``requests``' module-level calls through :func:`use_session`'s session; idempotent.

    Replaces ``requests.api.request`` (which ``requests.get``/``post``/``put``/... call) and its
    alias ``requests.request``. Outside :func:`use_session` the replacement calls the original.
    """
    with _install_lock:
        if requests.api.request is _routed_request:
            return
        requests.api.request = _routed_request
        requests.request = _routed_request


@contextmanager
def use_session(session: requests.Session) -> Iterator[None]:
    """While active, this thread's ``requests.request``/``post``/... calls go through ``session``
    (after :func:`install_session_routing`)."""
    previous = getattr(_local, "session", None)
    _local.session = session
    try:
        yield
    finally:
        _local.session = previous


class SessionPool:
    """Sessions for sends, one send per session at a time, most recently used first.

    Args:
        keep: most idle sessions kept (more are closed when given back); the notifier's
            number of sender threads.
        idle_limit: seconds after which an idle session is closed instead of reused.

    Thread-safe: sender threads take and give back sessions concurrently.
    """

    def __init__(self, keep: int, idle_limit: float = KEEPALIVE_IDLE_S) -> None:
        self._keep = keep
        self._idle_limit = idle_limit
        self._free: list[tuple[requests.Session, float]] = []
        self._lock = threading.Lock()
        self._closed = False

    def take(self) -> requests.Session:
        """A session for one send: the most recently given back one if it is fresh enough."""
        now = time.monotonic()
        stale: list[requests.Session] = []
        session: requests.Session | None = None
        with self._lock:
            while self._free:
                candidate, since = self._free.pop()
                if now - since <= self._idle_limit:
                    session = candidate
                    break
                stale.append(candidate)
            # the rest of the list is older still: close it too
            if stale:
                stale.extend(s for s, _ in self._free)
                self._free.clear()
        for old in stale:
            old.close()
        return session if session is not None else requests.Session()

    def give(self, session: requests.Session) -> None:
        """Take back a session after its send (its cookies are dropped)."""
        session.cookies.clear()
        with self._lock:
            if not self._closed and len(self._free) < self._keep:
                self._free.append((session, time.monotonic()))
                return
        session.close()

    def close(self) -> None:
        """Close every idle session; sessions given back later are closed too."""
        with self._lock:
            self._closed = True
            free, self._free = self._free, []
        for session, _ in free:
            session.close()
