"""``monitor scheduler --check`` verifies that every job's program can be started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.process import checkout_env


def _check(tmp_path: Path, jobs: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "jobs.toml"
    path.write_text(jobs)
    return subprocess.run(
        [sys.executable, "-m", "monitor", "scheduler", "--jobs", str(path), "--check"],
        env=checkout_env(PATH="/usr/bin:/bin"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_check_refuses_a_missing_or_unexecutable_program(tmp_path: Path) -> None:
    script = tmp_path / "not-executable.sh"
    script.write_text("echo hi\n")
    jobs = (
        '[[jobs]]\nname = "ok"\nschedule = "* * * * *"\ncommand = ["true"]\n'
        '[[jobs]]\nname = "typo"\nschedule = "* * * * *"\ncommand = ["backpu.sh", "--all"]\n'
        f'[[jobs]]\nname = "noexec"\nschedule = "* * * * *"\ncommand = ["{script}"]\n'
        '[[jobs]]\nname = "gone"\nschedule = "* * * * *"\ncommand = ["/opt/nowhere/bill"]\n'
        '[[jobs]]\nname = "string"\nschedule = "* * * * *"\ncommand = "backpu.sh | tee x"\n'
        '[[jobs]]\nname = "ownpath"\nschedule = "* * * * *"\ncommand = ["monitor-test-tool"]\n'
        f'[jobs.env]\nPATH = "{tmp_path}"\n'
    )
    tool = tmp_path / "monitor-test-tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    proc = _check(tmp_path, jobs)
    assert proc.returncode == 1, proc.stderr
    errors = [json.loads(line)["error"] for line in proc.stderr.splitlines() if line.startswith("{")]
    assert errors == [
        "jobs[1].command: 'backpu.sh' is not found on PATH (/usr/bin:/bin)",
        f"jobs[2].command: {script} is not an executable file",
        "jobs[3].command: /opt/nowhere/bill does not exist",
    ]
    # the report is printed all the same; a string command needs only its shell (sh)
    assert [j["name"] for j in json.loads(proc.stdout)["jobs"]] == [
        "ok",
        "typo",
        "noexec",
        "gone",
        "string",
        "ownpath",
    ]


def test_check_passes_when_every_program_is_found(tmp_path: Path) -> None:
    proc = _check(tmp_path, '[[jobs]]\nname = "ok"\nschedule = "* * * * *"\ncommand = "echo hi"\n')
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_check_piped_into_a_reader_that_stops_early_reports_no_database_problem(tmp_path: Path) -> None:
    # `monitor scheduler --check | head -1`: the reader closes the pipe; that is no database
    # failure, and the command ends as a plain pipeline member does (SIGPIPE's status, quietly)
    path = tmp_path / "jobs.toml"
    path.write_text('[[jobs]]\nname = "ok"\nschedule = "* * * * *"\ncommand = ["true"]\n')
    read, write = os.pipe()
    os.close(read)  # nobody reads: the first write fails with EPIPE
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "monitor", "scheduler", "--jobs", str(path), "--check", "--count", "1000"],
            env=checkout_env(PATH="/usr/bin:/bin"),
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert "MONITOR_DATABASE_URL" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 141, proc.stderr
