"""issue-6 bundled scheduler (tick claims)

One row per (job, tick), claimed with INSERT ... ON CONFLICT DO NOTHING under the job's lease
(DESIGN §8).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-29 13:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_claims",
        sa.Column("job", sa.String(length=100), nullable=False),
        sa.Column("tick", sa.DateTime(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("token", sa.BigInteger(), nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=True),
        sa.Column("reason", sa.String(length=32), nullable=True),
        sa.Column("claimed_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("exit_status", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("job", "tick", name=op.f("pk_job_claims")),
    )


def downgrade() -> None:
    op.drop_table("job_claims")
