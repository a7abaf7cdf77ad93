"""Keyword filters on checks and the scheme of each ping (Healthchecks' fields)

checks.filter_subject, filter_body, filter_http_body, filter_default_fail, start_kw,
success_kw, failure_kw: a migrated check whose job reports "FAIL" in its body or in an email
subject records a failure; pings.scheme tells HTTP from email pings.

Revision ID: 0011
Revises: 0009
Create Date: 2026-12-01 21:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FLAGS = ("filter_subject", "filter_body", "filter_http_body", "filter_default_fail")
KEYWORDS = ("start_kw", "success_kw", "failure_kw")


def upgrade() -> None:
    with op.batch_alter_table("checks", schema=None) as batch_op:
        for name in FLAGS:
            batch_op.add_column(sa.Column(name, sa.Boolean(), nullable=False, server_default=sa.false()))
        for name in KEYWORDS:
            batch_op.add_column(sa.Column(name, sa.String(length=200), nullable=False, server_default=""))
    with op.batch_alter_table("pings", schema=None) as batch_op:
        batch_op.add_column(sa.Column("scheme", sa.String(length=10), nullable=False, server_default="http"))


def downgrade() -> None:
    with op.batch_alter_table("pings", schema=None) as batch_op:
        batch_op.drop_column("scheme")
    with op.batch_alter_table("checks", schema=None) as batch_op:
        for name in (*FLAGS, *KEYWORDS):
            batch_op.drop_column(name)
