"""instants as ``timestamp with time zone`` on PostgreSQL

Every instant column held naive UTC (``timestamp``): each value bound was made naive in Python
and each value read was made aware again, two Python calls per instant, and an evaluator sweep
binds and reads about twenty per check (a tenth of its Python time). As ``timestamptz`` the
driver takes and returns aware UTC datetimes itself. The stored instants do not change: each
naive UTC value is read as UTC (``AT TIME ZONE 'UTC'``), whatever the server's ``TimeZone``.
SQLite stores text either way; nothing changes there.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06 18:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS: dict[str, tuple[str, ...]] = {
    "alerts": ("created_at", "scheduled"),
    "api_keys": ("created_at",),
    "channels": ("created_at",),
    "checks": (
        "closed_from",
        "closed_to",
        "created_at",
        "episode_from",
        "judged_until",
        "last_missed_tick",
        "last_ping_at",
        "last_run_ping_at",
        "next_due",
        "pending_tick",
        "superseded_through",
        "watch_from",
    ),
    "cluster_settings": ("changed_at",),
    "flips": ("created_at",),
    "job_claims": ("claimed_at", "finished_at", "started_at", "tick"),
    "leases": ("expires_at",),
    "liveness": ("renewed_at",),
    "maintenance_windows": ("created_at", "ends_at", "starts_at", "summarized_until"),
    "notification_attempts": ("at",),
    "notifications": ("claimed_until", "created_at", "next_attempt_at", "sent_at"),
    "outages": ("ended_at", "started_at"),
    "ping_keys": ("received_at",),
    "pings": ("finished_at", "received_at", "scheduled", "started_at"),
    "projects": ("created_at",),
    "replicas": ("renewed_at",),
    "runs": ("finished_at", "first_ping_at", "scheduled", "started_at"),
    "tick_marks": ("scheduled",),
    "users": ("created_at", "locked_until"),
    "web_sessions": ("created_at", "expires_at"),
}
"""Each table's instant columns (``UTCDateTime`` in ``monitor.storage.tables`` at this revision)."""


def _alter(to: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, columns in _COLUMNS.items():
        changes = ", ".join(
            f'ALTER COLUMN "{column}" TYPE {to} USING "{column}" AT TIME ZONE \'UTC\'' for column in columns
        )
        op.execute(f'ALTER TABLE "{table}" {changes}')


def upgrade() -> None:
    _alter("timestamp with time zone")


def downgrade() -> None:
    _alter("timestamp without time zone")
