"""Quiet logging of a failure that repeats (a database outage must not log a
traceback every 0.5 s from every loop).

A :class:`FailureLog` guards one call site of a loop: the first failure is logged with its
traceback, later ones at most once per ``every`` seconds as one line with a count, and the
first success after failures logs one ``… database reachable again`` line. This module
imports nothing from ``monitor``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

QUIET_PERIOD = 30.0
"""Seconds between the one-line reminders of a failure that goes on."""


class FailureLog:
    """Rate-limited logging of one repeating failure.

    Args:
        logger: where to log.
        what: the operation, e.g. ``"evaluator sweep"`` (starts every line).
        action: the structured ``action`` of the lines (``extra={"action": …}``).
        every: seconds between reminder lines while failures go on (default 30).
        clock: monotonic seconds (injected by tests; default :func:`time.monotonic`).
    """

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        action: str,
        every: float = QUIET_PERIOD,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.what = what
        self.action = action
        self.every = every
        self.clock = clock
        self.failures = 0
        """Failures since the last success."""
        self._since = 0.0
        self._last_logged = 0.0
        self._unlogged = 0

    def failed(self, error: BaseException) -> None:
        """Record one failure: traceback the first time, then a counted line every ``every`` s."""
        now = self.clock()
        self.failures += 1
        if self.failures == 1:
            self._since = now
            self._last_logged = now
            self._unlogged = 0
            self.logger.error(
                "%s failed: %s: %s",
                self.what,
                type(error).__name__,
                error,
                exc_info=error,
                extra={"action": self.action, "failures": 1},
            )
            return
        self._unlogged += 1
        if now - self._last_logged < self.every:
            return
        self.logger.warning(
            "%s still failing: %d failures in the last %.0f s (%d since %.0f s ago): %s: %s",
            self.what,
            self._unlogged,
            now - self._last_logged,
            self.failures,
            now - self._since,
            type(error).__name__,
            _one_line(error),
            extra={"action": self.action, "failures": self.failures},
        )
        self._last_logged = now
        self._unlogged = 0

    def succeeded(self) -> None:
        """Record a success; after failures, log that the database is reachable again."""
        if not self.failures:
            return
        self.logger.warning(
            "%s ok again: database reachable again after %d failures over %.0f s",
            self.what,
            self.failures,
            self.clock() - self._since,
            extra={"action": "database_reachable_again", "what": self.what, "failures": self.failures},
        )
        self.failures = 0
        self._unlogged = 0


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= 300 else text[:297] + "..."
