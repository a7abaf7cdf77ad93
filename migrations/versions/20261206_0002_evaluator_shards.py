"""evaluator shards: checks.shard (+ index on shard, next_due) and the replicas table

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-06 10:00:00

``checks.shard`` is ``uuid.int % MONITOR_SHARDS`` (DESIGN §6). Existing rows are backfilled
here with the ``MONITOR_SHARDS`` of the migrating process (default 16). Since revision 0005
the count is recorded in ``cluster_settings`` by the first process to start, which re-shards
the rows to it; ``monitor reshard N`` changes it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from monitor.domain.shards import shard_of
from monitor.settings import Settings

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BACKFILL_BATCH = 5000


def _shard_count() -> int:
    raw = os.environ.get("MONITOR_SHARDS", "")
    return int(raw) if raw.strip().isdigit() and int(raw) >= 1 else Settings().shards


def upgrade() -> None:
    # NOT NULL with a server default, so SQLite adds the column in place (no table copy).
    with op.batch_alter_table("checks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("shard", sa.Integer(), nullable=False, server_default="0"))
        batch_op.create_index("ix_checks_shard_next_due", ["shard", "next_due"], unique=False)

    bind = op.get_bind()
    checks = sa.table(
        "checks", sa.column("id", sa.Integer()), sa.column("uuid", sa.String()), sa.column("shard")
    )
    count = _shard_count()
    last = 0
    while True:
        rows = bind.execute(
            sa.select(checks.c.id, checks.c.uuid)
            .where(checks.c.id > last)
            .order_by(checks.c.id)
            .limit(BACKFILL_BATCH)
        ).all()
        if not rows:
            break
        bind.execute(
            sa.update(checks)
            .where(checks.c.id == sa.bindparam("b_id"))
            .values(shard=sa.bindparam("b_shard")),
            [{"b_id": cid, "b_shard": shard_of(uuid, count)} for cid, uuid in rows],
        )
        last = rows[-1][0]
    if bind.dialect.name == "postgresql":
        # Every insert names its shard; a forgotten one must fail, not land in shard 0.
        op.alter_column("checks", "shard", server_default=None)

    op.create_table(
        "replicas",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("renewed_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_replicas")),
    )


def downgrade() -> None:
    op.drop_table("replicas")
    with op.batch_alter_table("checks", schema=None) as batch_op:
        batch_op.drop_index("ix_checks_shard_next_due")
        batch_op.drop_column("shard")
