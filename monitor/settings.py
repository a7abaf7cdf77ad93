"""Settings: one declarative, frozen object read from ``MONITOR_*`` environment variables (DESIGN §10).

Every setting is declared once, as a field of :class:`Settings` built by :func:`setting`: its
name, environment variable, unit (durations are stored in **seconds**, sizes in bytes), bounds,
default and documentation. :meth:`Settings.from_env` reads them all; :func:`read` reads one
(for values needed before the whole configuration, such as the log level); :func:`specs` lists
them (``scripts/settings_table.py`` renders the README's table from it). This module is the only
one in ``monitor`` that reads ``MONITOR_*`` variables; it imports nothing from ``monitor``.

CLI flags override the environment by passing keyword overrides to :meth:`Settings.from_env`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./monitor.db"
DEFAULT_BASE_URL = "http://127.0.0.1:8000"


MAX_SHARDS = 4096
"""Upper bound of ``MONITOR_SHARDS`` and ``monitor reshard`` (each shard is a lease row and an
advisory lock held on one session)."""

LEASE_TTL_RANGE = (1.0, 86_400.0)
"""Allowed ``MONITOR_LEASE_TTL``, seconds. Below 1 s a lone SQLite evaluator cannot renew its
own leases in time; above a day takeover is meaningless and PostgreSQL's
``idle_session_timeout`` (milliseconds, a 32-bit integer) would overflow."""


MAX_SECONDS = 100 * 365.25 * 86_400
"""Upper bound of every duration setting without a tighter one (a century, in seconds): "keep
forever" fits, and ``now ± the value`` stays within :class:`datetime`'s range."""

MAX_INT = 2**31 - 1
"""Upper bound of every integer setting without a tighter one: it is stored in, or compared
with, 32-bit ``INTEGER`` columns (PostgreSQL, asyncpg) and passed to C ``int`` parameters."""

MAX_NOTIFY_CONCURRENCY = 4096
"""Upper bound of ``MONITOR_NOTIFY_CONCURRENCY`` and ``MONITOR_NOTIFY_PER_HOST`` (each send in
flight is a thread)."""


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The format of every process's log lines (stderr)."""


class SettingsError(ValueError):
    """A ``MONITOR_*`` variable holds a value of the wrong shape."""


@dataclass(frozen=True, slots=True)
class Spec:
    """One setting's declaration.

    Attributes:
        name: the :class:`Settings` field (filled in by :func:`specs`).
        env: its environment variable.
        kind: ``str``, ``int``, ``float``, ``bool`` or ``frozenset`` (a comma-separated list).
        default: the value when the variable is unset or empty.
        doc: what it means, one paragraph (the README's "meaning" column).
        unit: the unit of the stored value: ``"s"`` (seconds), ``"bytes"``, or ``None``.
        env_scale: stored value = variable x ``env_scale`` (``0.001`` for a variable in ms).
        env_unit: the variable's unit when it differs from ``unit`` (``"ms"``).
        minimum / maximum: inclusive bounds of the stored value (``None``: unbounded).
        shown_default: the default as the README shows it, when the value alone would mislead.
        secret: never shown (a key, a password).
        listed: in the README's table (``False`` for internal hand-overs between processes).
    """

    env: str
    kind: type
    default: Any
    doc: str
    unit: str | None = None
    env_scale: float = 1.0
    env_unit: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    shown_default: str | None = None
    secret: bool = False
    listed: bool = True
    name: str = ""


def setting(default: Any, *, env: str, kind: type, doc: str, **options: Any) -> Any:
    """Declare a :class:`Settings` field: its default plus a :class:`Spec` in the field's metadata.

    Args:
        default: the default value (stored units: seconds, bytes).
        env: the ``MONITOR_*`` variable.
        kind: the value's type (see :class:`Spec`).
        doc: the documentation.
        **options: the other :class:`Spec` attributes.
    """
    if options.get("maximum") is None and kind in (int, float):
        # Unbounded numbers overflowed later, inside a loop (an OverflowError each round): a
        # duration past a century leaves datetime's range, an integer past 2**31 - 1 the
        # databases' INTEGER and C's int.
        if options.get("unit") == "s":
            options["maximum"] = MAX_SECONDS / options.get("env_scale", 1.0)
        elif kind is int:
            options["maximum"] = MAX_INT
    spec = Spec(env=env, kind=kind, default=default, doc=doc, **options)
    return field(default=default, metadata={"setting": spec})


