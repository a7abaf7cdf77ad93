"""partial indexes on pings' Idempotency-Key and runs' rid

Most pings carry no ``Idempotency-Key`` and most runs no ``rid``, yet both indexes took an
entry for every row: keyed by check, each entry lands on a random index page, so every ingest
transaction dirtied one more page per ping for each of them (SQLite writes each dirtied page to
its WAL at commit; PostgreSQL logs a full page image after each checkpoint). Only rows with a
key are ever looked up by it (``key IN (…)``, ``rid = ANY(…)``), which both planners answer
from the partial index.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06 15:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEXES = (
    ("ix_pings_check_idem", "pings", ["check_id", "idempotency_key"], "idempotency_key IS NOT NULL"),
    ("ix_runs_check_rid", "runs", ["check_id", "rid"], "rid IS NOT NULL"),
)


def upgrade() -> None:
    for name, table, columns, where in _INDEXES:
        op.drop_index(name, table_name=table)
        op.create_index(
            name, table, columns, sqlite_where=sa.text(where), postgresql_where=sa.text(where)
        )


def downgrade() -> None:
    for name, table, columns, _ in _INDEXES:
        op.drop_index(name, table_name=table)
        op.create_index(name, table, columns)
