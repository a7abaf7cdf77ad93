"""Charge once per tick, guarded by the scheduler's fencing token (``MONITOR_FENCING_TOKEN``).

Run by ``monitor scheduler`` (see ``jobs.toml``). A lease with a TTL can be held by two
processes at once: a holder that stalls (GC pause, SIGSTOP, a VM migration) past its TTL
loses the lease, another replica takes it with a higher token and runs the next tick, and
then the stalled one wakes up and carries on as if nothing happened. Only the resource can
stop that stale write, so the resource keeps the highest token it has seen and refuses
lower ones (Martin Kleppmann, "How to do distributed locking", 2016).

The resource here is a SQLite file (``BILLING_DB``, default ``billing.db``):

* ``fence``: the highest token seen;
* ``charges``: one row per ``MONITOR_IDEMPOTENCY_KEY`` (``<job>:<tick>``), so a retried
  attempt of the same tick never charges twice;
* ``rejections``: every stale write refused.

Exit status: 0 charged (or already charged), 3 refused as stale. Environment:
``BILLING_WORK_SECONDS`` (default 0) simulates work between reading the token and writing;
``BILLING_TRACE`` (optional) is a file to which ``start <token> <pid> <tick>`` is appended.
Standard library only.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time

SCHEMA = """
CREATE TABLE IF NOT EXISTS fence (resource TEXT PRIMARY KEY, token INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS charges (
    idempotency_key TEXT PRIMARY KEY, tick TEXT NOT NULL, token INTEGER NOT NULL, attempt INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rejections (tick TEXT NOT NULL, token INTEGER NOT NULL, highest INTEGER NOT NULL);
"""


def charge(db: str, key: str, tick: str, token: int, attempt: int) -> int | None:
    """Write the charge if ``token`` is not older than the highest seen; else the highest token."""
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    try:
        conn.executescript(SCHEMA)
        conn.execute("BEGIN IMMEDIATE")  # one writer at a time: read-compare-write is atomic
        row = conn.execute("SELECT token FROM fence WHERE resource = 'billing'").fetchone()
        if row is not None and token < row[0]:
            conn.execute("INSERT INTO rejections VALUES (?, ?, ?)", (tick, token, row[0]))
            conn.execute("COMMIT")
            return int(row[0])
        conn.execute(
            "INSERT INTO fence VALUES ('billing', ?)"
            " ON CONFLICT (resource) DO UPDATE SET token = excluded.token",
            (token,),
        )
        conn.execute("INSERT OR IGNORE INTO charges VALUES (?, ?, ?, ?)", (key, tick, token, attempt))
        conn.execute("COMMIT")
        return None
    finally:
        conn.close()


def main() -> int:
    token = int(os.environ["MONITOR_FENCING_TOKEN"])
    tick = os.environ["MONITOR_SCHEDULED_TIME"]
    key = os.environ["MONITOR_IDEMPOTENCY_KEY"]
    attempt = int(os.environ.get("MONITOR_ATTEMPT", "1"))
    trace = os.environ.get("BILLING_TRACE")
    if trace:
        with open(trace, "a") as f:
            f.write(f"start {token} {os.getpid()} {tick}\n")
    print(f"billing {tick} with fencing token {token}", flush=True)
    time.sleep(float(os.environ.get("BILLING_WORK_SECONDS", "0")))
    highest = charge(os.environ.get("BILLING_DB", "billing.db"), key, tick, token, attempt)
    if highest is not None:
        print(f"refused: fencing token {token} is older than {highest}; nothing charged", flush=True)
        return 3
    print(f"charged {key}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
