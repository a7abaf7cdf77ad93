"""``monitor serve --workers N`` on SQLite: refused with one clear line (one writer per file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.cli import main


def test_serve_refuses_several_workers_on_sqlite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MONITOR_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'monitor.db'}")
    assert main(["serve", "--workers", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("monitor: --workers (MONITOR_WORKERS): more than 1 needs PostgreSQL"), err
    assert "\n" not in err
    assert not (tmp_path / "monitor.db").exists()  # refused before touching the database
