"""``MONITOR_LOG_LEVEL`` holds for the whole life of ``monitor serve``, with one worker or several.

Litestar's default logging configuration reset the root logger to INFO once the app started:
WARNING still showed every lease and delivery line, and DEBUG showed nothing after start-up.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.support.process import MonitorProcess, checkout_env, curl_api, throwaway_postgres
from tests.support.receivers import free_port

pytestmark = pytest.mark.e2e
API_KEY = "log-level-api-key-0123456789abcdef"


def _levels_logged(tmp_path: Path, level: str, database_url: str, *flags: str) -> set[str]:
    port = free_port()
    env = checkout_env(MONITOR_DATABASE_URL=database_url, MONITOR_API_KEY=API_KEY, MONITOR_LOG_LEVEL=level)
    process = MonitorProcess.serve(port, env=env, cwd=tmp_path, logs=tmp_path, name=f"serve-{level}")
    process.argv.extend(flags)
    try:
        process.start()
        process.wait_healthy(timeout=120)  # a loaded machine starts slowly
        # work that logs at INFO (the lease lines) and DEBUG once the app runs
        status, _ = curl_api(process.base, "POST", "/api/v3/checks/", API_KEY, {"name": "logged"})
        assert status == 201
        time.sleep(2.5)
        assert process.terminate() == 0
    finally:
        process.close()
    return set(re.findall(r" (DEBUG|INFO|WARNING|ERROR) [\w.]+: ", process.stderr))


def test_warning_keeps_info_lines_out_and_debug_lets_them_in(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'monitor.db'}"
    assert _levels_logged(tmp_path, "WARNING", url) <= {"WARNING", "ERROR"}
    assert {"DEBUG", "INFO"} <= _levels_logged(tmp_path, "DEBUG", url)


def test_worker_processes_log_at_the_level_set(tmp_path: Path) -> None:
    with throwaway_postgres("monitor_e2e_loglevel") as url:
        assert _levels_logged(tmp_path, "WARNING", url, "--workers", "2") <= {"WARNING", "ERROR"}
        assert "INFO" in _levels_logged(tmp_path, "INFO", url, "--workers", "2")
