"""Command-line errors are one clear line, never a traceback ."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.process import checkout_env


def _monitor(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=checkout_env(MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'm.db'}", **env),
        timeout=60,
        check=False,
    )


def test_a_short_api_key_is_refused_clearly(tmp_path: Path) -> None:
    for proc in (
        _monitor(tmp_path, "project", "create", "x", "--api-key", "short"),
        _monitor(tmp_path, "serve", "--port", "1", MONITOR_API_KEY="short"),
    ):
        assert proc.returncode == 2, proc.stderr
        assert "api_key: must be 16-128 printable ASCII characters" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_an_api_key_in_use_is_refused_clearly(tmp_path: Path) -> None:
    key = "a-key-in-use-0123456789"
    assert _monitor(tmp_path, "project", "create", "one", "--api-key", key).returncode == 0
    proc = _monitor(tmp_path, "project", "create", "two", "--api-key", key)
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith("api_key: already in use (choose another key)")
    assert "Traceback" not in proc.stderr and "INSERT" not in proc.stderr


def test_a_malformed_setting_names_the_variable(tmp_path: Path) -> None:
    proc = _monitor(tmp_path, "migrate", MONITOR_SHARDS="many")
    assert proc.returncode == 2
    assert "MONITOR_SHARDS" in proc.stderr and "Traceback" not in proc.stderr
