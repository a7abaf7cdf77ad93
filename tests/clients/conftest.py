"""One real ``monitor serve`` process (SQLite file) shared by the client tests of this package.

Every test names its own checks (fresh slugs), so the tests share the server without seeing
each other. The server keeps at most ``BODY_LIMIT`` bytes of a ping body, so the clients'
"send the last ``Ping-Body-Limit`` bytes" rule is exercised without megabytes of output.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.support.process import MonitorProcess, checkout_env
from tests.support.receivers import free_port

API_KEY = "client-tests-api-key-0123456789"
BODY_LIMIT = 2000


@dataclass
class Monitor:
    """The running server plus the default project's keys, and readers of what it stored."""

    process: MonitorProcess
    api_key: str
    ping_key: str
    readonly_key: str = ""

    @property
    def base(self) -> str:
        return self.process.base

    def api(self, method: str, path: str, body: Any = None) -> Any:
        response = httpx.request(
            method, self.base + "/api/v3/" + path, headers={"X-Api-Key": self.api_key}, json=body, timeout=10
        )
        assert response.status_code < 300, (response.status_code, response.text)
        return response.json()

    def create_check(self, **fields: Any) -> dict[str, Any]:
        fields.setdefault("name", f"check-{uuid.uuid4().hex[:8]}")
        return dict(self.api("POST", "checks/", fields))

    def check(self, uuid_: str) -> dict[str, Any]:
        return dict(self.api("GET", f"checks/{uuid_}"))

    def pings(self, uuid_: str) -> list[dict[str, Any]]:
        """The check's pings, oldest first."""
        return list(reversed(self.api("GET", f"checks/{uuid_}/pings/")["pings"]))

    def body(self, uuid_: str, n: int) -> bytes:
        response = httpx.get(
            f"{self.base}/api/v3/checks/{uuid_}/pings/{n}/body", headers={"X-Api-Key": self.api_key}
        )
        return response.content if response.status_code == 200 else b""

    def runs(self, uuid_: str) -> list[dict[str, Any]]:
        return list(self.api("GET", f"checks/{uuid_}/runs/")["runs"])

    def env(self, **extra: str) -> dict[str, str]:
        """An environment for a client process: base URL and keys of this server."""
        values = {
            "MONITOR_BASE_URL": self.base,
            "MONITOR_API_KEY": self.api_key,
            "MONITOR_PING_KEY": self.ping_key,
            **extra,
        }
        return checkout_env(**values)


@pytest.fixture(scope="package")
def monitor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Monitor]:
    workdir = tmp_path_factory.mktemp("client-serve")
    port = free_port()
    env = checkout_env(
        MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{workdir / 'monitor.db'}",
        MONITOR_API_KEY=API_KEY,
        MONITOR_BASE_URL=f"http://127.0.0.1:{port}",
        MONITOR_PING_BODY_LIMIT=str(BODY_LIMIT),
    )
    process = MonitorProcess.serve(port, env=env, cwd=workdir, logs=workdir, name="serve")
    try:
        process.start()
        process.wait_healthy()
        created = next(
            json.loads(line)
            for line in process.stdout.splitlines()
            if line.startswith("{") and "ping_key" in line
        )
        yield Monitor(
            process=process,
            api_key=API_KEY,
            ping_key=created["ping_key"],
            readonly_key=created["api_key_readonly"],
        )
    finally:
        process.close()
