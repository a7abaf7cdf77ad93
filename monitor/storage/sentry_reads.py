"""SQLAlchemy Core implementation of :class:`~monitor.storage.ports.SentryReads`.

Dialect-neutral lookups on SQLite and PostgreSQL, each by a unique or indexed column
(``projects.sentry_key``, ``projects.id``, ``checks (project_id, slug)``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from monitor.storage import tables as t


class SqlSentryReads:
    """:class:`~monitor.storage.ports.SentryReads` over one unit of work's connection."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def project_of_key(self, sentry_key: str) -> int | None:
        found = (
            await self.conn.execute(select(t.projects.c.id).where(t.projects.c.sentry_key == sentry_key))
        ).scalar_one_or_none()
        return None if found is None else int(found)

    async def project(self, project_id: int) -> tuple[str, str | None] | None:
        p = t.projects.c
        row = (await self.conn.execute(select(p.name, p.sentry_key).where(p.id == project_id))).first()
        return None if row is None else (str(row.name), row.sentry_key)

    async def check_by_slug(self, project_id: int, slug: str) -> dict[str, Any] | None:
        c = t.checks.c
        query = select(t.checks).where(c.project_id == project_id).where(c.slug == slug)
        row = (await self.conn.execute(query)).mappings().first()
        return None if row is None else dict(row)
