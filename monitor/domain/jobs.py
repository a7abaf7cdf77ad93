"""Jobs of the bundled scheduler: the jobs file's ``[[jobs]]`` tables as values (DESIGN §8).

Pure: :func:`parse_jobs` takes the already-decoded TOML document (a mapping, from
``tomllib``) and returns validated :class:`Job` values, or raises
:class:`~monitor.domain.errors.ValidationError` naming the offending key as
``jobs[<index>].<key>`` (``jobs[2].schedule: field 5 (day of week): 8 is out of range 0-7``).
Unknown keys are refused, so a typo (``concurency_policy``) never silently means the default.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any

from monitor.domain.cron import schedules
from monitor.domain.errors import ScheduleError, ValidationError, ValidationErrors, ZoneError

NAME = re.compile(r"^[a-z0-9_-]+$")
NAME_MAX = 100
"""A job's name is also its check's slug (``slug`` is at most 100 characters)."""
LIVENESS_SLUG = "monitor-scheduler"
"""Slug of the scheduler's own liveness check; no job may take it."""
DEFAULT_GRACE = 60
"""Seconds: the scheduler starts a run at its tick, so a start a minute late means it was down."""
DEFAULT_MAX_CATCHUP = 100
"""Kubernetes refuses to catch up more than 100 missed schedules (DESIGN §8)."""
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class ConcurrencyPolicy(StrEnum):
    """What to do with a tick that comes due while a run of the job is in progress.

    ``Allow``, ``Forbid`` and ``Replace`` are Kubernetes CronJob's names; ``BufferOne`` and
    ``BufferAll`` are Temporal's schedule overlap policies.
    """

    ALLOW = "Allow"
    FORBID = "Forbid"
    REPLACE = "Replace"
    BUFFER_ONE = "BufferOne"
    BUFFER_ALL = "BufferAll"


class Catchup(StrEnum):
    """Which ticks missed during downtime run when the scheduler is back (DESIGN §8)."""

    ALL = "all"
    LATEST = "latest"
    NONE = "none"


@dataclass(frozen=True, kw_only=True, slots=True)
class HttpCall:
    """A ``[jobs.http]`` table: the request a job makes instead of running a command."""

    method: str = "GET"
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str | None = None
    timeout: float = 30.0
    """Seconds the call may take (``timeout`` key, default 30; ``kill_after`` wins when shorter)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    """One validated ``[[jobs]]`` table.

    Attributes:
        name: ``[a-z0-9_-]+``; also the check's slug and name.
        schedule: the parsed cron schedule (dialect and zone included).
        command: an argv list (run without a shell) or ``["sh", "-c", text]`` for a string;
            ``None`` for an HTTP job.
        http: the request of an HTTP job, else ``None``.
        env: extra environment variables for the run.
        kill_after: a run still going after this long is terminated (``None``: never).
        grace: the check's grace, seconds.
        max_runtime: the check's max runtime, seconds (``None``: the monitor's default).
        concurrency_policy: see :class:`ConcurrencyPolicy`.
        starting_deadline: a tick that cannot start within this of its time is skipped.
        catchup: see :class:`Catchup`.
        max_catchup: the most overdue ticks considered after downtime.
    """

    name: str
    schedule: schedules.CronSchedule
    command: tuple[str, ...] | None = None
    http: HttpCall | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    kill_after: timedelta | None = None
    grace: int = DEFAULT_GRACE
    max_runtime: int | None = None
    concurrency_policy: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
    starting_deadline: timedelta | None = None
    catchup: Catchup = Catchup.ALL
    max_catchup: int = DEFAULT_MAX_CATCHUP

    @property
    def lease_name(self) -> str:
        """The job's lease, ``job-<name>`` (listed by ``/ready``)."""
        return f"job-{self.name}"


KEYS = frozenset(
    {
        "name",
        "schedule",
        "dialect",
        "tz",
        "command",
        "http",
        "env",
        "kill_after",
        "grace",
        "max_runtime",
        "concurrency_policy",
        "starting_deadline",
        "catchup",
        "max_catchup",
    }
)
HTTP_KEYS = frozenset({"method", "url", "headers", "body", "timeout"})
MAX_SECONDS = 31_536_000
"""Largest grace / max_runtime / duration in seconds: one year, the bound the check API enforces."""


