"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29 10:43:56.915885
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "leases",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=True),
        sa.Column("token", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_leases")),
    )
    op.create_table(
        "liveness",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("roles", sa.String(length=100), nullable=False),
        sa.Column("renewed_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_liveness")),
    )
    op.create_table(
        "projects",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("ping_key", sa.String(length=64), nullable=False),
        sa.Column("badge_key", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_projects")),
        sa.UniqueConstraint("badge_key", name=op.f("uq_projects_badge_key")),
        sa.UniqueConstraint("ping_key", name=op.f("uq_projects_ping_key")),
    )
    op.create_table(
        "api_keys",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("project_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("read_only", sa.Boolean(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_api_keys_project_id_projects"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_keys_project_id"), ["project_id"], unique=False)

    op.create_table(
        "channels",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("project_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("kinds", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_channels_project_id_projects"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_channels")),
    )
    with op.batch_alter_table("channels", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_channels_project_id"), ["project_id"], unique=False)

    op.create_table(
        "checks",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("project_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("slug", sa.String(length=100), nullable=True),
        sa.Column("tags", sa.String(length=500), nullable=False),
        sa.Column("desc", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("timeout", sa.Integer(), nullable=False),
        sa.Column("schedule", sa.String(length=200), nullable=True),
        sa.Column("tz", sa.String(length=64), nullable=False),
        sa.Column("dialect", sa.String(length=10), nullable=False),
        sa.Column("grace", sa.Integer(), nullable=False),
        sa.Column("max_runtime", sa.Integer(), nullable=False),
        sa.Column("failure_threshold", sa.Integer(), nullable=False),
        sa.Column("recovery_threshold", sa.Integer(), nullable=False),
        sa.Column("early_tolerance", sa.Integer(), nullable=False),
        sa.Column("methods", sa.String(length=10), nullable=False),
        sa.Column("manual_resume", sa.Boolean(), nullable=False),
        sa.Column("badge_uuid", sa.String(length=36), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("watch_from", sa.DateTime(), nullable=True),
        sa.Column("judged_until", sa.DateTime(), nullable=True),
        sa.Column("last_run_ping_at", sa.DateTime(), nullable=True),
        sa.Column("bad_streak", sa.Integer(), nullable=False),
        sa.Column("good_streak", sa.Integer(), nullable=False),
        sa.Column("episode_key", sa.String(length=200), nullable=True),
        sa.Column("episode_count", sa.Integer(), nullable=False),
        sa.Column("late_in_episode", sa.Boolean(), nullable=False),
        sa.Column("last_missed_tick", sa.DateTime(), nullable=True),
        sa.Column("pending_tick", sa.DateTime(), nullable=True),
        sa.Column("next_due", sa.DateTime(), nullable=True),
        sa.Column("last_ping_at", sa.DateTime(), nullable=True),
        sa.Column("n_pings", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_checks_project_id_projects"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_checks")),
        sa.UniqueConstraint("badge_uuid", name=op.f("uq_checks_badge_uuid")),
        sa.UniqueConstraint("uuid", name=op.f("uq_checks_uuid")),
    )
    with op.batch_alter_table("checks", schema=None) as batch_op:
        batch_op.create_index("ix_checks_next_due", ["next_due"], unique=False)
        batch_op.create_index(batch_op.f("ix_checks_project_id"), ["project_id"], unique=False)
        batch_op.create_index(
            "uq_checks_project_slug",
            ["project_id", "slug"],
            unique=True,
            sqlite_where=sa.text("slug IS NOT NULL"),
            postgresql_where=sa.text("slug IS NOT NULL"),
        )

    op.create_table(
        "alerts",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("project_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("check_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=24), nullable=False),
        sa.Column("scheduled", sa.DateTime(), nullable=True),
        sa.Column("run_id", sa.String(length=36), nullable=True),
        sa.Column("rid", sa.String(length=36), nullable=True),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("title", sa.String(length=300), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("token", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["check_id"], ["checks.id"], name=op.f("fk_alerts_check_id_checks"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_alerts_project_id_projects"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alerts")),
        sa.UniqueConstraint("project_id", "check_id", "key", name="uq_alerts_check_key"),
    )
    with op.batch_alter_table("alerts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_alerts_check_id"), ["check_id"], unique=False)

    op.create_table(
        "check_channels",
        sa.Column("check_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("channel_id", sa.String(length=36), nullable=False),
        sa.ForeignKeyConstraint(
            ["channel_id"],
            ["channels.id"],
            name=op.f("fk_check_channels_channel_id_channels"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["check_id"], ["checks.id"], name=op.f("fk_check_channels_check_id_checks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("check_id", "channel_id", name=op.f("pk_check_channels")),
    )
    op.create_table(
        "flips",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("check_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("up", sa.Integer(), nullable=True),
        sa.Column("reason", sa.String(length=12), nullable=False),
        sa.Column("token", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["check_id"], ["checks.id"], name=op.f("fk_flips_check_id_checks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_flips")),
    )
    with op.batch_alter_table("flips", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_flips_check_id"), ["check_id"], unique=False)

    op.create_table(
        "pings",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("check_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.Column("scheduled", sa.DateTime(), nullable=True),
        sa.Column("rid", sa.String(length=36), nullable=True),
        sa.Column("run_id", sa.String(length=36), nullable=True),
        sa.Column("exit_status", sa.Integer(), nullable=True),
        sa.Column("duration", sa.Float(), nullable=True),
        sa.Column("method", sa.String(length=10), nullable=False),
        sa.Column("remote_addr", sa.String(length=64), nullable=False),
        sa.Column("ua", sa.String(length=200), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=True),
        sa.Column("body_size", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("response_status", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["check_id"], ["checks.id"], name=op.f("fk_pings_check_id_checks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pings")),
        sa.UniqueConstraint("check_id", "n", name="uq_pings_check_n"),
    )
    with op.batch_alter_table("pings", schema=None) as batch_op:
        batch_op.create_index("ix_pings_check_idem", ["check_id", "idempotency_key"], unique=False)

    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("check_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("rid", sa.String(length=36), nullable=True),
        sa.Column("scheduled", sa.DateTime(), nullable=False),
        sa.Column("first_ping_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("finish_kind", sa.String(length=10), nullable=True),
        sa.Column("exit_status", sa.Integer(), nullable=True),
        sa.Column("late", sa.Boolean(), nullable=False),
        sa.Column("duplicate", sa.Boolean(), nullable=False),
        sa.Column("overlap", sa.Boolean(), nullable=False),
        sa.Column("timed_out", sa.Boolean(), nullable=False),
        sa.Column("outcome", sa.String(length=12), nullable=True),
        sa.ForeignKeyConstraint(
            ["check_id"], ["checks.id"], name=op.f("fk_runs_check_id_checks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index("ix_runs_check_rid", ["check_id", "rid"], unique=False)
        batch_op.create_index("ix_runs_check_scheduled", ["check_id", "scheduled"], unique=False)
        batch_op.create_index(
            "ix_runs_open",
            ["check_id"],
            unique=False,
            sqlite_where=sa.text("outcome IS NULL"),
            postgresql_where=sa.text("outcome IS NULL"),
        )

    op.create_table(
        "tick_marks",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("check_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("scheduled", sa.DateTime(), nullable=False),
        sa.Column("outcome", sa.String(length=12), nullable=False),
        sa.ForeignKeyConstraint(
            ["check_id"], ["checks.id"], name=op.f("fk_tick_marks_check_id_checks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tick_marks")),
        sa.UniqueConstraint("check_id", "scheduled", name="uq_tick_marks_check_scheduled"),
    )
    op.create_table(
        "notifications",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("alert_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("channel_id", sa.String(length=36), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(), nullable=False),
        sa.Column("claimed_until", sa.DateTime(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("sent_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["alert_id"], ["alerts.id"], name=op.f("fk_notifications_alert_id_alerts"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["channel_id"],
            ["channels.id"],
            name=op.f("fk_notifications_channel_id_channels"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notifications")),
        sa.UniqueConstraint("alert_id", "channel_id", name="uq_notifications_alert_channel"),
    )
    with op.batch_alter_table("notifications", schema=None) as batch_op:
        batch_op.create_index("ix_notifications_due", ["status", "next_attempt_at"], unique=False)

    op.create_table(
        "notification_attempts",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("notification_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["notification_id"],
            ["notifications.id"],
            name=op.f("fk_notification_attempts_notification_id_notifications"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notification_attempts")),
    )
    with op.batch_alter_table("notification_attempts", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_notification_attempts_notification_id"), ["notification_id"], unique=False
        )


def downgrade() -> None:

    with op.batch_alter_table("notification_attempts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_notification_attempts_notification_id"))

    op.drop_table("notification_attempts")
    with op.batch_alter_table("notifications", schema=None) as batch_op:
        batch_op.drop_index("ix_notifications_due")

    op.drop_table("notifications")
    op.drop_table("tick_marks")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_runs_open",
            sqlite_where=sa.text("outcome IS NULL"),
            postgresql_where=sa.text("outcome IS NULL"),
        )
        batch_op.drop_index("ix_runs_check_scheduled")
        batch_op.drop_index("ix_runs_check_rid")

    op.drop_table("runs")
    with op.batch_alter_table("pings", schema=None) as batch_op:
        batch_op.drop_index("ix_pings_check_idem")

    op.drop_table("pings")
    with op.batch_alter_table("flips", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_flips_check_id"))

    op.drop_table("flips")
    op.drop_table("check_channels")
    with op.batch_alter_table("alerts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_alerts_check_id"))

    op.drop_table("alerts")
    with op.batch_alter_table("checks", schema=None) as batch_op:
        batch_op.drop_index(
            "uq_checks_project_slug",
            sqlite_where=sa.text("slug IS NOT NULL"),
            postgresql_where=sa.text("slug IS NOT NULL"),
        )
        batch_op.drop_index(batch_op.f("ix_checks_project_id"))
        batch_op.drop_index("ix_checks_next_due")

    op.drop_table("checks")
    with op.batch_alter_table("channels", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_channels_project_id"))

    op.drop_table("channels")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_keys_project_id"))

    op.drop_table("api_keys")
    op.drop_table("projects")
    op.drop_table("liveness")
    op.drop_table("leases")
