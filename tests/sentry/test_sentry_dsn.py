"""Every project has a Sentry DSN: ``monitor project create`` and the first ``serve`` print it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.sentry.conftest import Monitor
from tests.support.process import checkout_env


def test_project_create_prints_a_sentry_dsn_on_the_base_url(tmp_path: Path) -> None:
    made = []
    for name in ("payments", "web"):
        proc = subprocess.run(
            [sys.executable, "-m", "monitor", "project", "create", name],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=checkout_env(
                MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'm.db'}",
                MONITOR_BASE_URL="https://cron.example.com/monitor",
            ),
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        made.append(json.loads(proc.stdout))
    keys = []
    for project in made:
        dsn = project["sentry_dsn"]
        scheme, rest = dsn.split("://", 1)
        key, location = rest.split("@", 1)
        assert (scheme, location) == ("https", f"cron.example.com/monitor/{project['id']}")
        assert len(key) == 32 and int(key, 16) >= 0
        keys.append(key)
    assert keys[0] != keys[1]


def test_serve_prints_the_default_projects_dsn_for_the_address_it_serves(monitor: Monitor) -> None:
    assert monitor.dsn == f"http://{monitor.public_key}@127.0.0.1:{monitor.process.port}/1"
    assert monitor.api("GET", "project") == {"id": 1, "name": "default", "sentry_dsn": monitor.dsn}
