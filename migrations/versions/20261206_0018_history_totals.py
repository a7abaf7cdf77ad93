"""history_totals: deleted pings, alerts and delivery attempts, by label

``/metrics``' ``monitor_pings_total``, ``monitor_alerts_total`` and
``monitor_notification_attempts_total`` counted the stored rows, which retention prunes, so
those counters went down. Whoever deletes such rows now adds their number here
(``monitor/storage/history_totals.py``).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06 13:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "history_totals",
        sa.Column("family", sa.String(length=40), nullable=False),
        sa.Column("label", sa.String(length=24), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("family", "label"),
    )


def downgrade() -> None:
    op.drop_table("history_totals")
