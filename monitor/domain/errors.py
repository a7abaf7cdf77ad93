"""The one error tree of the domain; mapped to HTTP once, in ``monitor.http.errors``."""

from __future__ import annotations


class MonitorError(Exception):
    """Base of every error the monitor raises on purpose."""


class ValidationError(MonitorError):
    """Bad input for a named field.

    ``str(error)`` is ``"<field>: <problem>"``, the text the management API returns as
    ``{"error": ...}`` with status 400.
    """

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class ValidationErrors(ValidationError):
    """Several bad fields found at once (a jobs file with more than one invalid job).

    ``errors`` holds each, in order; ``field``, ``problem`` and ``str(error)`` are the first's,
    so a caller that shows one error still shows a true one.
    """

    def __init__(self, errors: list[ValidationError]) -> None:
        self.errors = errors
        super().__init__(errors[0].field, errors[0].problem)


class ScheduleError(MonitorError):
    """A cron expression that cannot be parsed or can never fire.

    Attributes:
        field: the cron field's name (``"day of week"``), or ``None`` for whole-expression
            problems (wrong field count, never fires).
        position: the 1-based position of that field in the expression, or ``None``.
        message: the problem, e.g. ``"field 5 (day of week): 8 is out of range 0-7"``.
    """

    def __init__(self, message: str, *, field: str | None = None, position: int | None = None) -> None:
        self.message = message
        self.field = field
        self.position = position
        super().__init__(message)


class ZoneError(MonitorError):
    """An unknown or unusable time zone name (IANA names only, never fixed offsets)."""


class NotFound(MonitorError):
    """The named object does not exist (or belongs to another project)."""


class Conflict(MonitorError):
    """The request conflicts with the object's state (e.g. resuming a check that is not paused)."""


class StaleLease(MonitorError):
    """A write under a lease whose fencing token is no longer the writer's (DESIGN §6).

    Raised inside the writer's transaction, before anything is written, so the transaction
    rolls back. The writer must step down from the lease.

    Attributes:
        lease: the lease's name (``"shard-3"``).
        token: the fencing token the writer held.
        current: the token in the lease row now (``None`` if the row is missing).
    """

    def __init__(self, lease: str, token: int, current: int | None, reason: str) -> None:
        self.lease = lease
        self.token = token
        self.current = current
        super().__init__(f"lease {lease}: token {token} is stale ({reason})")
