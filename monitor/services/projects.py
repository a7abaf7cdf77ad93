"""Projects and API keys (DESIGN §2, §9, §10). Keys are stored hashed (SHA-256), shown once."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime

from monitor.domain import sentry
from monitor.domain.errors import ValidationError
from monitor.storage import repositories
from monitor.storage.engine import hold_migration_lock
from monitor.storage.unit_of_work import Connection, Engine, UnitOfWork


@dataclass(frozen=True, kw_only=True, slots=True)
class ApiKey:
    """A resolved ``X-Api-Key``: the project it opens and whether it may write."""

    project_id: int
    read_only: bool


def validate_api_key_text(key: str) -> None:
    """DESIGN §9: any string of 16-128 printable ASCII characters."""
    if not 16 <= len(key) <= 128 or not all(33 <= ord(c) <= 126 for c in key):
        raise ValidationError("api_key", "must be 16-128 printable ASCII characters without spaces")


async def create_project(
    conn: Connection,
    name: str,
    now: datetime,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
) -> dict[str, object]:
    """Create a project with a read-write and a read-only key; returns them in clear (once).

    The project also gets the public key of its Sentry DSN; with ``base_url`` (the service's
    public URL, ``MONITOR_BASE_URL``) the answer carries that DSN as ``sentry_dsn``.

    Raises:
        ValidationError: ``api_key`` is not 16-128 printable ASCII characters.

    Long because a project and its two keys are created in one transaction.
    """
    if api_key is not None:
        validate_api_key_text(api_key)
    rw = api_key or secrets.token_urlsafe(24)
    ro = "ro_" + secrets.token_urlsafe(24)
    ping_key = secrets.token_urlsafe(16)
    sentry_key = secrets.token_hex(16)  # 32 hex digits, as Sentry's public keys
    uow = UnitOfWork.joining(conn)
    project_id = await uow.projects.insert(
        {
            "name": name,
            "ping_key": ping_key,
            "badge_key": secrets.token_urlsafe(16),
            "sentry_key": sentry_key,
            "created_at": now,
        }
    )
    await uow.projects.insert_keys(
        [
            {
                "project_id": project_id,
                "key_hash": repositories.hash_key(rw),
                "read_only": False,
                "name": "read-write",
                "created_at": now,
            },
            {
                "project_id": project_id,
                "key_hash": repositories.hash_key(ro),
                "read_only": True,
                "name": "read-only",
                "created_at": now,
            },
        ],
    )
    out: dict[str, object] = {
        "id": project_id,
        "name": name,
        "api_key": rw,
        "api_key_readonly": ro,
        "ping_key": ping_key,
    }
    if base_url is not None:
        out["sentry_dsn"] = sentry.dsn(base_url, sentry_key, project_id)
    return out


async def add_project(
    engine: Engine, name: str, now: datetime, *, api_key: str | None = None, base_url: str | None = None
) -> dict[str, object]:
    """:func:`create_project` in a unit of work of its own (``monitor project create``)."""
    async with UnitOfWork.begin(engine) as uow:
        return await create_project(uow.connection, name, now, api_key=api_key, base_url=base_url)


async def ensure_default_project(
    engine: Engine, now: datetime, *, api_key: str | None = None, base_url: str | None = None
) -> dict[str, object] | None:
    """With no project yet, create ``default`` (its keys returned once); else ``None``.

    On PostgreSQL the count and the creation run under the migration's advisory lock, so API
    replicas started together (compose, Kubernetes) create one default project, not one each
    (or an ``api_key`` conflict that ends all but one).
    """
    async with UnitOfWork.begin(engine) as uow:
        await hold_migration_lock(uow.connection)
        if await count_projects(uow.connection) == 0:
            return await create_project(uow.connection, "default", now, api_key=api_key, base_url=base_url)
    return None


async def count_projects(conn: Connection) -> int:
    """How many projects exist."""
    return await UnitOfWork.joining(conn).projects.count()


async def resolve_api_key(conn: Connection, key: str) -> ApiKey | None:
    """The project and access of an API key given in clear (it is looked up by its SHA-256),
    or ``None`` for a key no project has."""
    found = await UnitOfWork.joining(conn).projects.key(repositories.hash_key(key))
    if found is None:
        return None
    return ApiKey(project_id=found[0], read_only=found[1])


async def authenticate_key(engine: Engine, key: str) -> ApiKey | None:
    """:func:`resolve_api_key` in a read unit of work of its own (the edges' key check)."""
    async with UnitOfWork.read(engine) as uow:
        return await resolve_api_key(uow.connection, key)
