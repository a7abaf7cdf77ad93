"""Counts of history rows that were deleted, so ``/metrics``' ``*_total`` counters never go down.

``monitor_pings_total{kind}``, ``monitor_alerts_total{kind}`` and
``monitor_notification_attempts_total{result}`` are Prometheus counters: ``rate()`` reads any
decrease as a restart. They used to count the stored rows, which retention prunes (and which a
deleted check takes with it), so they fell. Whoever deletes such rows now adds how many, by
label, to ``history_totals`` in the same transaction, and the metrics add those to the stored
rows' counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from monitor.storage import tables as t

PINGS = "pings"
"""Family of deleted pings, labelled by kind."""
ALERTS = "alerts"
"""Family of deleted alerts, labelled by kind."""
ATTEMPTS = "notification_attempts"
"""Family of deleted delivery attempts, labelled ``ok`` or ``error``."""


def result_label(ok: Any) -> str:
    """A delivery attempt's ``ok`` column as the metric's ``result`` label."""
    return "ok" if ok in (True, 1, "1", "true", "True") else "error"


async def add(conn: AsyncConnection, family: str, counts: Mapping[str, int]) -> None:
    """Add ``counts`` (label → rows deleted) to ``family``'s totals (one upsert)."""
    rows = [{"family": family, "label": label, "count": n} for label, n in counts.items() if n]
    if not rows:
        return
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(t.history_totals).values(rows)
    statement = statement.on_conflict_do_update(
        index_elements=["family", "label"],
        set_={"count": t.history_totals.c.count + statement.excluded.count},
    )
    await conn.execute(statement)


async def add_labels(conn: AsyncConnection, family: str, labels: Iterable[str]) -> None:
    """Add one per label occurrence in ``labels`` (the deleted rows' labels) to ``family``."""
    await add(conn, family, Counter(labels))


async def totals(conn: AsyncConnection, family: str) -> dict[str, int]:
    """``family``'s deleted-row counts by label."""
    h = t.history_totals.c
    rows = await conn.execute(select(h.label, h.count).where(h.family == family))
    return {str(label): int(count) for label, count in rows}


async def count_of_check(conn: AsyncConnection, check_id: int) -> None:
    """Before a check is deleted: add its pings, alerts and their attempts to the totals."""
    p, a = t.pings.c, t.alerts.c
    n, at = t.notifications.c, t.notification_attempts.c
    kinds = await conn.execute(select(p.kind, func.count()).where(p.check_id == check_id).group_by(p.kind))
    await add(conn, PINGS, {str(k): int(c) for k, c in kinds})
    kinds = await conn.execute(select(a.kind, func.count()).where(a.check_id == check_id).group_by(a.kind))
    await add(conn, ALERTS, {str(k): int(c) for k, c in kinds})
    results = await conn.execute(
        select(at.ok, func.count())
        .join(t.notifications, n.id == at.notification_id)
        .join(t.alerts, a.id == n.alert_id)
        .where(a.check_id == check_id)
        .group_by(at.ok)
    )
    await add(conn, ATTEMPTS, {result_label(ok): int(c) for ok, c in results})
