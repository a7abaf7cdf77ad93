"""One throwaway PostgreSQL database, one real ``monitor serve`` on it, and ``monitor
scheduler`` replicas started on demand: what the scheduler's process-level tests share
(``tests/e2e/test_scheduler.py``, ``tests/e2e/test_scheduler_failover.py``).

Read back: the ``job_claims`` rows, ``/ready`` (which replica holds ``job-<name>``) and the
monitor's own API (checks, runs, pings): the scheduler reports there like any client.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from tests.support import stalling_scheduler
from tests.support.process import MonitorProcess, checkout_env, curl_api, throwaway_postgres
from tests.support.receivers import free_port

SERVE_LEASE_TTL = "1"
"""``MONITOR_LEASE_TTL`` of the shared ``monitor serve`` (its evaluator's leases), seconds."""
CLAIM_INSTANTS = ("tick", "claimed_at", "started_at", "finished_at")


def parse(text: str) -> datetime:
    """An instant of the API (``…Z``) or of a job's output."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def lines(path: Path) -> list[list[str]]:
    """The words of each line a job appended to ``path`` (none before the first run)."""
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


@dataclass
class Stack:
    """The shared database and server; ``scheduler()`` starts a replica of its own."""

    url: str
    directory: Path
    monitor: MonitorProcess
    api_key: str
    lease_ttl: str
    started: int = 0

    def scheduler(
        self,
        name: str,
        jobs: str,
        *,
        grace: float = 5.0,
        pre_spawn_delay: float = 0.0,
        in_fence_delay: float = 0.0,
        **env: str,
    ) -> MonitorProcess:
        """Start ``monitor scheduler`` on a jobs file holding ``jobs`` (``--shutdown-grace``
        ``grace`` seconds); with ``pre_spawn_delay`` (seconds) it pauses between recording a
        run's start and spawning it, with ``in_fence_delay`` after the spawn inside the fence
        transaction (:mod:`tests.support.stalling_scheduler`)."""
        path = self.directory / f"{name}.toml"
        path.write_text(jobs)
        self.started += 1
        environment = checkout_env(
            MONITOR_DATABASE_URL=self.url,
            MONITOR_BASE_URL=self.monitor.base,
            MONITOR_API_KEY=self.api_key,
            MONITOR_LEASE_TTL=self.lease_ttl,
            MONITOR_EVALUATE_INTERVAL="0.2",  # settings refuse one over TTL/2 (any process)
            MONITOR_SCHEDULER_LIVENESS_INTERVAL="5",
            **env,
        )
        module = "monitor"
        if pre_spawn_delay or in_fence_delay:
            module = "tests.support.stalling_scheduler"
            environment[stalling_scheduler.DELAY_ENV] = str(pre_spawn_delay)
            environment[stalling_scheduler.FENCE_DELAY_ENV] = str(in_fence_delay)
        argv = [
            sys.executable,
            "-m",
            module,
            "scheduler",
            "--jobs",
            str(path),
            "--shutdown-grace",
            str(grace),
        ]
        return MonitorProcess(
            argv, env=environment, cwd=self.directory, logs=self.directory, name=f"{name}{self.started}"
        ).start()

    def api(self, path: str) -> Any:
        status, body = curl_api(self.monitor.base, "GET", path, self.api_key)
        assert status == 200, (path, status, body)
        return body

    def check(self, slug: str) -> dict[str, Any]:
        checks = self.api(f"/api/v3/checks/?slug={slug}")["checks"]
        assert len(checks) == 1, checks  # replicas booting together made one check
        return dict(checks[0])

    def uuid(self, slug: str) -> str:
        return str(self.check(slug)["uuid"])

    def runs(self, slug: str) -> list[dict[str, Any]]:
        return list(self.api(f"/api/v3/checks/{self.uuid(slug)}/runs/?limit=1000")["runs"])

    def pings(self, slug: str) -> list[dict[str, Any]]:
        return list(self.api(f"/api/v3/checks/{self.uuid(slug)}/pings/?limit=1000")["pings"])

    def lease(self, name: str) -> dict[str, Any] | None:
        """The ``/ready`` row of lease ``name`` (``None``: never taken)."""
        status, ready = curl_api(self.monitor.base, "GET", "/ready", None)
        assert status == 200, ready
        return next((row for row in ready["leases"] if row["name"] == name), None)

    def holder_pid(self, job: str) -> tuple[int, int]:
        """(pid, token) of the replica holding ``job-<job>``; (0, 0) while nobody does."""
        row = self.lease(f"job-{job}")
        if row is None or not row["holder"]:
            return 0, 0
        return int(row["holder"].rsplit(":", 1)[1]), int(row["token"])

    def claims(self, job: str) -> list[dict[str, Any]]:
        """The ``job_claims`` rows of ``job`` by tick, their instants aware (UTC)."""

        async def go() -> list[dict[str, Any]]:
            conn = await asyncpg.connect(self.url.replace("postgresql+asyncpg://", "postgresql://"))
            try:
                rows = await conn.fetch("SELECT * FROM job_claims WHERE job = $1 ORDER BY tick", job)
            finally:
                await conn.close()
            out = []
            for r in rows:
                row = dict(r)
                for key in CLAIM_INSTANTS:
                    if row[key] is not None:
                        row[key] = row[key].replace(tzinfo=UTC)
                out.append(row)
            return out

        return asyncio.run(go())


@contextlib.contextmanager
def scheduler_stack(directory: Path, database: str, *, api_key: str, lease_ttl: str) -> Iterator[Stack]:
    """A throwaway database named after ``database`` and a healthy ``monitor serve`` on it, for
    ``with``; schedulers started by the stack use ``lease_ttl`` (seconds, as text)."""
    with throwaway_postgres(database) as url:
        monitor = MonitorProcess.serve(
            free_port(),
            env=checkout_env(
                MONITOR_DATABASE_URL=url,
                MONITOR_API_KEY=api_key,
                MONITOR_LEASE_TTL=SERVE_LEASE_TTL,
                MONITOR_EVALUATE_INTERVAL="0.2",
            ),
            cwd=directory,
            logs=directory,
            name="serve",
        ).start()
        try:
            monitor.wait_healthy()
            yield Stack(url=url, directory=directory, monitor=monitor, api_key=api_key, lease_ttl=lease_ttl)
        finally:
            monitor.close()
