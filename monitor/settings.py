"""Settings: one frozen object, read from ``MONITOR_*`` environment variables (DESIGN §10).

CLI flags override the environment by passing keyword overrides to :meth:`Settings.from_env`.
This module imports nothing from ``monitor``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
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


class SettingsError(ValueError):
    """A ``MONITOR_*`` variable holds a value of the wrong shape."""


def _bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise SettingsError(f"{name}: expected 0/1/true/false, got {raw!r}")


def _number(name: str, raw: str, kind: type[int] | type[float], minimum: float) -> Any:
    try:
        value = kind(raw)
    except ValueError:
        raise SettingsError(f"{name}: expected a number, got {raw!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise SettingsError(f"{name}: expected a finite number, got {raw!r}")
    if value < minimum:
        raise SettingsError(f"{name}: must be at least {minimum}, got {raw!r}")
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class Settings:
    """Every tunable of the service. Durations are in seconds, sizes in bytes."""

    database_url: str = DEFAULT_DATABASE_URL
    """Any SQLAlchemy async URL; ``postgresql+asyncpg://…`` for several replicas."""
    base_url: str = DEFAULT_BASE_URL
    """Public URL of this service: ping URLs and links in messages."""
    api_key: str | None = None
    """Read-write key of the default project, created when the database has no project."""
    evaluate_interval: float = 1.0
    """Evaluator sweep period and liveness renewal, seconds."""
    lease_ttl: float = 10.0
    """Lease expiry / takeover time, seconds."""
    shards: int = 16
    """Evaluator shards (shard = uuid.int % shards)."""
    ping_body_limit: int = 100_000
    """Stored bytes of a ping body; the first bytes are kept."""
    ping_rate_limit: int = 600
    """Pings per check in any 60 s before 429."""
    ingest_batch: int = 500
    """Most pings in one group-commit transaction."""
    ingest_wait_ms: float = 2.0
    """Longest wait for more pings before a batch is committed, milliseconds."""
    ingest_queue: int = 5000
    """``MONITOR_INGEST_QUEUE``: most pings waiting for the writer per process (default 5000,
    ten batches); beyond it a ping is answered ``503`` with ``Retry-After: 1`` and not stored."""
    notify_max_attempts: int = 8
    """Delivery attempts per notification before it is marked failed."""
    notify_timeout: float = 10.0
    """Per-attempt delivery timeout, seconds."""
    notify_backoff: float = 2.0
    """First retry delay, seconds; doubled each attempt (with jitter), capped at 1 h."""
    allow_private_targets: bool = False
    """Allow Apprise targets on loopback/private networks (``serve --dev`` turns it on)."""
    trusted_proxies: frozenset[str] = field(default_factory=frozenset)
    """Peer addresses whose ``X-Forwarded-For`` first hop is believed."""
    metrics_key: str | None = None
    """Bearer key for ``/metrics``; unset means open."""
    metrics_per_check: bool = False
    """``MONITOR_METRICS_PER_CHECK``: also export per-check series (``monitor_check_up``,
    ``monitor_check_status``, ``monitor_check_started``, ``monitor_check_last_ping_age_seconds``,
    labelled ``uuid`` and ``name``); off by default: ``/metrics`` then carries counts by status
    (``monitor_checks{status}``) and stays small at 100k checks."""
    # --- issue 8: notifications
    notify_rate_limit: int = 10
    """Notifications one channel receives about one check in any ``notify_rate_window`` before
    the rest are held back and then coalesced into one digest (never dropped)."""
    notify_rate_window: float = 300.0
    """The rate limit's window, seconds."""
    templates_dir: str | None = None
    """A directory of message templates overriding the package's (``monitor/notify/templates``)."""
    notify_pre_send_delay: float = 0.0
    """Testing aid: seconds a notifier waits between claiming a notification and re-checking its
    claim before sending, so a test can stall (SIGSTOP) a sender inside that gap."""
    # --- email pings (Healthchecks' ``manage.py smtpd``)
    smtp_port: int | None = None
    """``MONITOR_SMTP_PORT`` / ``serve --smtp-port``: TCP port of the SMTP listener for email
    pings, run inside the serving process; unset (the default) means no listener."""
    smtp_host: str = "127.0.0.1"
    """``MONITOR_SMTP_HOST``: address the SMTP listener binds (``serve`` passes its ``--host``)."""
    ping_email_domain: str | None = None
    """``MONITOR_PING_EMAIL_DOMAIN``: the domain of ping addresses (``<uuid>@<domain>``,
    ``<ping_key>+<slug>@<domain>``); default: the host name of ``MONITOR_BASE_URL``."""
    smtp_message_limit: int = 1_000_000
    """``MONITOR_SMTP_MESSAGE_LIMIT``: largest email accepted, bytes (advertised as SIZE; a
    larger message is refused with ``552``); the stored body is still cut to ``ping_body_limit``."""
    # --- Sentry Crons check-ins
    sentry_envelope_limit: int = 20_000_000
    """``MONITOR_SENTRY_ENVELOPE_LIMIT``: largest Sentry envelope accepted, in bytes, both as sent
    and decompressed (default 20 MB); a larger one is answered 413."""
    scheduler_pre_spawn_delay: float = 0.0
    """Testing aid (``MONITOR_SCHEDULER_PRE_SPAWN_DELAY``, seconds, default 0): how long the
    bundled scheduler waits between recording a run's start and spawning it, so a test can stall
    (SIGSTOP) a replica inside that gap. Not for production."""
    notify_concurrency: int = 64
    """``MONITOR_NOTIFY_CONCURRENCY``: deliveries one notifier process keeps in flight at once
    (default 64); also the number of Apprise sender threads."""
    notify_per_host: int = 32
    """``MONITOR_NOTIFY_PER_HOST``: of those, most in flight to one target host (default 32), so a
    slow or hanging target cannot take every slot from the others."""
    # --- retention
    ping_retention: int = 1000
    """``MONITOR_PING_RETENTION``: pings kept per check, newest first (default 1000, as
    Healthchecks); older ones are pruned unless an open run or an unjudged tick still needs them."""
    ping_body_retention: float = 30 * 86400.0
    """``MONITOR_PING_BODY_RETENTION``: seconds a ping's body is kept (default 30 days); the ping
    row stays, its body is cleared."""
    history_retention: float = 90 * 86400.0
    """``MONITOR_HISTORY_RETENTION``: seconds of finished runs, judged ticks, flips and alerts
    (with their notifications) kept (default 90 days)."""
    retention_interval: float = 60.0
    """``MONITOR_RETENTION_INTERVAL``: seconds between pruning rounds of the background task."""
    retention_batch: int = 500
    """``MONITOR_RETENTION_BATCH``: most rows one pruning transaction deletes (small batches keep
    the SQLite writer free for ingest)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from ``MONITOR_*`` variables, then apply non-None ``overrides``.

        Args:
            environ: the variables to read (default ``os.environ``).
            **overrides: field values that win over the environment (CLI flags); ``None`` is ignored.

        Raises:
            SettingsError: a variable is malformed (the message names it).
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}

        def text(name: str, key: str) -> None:
            raw = env.get(name)
            if raw is not None and raw != "":
                values[key] = raw

        text("MONITOR_DATABASE_URL", "database_url")
        text("MONITOR_BASE_URL", "base_url")
        text("MONITOR_API_KEY", "api_key")
        text("MONITOR_METRICS_KEY", "metrics_key")
        text("MONITOR_TEMPLATES_DIR", "templates_dir")
        text("MONITOR_SMTP_HOST", "smtp_host")
        text("MONITOR_PING_EMAIL_DOMAIN", "ping_email_domain")
        numbers: list[tuple[str, str, type[int] | type[float], float]] = [
            ("MONITOR_EVALUATE_INTERVAL", "evaluate_interval", float, 0.01),
            ("MONITOR_LEASE_TTL", "lease_ttl", float, LEASE_TTL_RANGE[0]),
            ("MONITOR_SHARDS", "shards", int, 1),
            ("MONITOR_PING_BODY_LIMIT", "ping_body_limit", int, 0),
            ("MONITOR_PING_RATE_LIMIT", "ping_rate_limit", int, 1),
            ("MONITOR_INGEST_BATCH", "ingest_batch", int, 1),
            ("MONITOR_INGEST_WAIT_MS", "ingest_wait_ms", float, 0),
            ("MONITOR_INGEST_QUEUE", "ingest_queue", int, 1),
            ("MONITOR_NOTIFY_MAX_ATTEMPTS", "notify_max_attempts", int, 1),
            ("MONITOR_NOTIFY_TIMEOUT", "notify_timeout", float, 0.1),
            ("MONITOR_NOTIFY_BACKOFF", "notify_backoff", float, 0),
            ("MONITOR_NOTIFY_RATE_LIMIT", "notify_rate_limit", int, 1),
            ("MONITOR_NOTIFY_RATE_WINDOW", "notify_rate_window", float, 0),
            ("MONITOR_NOTIFY_PRE_SEND_DELAY", "notify_pre_send_delay", float, 0),
            ("MONITOR_SMTP_PORT", "smtp_port", int, 1),
            ("MONITOR_SMTP_MESSAGE_LIMIT", "smtp_message_limit", int, 1),
            ("MONITOR_SENTRY_ENVELOPE_LIMIT", "sentry_envelope_limit", int, 1024),
            ("MONITOR_SCHEDULER_PRE_SPAWN_DELAY", "scheduler_pre_spawn_delay", float, 0),
            ("MONITOR_NOTIFY_CONCURRENCY", "notify_concurrency", int, 1),
            ("MONITOR_NOTIFY_PER_HOST", "notify_per_host", int, 1),
            ("MONITOR_PING_RETENTION", "ping_retention", int, 1),
            ("MONITOR_PING_BODY_RETENTION", "ping_body_retention", float, 0),
            ("MONITOR_HISTORY_RETENTION", "history_retention", float, 0),
            ("MONITOR_RETENTION_INTERVAL", "retention_interval", float, 0.01),
            ("MONITOR_RETENTION_BATCH", "retention_batch", int, 1),
        ]
        for name, key, kind, minimum in numbers:
            raw = env.get(name)
            if raw:
                values[key] = _number(name, raw, kind, minimum)
        raw = env.get("MONITOR_ALLOW_PRIVATE_TARGETS")
        if raw is not None:
            values["allow_private_targets"] = _bool("MONITOR_ALLOW_PRIVATE_TARGETS", raw)
        raw = env.get("MONITOR_METRICS_PER_CHECK")
        if raw is not None:
            values["metrics_per_check"] = _bool("MONITOR_METRICS_PER_CHECK", raw)
        raw = env.get("MONITOR_TRUSTED_PROXIES")
        if raw:
            values["trusted_proxies"] = frozenset(p.strip() for p in raw.split(",") if p.strip())
        values.update({k: v for k, v in overrides.items() if v is not None})
        values["base_url"] = str(values.get("base_url", DEFAULT_BASE_URL)).rstrip("/")
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        """Refuse combinations the service cannot run with (QA issue 5, F2/F5/F6).

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
