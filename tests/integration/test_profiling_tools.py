"""The diagnostics in ``benchmarks/profiling`` still run against the code they measure.

They have no goal to check; these runs, tiny and on SQLite, only make sure a change to the
services or the storage that they call breaks here rather than in the next profiling session.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(script: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "profiling" / script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_ingest_cost_reports_per_ping_cost_and_statements() -> None:
    out = run("ingest_cost.py", "--checks", "20", "--batch", "4", "--batches", "5", "--statements")
    assert "sqlite, batches of 4: wall" in out
    assert "µs/ping" in out
    assert "INSERT INTO pings" in out


def test_ingest_cost_profiles_the_transaction_inline() -> None:
    out = run("ingest_cost.py", "--checks", "10", "--batch", "2", "--batches", "3", "--cprofile", "--top=5")
    assert "under cProfile" in out
    assert "function calls" in out


def test_sweep_statements_shows_a_sweeps_timeline() -> None:
    out = run("sweep_statements.py", "--backend", "sqlite", "--checks", "200", "--due", "10", "--sweeps", "1")
    assert "sqlite, 200 checks, 10 due" in out
    assert "UPDATE checks" in out
    assert "statements," in out
