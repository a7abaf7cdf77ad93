"""dashboard users: project admins and a per-user time zone

``user_projects.is_admin``: the user administers that project (manages its users on the
dashboard). Existing memberships become admin memberships: they were all made by an operator
with ``monitor user create``, who could already do everything. ``users.tz``: the IANA zone the
dashboard shows times in ("" = UTC).

Revision ID: 0014
Revises: 0012
Create Date: 2026-12-01 21:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("user_projects") as batch:
        batch.add_column(sa.Column("is_admin", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("tz", sa.String(64), nullable=False, server_default=""))
    op.execute(sa.text("UPDATE user_projects SET is_admin = :yes").bindparams(yes=True))


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("tz")
    with op.batch_alter_table("user_projects") as batch:
        batch.drop_column("is_admin")
