"""``monitor import-crontab`` on a real multi-user ``/etc/crontab``-style file, against a real
``monitor serve`` process: checks are upserted through the management API, the crontab
comes back rewritten, unreadable lines are reported with their numbers and left unchanged, and a
rewritten line really reports to its check when cron's shell runs it.
"""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from monitor.cli import crontab_import
from monitor.domain.cron import crontab as domain_crontab
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


MONITOR_RUN = str(Path(sys.executable).parent / "monitor-run")


def _unhashed(slug: str) -> str:
    """A slug without its stable (user, command) hash: ``host1-backup-1a2b3c`` → ``host1-backup``."""
    return re.sub(r"-[0-9a-f]{6}$", "", slug)


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
    # cronie: its CRON_TZ= sets the zone of the jobs after it (Debian's cron ignores it)
    proc = _import(monitor, path, "--prefix", "host1", "--cron", "cronie", "--tz", "UTC")
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
        _unhashed(c["slug"]): c
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
        f"0 3 * * * postgres {MONITOR_RUN} --check {backup['uuid']} -- "
        "/bin/sh -c '/usr/local/bin/backup.sh --full > /var/log/backup.log 2>&1'"
    )

    # importing again updates the same checks (unique slug), it does not duplicate them
    again = _import(monitor, path, "--prefix", "host1", "--cron", "cronie", "--tz", "UTC")
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
    assert weekly.startswith(f"45 23 * * 0 dave {MONITOR_RUN} --check ")
    command = weekly.split(" dave ", 1)[1]
    env = monitor.env(PATH="/usr/bin:/bin")  # cron's PATH: monitor-run is called by its absolute path
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
    line = proc.stdout.splitlines()[1]
    expected = rf"\*/5 \* \* \* \* {MONITOR_RUN} --check dry-poll-[0-9a-f]{{6}} -- /bin/sh -c '/opt/poll.sh'"
    assert re.fullmatch(expected, line), line
    slug = line.split("--check ")[1].split()[0]
    assert monitor.api("GET", f"checks/?slug={slug}")["checks"] == []


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
    proc = _import(
        monitor, path, "--style", "curl", "--prefix", "curlstyle", "--cron", "cronie", system=False
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "CRON_TZ=Asia/Tokyo"  # no MONITOR_BASE_URL line: the URLs are in the commands
    checks = monitor.api("GET", "checks/?tag=crontab")["checks"]
    [check] = [c for c in checks if c["slug"].startswith("curlstyle-printf-")]
    assert (check["schedule"], check["tz"], check["grace"]) == ("*/10 * * * *", "Asia/Tokyo", 150)
    command = lines[1].removeprefix("*/10 * * * * ")
    ran = subprocess.run(["/bin/sh", "-c", command], capture_output=True, timeout=30, check=False)
    assert ran.returncode == 0, ran.stderr  # the last curl's status, as in any crontab curl line
    pings = monitor.pings(check["uuid"])
    assert [(p["type"], p["exit_status"]) for p in pings] == [("start", None), ("fail", 4)]
    assert pings[0]["rid"] == pings[1]["rid"]


def test_reimport_after_adding_a_line_keeps_every_job_on_its_check(monitor: Monitor, tmp_path: Path) -> None:
    """Slugs were numbered by position (echo, echo-2 …), so a line added at the top
    handed the existing jobs each other's checks."""
    tag = f"re{uuid.uuid4().hex[:6]}"
    first = "0 1 * * * echo one\n0 2 * * * echo two\n"
    path = tmp_path / "crontab"
    path.write_text(first)
    code, out, err = _import_here(monitor, path, "--prefix", tag)
    assert code == 0, err
    assert "warning: monitor-run is not on the crontab's PATH" in err  # but called by its path
    before = _bound_checks(out)

    path.write_text("*/5 * * * * echo zero\n" + first)
    code, again, err = _import_here(monitor, path, "--prefix", tag)
    assert code == 0, err
    after = _bound_checks(again)
    assert after[1:] == before
    for uuid_, expected in zip(after, ["*/5 * * * *", "0 1 * * *", "0 2 * * *"], strict=True):
        assert monitor.check(uuid_)["schedule"] == expected

    # the rewritten crontab plus a new line: rewritten lines are recognised and keep their check
    path.write_text("0 3 * * * echo three\n" + "\n".join(again.splitlines()[1:]) + "\n")
    code, third, err = _import_here(monitor, path, "--prefix", tag)
    assert code == 0, err
    assert f"already reports to check {after[0]}" in err
    assert _bound_checks(third)[1:] == after


def test_reads_stdin_and_refuses_six_fields_and_user_fields_unless_forced(monitor: Monitor) -> None:
    text = "0 0 3 * * * /opt/six.sh\n0 1 * * * root /opt/y.sh\n"

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "monitor",
                "import-crontab",
                "-",
                "--dry-run",
                "--monitor-run",
                "monitor-run",
                *extra,
            ],
            input=text,
            env=monitor.env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    refused = run()
    assert refused.returncode == 1, refused.stderr  # both lines left as they were
    assert "line 1: looks like a 6-field schedule" in refused.stderr and "--force" in refused.stderr
    assert "line 2: 'root' looks like a user field" in refused.stderr and "--system" in refused.stderr
    assert refused.stdout.splitlines()[1:] == text.splitlines()
    assert "0 jobs parsed, 2 lines left unchanged" in refused.stderr

    proc = run("--force")
    assert proc.returncode == 0, proc.stderr
    assert "warning: line 1: looks like a 6-field schedule" in proc.stderr
    assert "warning: line 2: 'root' looks like a user field" in proc.stderr
    assert "'monitor-run' is not on the crontab's PATH (/usr/bin:/bin): cron will not find it" in proc.stderr
    assert proc.stdout.splitlines()[2].startswith("0 1 * * * monitor-run --check ")


