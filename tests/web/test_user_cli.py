"""``monitor user create`` (DESIGN §10): prints the user as JSON; password from stdin or env."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.support.process import checkout_env


def _monitor(tmp_path: Path, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=checkout_env(MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'm.db'}", **env),
        check=False,
    )


def test_user_create_links_projects_and_reads_the_password_from_stdin(tmp_path: Path) -> None:
    assert _monitor(tmp_path, "project", "create", "payments").returncode == 0
    assert _monitor(tmp_path, "project", "create", "web").returncode == 0
    made = _monitor(
        tmp_path,
        "user",
        "create",
        "Ops@Example.com",
        "--project",
        "payments",
        "--project",
        "web",
        "--password-stdin",
        stdin="a long enough password\n",
    )
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout) == {"id": 1, "email": "ops@example.com", "projects": ["payments", "web"]}
    # the operator's users administer their projects: they manage the others on the dashboard
    with sqlite3.connect(tmp_path / "m.db") as db:
        assert db.execute("SELECT count(*) FROM user_projects WHERE is_admin").fetchone() == (2,)
    again = _monitor(tmp_path, "user", "create", "ops@example.com", MONITOR_USER_PASSWORD="another password")
    assert again.returncode == 2 and "email: a user with this email exists" in again.stderr


def test_user_create_refuses_bad_input_by_name(tmp_path: Path) -> None:
    unknown = _monitor(
        tmp_path, "user", "create", "a@b.c", "--project", "nope", MONITOR_USER_PASSWORD="password1"
    )
    assert unknown.returncode == 2 and "project: no project named 'nope'" in unknown.stderr
    short = _monitor(tmp_path, "user", "create", "a@b.c", "--password-stdin", stdin="short\n")
    assert short.returncode == 2 and "password:" in short.stderr
    missing = _monitor(tmp_path, "user", "create", "a@b.c")
    assert missing.returncode == 2 and "--password-stdin" in missing.stderr
    bad = _monitor(tmp_path, "user", "create", "not-an-email", MONITOR_USER_PASSWORD="password1")
    assert bad.returncode == 2 and "email:" in bad.stderr
