"""Verdicts: early window default, fleets, too-fast runs, supersession (DESIGN §5)

checks.early_tolerance becomes nullable (null: min(grace, 5 min)); the old implicit default of
60 s was never a user's choice, so it becomes null. New check settings expected_runs and
min_runtime; state for supersession (the last closed episode, the shared superseded alert);
runs.early marks runs bound to the next tick from outside the early window.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 21:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("checks", schema=None) as batch_op:
        batch_op.alter_column("early_tolerance", existing_type=sa.Integer(), nullable=True)
        batch_op.add_column(sa.Column("expected_runs", sa.Integer(), nullable=False, server_default="1"))
        batch_op.add_column(sa.Column("min_runtime", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("episode_from", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("closed_key", sa.String(200), nullable=True))
        batch_op.add_column(sa.Column("closed_from", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("closed_to", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("closed_count", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("superseded_key", sa.String(200), nullable=True))
        batch_op.add_column(sa.Column("superseded_through", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("superseded_count", sa.Integer(), nullable=False, server_default="0"))
    op.execute("UPDATE checks SET early_tolerance = NULL WHERE early_tolerance = 60")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("early", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("early")
    op.execute("UPDATE checks SET early_tolerance = 60 WHERE early_tolerance IS NULL")
    with op.batch_alter_table("checks", schema=None) as batch_op:
        for name in (
            "superseded_count",
            "superseded_through",
            "superseded_key",
            "closed_count",
            "closed_to",
            "closed_from",
            "closed_key",
            "episode_from",
            "min_runtime",
            "expected_runs",
        ):
            batch_op.drop_column(name)
        batch_op.alter_column("early_tolerance", existing_type=sa.Integer(), nullable=False)