@dataclass(frozen=True, kw_only=True, slots=True)
class Settings:
    """Every tunable of the service. Durations are in seconds, sizes in bytes."""

    database_url: str = setting(
        DEFAULT_DATABASE_URL,
        env="MONITOR_DATABASE_URL",
        kind=str,
        doc="`sqlite+aiosqlite:///PATH` (the directory must exist), or "
        "`postgresql+asyncpg://user@host/db` for several replicas; other drivers are refused at "
        "start-up (also `--database-url`)",
    )
    base_url: str = setting(
        DEFAULT_BASE_URL,
        env="MONITOR_BASE_URL",
        kind=str,
        doc="public URL of the service: ping URLs and links in messages",
        shown_default="`http://<host>:<port>` served",
    )
    api_key: str | None = setting(
        None,
        env="MONITOR_API_KEY",
        kind=str,
        secret=True,
        doc="read-write key of the default project created on an empty database (16-128 printable "
        "characters); the bundled scheduler and `import-crontab` use it to reach the API",
    )
    host: str = setting(
        "127.0.0.1", env="MONITOR_HOST", kind=str, doc="address `monitor serve` listens on (`--host`)"
    )
    port: int = setting(
        8000,
        env="MONITOR_PORT",
        kind=int,
        minimum=1,
        maximum=65535,
        doc="TCP port of `monitor serve` (`--port`)",
    )
    workers: int = setting(
        1, env="MONITOR_WORKERS", kind=int, minimum=1, doc="API processes of `monitor serve` (`--workers`)"
    )
    evaluate_interval: float = setting(
        1.0,
        env="MONITOR_EVALUATE_INTERVAL",
        kind=float,
        unit="s",
        minimum=0.01,
        doc="evaluator sweep period, liveness renewal (a deadline between two sweeps gets a sweep of its own "
        "about 0.1 s after it); **at most `MONITOR_LEASE_TTL` / 2** (2 × TTL "
        "without a liveness renewal is a monitor outage, so a longer interval would make every "
        "interval one)",
    )
    lease_ttl: float = setting(
        10.0,
        env="MONITOR_LEASE_TTL",
        kind=float,
        unit="s",
        minimum=LEASE_TTL_RANGE[0],
        maximum=LEASE_TTL_RANGE[1],
        doc="lease expiry and takeover time; 1 s … 86400 s (one day)",
    )
    shards: int = setting(
        16,
        env="MONITOR_SHARDS",
        kind=int,
        minimum=1,
        maximum=MAX_SHARDS,
        doc="evaluator shards shared out between replicas, 1 … 4096 (as `monitor reshard`); recorded "
        "in the database by the first process, which then wins over this variable (see below)",
    )
    ping_body_limit: int = setting(
        100_000,
        env="MONITOR_PING_BODY_LIMIT",
        kind=int,
        unit="bytes",
        minimum=0,
        doc="stored bytes of a ping body (the first ones)",
    )
    ping_rate_limit: int = setting(
        600,
        env="MONITOR_PING_RATE_LIMIT",
        kind=int,
        minimum=1,
        doc="pings per check per 60 s before `429`, counted by each API process "
        "(`--workers N`: up to N times it)",
    )
    ingest_batch: int = setting(
        500,
        env="MONITOR_INGEST_BATCH",
        kind=int,
        minimum=1,
        doc="group commit: most pings in one transaction",
    )
    ingest_wait: float = setting(
        0.002,
        env="MONITOR_INGEST_WAIT_MS",
        kind=float,
        unit="s",
        env_scale=0.001,
        env_unit="ms",
        minimum=0,
        doc="group commit: longest wait for more pings before a batch is committed (the variable is "
        "in milliseconds)",
    )
    notify_max_attempts: int = setting(
        8,
        env="MONITOR_NOTIFY_MAX_ATTEMPTS",
        kind=int,
        minimum=1,
        doc="delivery attempts before a notification is `failed`",
    )
    notify_timeout: float = setting(
        10.0,
        env="MONITOR_NOTIFY_TIMEOUT",
        kind=float,
        unit="s",
        minimum=0.1,
        doc="one delivery attempt's time limit",
    )
    notify_backoff: float = setting(
        2.0,
        env="MONITOR_NOTIFY_BACKOFF",
        kind=float,
        unit="s",
        minimum=0,
        doc="first retry delay, doubled each attempt (±25 % jitter, at most 1 h)",
    )
    notify_rate_limit: int = setting(
        10,
        env="MONITOR_NOTIFY_RATE_LIMIT",
        kind=int,
        minimum=1,
        doc="notifications one channel receives about one check per `MONITOR_NOTIFY_RATE_WINDOW`; "
        "the rest are held back and then sent as one digest (never dropped)",
    )
    notify_rate_window: float = setting(
        300.0,
        env="MONITOR_NOTIFY_RATE_WINDOW",
        kind=float,
        unit="s",
        minimum=0,
        doc="the window of `MONITOR_NOTIFY_RATE_LIMIT`",
    )
    allow_private_targets: bool = setting(
        False,
        env="MONITOR_ALLOW_PRIVATE_TARGETS",
        kind=bool,
        shown_default="`0` (`1` under `serve --dev`)",
        doc="allow Apprise targets on loopback/private networks",
    )
    trusted_proxies: frozenset[str] = setting(
        frozenset(),
        env="MONITOR_TRUSTED_PROXIES",
        kind=frozenset,
        shown_default="none",
        doc="comma-separated peers whose `X-Forwarded-For` first hop is believed",
    )
    metrics_key: str | None = setting(
        None,
        env="MONITOR_METRICS_KEY",
        kind=str,
        secret=True,
        doc="bearer key for `/metrics` (`Authorization: Bearer <key>`); unset, `/metrics` is public",
    )
    templates_dir: str | None = setting(
        None,
        env="MONITOR_TEMPLATES_DIR",
        kind=str,
        doc="directory of message templates overriding the package's (`monitor/notify/templates`)",
    )
    log_level: str = setting("INFO", env="MONITOR_LOG_LEVEL", kind=str, doc="log level (logs go to stderr)")
    scheduler_shutdown_grace: float = setting(
        30.0,
        env="MONITOR_SCHEDULER_SHUTDOWN_GRACE",
        kind=float,
        unit="s",
        minimum=0,
        doc="`monitor scheduler`: on SIGTERM, how long running jobs may take before they are "
        "terminated (`--shutdown-grace`)",
    )
    scheduler_liveness_interval: float = setting(
        60.0,
        env="MONITOR_SCHEDULER_LIVENESS_INTERVAL",
        kind=float,
        unit="s",
        minimum=0.1,
        doc="`monitor scheduler`: period of its own liveness check `monitor-scheduler` "
        "(`--liveness-interval`)",
    )
    user_password: str | None = setting(
        None,
        env="MONITOR_USER_PASSWORD",
        kind=str,
        secret=True,
        doc="`monitor user create`: the password, when `--password-stdin` is not given",
    )
    roles: str = setting(
        "evaluator,notifier",
        env="MONITOR_ROLES",
        kind=str,
        listed=False,
        doc="loops `monitor serve`'s API processes run besides HTTP, comma-separated: `evaluator`, "
        "`notifier` (set by `serve` for its uvicorn workers, always starting with `http`)",
    )

    ingest_process: bool = setting(
        False,
        env="MONITOR_INGEST_PROCESS",
        kind=bool,
        shown_default="`1` under `serve` on a SQLite file, else `0`",
        doc="store pings in a child process of their own (a SQLite file's one writer, on a core "
        "of its own) instead of in the API process; `0` keeps them in the API process",
    )
    ingest_queue: int = setting(
        5000,
        env="MONITOR_INGEST_QUEUE",
        kind=int,
        minimum=1,
        doc="pings waiting for the writer per process; beyond it a ping gets `503` with "
        "`Retry-After: 1` and is not stored",
    )

    metrics_per_check: bool = setting(
        False,
        env="MONITOR_METRICS_PER_CHECK",
        kind=bool,
        shown_default="`0`",
        doc="`1`: `/metrics` also exports per-check series (`monitor_check_up`, `monitor_check_status`, "
        "… labelled `uuid`, `name`); by default only counts by status, small at 100k checks",
    )

    notify_concurrency: int = setting(
        64,
        env="MONITOR_NOTIFY_CONCURRENCY",
        kind=int,
        minimum=1,
        maximum=MAX_NOTIFY_CONCURRENCY,
        doc="deliveries one notifier process keeps in flight (and Apprise sender threads)",
    )

    notify_per_host: int = setting(
        32,
        env="MONITOR_NOTIFY_PER_HOST",
        kind=int,
        minimum=1,
        maximum=MAX_NOTIFY_CONCURRENCY,
        doc="of those, most to one target host (fewer to one whose sends time out: it holds only its own)",
    )

    ping_retention: int = setting(
        1000,
        env="MONITOR_PING_RETENTION",
        kind=int,
        minimum=1,
        doc="pings kept per check, newest first (older ones are pruned unless an open run or an "
        "unjudged tick still needs them)",
    )

    ping_body_retention: float = setting(
        30 * 86400.0,
        env="MONITOR_PING_BODY_RETENTION",
        kind=float,
        unit="s",
        minimum=0,
        doc="a ping's body is cleared after this (the ping stays); 30 days",
    )

    history_retention: float = setting(
        90 * 86400.0,
        env="MONITOR_HISTORY_RETENTION",
        kind=float,
        unit="s",
        minimum=0,
        doc="finished runs, judged ticks, flips and alerts (with their notifications) kept; 90 days",
    )

    retention_interval: float = setting(
        60.0,
        env="MONITOR_RETENTION_INTERVAL",
        kind=float,
        unit="s",
        minimum=0.01,
        doc="pause between pruning rounds of the background task",
    )

    retention_batch: int = setting(
        500,
        env="MONITOR_RETENTION_BATCH",
        kind=int,
        minimum=1,
        doc="most rows one pruning transaction deletes (small batches keep the SQLite writer free)",
    )

    smtp_port: int | None = setting(
        None,
        env="MONITOR_SMTP_PORT",
        kind=int,
        minimum=1,
        maximum=65535,
        shown_default="unset (no listener)",
        doc="SMTP port for email pings, in the serving process (`serve --smtp-port`)",
    )

    smtp_host: str = setting(
        "127.0.0.1",
        env="MONITOR_SMTP_HOST",
        kind=str,
        shown_default="`serve --host`",
        doc="address the SMTP listener binds",
    )

    ping_email_domain: str | None = setting(
        None,
        env="MONITOR_PING_EMAIL_DOMAIN",
        kind=str,
        shown_default="host of `MONITOR_BASE_URL`",
        doc="domain of `<uuid>@<domain>` and `<ping_key>+<slug>@<domain>` ping addresses",
    )

    smtp_message_limit: int = setting(
        1_000_000,
        env="MONITOR_SMTP_MESSAGE_LIMIT",
        kind=int,
        unit="bytes",
        minimum=1,
        doc="largest email accepted (advertised as SIZE; `552` beyond); the stored body is still cut "
        "to `MONITOR_PING_BODY_LIMIT`",
    )

    sentry_envelope_limit: int = setting(
        20_000_000,
        env="MONITOR_SENTRY_ENVELOPE_LIMIT",
        kind=int,
        unit="bytes",
        minimum=1024,
        doc="largest Sentry envelope accepted, as sent and decompressed (`413` beyond)",
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from ``MONITOR_*`` variables, then apply non-None ``overrides``.

        Args:
            environ: the variables to read (default ``os.environ``).
            **overrides: field values that win over the environment (CLI flags); ``None`` is ignored.

        Raises:
            SettingsError: a variable is malformed or out of bounds (the message names it).
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for spec in specs():
            raw = env.get(spec.env)
            if raw is not None:
                parsed = _parse(spec, raw)
                if parsed is not _UNSET:
                    values[spec.name] = parsed
        values.update({k: v for k, v in overrides.items() if v is not None})
        values["base_url"] = str(values.get("base_url", DEFAULT_BASE_URL)).rstrip("/")
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        """Refuse combinations the service cannot run with.

        * ``lease_ttl`` within :data:`LEASE_TTL_RANGE` (finite);
        * ``evaluate_interval`` at most ``lease_ttl / 2``: liveness is renewed every interval
          and a span of 2 x TTL without a renewal is a monitor outage (DESIGN §6), so a longer
          interval would make every interval an outage (``monitor_unavailable`` storms, no
          ``missed`` ever); TTL/2 leaves at least three renewals per outage span;
        * ``shards`` between 1 and :data:`MAX_SHARDS` (as ``monitor reshard``).

        Raises:
            SettingsError: one line naming the variable(s).
        """
        low, high = LEASE_TTL_RANGE
        ttl = self.lease_ttl
        if not (math.isfinite(ttl) and low <= ttl <= high):
            raise SettingsError(
                f"MONITOR_LEASE_TTL: must be between {low:g} and {high:g} seconds, got {ttl:g}"
            )
        interval = self.evaluate_interval
        if not (math.isfinite(interval) and 0 < interval <= ttl / 2):
            raise SettingsError(
                f"MONITOR_EVALUATE_INTERVAL: must be at most half of MONITOR_LEASE_TTL ({ttl:g} s), got "
                f"{interval:g} (2 x MONITOR_LEASE_TTL without a liveness renewal is a monitor outage)"
            )
        if self.smtp_port is not None and not 1 <= self.smtp_port <= 65535:
            raise SettingsError(f"MONITOR_SMTP_PORT: must be a whole number 1-65535, got {self.smtp_port}")
        if not 1 <= self.shards <= MAX_SHARDS:
            raise SettingsError(f"MONITOR_SHARDS: must be between 1 and {MAX_SHARDS}, got {self.shards}")

    @property
    def email_domain(self) -> str:
        """The domain of ping addresses: ``ping_email_domain``, else ``base_url``'s host name."""
        if self.ping_email_domain:
            return self.ping_email_domain.strip().lower()
        host = self.base_url.split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1]
        if host.startswith("["):
            return host.split("]", 1)[0] + "]"
        return host.rsplit(":", 1)[0].lower() if ":" in host else host.lower()

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)


