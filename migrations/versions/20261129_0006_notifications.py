"""issue-8 notifications (channel defaults, repeats, escalation, maintenance windows, claim tokens)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29 13:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("checks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("nag_interval", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("escalate_after", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("escalate_to", sa.String(2000), nullable=False, server_default=""))
    with op.batch_alter_table("channels", schema=None) as batch_op:
        batch_op.add_column(sa.Column("is_default", sa.Boolean(), nullable=False, server_default="0"))
    with op.batch_alter_table("alerts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("facts", sa.Text(), nullable=True))
    with op.batch_alter_table("notifications", schema=None) as batch_op:
        batch_op.add_column(sa.Column("claim_token", sa.String(36), nullable=True))
    op.create_table(
        "maintenance_windows",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("project_id", ID, nullable=False),
        sa.Column("check_id", ID, nullable=True),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("starts_at", sa.DateTime(), nullable=True),
        sa.Column("ends_at", sa.DateTime(), nullable=True),
        sa.Column("schedule", sa.String(200), nullable=True),
        sa.Column("dialect", sa.String(10), nullable=False),
        sa.Column("tz", sa.String(64), nullable=False),
        sa.Column("duration", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("summarized_until", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_maintenance_windows_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["check_id"], ["checks.id"], name=op.f("fk_maintenance_windows_check_id_checks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_maintenance_windows")),
    )
    op.create_index(
        op.f("ix_maintenance_windows_project_id"), "maintenance_windows", ["project_id"], unique=False
    )
    op.create_index(op.f("ix_maintenance_windows_check_id"), "maintenance_windows", ["check_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_maintenance_windows_check_id"), table_name="maintenance_windows")
    op.drop_index(op.f("ix_maintenance_windows_project_id"), table_name="maintenance_windows")
    op.drop_table("maintenance_windows")
    with op.batch_alter_table("notifications", schema=None) as batch_op:
        batch_op.drop_column("claim_token")
    with op.batch_alter_table("alerts", schema=None) as batch_op:
        batch_op.drop_column("facts")
    with op.batch_alter_table("channels", schema=None) as batch_op:
        batch_op.drop_column("is_default")
    with op.batch_alter_table("checks", schema=None) as batch_op:
        batch_op.drop_column("escalate_to")
        batch_op.drop_column("escalate_after")
        batch_op.drop_column("nag_interval")
