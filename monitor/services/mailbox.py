"""Email ping recipients: does an address name a check (Healthchecks' ``manage.py smtpd``)?"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from monitor.storage import tables as t


async def recipient_exists(
    engine: AsyncEngine, *, uuid: str | None = None, ping_key: str | None = None, slug: str | None = None
) -> bool:
    """Whether a check answers to ``uuid``, or to ``slug`` in the project whose ping key is ``ping_key``.

    Args:
        engine: the database.
        uuid: a check's uuid in canonical lower-case form; or
        ping_key, slug: a project's ping key and a check's slug.

    Returns:
        ``True`` when exactly such a check exists (a read; nothing is locked or written).
    """
    async with engine.connect() as conn:
        if uuid is not None:
            query = select(t.checks.c.id).where(t.checks.c.uuid == uuid)
        else:
            query = (
                select(t.checks.c.id)
                .join(t.projects, t.projects.c.id == t.checks.c.project_id)
                .where(t.projects.c.ping_key == ping_key)
                .where(t.checks.c.slug == slug)
            )
        return (await conn.execute(query.limit(1))).first() is not None