def specs() -> Iterator[Spec]:
    """Every setting's :class:`Spec`, in declaration order, with ``name`` filled in."""
    for f in dataclasses.fields(Settings):
        spec = f.metadata.get("setting")
        if spec is not None:
            yield dataclasses.replace(spec, name=f.name)


def spec_of(name: str) -> Spec:
    """The :class:`Spec` of the field ``name``.

    Raises:
        KeyError: no such setting.
    """
    for spec in specs():
        if spec.name == name:
            return spec
    raise KeyError(name)


def read(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """One setting from the environment (its default when unset), without building :class:`Settings`.

    For values needed before the whole configuration is read or valid: the log level, the
    database URL shown in a start-up error, ``import-crontab``'s base URL and key.

    Raises:
        SettingsError: the variable is malformed or out of bounds.
    """
    spec = spec_of(name)
    raw = (os.environ if environ is None else environ).get(spec.env)
    parsed = _UNSET if raw is None else _parse(spec, raw)
    return spec.default if parsed is _UNSET else parsed


def given(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the setting ``name``'s variable is set to a non-empty value (not left to its default)."""
    return bool((os.environ if environ is None else environ).get(spec_of(name).env))


_UNSET: Any = object()


def _bound(value: float) -> str:
    """A bound as an error message shows it: whole numbers in full (``2147483647``, not ``2.14748e+09``)."""
    return str(int(value)) if value == int(value) else f"{value:g}"


def _parse(spec: Spec, raw: str) -> Any:
    """``raw`` as the setting's stored value (``_UNSET`` for an empty value that means "default")."""
    if spec.kind is bool:
        value = raw.strip().lower()
        if value in {"1", "true", "yes", "on"}:
            return True
        if value in {"0", "false", "no", "off", ""}:
            return False
        raise SettingsError(f"{spec.env}: expected 0/1/true/false, got {raw!r}")
    if raw == "":
        return _UNSET
    if spec.kind is str:
        return raw
    if spec.kind is frozenset:
        return frozenset(p.strip() for p in raw.split(",") if p.strip())
    try:
        number = spec.kind(raw)
    except ValueError:
        raise SettingsError(f"{spec.env}: expected a number, got {raw!r}") from None
    if isinstance(number, float) and not math.isfinite(number):
        raise SettingsError(f"{spec.env}: expected a finite number, got {raw!r}")
    if spec.minimum is not None and number < spec.minimum:
        raise SettingsError(f"{spec.env}: must be at least {_bound(spec.minimum)}, got {raw!r}")
    if spec.maximum is not None and number > spec.maximum:
        raise SettingsError(f"{spec.env}: must be at most {_bound(spec.maximum)}, got {raw!r}")
    return number * spec.env_scale if spec.env_scale != 1.0 else number
