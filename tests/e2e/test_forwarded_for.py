"""The ping log's remote address through a real ``monitor serve`` and curl (DESIGN §5): an
``X-Forwarded-For`` is believed only from ``MONITOR_TRUSTED_PROXIES``. uvicorn's own
proxy-headers handling (which trusts 127.0.0.1 by default) must not rewrite it first."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.process import MonitorProcess, checkout_env
from tests.support.receivers import free_port

pytestmark = pytest.mark.e2e
API_KEY = "forwarded-for-api-key-0123456789"


def _serve(tmp_path: Path, **extra: str) -> Iterator[MonitorProcess]:
    port = free_port()
    env = checkout_env(
        MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'monitor.db'}",
        MONITOR_API_KEY=API_KEY,
        MONITOR_BASE_URL=f"http://127.0.0.1:{port}",
        **extra,
    )
    process = MonitorProcess.serve(port, env=env, cwd=tmp_path, logs=tmp_path, name="serve")
    try:
        process.start()
        process.wait_healthy(timeout=120)  # a loaded machine starts slowly
        yield process
    finally:
        process.close()


def _curl(*args: str) -> str:
    out = subprocess.run(
        ["curl", "-sS", "-m", "10", *args], capture_output=True, text=True, timeout=20, check=True
    )
    return out.stdout


def _remote_addr_of_a_ping(base: str, forwarded_for: str) -> str:
    check = json.loads(
        _curl(f"{base}/api/v3/checks/", "-H", f"X-Api-Key: {API_KEY}", "-d", '{"name": "spoof"}')
    )
    assert _curl(f"{base}/ping/{check['uuid']}", "-H", f"X-Forwarded-For: {forwarded_for}") == "OK"
    pings = json.loads(_curl(f"{base}/api/v3/checks/{check['uuid']}/pings/", "-H", f"X-Api-Key: {API_KEY}"))
    return str(pings["pings"][0]["remote_addr"])


def test_loopback_client_cannot_spoof_its_address_without_trusted_proxies(tmp_path: Path) -> None:
    for process in _serve(tmp_path):
        assert _remote_addr_of_a_ping(process.base, "1.1.1.1") == "127.0.0.1"


def test_a_trusted_proxy_is_believed(tmp_path: Path) -> None:
    for process in _serve(tmp_path, MONITOR_TRUSTED_PROXIES="127.0.0.1"):
        assert _remote_addr_of_a_ping(process.base, "203.0.113.7, 127.0.0.1") == "203.0.113.7"
