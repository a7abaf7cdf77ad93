"""Hints for checks, read from their latest runs (the rules: :mod:`monitor.domain.hints`).

One query for any number of checks: each cron check's latest
:data:`~monitor.domain.hints.RUNS_CONSIDERED` runs by first-ping arrival, through a window
function (SQLite ≥ 3.25 and PostgreSQL alike).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from monitor.domain import hints as hint_rules
from monitor.domain.cron.explain import explain
from monitor.domain.errors import NotFound, ValidationError
from monitor.storage.unit_of_work import Connection, Engine, UnitOfWork

UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
"""A check's uuid, as ping URLs carry it (any case)."""


async def hints_of(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> dict[int, list[str]]:
    """Each check's hints (an empty list when none).

    Args:
        conn: an open connection.
        rows: check rows (``id``, ``kind``, ``tz``), e.g. from
            :meth:`monitor.storage.ports.CheckStore.by_ids`.

    Returns:
        check id → hint texts, for every id in ``rows``.
    """
    found: dict[int, list[str]] = {int(r["id"]): [] for r in rows}
    cron = {int(r["id"]): r for r in rows if r["kind"] == "cron"}
    if not cron:
        return found
    arrivals: dict[int, list[hint_rules.RunArrival]] = {cid: [] for cid in cron}
    latest = await UnitOfWork.joining(conn).detection.latest_arrivals(list(cron), hint_rules.RUNS_CONSIDERED)
    for check_id, tick, arrived in latest:
        arrivals[int(check_id)].append(hint_rules.RunArrival(tick=tick, arrived=arrived))
    for cid, row in cron.items():
        found[cid] = hint_rules.hints("cron", str(row["tz"]), arrivals[cid])
    return found


async def explain_check(engine: Engine, reference: str, *, count: int, after: datetime) -> dict[str, Any]:
    """``monitor cron explain --check``: a stored cron check's explain document plus its hints.

    Args:
        engine: the database (migrated).
        reference: the check's uuid (any case), or its slug when exactly one check has it
            (slugs are unique within a project, not across projects).
        count: next ticks listed, 1-100.
        after: list ticks strictly after this instant (aware).

    Returns:
        :func:`monitor.domain.cron.explain.explain`'s document (``schedule``, ``tz``, ``dialect``,
        ``fields``, ``description``, ``warnings``, ``next``) plus ``check``
        (``{"uuid", "name", "slug"}``) and ``hints`` (a list of strings, empty when none).

    Raises:
        NotFound: no check has that uuid or slug (field ``check``).
        ValidationError: ``check``: the slug names several checks, or the check is a simple
            one (a period, no cron expression to explain); or from ``explain`` (``count``).
    """
    async with UnitOfWork.read(engine) as uow:
        if UUID_RE.match(reference):
            rows = await uow.detection.checks_named(uuid=reference.lower(), limit=2)
        else:
            rows = await uow.detection.checks_named(slug=reference, limit=2)
        if not rows:
            raise NotFound(f"check: no check has the uuid or slug {reference!r}")
        if len(rows) > 1:
            raise ValidationError(
                "check", f"the slug {reference!r} names several checks (in different projects); give the uuid"
            )
        row = rows[0]
        if row["kind"] != "cron":
            raise ValidationError(
                "check",
                f"{reference!r} is a simple check (a period of {row['timeout']} s), not a cron expression",
            )
        found = (await hints_of(uow.connection, [row]))[int(row["id"])]
    document = explain(
        str(row["schedule"]), dialect=str(row["dialect"]), tz=str(row["tz"]), count=count, after=after
    )
    return {
        **document,
        "check": {"uuid": row["uuid"], "name": row["name"], "slug": row["slug"]},
        "hints": found,
    }
