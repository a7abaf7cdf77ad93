"""Changing the evaluator shard count: ``monitor reshard N`` (DESIGN §6).

The count is recorded once in the database (:mod:`monitor.storage.cluster`); this is the one
way to change it, and it is safe while evaluators run. One transaction:

1. PostgreSQL: lock every evaluator lease row ``FOR UPDATE``. Each fenced evaluator
   transaction reads its shard's row ``FOR SHARE`` first, so this waits for the sweeps in
   flight and holds new ones back until the commit: no sweep straddles the change.
2. Lock the ``cluster_settings`` row and store the new count. Check creation reads that row
   ``FOR SHARE``, so a check created concurrently either commits first (and is re-sharded in
   step 3) or waits and takes its shard from the new count.
3. Re-shard every check: ``shard = uuid.int % N``.
4. Delete the lease rows of shards that no longer exist (``shard-<n>``, ``n >= N``) and the
   legacy ``evaluator`` row; other leases (``job-<name>``) are kept.

Why it is safe: a shard lease guards the checks whose *stored* shard is its index, whatever
the count. A holder of ``shard-2`` keeps evaluating ``checks.shard = 2`` — the new set of
them after the commit. A holder of a deleted ``shard-n`` fails its next fencing check
("no lease row") and steps down. Every evaluator reads the stored count each round and takes
or releases shard leases to match within one ``MONITOR_EVALUATE_INTERVAL``; until then the new
shards are simply not swept yet (evaluation is late by at most a round, never lost).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from monitor import settings
from monitor.domain.errors import ValidationError
from monitor.storage.unit_of_work import Engine, UnitOfWork

logger = logging.getLogger(__name__)

MAX_SHARDS = settings.MAX_SHARDS
"""Upper bound of the shard count (each shard is a lease row and an advisory lock); the same
bound as ``MONITOR_SHARDS`` (:data:`monitor.settings.MAX_SHARDS`)."""


async def reshard(engine: Engine, count: int, now: datetime) -> dict[str, Any]:
    """Set the cluster's shard count to ``count`` and re-shard every check, in one transaction.

    Args:
        engine: the database (migrated).
        count: the new shard count, 1 … :data:`MAX_SHARDS`.
        now: the current instant (aware UTC), stored as ``changed_at``.

    Returns:
        ``{"shards_before": int | None, "shards": int, "checks_moved": int,
        "leases_removed": [names]}``; ``shards_before`` is ``None`` when no count was stored.

    Raises:
        ValidationError: ``count`` is out of range (field ``shards``).
    """
    if not 1 <= count <= MAX_SHARDS:
        raise ValidationError("shards", f"must be between 1 and {MAX_SHARDS}, got {count}")
    async with UnitOfWork.begin(engine) as uow:  # the module docstring's steps, in order
        await uow.shards.lock_evaluator_leases()
        before = await uow.shards.store_count(count, now)
        moved = await uow.shards.rewrite_checks(count)
        removed = await uow.shards.prune_leases(count)
    result: dict[str, Any] = {
        "shards_before": before,
        "shards": count,
        "checks_moved": moved,
        "leases_removed": removed,
    }
    logger.info(
        "resharded %s -> %d shards: %d checks moved, leases removed: %s",
        result["shards_before"],
        count,
        moved,
        ",".join(removed) or "none",
        extra={"action": "resharded", **result},
    )
    return result
