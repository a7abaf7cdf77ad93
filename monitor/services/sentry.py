"""Sentry Crons check-ins: the project a DSN key opens, and the check each check-in reports to.

A check-in's ``monitor_config`` creates or updates its check through the check service
(:func:`monitor.services.checks.create_or_upsert` / :func:`~monitor.services.checks.update_check`),
so a configured monitor is validated and planned exactly as a check created through the API.
The ping itself then goes through the ingest writer like every other ping (group commit).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from monitor.domain import sentry
from monitor.domain.errors import Conflict, NotFound, ValidationError
from monitor.domain.sentry import CheckIn, SentryError
from monitor.services import checks
from monitor.storage.unit_of_work import Connection, Engine, UnitOfWork


async def authorize(engine: Engine, project_id: int, key: str | None) -> None:
    """Check that ``key`` is the public key of project ``project_id``'s DSN (a read of its own).

    Raises:
        SentryError: 401 when no key was sent; 403 when it is unknown or another project's.
    """
    if not key:
        raise SentryError(
            401, "sentry_key", "missing authorization information (X-Sentry-Auth header or sentry_key)"
        )
    async with UnitOfWork.read(engine) as uow:
        owner = await uow.sentry.project_of_key(key)
    if owner is None:
        raise SentryError(403, "sentry_key", "unknown public key")
    if owner != project_id:
        raise SentryError(403, "sentry_key", f"the key does not belong to project {project_id}")


async def project_dsn(conn: Connection, project_id: int, base_url: str) -> str | None:
    """The project's Sentry DSN (``None`` if the project has no key), in the caller's unit of work."""
    found = await UnitOfWork.joining(conn).sentry.project(project_id)
    key = found[1] if found is not None else None
    return sentry.dsn(base_url, key, project_id) if key else None


async def project_info(engine: Engine, project_id: int, base_url: str) -> tuple[str, str | None]:
    """``(name, Sentry DSN or None)`` of an existing project (the API key's), in a read of its own.

    Raises:
        NotFound: no such project.
    """
    async with UnitOfWork.read(engine) as uow:
        found = await uow.sentry.project(project_id)
    if found is None:
        raise NotFound("project: no such project")
    name, key = found
    return name, (sentry.dsn(base_url, key, project_id) if key else None)


async def checks_for(
    engine: Engine, project_id: int, check_ins: Sequence[CheckIn], now: datetime, *, shards: int
) -> list[str]:
    """The uuid of each check-in's check, creating or updating checks from ``monitor_config``.

    One write unit of work: if any check-in is refused, its rollback undoes the others'
    upserts (nothing is stored half-way).

    * with a ``monitor_config``: the check of (monitor slug, environment) is created with the
      config (Sentry's defaults for what it leaves out: 1 minute margin, 30 minutes runtime), or
      updated with the settings that differ from it;
    * without: the existing check; a new environment of a known monitor gets its own check
      with the settings of the monitor's ``production`` check (as Sentry adds environments to a
      monitor on first use).

    Raises:
        SentryError: 404 for a monitor that has no check and no config; 400 for a config the
            check service refuses (the field named as Sentry's).
    """
    async with UnitOfWork.begin(engine) as uow:
        return [await _check_for(uow, project_id, check_in, now, shards) for check_in in check_ins]


async def _check_for(uow: UnitOfWork, project_id: int, check_in: CheckIn, now: datetime, shards: int) -> str:
    """The uuid of one check-in's check (:func:`checks_for`), created or updated in ``uow``."""
    conn = uow.connection
    row = await uow.sentry.check_by_slug(project_id, check_in.check_slug)
    try:
        if check_in.config is not None:
            if row is None:
                row = await _create(conn, project_id, check_in, _config_fields(check_in), now, shards)
            else:
                changes = sentry.config_changes(check_in.config, row)
                if changes:
                    await checks.update_check(conn, project_id, row["id"], changes, now)
        elif row is None:
            base = None
            if check_in.environment != sentry.DEFAULT_ENVIRONMENT:
                base = await uow.sentry.check_by_slug(project_id, check_in.monitor_slug)
            if base is None:
                raise SentryError(
                    404,
                    "monitor_slug",
                    f"no monitor {check_in.monitor_slug!r} (environment {check_in.environment}) in "
                    "this project; send a monitor_config to create it",
                )
            row = await _create(conn, project_id, check_in, _copied_fields(base), now, shards)
    except ValidationError as error:
        raise SentryError(400, f"monitor_config.{_sentry_field(error.field)}", error.problem) from None
    except Conflict as error:
        raise SentryError(400, "monitor_slug", str(error)) from None
    return str(row["uuid"])


async def _create(
    conn: Connection,
    project_id: int,
    check_in: CheckIn,
    fields: dict[str, Any],
    now: datetime,
    shards: int,
) -> dict[str, Any]:
    data = {
        "name": check_in.check_name,
        "slug": check_in.check_slug,
        **fields,
        # a concurrent check-in may have created it since we looked: then it is updated instead
        "unique": ["slug"],
    }
    data["tags"] = sentry.merge_tags(
        data.get("tags", ""),
        check_in.config.owner_tag if check_in.config is not None else None,
        check_in.environment_tag,
    )
    check_id, _ = await checks.create_or_upsert(conn, project_id, data, now, shards=shards)
    return (await UnitOfWork.joining(conn).checks.by_ids([check_id]))[check_id]


def _config_fields(check_in: CheckIn) -> dict[str, Any]:
    assert check_in.config is not None
    fields = check_in.config.check_fields()
    fields.setdefault("grace", sentry.DEFAULT_GRACE)
    fields.setdefault("max_runtime", sentry.DEFAULT_MAX_RUNTIME)
    return fields


def _copied_fields(base: dict[str, Any]) -> dict[str, Any]:
    """The schedule settings of another environment's check, its ``env:`` tag left out."""
    fields: dict[str, Any] = {
        name: base[name] for name in ("grace", "max_runtime", "failure_threshold", "recovery_threshold", "tz")
    }
    if base["kind"] == "cron":
        fields.update(schedule=base["schedule"], dialect=base["dialect"])
    else:
        fields["timeout"] = base["timeout"]
    fields["tags"] = " ".join(w for w in base["tags"].split() if not w.startswith("env:"))
    return fields


_FIELDS = {
    "schedule": "schedule.value",
    "timeout": "schedule",
    "tz": "timezone",
    "grace": "checkin_margin",
    "failure_threshold": "failure_issue_threshold",
}


def _sentry_field(name: str) -> str:
    """Our check field's name as the ``monitor_config`` field it came from."""
    return _FIELDS.get(name, name)
