"""Sentry DSN public keys for projects

Each project gets the public key of its Sentry DSN, so that Sentry SDKs' check-ins map to it.
Existing projects get a fresh random key.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 21:00:00
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.add_column(sa.Column("sentry_key", sa.String(length=32), nullable=True))
    bind = op.get_bind()
    projects = sa.table("projects", sa.column("id", sa.Integer()), sa.column("sentry_key", sa.String()))
    for (project_id,) in bind.execute(sa.select(projects.c.id)).all():
        bind.execute(
            projects.update().where(projects.c.id == project_id).values(sentry_key=secrets.token_hex(16))
        )
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.create_unique_constraint(op.f("uq_projects_sentry_key"), ["sentry_key"])


def downgrade() -> None:
    with op.batch_alter_table("projects", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("uq_projects_sentry_key"), type_="unique")
        batch_op.drop_column("sentry_key")
