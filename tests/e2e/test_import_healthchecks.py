"""``monitor import-healthchecks`` between two real ``monitor serve`` processes: the "source"
speaks Healthchecks' v3 API (ours is a superset of it), the target is filled through its own
API. Idempotent (a second run updates, creates nothing) and says what it could not carry over."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.process import MonitorProcess, checkout_env
from tests.support.receivers import free_port

pytestmark = pytest.mark.e2e
SOURCE_KEY = "source-hc-api-key-0123456789abcdef"
TARGET_KEY = "target-api-key-0123456789abcdef"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MonitorProcess, MonitorProcess]]:
    processes = []
    for name, key in (("source", SOURCE_KEY), ("target", TARGET_KEY)):
        workdir = tmp_path_factory.mktemp(name)
        port = free_port()
        env = checkout_env(
            MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{workdir / 'monitor.db'}",
            MONITOR_API_KEY=key,
            MONITOR_BASE_URL=f"http://127.0.0.1:{port}",
        )
        processes.append(MonitorProcess.serve(port, env=env, cwd=workdir, logs=workdir, name=name).start())
    try:
        for process in processes:
            process.wait_healthy(timeout=120)  # a loaded machine starts slowly
        yield processes[0], processes[1]
    finally:
        for process in processes:
            process.close()


def _api(base: str, key: str, method: str, path: str, body: Any = None) -> Any:
    r = httpx.request(method, f"{base}/api/v3/{path}", json=body, headers={"X-Api-Key": key}, timeout=10)
    assert r.status_code < 300, (r.status_code, r.text)
    return r.json()


def _import(
    source: MonitorProcess, target: MonitorProcess, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor",
            "import-healthchecks",
            "--url",
            source.base + "/api/v3/",
            "--api-key",
            SOURCE_KEY,
        ],
        env=checkout_env(MONITOR_BASE_URL=target.base, MONITOR_API_KEY=TARGET_KEY),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_import_copies_checks_idempotently_and_reports_the_rest(
    servers: tuple[MonitorProcess, MonitorProcess], tmp_path: Path
) -> None:
    source, target = servers
    src = lambda method, path, body=None: _api(source.base, SOURCE_KEY, method, path, body)  # noqa: E731
    mail = src("POST", "channels/", {"name": "ops mail", "url": "mailto://ops@example.org"})
    pager = src("POST", "channels/", {"name": "pager", "url": "pagerduty://key@token"})
    _api(
        target.base, TARGET_KEY, "POST", "channels/", {"name": "ops mail", "url": "mailto://ops@example.net"}
    )
    src("POST", "checks/", {"name": "backup", "slug": "backup", "tags": "db nightly", "desc": "pg_dump",
                            "timeout": 86400, "grace": 900, "channels": mail["id"]})  # fmt: skip
    src("POST", "checks/", {"name": "billing", "slug": "billing", "schedule": "0 3 * * 1-5",
                            "tz": "Europe/Riga", "grace": 600, "manual_resume": True, "methods": "POST",
                            "channels": f"{mail['id']},{pager['id']}"})  # fmt: skip
    paused = src("POST", "checks/", {"name": "Old Report", "timeout": 3600})
    src("POST", f"checks/{paused['uuid']}/pause")
    src(
        "POST", "checks/", {"name": "fast", "slug": "fast", "schedule": "*/5 * * * * *", "dialect": "seconds"}
    )

    first = _import(source, target, tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr  # something was not carried over
    assert "imported 3 checks (3 created, 0 updated), 1 skipped" in first.stdout, first.stdout
    notes = [line for line in first.stdout.splitlines() if line.startswith("not carried over: ")]
    assert any("channel 'pager'" in n and "pagerduty://" in n for n in notes), notes
    assert any("check 'billing': channel 'pager'" in n for n in notes), notes
    assert any("check 'fast'" in n for n in notes), notes  # 6 fields: Healthchecks reads OnCalendar

    got = {c["slug"]: c for c in _api(target.base, TARGET_KEY, "GET", "checks/")["checks"]}
    assert set(got) == {"backup", "billing", "old-report"}
    channels = {c["name"]: c["id"] for c in _api(target.base, TARGET_KEY, "GET", "channels/")["channels"]}
    backup, billing = got["backup"], got["billing"]
    assert (backup["name"], backup["tags"], backup["desc"], backup["timeout"], backup["grace"]) == (
        "backup", "db nightly", "pg_dump", 86400, 900)  # fmt: skip
    assert backup["channels"] == channels["ops mail"]
    assert (billing["schedule"], billing["tz"], billing["dialect"], billing["grace"]) == (
        "0 3 * * 1-5", "Europe/Riga", "unix", 600)  # fmt: skip
    assert billing["manual_resume"] is True and billing["methods"] == "POST"
    assert billing["channels"] == channels["ops mail"]
    assert got["old-report"]["name"] == "Old Report" and got["old-report"]["status"] == "paused"

    second = _import(source, target, tmp_path)
    assert "imported 3 checks (0 created, 3 updated), 1 skipped" in second.stdout, second.stdout
    again = {c["slug"]: c["uuid"] for c in _api(target.base, TARGET_KEY, "GET", "checks/")["checks"]}
    assert again == {slug: c["uuid"] for slug, c in got.items()}


def test_import_says_why_it_cannot_run(
    servers: tuple[MonitorProcess, MonitorProcess], tmp_path: Path
) -> None:
    source, target = servers
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "monitor",
            "import-healthchecks",
            "--url",
            source.base,
            "--api-key",
            "wrong-key-000000000000",
        ],
        env=checkout_env(MONITOR_BASE_URL=target.base, MONITOR_API_KEY=TARGET_KEY),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "source checks" in bad.stderr and "401" in bad.stderr