def _import_here(monitor: Monitor, path: Path, *extra: str) -> tuple[int, str, str]:
    """``monitor import-crontab`` in this process (no interpreter start): status, stdout, stderr."""
    parser = argparse.ArgumentParser()
    crontab_import.add_parser(parser.add_subparsers())
    args = parser.parse_args(
        ["import-crontab", str(path), "--base-url", monitor.base, "--api-key", monitor.api_key, *extra]
    )
    out, err = io.StringIO(), io.StringIO()
    code = crontab_import.run(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _bound_checks(crontab_text: str) -> list[str]:
    return re.findall(r"--check ([0-9a-f-]{36}) ", crontab_text)


def test_removing_one_of_two_lines_with_the_same_command_keeps_the_other_on_its_check(
    monitor: Monitor, tmp_path: Path
) -> None:
    tag = f"tw{uuid.uuid4().hex[:6]}"
    path = tmp_path / "crontab"
    path.write_text("0 4 * * * /bin/foo\n0 5 * * * /bin/foo\n")
    code, out, err = _import_here(monitor, path, "--prefix", tag)
    assert code == 0, err
    four, five = _bound_checks(out)
    assert four != five

    for kept, bound in (("0 5 * * * /bin/foo\n", five), ("0 4 * * * /bin/foo\n", four)):
        path.write_text(kept)
        code, again, err = _import_here(monitor, path, "--prefix", tag)
        assert code == 0, err
        assert _bound_checks(again) == [bound], err  # its own check, never the other job's
        assert monitor.check(bound)["schedule"] == kept.split(" /")[0]

    # the original file again: the same two checks
    path.write_text("0 4 * * * /bin/foo\n0 5 * * * /bin/foo\n")
    code, out, err = _import_here(monitor, path, "--prefix", tag)
    assert code == 0, err
    assert _bound_checks(out) == [four, five]
    # a line added between them, or the two swapped, changes nothing either
    path.write_text("0 5 * * * /bin/foo\n0 1 * * * /bin/bar\n0 4 * * * /bin/foo\n")
    code, out, err = _import_here(monitor, path, "--prefix", tag)
    assert code == 0, err
    assert _bound_checks(out)[::2] == [five, four]


def test_twin_lines_imported_by_the_position_scheme_keep_the_second_on_its_check(
    monitor: Monitor, tmp_path: Path
) -> None:
    """The first of two lines with one command used to get the plain (user, command) hash and
    the second its schedule's: with the first line removed, the second took the first's check."""
    tag = f"lg{uuid.uuid4().hex[:6]}"
    twins = "0 4 * * * /bin/foo\n0 5 * * * /bin/foo\n"
    now = datetime.now(UTC)
    plain = [
        x.slug
        for x in domain_crontab.parse_crontab("0 4 * * * /bin/foo\n", system=False, now=now, prefix=tag)
    ]
    hashed = [x.slug for x in domain_crontab.parse_crontab(twins, system=False, now=now, prefix=tag)]
    # what the earlier version created for the two lines
    first = monitor.create_check(name=plain[0], slug=plain[0], schedule="0 4 * * *")
    second = monitor.create_check(name=hashed[1], slug=hashed[1], schedule="0 5 * * *")
    path = tmp_path / "crontab"
    path.write_text("0 5 * * * /bin/foo\n")
    code, out, err = _import_here(monitor, path, "--prefix", tag)
    assert code == 0, err
    assert _bound_checks(out) == [second["uuid"]], err
    assert monitor.check(first["uuid"])["schedule"] == "0 4 * * *"  # not taken over
