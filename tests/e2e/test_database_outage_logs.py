"""While the database is unreachable the log stays readable.

A real ``monitor serve`` (API, evaluator, notifier, liveness) on a throwaway PostgreSQL
database, sweeping every 0.2 s. The database then refuses every connection (``ALLOW_CONNECTIONS
false`` and its sessions terminated) for a few seconds: each loop logs its first failure with a
traceback and then at most one counted line per 30 s (before: a traceback every round, about
750 lines/s). When connections are allowed again, ``database reachable again`` is logged.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest

from tests.support.process import MonitorProcess, _admin, checkout_env, throwaway_postgres, wait_until
from tests.support.receivers import free_port

RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (ERROR|WARNING|INFO) [\w.]+: ")
pytestmark = pytest.mark.e2e

OUTAGE_S = 3.0


def test_an_unreachable_database_logs_a_few_lines_not_a_flood(tmp_path: Path) -> None:
    with throwaway_postgres("monitor_dbdown") as database_url:
        name = database_url.rsplit("/", 1)[1]
        env = checkout_env(
            MONITOR_DATABASE_URL=database_url,
            MONITOR_LEASE_TTL="1",
            MONITOR_EVALUATE_INTERVAL="0.2",
            MONITOR_API_KEY="dbdown-api-key-0123456789",
        )
        with MonitorProcess.serve(free_port(), env=env, cwd=tmp_path, logs=tmp_path, name="serve") as proc:
            proc.wait_healthy()
            time.sleep(1.0)  # leases taken, a few sweeps done
            before = len(proc.stderr.splitlines())
            asyncio.run(_admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
            try:
                asyncio.run(
                    _admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")
                )
                time.sleep(OUTAGE_S)
                during = proc.stderr.splitlines()[before:]
            finally:
                asyncio.run(_admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
            wait_until(
                lambda: "database reachable again" in proc.stderr,
                timeout=15,
                what=f"a recovery line\n{proc.describe()}",
            )
            # a record's first line: "<date> <time> LEVEL logger: message" (monitor.settings.LOG_FORMAT)
            records = [line for line in during if RECORD.match(line)]
            failures = [line for line in records if " ERROR " in line[:40]]
            # one record with a traceback per loop that touches the database (evaluator sweep,
            # rebalance, lease session, liveness, notifier round, reminders), not one per round
            assert 1 <= len(failures) <= 10, "\n".join(records)
            assert len(records) <= 20, "\n".join(records)
            assert proc.proc is not None and proc.proc.poll() is None, proc.describe()