def _seconds(where: str, value: Any, *, minimum: float, maximum: float = MAX_SECONDS) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(where, f"must be a number of seconds, got {value!r}")
    if not math.isfinite(value):
        raise ValidationError(where, f"must be a finite number of seconds, got {value!r}")
    if value < minimum:
        raise ValidationError(where, f"must be at least {minimum:g}, got {value!r}")
    if value > maximum:
        raise ValidationError(where, f"must be at most {maximum:g}, got {value!r}")
    return float(value)


def _whole(where: str, value: Any, *, minimum: int, maximum: int = MAX_SECONDS) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(where, f"must be a whole number, got {value!r}")
    if value < minimum:
        raise ValidationError(where, f"must be at least {minimum}, got {value!r}")
    if value > maximum:
        raise ValidationError(where, f"must be at most {maximum}, got {value!r}")
    return value


def _text(where: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ValidationError(where, f"must be a string, got {value!r}")
    return value


def _strings(where: str, value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ValidationError(where, "must be a table of strings")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(item, str):
            raise ValidationError(f"{where}.{key}", f"must be a string, got {item!r}")
        out[str(key)] = item
    return out


def _enum(where: str, value: Any, kind: type[StrEnum]) -> Any:
    allowed = ", ".join(m.value for m in kind)
    if not isinstance(value, str):
        raise ValidationError(where, f"must be one of {allowed}")
    try:
        return kind(value)
    except ValueError:
        raise ValidationError(where, f"{value!r} is not one of {allowed}") from None


def _http(where: str, value: Any) -> HttpCall:
    if not isinstance(value, Mapping):
        raise ValidationError(where, "must be a table with url (and method, headers, body)")
    unknown = sorted(set(value) - HTTP_KEYS)
    if unknown:
        raise ValidationError(
            f"{where}.{unknown[0]}", f"unknown key (allowed: {', '.join(sorted(HTTP_KEYS))})"
        )
    if "url" not in value:
        raise ValidationError(f"{where}.url", "is required")
    url = _text(f"{where}.url", value["url"])
    if not url.startswith(("http://", "https://")):
        raise ValidationError(f"{where}.url", "must start with http:// or https://")
    method = _text(f"{where}.method", value.get("method", "GET")).upper()
    if method not in HTTP_METHODS:
        raise ValidationError(
            f"{where}.method", f"{method!r} is not one of {', '.join(sorted(HTTP_METHODS))}"
        )
    headers = _strings(f"{where}.headers", value.get("headers", {}))
    body = value.get("body")
    if body is not None:
        body = _text(f"{where}.body", body)
    timeout = _seconds(f"{where}.timeout", value.get("timeout", 30), minimum=0.1)
    return HttpCall(method=method, url=url, headers=headers, body=body, timeout=timeout)


NUL = "\x00"
"""The one character ``execve`` cannot pass in an argument or environment entry (C strings)."""
NUL_REFUSED = "must not contain a NUL character (\\u0000): it cannot be executed"


def _command(where: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        if not value.strip():
            raise ValidationError(where, "must not be empty")
        if NUL in value:
            raise ValidationError(where, NUL_REFUSED)
        return ("sh", "-c", value)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        for position, argument in enumerate(value):
            if NUL in argument:
                raise ValidationError(f"{where}[{position}]", NUL_REFUSED)
        return tuple(value)
    raise ValidationError(where, "must be a non-empty list of strings (argv) or a string (run with sh -c)")


def _env(where: str, value: Any) -> dict[str, str]:
    """A job's ``env``: strings whose names and values ``execve`` can pass (``NAME=value``
    entries, so a name is non-empty without ``=``, and neither holds a NUL)."""
    env = _strings(where, value)
    for name, item in env.items():
        if not name:
            raise ValidationError(where, "a variable name must not be empty")
        if "=" in name or NUL in name:
            raise ValidationError(
                where, f"variable name {name!r} must not contain '=' or a NUL character (\\u0000)"
            )
        if NUL in item:
            raise ValidationError(f"{where}.{name}", NUL_REFUSED)
    return env


def parse_job(raw: Any, index: int) -> Job:
    """Validate one ``[[jobs]]`` table (``index`` is its 0-based position, for messages).

    Raises:
        ValidationError: ``jobs[<index>].<key>: <problem>``.
    """
    where = f"jobs[{index}]"
    if not isinstance(raw, Mapping):
        raise ValidationError(where, "must be a table")
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise ValidationError(f"{where}.{unknown[0]}", f"unknown key (allowed: {', '.join(sorted(KEYS))})")
    for key in ("name", "schedule"):
        if key not in raw:
            raise ValidationError(f"{where}.{key}", "is required")
    name = _text(f"{where}.name", raw["name"])
    if not NAME.match(name) or len(name) > NAME_MAX:
        raise ValidationError(
            f"{where}.name", f"{name!r} must match [a-z0-9_-]+ (at most {NAME_MAX} characters)"
        )
    if name == LIVENESS_SLUG:
        raise ValidationError(f"{where}.name", f"{LIVENESS_SLUG!r} is the scheduler's own liveness check")
    expression = _text(f"{where}.schedule", raw["schedule"])
    dialect = _text(f"{where}.dialect", raw.get("dialect", "unix"))
    tz = _text(f"{where}.tz", raw.get("tz", "UTC"))
    try:
        schedule = schedules.parse_cron(expression, dialect, tz)
    except ZoneError as error:
        raise ValidationError(f"{where}.tz", str(error)) from None
    except ScheduleError as error:
        key = "dialect" if "unknown dialect" in str(error) else "schedule"
        raise ValidationError(f"{where}.{key}", str(error)) from None
    has_command, has_http = "command" in raw, "http" in raw
    if has_command == has_http:
        raise ValidationError(f"{where}.command", "give exactly one of command and [jobs.http]")
    command = _command(f"{where}.command", raw["command"]) if has_command else None
    http = _http(f"{where}.http", raw["http"]) if has_http else None
    kill_after = raw.get("kill_after")
    deadline = raw.get("starting_deadline")
    max_runtime = raw.get("max_runtime")
    return Job(
        name=name,
        schedule=schedule,
        command=command,
        http=http,
        env=_env(f"{where}.env", raw.get("env", {})),
        kill_after=None
        if kill_after is None
        else timedelta(seconds=_seconds(f"{where}.kill_after", kill_after, minimum=0.1)),
        grace=_whole(f"{where}.grace", raw.get("grace", DEFAULT_GRACE), minimum=1),
        max_runtime=None if max_runtime is None else _whole(f"{where}.max_runtime", max_runtime, minimum=1),
        concurrency_policy=_enum(
            f"{where}.concurrency_policy", raw.get("concurrency_policy", "Allow"), ConcurrencyPolicy
        ),
        starting_deadline=None
        if deadline is None
        else timedelta(seconds=_seconds(f"{where}.starting_deadline", deadline, minimum=1)),
        catchup=_enum(f"{where}.catchup", raw.get("catchup", "all"), Catchup),
        max_catchup=_whole(f"{where}.max_catchup", raw.get("max_catchup", DEFAULT_MAX_CATCHUP), minimum=1),
    )


def parse_jobs(document: Mapping[str, Any]) -> list[Job]:
    """Validate a decoded jobs file: ``{"jobs": [table, …]}`` (TOML ``[[jobs]]``).

    Args:
        document: the file as ``tomllib.loads`` returns it.

    Returns:
        The jobs, in file order.

    Raises:
        ValidationError: naming the key, e.g. ``jobs[1].name: 'nightly' is used by jobs[0]``;
            a :class:`~monitor.domain.errors.ValidationErrors` (one per job) when several
            jobs are invalid.
    """
    unknown = sorted(set(document) - {"jobs"})
    if unknown:
        raise ValidationError(unknown[0], "unknown top-level key (the file holds [[jobs]] tables)")
    raw_jobs = document.get("jobs")
    if not isinstance(raw_jobs, Sequence) or isinstance(raw_jobs, str) or not raw_jobs:
        raise ValidationError("jobs", "the file needs at least one [[jobs]] table")
    jobs: list[Job] = []
    errors: list[ValidationError] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(raw_jobs):
        try:
            job = parse_job(raw, index)
        except ValidationError as error:
            errors.append(error)  # go on: the file's author gets every invalid job at once
            continue
        if job.name in seen:
            errors.append(
                ValidationError(f"jobs[{index}].name", f"{job.name!r} is used by jobs[{seen[job.name]}]")
            )
            continue
        seen[job.name] = index
        jobs.append(job)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ValidationErrors(errors)
    return jobs
