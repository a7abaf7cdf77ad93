"""pings.finished_at: when a finish ping's run really ended, as its client said

A finish delivered late (a stalled reporter, a monitor that did not answer) carries
``finished=`` (docs/design.md §5); the instant it named, after the bounds the monitor applies,
is kept with the ping (null: the run ended at the ping's arrival).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02 05:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("pings") as batch:
        batch.add_column(sa.Column("finished_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pings") as batch:
        batch.drop_column("finished_at")
