"""Email ping recipients: does an address name a check (Healthchecks' ``manage.py smtpd``)?"""

from __future__ import annotations

from monitor.storage.unit_of_work import Engine, UnitOfWork


async def recipient_exists(
    engine: Engine, *, uuid: str | None = None, ping_key: str | None = None, slug: str | None = None
) -> bool:
    """Whether a check answers to ``uuid``, or to ``slug`` in the project whose ping key is ``ping_key``.

    Args:
        engine: the database.
        uuid: a check's uuid in canonical lower-case form; or
        ping_key, slug: a project's ping key and a check's slug.

    Returns:
        ``True`` when exactly such a check exists (a read; nothing is locked or written).
    """
    async with UnitOfWork.read(engine) as uow:
        return await uow.detection.recipient_exists(uuid=uuid, ping_key=ping_key, slug=slug)
