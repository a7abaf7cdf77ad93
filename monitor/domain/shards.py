"""Evaluator shards: which shard a check belongs to (DESIGN §6).

Pure: the value depends only on the check's public UUID and the shard count, so every
process computes the same shard (Python's ``hash()`` is salted per process and must not be
used).
"""

from __future__ import annotations

import uuid as uuid_module

LEASE_PREFIX = "shard-"
"""Lease names of evaluator shards: ``shard-0`` … ``shard-<count-1>``."""


def shard_of(check_uuid: str, count: int) -> int:
    """The shard of a check: ``uuid.int % count`` (DESIGN §6).

    Args:
        check_uuid: the check's public UUID, in any form :class:`uuid.UUID` accepts.
        count: ``MONITOR_SHARDS`` (at least 1).

    Raises:
        ValueError: ``check_uuid`` is not a UUID or ``count`` is below 1.
    """
    if count < 1:
        raise ValueError(f"shard count must be at least 1, got {count}")
    return uuid_module.UUID(check_uuid).int % count


def lease_name(index: int) -> str:
    """The lease that owns shard ``index``: ``shard-<index>``."""
    return f"{LEASE_PREFIX}{index}"


def lease_names(count: int) -> list[str]:
    """Every shard lease name for ``count`` shards, in shard order."""
    return [lease_name(i) for i in range(count)]
