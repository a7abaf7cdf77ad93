"""``monitor import-crontab`` on a real multi-user ``/etc/crontab``-style file, against a real
``monitor serve`` process (issue 7): checks are upserted through the management API, the crontab
comes back rewritten, unreadable lines are reported with their numbers and left unchanged, and a
rewritten line really reports to its check when cron's shell runs it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.clients.conftest import Monitor

pytestmark = pytest.mark.e2e

# 15 lines: comments and environment, 6 jobs of 5 users, 4 lines it cannot import, 1 already pinging
ETC_CRONTAB = """\
# /etc/crontab: system-wide crontab (Debian's, plus the jobs of a few users)
SHELL=/bin/sh
PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin
17 *\t* * *\troot    cd / && run-parts --report /etc/cron.hourly
25 6\t* * *\troot\ttest -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.daily )
CRON_TZ=Europe/Berlin
0 3 * * * postgres /usr/local/bin/backup.sh --full > /var/log/backup.log 2>&1
@daily   www-data /usr/bin/php /var/www/app/cron.php
*/15 9-17 * * 1-5 alice /home/alice/bin/sync-reports.py 'quarterly report'
@reboot  root /usr/local/bin/warm-cache
0 25 * * * bob /home/bob/bin/report.sh
30 2 * * * carol
0 5 * * * root date +%Y-%m-%d > /tmp/today
0 4 * * * root curl -fsS http://127.0.0.1:9/ping/0b5ad9c4-3b1f-4a52-8a4e-6f3a1c2f6d11
45 23 * * 0 dave echo "weekly $(hostname)" >/dev/null
"""


def _import(
    monitor: Monitor, path: Path, *extra: str, system: bool = True
) -> subprocess.CompletedProcess[str]:
    form = ["--system"] if system else []
    return subprocess.run(
        [sys.executable, "-m", "monitor", "import-crontab", str(path), *form, *extra],
        env=monitor.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_import_crontab_upserts_checks_and_rewrites_the_file(monitor: Monitor, tmp_path: Path) -> None:
    path = tmp_path / "crontab"
    path.write_text(ETC_CRONTAB)
    assert len(ETC_CRONTAB.splitlines()) == 15
    proc = _import(monitor, path, "--prefix", "host1")
    assert proc.returncode == 1, proc.stderr  # some lines were left unchanged
    report = proc.stderr

    # unreadable lines: reported with their numbers, left exactly as they were
    for number, reason in (
        (10, "@reboot has no schedule to watch"),
        (11, "schedule '0 25 * * *'"),
        (12, "no command after the user field"),
        (13, "unescaped %"),
    ):
        assert f"line {number}: " in report and reason in report, report
    assert "line 14: already pings a monitor" in report
    assert "6 jobs imported, 4 lines left unchanged" in report

    out = proc.stdout.splitlines()
    assert out[0] == f"MONITOR_BASE_URL={monitor.base}"
    original = ETC_CRONTAB.splitlines()
    body = out[1:]
    assert len(body) == 15
    for number in (1, 2, 3, 6, 10, 11, 12, 13, 14):
        assert body[number - 1] == original[number - 1]

    checks = {
        c["slug"]: c
        for c in monitor.api("GET", "checks/?tag=crontab")["checks"]
        if c["slug"].startswith("host1-")
    }
    assert set(checks) == {
        "host1-run-parts-cron-hourly",
        "host1-run-parts-cron-daily",
        "host1-backup",
        "host1-cron",
        "host1-sync-reports",
        "host1-echo",
    }
    backup = checks["host1-backup"]
    assert (backup["schedule"], backup["tz"], backup["grace"]) == ("0 3 * * *", "Europe/Berlin", 3600)
    hourly = checks["host1-run-parts-cron-hourly"]
    assert (hourly["schedule"], hourly["tz"], hourly["grace"]) == ("17 * * * *", "UTC", 900)
    assert checks["host1-sync-reports"]["grace"] == 225
    assert "user-alice" in checks["host1-sync-reports"]["tags"]
    assert body[6] == (
        f"0 3 * * * postgres monitor-run --check {backup['uuid']} -- "
        "sh -c '/usr/local/bin/backup.sh --full > /var/log/backup.log 2>&1'"
    )

    # importing again updates the same checks (unique slug), it does not duplicate them
    again = _import(monitor, path, "--prefix", "host1")
    assert again.stdout == proc.stdout
    assert (
        len(
            [c for c in monitor.api("GET", "checks/?tag=crontab")["checks"] if c["slug"].startswith("host1-")]
        )
        == 6
    )

    # the rewritten line runs as cron would run it (sh -c, the crontab's environment): the job's
    # check gets its start and its exit status
    weekly = body[14]
    assert weekly.startswith("45 23 * * 0 dave monitor-run --check ")
    command = weekly.split(" dave ", 1)[1]
    bin_dir = str(Path(sys.executable).parent)
    env = monitor.env(PATH=f"{bin_dir}:/usr/bin:/bin")
    env.pop("MONITOR_PING_KEY")
    ran = subprocess.run(["/bin/sh", "-c", command], env=env, capture_output=True, timeout=30, check=False)
    assert ran.returncode == 0, ran.stderr
    pings = monitor.pings(checks["host1-echo"]["uuid"])
    assert [(p["type"], p["exit_status"]) for p in pings] == [("start", None), ("success", 0)]


def test_dry_run_needs_no_key_and_creates_nothing(monitor: Monitor, tmp_path: Path) -> None:
    path = tmp_path / "crontab"
    path.write_text("*/5 * * * * /opt/poll.sh\n")
    env = monitor.env()
    env.pop("MONITOR_API_KEY")
    proc = subprocess.run(
        [sys.executable, "-m", "monitor", "import-crontab", str(path), "--dry-run", "--prefix", "dry"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1] == "*/5 * * * * monitor-run --check dry-poll -- sh -c '/opt/poll.sh'"
    assert monitor.api("GET", "checks/?slug=dry-poll")["checks"] == []


def test_missing_file_and_missing_key_are_clear_errors(monitor: Monitor, tmp_path: Path) -> None:
    missing = _import(monitor, tmp_path / "nope")
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    path = tmp_path / "crontab"
    path.write_text("0 1 * * * root /x\n")
    env = monitor.env()
    env.pop("MONITOR_API_KEY")
    proc = subprocess.run(
        [sys.executable, "-m", "monitor", "import-crontab", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "api_key:" in proc.stderr


def test_curl_style_line_reports_start_and_exit_status_when_run(monitor: Monitor, tmp_path: Path) -> None:
    path = tmp_path / "crontab"
    path.write_text("CRON_TZ=Asia/Tokyo\n*/10 * * * * cd /tmp && sh -c 'printf \"the output\"; exit 4'\n")
    proc = _import(monitor, path, "--style", "curl", "--prefix", "curlstyle", system=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "CRON_TZ=Asia/Tokyo"  # no MONITOR_BASE_URL line: the URLs are in the commands
    [check] = monitor.api("GET", "checks/?slug=curlstyle-printf")["checks"]
    assert (check["schedule"], check["tz"], check["grace"]) == ("*/10 * * * *", "Asia/Tokyo", 150)
    command = lines[1].removeprefix("*/10 * * * * ")
    ran = subprocess.run(["/bin/sh", "-c", command], capture_output=True, timeout=30, check=False)
    assert ran.returncode == 0, ran.stderr  # the last curl's status, as in any crontab curl line
    pings = monitor.pings(check["uuid"])
    assert [(p["type"], p["exit_status"]) for p in pings] == [("start", None), ("fail", 4)]
    assert pings[0]["rid"] == pings[1]["rid"]
