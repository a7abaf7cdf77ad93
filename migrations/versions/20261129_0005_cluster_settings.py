"""cluster_settings: the evaluator shard count recorded once in the database; drop the
pre-sharding ``evaluator`` lease row

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29 13:00:00

Before this revision each process trusted its own ``MONITOR_SHARDS``, so replicas configured
differently split the keyspace and left checks in shards nobody held. Now the count lives in
the one-row ``cluster_settings`` table (DESIGN §6). The migration only creates the table: the
first process that starts on the database records its ``MONITOR_SHARDS`` there and re-shards
the existing checks to it in the same transaction (``monitor.storage.cluster.adopt_shard_count``),
so a database upgraded from 0004 ends up consistent whatever count its checks were stored with.

The lease row ``evaluator`` belongs to the single global evaluator lease that sharding replaced
(revision 0002); nothing takes it any more, yet ``/ready`` kept listing it: it is deleted.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "cluster_settings",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("shards", sa.Integer(), nullable=False),
        sa.Column("changed_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cluster_settings")),
    )
    leases = sa.table("leases", sa.column("name", sa.String()))
    op.get_bind().execute(sa.delete(leases).where(leases.c.name == "evaluator"))


def downgrade() -> None:
    op.drop_table("cluster_settings")
