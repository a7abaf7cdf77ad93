"""``monitor serve`` defaults a new user meets."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.process import MonitorProcess, checkout_env, curl_api
from tests.support.receivers import free_port

pytestmark = pytest.mark.e2e

KEY = "serve-defaults-key-0123456789"


def test_ping_urls_follow_the_served_port_without_base_url(tmp_path: Path) -> None:
    port = free_port()
    env = checkout_env(MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'm.db'}", MONITOR_API_KEY=KEY)
    with MonitorProcess.serve(port, env=env, cwd=tmp_path, logs=tmp_path, name="serve") as server:
        server.wait_healthy()
        status, check = curl_api(server.base, "POST", "/api/v3/checks/", KEY, {"name": "x"})
        assert status == 201
        assert check["ping_url"] == f"http://127.0.0.1:{port}/ping/{check['uuid']}"
