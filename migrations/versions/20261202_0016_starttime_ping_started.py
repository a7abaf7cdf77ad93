"""pings.started_at: when a start ping's run really started, as its client said

A start delivered late (a stalled reporter, a monitor that did not answer) carries
``started=`` (docs/design.md §5); the instant it named, after the bounds the monitor applies,
is kept with the ping (null: the run started at the ping's arrival).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02 14:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("pings") as batch:
        batch.add_column(sa.Column("started_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pings") as batch:
        batch.drop_column("started_at")
