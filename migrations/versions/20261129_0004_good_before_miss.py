"""checks.good_before_miss: recovery counting survives a miss that a late run fills in

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29 12:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("checks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("good_before_miss", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("checks", schema=None) as batch_op:
        batch_op.drop_column("good_before_miss")
