"""One real ``monitor serve`` process (SQLite file) for the Sentry SDK tests of this package.

The server is started without ``MONITOR_BASE_URL``: the DSN it prints for the default project
must then name the address it actually serves. Every test uses its own monitor slugs.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.process import MonitorProcess, checkout_env
from tests.support.receivers import free_port

API_KEY = "sentry-tests-api-key-0123456789"
HERE = Path(__file__).resolve().parent


@dataclass
class Monitor:
    """The running server, the default project's API key and Sentry DSN, and API readers."""

    process: MonitorProcess
    api_key: str
    dsn: str

    @property
    def base(self) -> str:
        return self.process.base

    @property
    def project_id(self) -> str:
        return self.dsn.rsplit("/", 1)[1]

    @property
    def public_key(self) -> str:
        return self.dsn.split("://", 1)[1].split("@", 1)[0]

    def api(self, method: str, path: str, body: Any = None) -> Any:
        response = httpx.request(
            method, self.base + "/api/v3/" + path, headers={"X-Api-Key": self.api_key}, json=body, timeout=10
        )
        assert response.status_code < 300, (response.status_code, response.text)
        return response.json()

    def check(self, slug: str) -> dict[str, Any] | None:
        found = self.api("GET", f"checks/?slug={slug}")["checks"]
        return dict(found[0]) if found else None

    def listing(self, check: dict[str, Any], what: str) -> list[dict[str, Any]]:
        """The check's pings, runs or alerts, oldest first."""
        return list(reversed(self.api("GET", f"checks/{check['uuid']}/{what}/")[what]))


def run_python(script: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> str:
    """Run a Python script of this folder with the test interpreter; asserts exit 0, returns stderr."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, str(HERE / script), *args],
        capture_output=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )
    stderr = proc.stderr.decode()
    assert proc.returncode == 0, (
        f"{script} {args} exited {proc.returncode}:\n{proc.stdout.decode()}\n{stderr}"
    )
    return stderr


@pytest.fixture(scope="package")
def monitor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Monitor]:
    workdir = tmp_path_factory.mktemp("sentry-serve")
    port = free_port()
    env = checkout_env(
        MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{workdir / 'monitor.db'}",
        MONITOR_API_KEY=API_KEY,
        MONITOR_EVALUATE_INTERVAL="0.2",
    )
    process = MonitorProcess.serve(port, env=env, cwd=workdir, logs=workdir, name="serve")
    try:
        process.start()
        process.wait_healthy()
        created = next(
            json.loads(line)
            for line in process.stdout.splitlines()
            if line.startswith("{") and "sentry_dsn" in line
        )
        yield Monitor(process=process, api_key=API_KEY, dsn=created["sentry_dsn"])
    finally:
        process.close()
