"""The schema (SQLAlchemy Core tables). Alembic's migrations must produce exactly this.

Every instant is stored as naive UTC and read back as aware UTC (:class:`UTCDateTime`), on
SQLite and PostgreSQL alike. Durations are whole seconds (integers) or float seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


_BIND_TEXTS = 4096
"""Instants whose SQLite text the bind processors keep (then they start again)."""

_SQLITE_TEXTS: dict[datetime, str] = {}
"""Instant → its SQLite text, shared by every :class:`UTCDateTime` column's bind processor."""


def _sqlite_text(value: datetime) -> str:
    """SQLAlchemy's SQLite ``DATETIME`` text of ``value``'s wall time (its zone ignored:
    ``2026-01-05 13:00:00.000000``, microseconds always present); ``%`` formatting, about
    twice as fast as ``isoformat`` and a slice."""
    return "%04d-%02d-%02d %02d:%02d:%02d.%06d" % (  # noqa: UP031 (an f-string measured slower)
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
    )


class UTCDateTime(TypeDecorator[datetime]):
    """An instant: aware UTC in Python.

    On PostgreSQL a ``timestamp with time zone``: asyncpg binds and returns aware datetimes
    itself (UTC on the way back, whatever the session's ``TimeZone``), so no value passes
    through Python here beyond the refusal of a naive one. On SQLite the value is SQLAlchemy's
    own ``DATETIME`` text of the UTC wall time (``2026-01-05 13:00:00.000000``, microseconds
    always present), so stored rows and comparisons in SQL are those of a plain ``DateTime``
    column.
    """

    impl = DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        return dialect.type_descriptor(DateTime(timezone=dialect.name == "postgresql"))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if dialect.name == "postgresql":
            return _aware_or_none(value)
        return None if value is None else _naive_utc(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        return _aware_utc(value)

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        """On SQLite, one conversion per bound value instead of two chained ones (aware → naive
        UTC, then SQLite's text); an evaluator sweep binds about ten instants per check. The
        text is exactly what SQLAlchemy's SQLite ``DATETIME`` writes.

        Raises (from the returned function):
            ValueError: a naive datetime (only aware UTC instants belong here).
        """
        if dialect.name == "postgresql":
            return _aware_or_none  # the driver converts it to UTC itself
        if dialect.name != "sqlite":
            return _naive_utc_or_none  # the driver's timestamp takes the naive datetime itself
        # the instants of a sweep or an ingest batch repeat (its ``now``, the ticks many checks
        # share, a ping's arrival in its ping, run and state rows): their text is looked up, not
        # formatted again, in one table for every column (one per column missed each instant
        # a ping's row shares with its run's and its check's). Equal instants in any zone are
        # one key and one UTC text; a naive datetime equals no aware one, so it never hits.
        texts = _SQLITE_TEXTS

        def process(value: datetime | None) -> str | None:
            if value is None:
                return None
            text = texts.get(value)
            if text is not None:
                return text
            text = _sqlite_text(value if value.tzinfo is UTC else _naive_utc(value))
            if len(texts) >= _BIND_TEXTS:
                texts.clear()
            texts[value] = text
            return text

        return process

    def result_processor(self, dialect: Dialect, coltype: object) -> Callable[[Any], Any] | None:
        """On PostgreSQL nothing: asyncpg returns ``timestamptz`` as aware UTC. On SQLite, the
        stored text parsed straight to aware UTC (one conversion per value); elsewhere the
        driver's naive datetime made aware, without the generic wrapper's calls."""
        if dialect.name == "postgresql":
            return None
        if dialect.name != "sqlite":
            return _aware_utc_of_naive
        return _aware_utc_of_text


def _aware_or_none(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise ValueError("naive datetime given where an aware UTC instant belongs")
    return value


def _naive_utc_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else _naive_utc(value)


def _aware_utc_of_naive(value: Any) -> datetime | None:
    if value is not None and type(value) is datetime and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return _aware_utc(value)


def _aware_utc_of_text(value: Any) -> datetime | None:
    # the stored text with "+00:00" parses straight to aware UTC, five times faster than
    # parsing it naive and replacing its zone; most instants a check row holds are NULL
    if value is None:
        return None
    if isinstance(value, str) and len(value) == 26:
        return datetime.fromisoformat(value + "+00:00")
    return _aware_utc(value)


def _aware_utc(value: Any) -> datetime | None:
    if value is None:
        return None
    instant: datetime = datetime.fromisoformat(value) if isinstance(value, str) else value
    return instant.replace(tzinfo=UTC) if instant.tzinfo is None else instant.astimezone(UTC)


def _naive_utc(value: datetime) -> datetime:
    tz = value.tzinfo
    if tz is UTC:
        return value.replace(tzinfo=None)
    if tz is None:
        raise ValueError("naive datetime given where an aware UTC instant belongs")
    return value.astimezone(UTC).replace(tzinfo=None)


ID = BigInteger().with_variant(Integer(), "sqlite")

projects = Table(
    "projects",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("name", String(100), nullable=False),
    Column("ping_key", String(64), nullable=False, unique=True),
    Column("badge_key", String(64), nullable=False, unique=True),
    Column("created_at", UTCDateTime(), nullable=False),
    # the public key of the project's Sentry DSN (Sentry Crons check-ins, monitor.domain.sentry)
    Column("sentry_key", String(32), nullable=True, unique=True),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("project_id", ID, ForeignKey("projects.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("read_only", Boolean(), nullable=False, default=False),
    Column("name", String(100), nullable=False, default=""),
    Column("created_at", UTCDateTime(), nullable=False),
)

checks = Table(
    "checks",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("uuid", String(36), nullable=False, unique=True),
    Column("project_id", ID, ForeignKey("projects.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("name", String(100), nullable=False, default=""),
    Column("slug", String(100), nullable=True),
    Column("tags", String(500), nullable=False, default=""),
    Column("desc", Text(), nullable=False, default=""),
    Column("kind", String(10), nullable=False),
    Column("timeout", Integer(), nullable=False, default=86400),
    Column("schedule", String(200), nullable=True),
    Column("tz", String(64), nullable=False, default="UTC"),
    Column("dialect", String(10), nullable=False, default="unix"),
    Column("grace", Integer(), nullable=False, default=3600),
    Column("max_runtime", Integer(), nullable=False, default=1800),
    Column("failure_threshold", Integer(), nullable=False, default=1),
    Column("recovery_threshold", Integer(), nullable=False, default=1),
    Column("early_tolerance", Integer(), nullable=True),  # null: min(grace, 5 min) (DESIGN §5)
    Column("expected_runs", Integer(), nullable=False, default=1, server_default="1"),
    Column("min_runtime", Integer(), nullable=True),
    Column("methods", String(10), nullable=False, default=""),
    Column("manual_resume", Boolean(), nullable=False, default=False),
    # keyword filters (monitor.domain.keywords; Healthchecks' fields of the same names)
    Column("filter_subject", Boolean(), nullable=False, default=False, server_default=false()),
    Column("filter_body", Boolean(), nullable=False, default=False, server_default=false()),
    Column("filter_http_body", Boolean(), nullable=False, default=False, server_default=false()),
    Column("filter_default_fail", Boolean(), nullable=False, default=False, server_default=false()),
    Column("start_kw", String(200), nullable=False, default="", server_default=""),
    Column("success_kw", String(200), nullable=False, default="", server_default=""),
    Column("failure_kw", String(200), nullable=False, default="", server_default=""),
    Column("badge_uuid", String(36), nullable=False, unique=True),
    Column("created_at", UTCDateTime(), nullable=False),
    # state (monitor.domain.checks.CheckState)
    Column("paused", Boolean(), nullable=False, default=False),
    Column("watch_from", UTCDateTime(), nullable=True),
    Column("judged_until", UTCDateTime(), nullable=True),
    Column("last_run_ping_at", UTCDateTime(), nullable=True),
    Column("bad_streak", Integer(), nullable=False, default=0),
    Column("good_streak", Integer(), nullable=False, default=0),
    Column("good_before_miss", Integer(), nullable=False, default=0, server_default="0"),
    Column("episode_key", String(200), nullable=True),
    Column("episode_count", Integer(), nullable=False, default=0),
    Column("late_in_episode", Boolean(), nullable=False, default=False),
    Column("last_missed_tick", UTCDateTime(), nullable=True),
    Column("pending_tick", UTCDateTime(), nullable=True),
    Column("next_due", UTCDateTime(), nullable=True),
    Column("episode_from", UTCDateTime(), nullable=True),
    Column("closed_key", String(200), nullable=True),
    Column("closed_from", UTCDateTime(), nullable=True),
    Column("closed_to", UTCDateTime(), nullable=True),
    Column("closed_count", Integer(), nullable=False, default=0, server_default="0"),
    Column("superseded_key", String(200), nullable=True),
    Column("superseded_through", UTCDateTime(), nullable=True),
    Column("superseded_count", Integer(), nullable=False, default=0, server_default="0"),
    Column("last_ping_at", UTCDateTime(), nullable=True),
    Column("n_pings", Integer(), nullable=False, default=0),
    # evaluator shard: uuid.int % MONITOR_SHARDS (monitor.domain.shards), set at creation
    Column("shard", Integer(), nullable=False),
    Index("ix_checks_next_due", "next_due"),
    Index("ix_checks_shard_next_due", "shard", "next_due"),
    Index(
        "uq_checks_project_slug",
        "project_id",
        "slug",
        unique=True,
        sqlite_where=text("slug IS NOT NULL"),
        postgresql_where=text("slug IS NOT NULL"),
    ),
)

pings = Table(
    "pings",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("check_id", ID, ForeignKey("checks.id", ondelete="CASCADE"), nullable=False),
    Column("n", Integer(), nullable=False),
    Column("kind", String(10), nullable=False),
    Column("received_at", UTCDateTime(), nullable=False),
    Column("scheduled", UTCDateTime(), nullable=True),
    Column("rid", String(36), nullable=True),
    Column("run_id", String(36), nullable=True),
    Column("exit_status", Integer(), nullable=True),
    Column("duration", Float(), nullable=True),
    # a late finish's real end (``finished=``, bounded); null: the run ended at received_at
    Column("finished_at", UTCDateTime(), nullable=True),
    # a late start's real start (``started=``, bounded); null: the run started at received_at
    Column("started_at", UTCDateTime(), nullable=True),
    Column("method", String(10), nullable=False, default=""),
    Column("remote_addr", String(64), nullable=False, default=""),
    Column("ua", String(200), nullable=False, default=""),
    # "http", "https" or "email" (Healthchecks' ping field)
    Column("scheme", String(10), nullable=False, default="http", server_default="http"),
    Column("body", LargeBinary(), nullable=True),
    Column("body_size", Integer(), nullable=False, default=0),
    Column("idempotency_key", String(200), nullable=True),
    Column("response_status", Integer(), nullable=False, default=200),
    UniqueConstraint("check_id", "n", name="uq_pings_check_n"),
    # partial: most pings carry no key, and a full index took a random page per ping in every
    # ingest commit (SQLite writes each dirtied page to the WAL)
    Index(
        "ix_pings_check_idem",
        "check_id",
        "idempotency_key",
        sqlite_where=text("idempotency_key IS NOT NULL"),
        postgresql_where=text("idempotency_key IS NOT NULL"),
    ),
)

ping_keys = Table(
    "ping_keys",
    metadata,
    # The Idempotency-Key of a ping that retention pruned before the key's 7 days were over
    # (DESIGN §5: remembered 7 days): a repeat is still recognised, without keeping the ping.
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("check_id", ID, ForeignKey("checks.id", ondelete="CASCADE"), nullable=False),
    Column("kind", String(10), nullable=False),
    Column("key", String(200), nullable=False),
    Column("response_status", Integer(), nullable=False),
    Column("received_at", UTCDateTime(), nullable=False),
    Index("ix_ping_keys_check_key", "check_id", "key"),
    Index("ix_ping_keys_received_at", "received_at"),
)

history_totals = Table(
    "history_totals",
    metadata,
    # rows of pings, alerts and delivery attempts deleted (retention, a deleted check), by label:
    # /metrics adds them to the stored rows so its *_total counters never go down
    Column("family", String(40), primary_key=True),
    Column("label", String(24), primary_key=True),
    Column("count", BigInteger(), nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("check_id", ID, ForeignKey("checks.id", ondelete="CASCADE"), nullable=False),
    Column("rid", String(36), nullable=True),
    Column("scheduled", UTCDateTime(), nullable=False),
    Column("first_ping_at", UTCDateTime(), nullable=False),
    Column("started_at", UTCDateTime(), nullable=True),
    Column("finished_at", UTCDateTime(), nullable=True),
    Column("finish_kind", String(10), nullable=True),
    Column("exit_status", Integer(), nullable=True),
    Column("late", Boolean(), nullable=False, default=False),
    Column("duplicate", Boolean(), nullable=False, default=False),
    Column("overlap", Boolean(), nullable=False, default=False),
    Column("timed_out", Boolean(), nullable=False, default=False),
    Column("early", Boolean(), nullable=False, default=False, server_default="0"),
    Column("outcome", String(12), nullable=True),
    Index("ix_runs_check_scheduled", "check_id", "scheduled"),
    # partial, as ix_pings_check_idem: runs are looked up by rid only when a ping names one
    Index(
        "ix_runs_check_rid",
        "check_id",
        "rid",
        sqlite_where=text("rid IS NOT NULL"),
        postgresql_where=text("rid IS NOT NULL"),
    ),
    Index(
        "ix_runs_open",
        "check_id",
        sqlite_where=text("outcome IS NULL"),
        postgresql_where=text("outcome IS NULL"),
    ),
)

tick_marks = Table(
    "tick_marks",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("check_id", ID, ForeignKey("checks.id", ondelete="CASCADE"), nullable=False),
    Column("scheduled", UTCDateTime(), nullable=False),
    Column("outcome", String(12), nullable=False),
    UniqueConstraint("check_id", "scheduled", name="uq_tick_marks_check_scheduled"),
)

flips = Table(
    "flips",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("check_id", ID, ForeignKey("checks.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("up", Integer(), nullable=True),
    Column("reason", String(12), nullable=False),
    Column("token", BigInteger(), nullable=True),
)

alerts = Table(
    "alerts",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("project_id", ID, ForeignKey("projects.id", ondelete="CASCADE"), nullable=False),
    Column("check_id", ID, ForeignKey("checks.id", ondelete="CASCADE"), nullable=True, index=True),
    Column("key", String(200), nullable=False),
    Column("kind", String(24), nullable=False),
    Column("scheduled", UTCDateTime(), nullable=True),
    Column("run_id", String(36), nullable=True),
    Column("rid", String(36), nullable=True),
    Column("count", Integer(), nullable=False, default=1),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("title", String(300), nullable=False, default=""),
    Column("message", Text(), nullable=False, default=""),
    Column("token", BigInteger(), nullable=True),
    UniqueConstraint("project_id", "check_id", "key", name="uq_alerts_check_key"),
)

channels = Table(
    "channels",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("project_id", ID, ForeignKey("projects.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("name", String(100), nullable=False, default=""),
    Column("url", Text(), nullable=False),
    Column("kinds", String(200), nullable=False, default=""),
    Column("created_at", UTCDateTime(), nullable=False),
)

check_channels = Table(
    "check_channels",
    metadata,
    Column("check_id", ID, ForeignKey("checks.id", ondelete="CASCADE"), primary_key=True),
    Column("channel_id", String(36), ForeignKey("channels.id", ondelete="CASCADE"), primary_key=True),
)

notifications = Table(
    "notifications",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("alert_id", ID, ForeignKey("alerts.id", ondelete="CASCADE"), nullable=False),
    Column("channel_id", String(36), ForeignKey("channels.id", ondelete="CASCADE"), nullable=False),
    Column("status", String(10), nullable=False, default="pending"),
    Column("attempts", Integer(), nullable=False, default=0),
    Column("next_attempt_at", UTCDateTime(), nullable=False),
    Column("claimed_until", UTCDateTime(), nullable=True),
    Column("last_error", Text(), nullable=True),
    Column("sent_at", UTCDateTime(), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    UniqueConstraint("alert_id", "channel_id", name="uq_notifications_alert_channel"),
    Index("ix_notifications_due", "status", "next_attempt_at"),
)

notification_attempts = Table(
    "notification_attempts",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column(
        "notification_id", ID, ForeignKey("notifications.id", ondelete="CASCADE"), nullable=False, index=True
    ),
    Column("at", UTCDateTime(), nullable=False),
    Column("ok", Boolean(), nullable=False),
    Column("error", Text(), nullable=True),
)

leases = Table(
    "leases",
    metadata,
    Column("name", String(100), primary_key=True),
    Column("holder", String(200), nullable=True),
    Column("token", BigInteger(), nullable=False, default=0),
    Column("expires_at", UTCDateTime(), nullable=True),
)

liveness = Table(
    "liveness",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("roles", String(100), nullable=False, default=""),
    Column("renewed_at", UTCDateTime(), nullable=False),
)

replicas = Table(
    "replicas",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("role", String(20), nullable=False),
    Column("renewed_at", UTCDateTime(), nullable=False),
)
"""Worker replicas announcing themselves (heartbeats), so each takes a fair share of shards."""

outages = Table(
    "outages",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("started_at", UTCDateTime(), nullable=False, unique=True),
    Column("ended_at", UTCDateTime(), nullable=False),
)
"""Spans with no live HTTP process (DESIGN §6 self-outage guard): deadlines inside are unknown."""

job_claims = Table(
    "job_claims",
    metadata,
    Column("job", String(100), primary_key=True),
    Column("tick", UTCDateTime(), primary_key=True),
    Column("attempt", Integer(), nullable=False, default=1),
    Column("state", String(16), nullable=False),
    Column("token", BigInteger(), nullable=False),
    Column("holder", String(200), nullable=False),
    Column("run_id", String(36), nullable=True),
    Column("reason", String(32), nullable=True),
    Column("claimed_at", UTCDateTime(), nullable=False),
    Column("started_at", UTCDateTime(), nullable=True),
    Column("finished_at", UTCDateTime(), nullable=True),
    Column("exit_status", Integer(), nullable=True),
)
"""Bundled-scheduler ticks (DESIGN §8): one row per (job, tick), inserted with ON CONFLICT DO
NOTHING under the job's lease ``job-<name>``, so each tick is claimed once across replicas.
``state``: claimed → started → finished, or skipped; ``token`` is the claimant's fencing token."""

cluster_settings = Table(
    "cluster_settings",
    metadata,
    Column("id", Integer(), primary_key=True, autoincrement=False),
    Column("shards", Integer(), nullable=False),
    Column("changed_at", UTCDateTime(), nullable=False),
)
"""One row (``id`` 1): settings every replica must share. ``shards`` is the evaluator shard
count, the source of truth over each process's ``MONITOR_SHARDS`` (DESIGN §6,
:mod:`monitor.storage.cluster`); ``changed_at`` is when it was recorded or last resharded."""
# -- dashboard: users, their projects, login sessions ------------------------------

users = Table(
    "users",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("email", String(254), nullable=False, unique=True),
    Column("password_hash", String(200), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    # login throttling: consecutive wrong passwords and the instant before which logins are refused
    Column("failed_logins", Integer(), nullable=False, default=0),
    Column("locked_until", UTCDateTime(), nullable=True),
    # the IANA zone the dashboard shows this user's times in ("" = UTC)
    Column("tz", String(64), nullable=False, default="", server_default=""),
)
"""Dashboard users (passwords hashed with argon2id); a user sees the projects linked below."""

user_projects = Table(
    "user_projects",
    metadata,
    Column("user_id", ID, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    Column("project_id", ID, ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True),
    # a project admin manages the project's users on the dashboard
    Column("is_admin", Boolean(), nullable=False, default=False, server_default=false()),
)

web_sessions = Table(
    "web_sessions",
    metadata,
    # SHA-256 of the cookie's random token: a leaked table does not log anyone in
    Column("token_hash", String(64), primary_key=True),
    Column("user_id", ID, ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("csrf_token", String(64), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("expires_at", UTCDateTime(), nullable=False),
)

# --- notifications (migration 0006) ---------------------------------------------------
# Columns added to existing tables: checks.nag_interval / escalate_after / escalate_to (repeats and
# escalation), channels.is_default (project default routing), alerts.facts (what the message is
# rendered from at delivery), notifications.claim_token (the claim a sender must still hold).
checks.append_column(Column("nag_interval", Integer(), nullable=True))
checks.append_column(Column("escalate_after", Integer(), nullable=True))
checks.append_column(Column("escalate_to", String(2000), nullable=False, default="", server_default=""))
channels.append_column(Column("is_default", Boolean(), nullable=False, default=False, server_default="0"))
alerts.append_column(Column("facts", Text(), nullable=True))
notifications.append_column(Column("claim_token", String(36), nullable=True))

maintenance_windows = Table(
    "maintenance_windows",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("project_id", ID, ForeignKey("projects.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("check_id", ID, ForeignKey("checks.id", ondelete="CASCADE"), nullable=True, index=True),
    Column("name", String(100), nullable=False, default=""),
    # one-off: [starts_at, ends_at); recurring: each tick of (schedule, dialect, tz) + duration seconds
    Column("starts_at", UTCDateTime(), nullable=True),
    Column("ends_at", UTCDateTime(), nullable=True),
    Column("schedule", String(200), nullable=True),
    Column("dialect", String(10), nullable=False, default="unix"),
    Column("tz", String(64), nullable=False, default="UTC"),
    Column("duration", Integer(), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    # the end of the latest occurrence whose summary was queued (claimed by a conditional update)
    Column("summarized_until", UTCDateTime(), nullable=True),
)
"""Maintenance windows: alerts raised inside one are recorded but not sent; a summary
goes out when the window ends."""
