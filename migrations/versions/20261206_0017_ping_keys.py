"""ping_keys: the Idempotency-Keys of pings pruned before their 7 days were over

Retention kept every ping whose ``Idempotency-Key`` was younger than 7 days, so a client that
sends a fresh key with each ping (the bundled Python client does) kept 7 days of pings per
check whatever ``MONITOR_PING_RETENTION`` said. Such a ping is now pruned like any other and
its key (check, kind, key, answer status, arrival) moves here, where the ingest still finds a
repeat; the key itself goes after its 7 days.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "ping_keys",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("check_id", ID, nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=False),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["check_id"], ["checks.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_ping_keys_check_key", "ping_keys", ["check_id", "key"], unique=False)
    op.create_index("ix_ping_keys_received_at", "ping_keys", ["received_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_ping_keys_received_at", table_name="ping_keys")
    op.drop_index("ix_ping_keys_check_key", table_name="ping_keys")
    op.drop_table("ping_keys")
