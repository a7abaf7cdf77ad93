"""``monitor import-crontab`` round trip under the real Debian ``cron`` daemon.

A system crontab with ``SHELL=/bin/bash``, ``PATH``, ``MAILTO`` and ``TZ`` lines and a bash-only
command (``[[ … ]]``, brace expansion) is imported against a real ``monitor serve``; the
rewritten file goes to ``/etc/cron.d`` (Debian's cron has no option to read another spool
directory) and ``cron -f`` runs it in the foreground. The command must run under bash as cron
would run it unwrapped, and its run must reach the monitor bound to the minute it was due at,
in the daemon's zone (``TZ=`` moves no schedule).

Cron has minute ticks, so this waits for up to two real minutes: ``slow``. It needs root (to
write ``/etc/cron.d``) and the ``cron`` package (``apt-get install cron``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from monitor.cli import crontab_import
from monitor.services.zone_names import canonical_zone
from tests.clients.conftest import Monitor
from tests.support.process import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MONITOR_RUN = str(Path(sys.executable).parent / "monitor-run")


def test_a_bash_crontab_runs_under_real_cron_after_import_and_reports_its_minute(
    monitor: Monitor, tmp_path: Path
) -> None:
    cron = shutil.which("cron") or "/usr/sbin/cron"
    if not os.access(cron, os.X_OK) or os.geteuid() != 0:
        pytest.fail("needs root and Debian's cron daemon (apt-get install cron)")
    out = tmp_path / "out.txt"
    tag = f"crond{uuid.uuid4().hex[:6]}"
    source = tmp_path / "crontab"
    source.write_text(
        "SHELL=/bin/bash\n"
        "PATH=/usr/bin:/bin\n"
        'MAILTO=""\n'
        "TZ=Asia/Tokyo\n"
        f'* * * * * root [[ -n "$HOME" && $SHELL == /bin/bash ]] && echo {{alpha,beta}} "$TZ" >> {out}\n'
    )
    imported = subprocess.run(
        [sys.executable, "-m", "monitor", "import-crontab", str(source), "--system", "--prefix", tag],
        env=monitor.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert imported.returncode == 0, imported.stderr
    rewritten = imported.stdout
    assert 'SHELL=/bin/bash\nPATH=/usr/bin:/bin\nMAILTO=""\nTZ=Asia/Tokyo\n' in rewritten
    assert "-- /bin/bash -c '[[" in rewritten
    (check,) = [c for c in monitor.api("GET", "checks/?tag=crontab")["checks"] if c["slug"].startswith(tag)]
    # the daemon's zone (under its current name: Etc/UTC is stored as UTC), not TZ=Asia/Tokyo
    assert check["tz"] == canonical_zone(crontab_import.system_zone())

    spool = Path("/etc/cron.d") / f"monitor-test-{tag}"  # cron.d names: [A-Za-z0-9_-] only
    spool.write_text(rewritten)
    spool.chmod(0o644)
    daemon = None
    try:
        # one cron daemon per machine (pid file): start ours unless one runs already
        if subprocess.run(["pgrep", "-x", "cron"], capture_output=True, check=False).returncode != 0:
            with (tmp_path / "cron.log").open("wb") as log:  # the daemon keeps its own copy
                daemon = subprocess.Popen([cron, "-f", "-L", "15"], stdout=log, stderr=subprocess.STDOUT)
        started = datetime.now(UTC)
        wait_until(lambda: out.exists() and out.read_text(), timeout=150, interval=0.5, what="cron's run")
        ran = out.read_text().splitlines()[0]
        assert ran == "alpha beta Asia/Tokyo", ran  # bash ran it; TZ reached only the environment

        def finished() -> list[dict[str, object]] | None:
            runs = [r for r in monitor.runs(check["uuid"]) if r["outcome"]]
            return runs or None

        (run, *_) = wait_until(finished, timeout=30, what="the run's report")
    finally:
        spool.unlink(missing_ok=True)
        if daemon is not None:
            daemon.terminate()
            daemon.wait(10)
    log = (tmp_path / "cron.log").read_text(errors="replace") if daemon is not None else ""
    assert run["outcome"] == "on_time" and run["exit_status"] == 0, (run, log)
    scheduled = datetime.fromisoformat(str(run["scheduled"]).replace("Z", "+00:00"))
    assert scheduled.second == 0 and started.replace(second=0, microsecond=0) <= scheduled, run
