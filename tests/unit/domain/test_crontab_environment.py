"""What a crontab's environment lines mean to the cron daemon, and what the import keeps of it.

Debian's cron runs each command as ``$SHELL -c COMMAND`` and schedules every job in its own
(the system's) zone: ``TZ=`` reaches only the job's environment and ``CRON_TZ=`` is not
supported; cronie honours ``CRON_TZ=``. Lines cron would run with another meaning than the
author's (a 6-field schedule) are left alone unless forced.
"""

from __future__ import annotations

import shlex
import subprocess
from datetime import UTC, datetime

from monitor.domain.cron import crontab

NOW = datetime(2026, 7, 1, tzinfo=UTC)


def jobs(text: str, **options: object) -> list[crontab.Job]:
    lines = crontab.parse_crontab(text, system=False, now=NOW, **options)  # type: ignore[arg-type]
    return [line for line in lines if isinstance(line, crontab.Job)]


def test_the_crontabs_shell_runs_the_rewritten_command() -> None:
    text = 'SHELL=/bin/bash\n* * * * * [[ -n "$HOME" ]] && echo {alpha,beta}\n'
    (job,) = jobs(text)
    assert job.shell == "/bin/bash"
    line = crontab.rewrite(job, "CHECK", runner="/opt/monitor-run")
    assert line.startswith("* * * * * /opt/monitor-run --check CHECK -- /bin/bash -c ")
    # what monitor-run executes: the words after `--`, as cron's shell splits the line
    words = shlex.split(line.removeprefix("* * * * * "))
    argv = words[words.index("--") + 1 :]
    assert argv == ["/bin/bash", "-c", '[[ -n "$HOME" ]] && echo {alpha,beta}']
    ran = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert (ran.returncode, ran.stdout) == (0, "alpha beta\n")


def test_without_a_shell_line_commands_run_with_bin_sh() -> None:
    (job,) = jobs("0 1 * * * /opt/x.sh\n")
    assert job.shell == "/bin/sh"
    assert crontab.rewrite(job, "C", runner="monitor-run").endswith("-- /bin/sh -c '/opt/x.sh'")


def test_path_mailto_and_tz_lines_are_kept_as_written() -> None:
    text = 'PATH=/usr/local/bin:/usr/bin:/bin\nMAILTO="ops@example.com"\nTZ=Asia/Tokyo\n0 3 * * * /opt/x\n'
    lines = crontab.parse_crontab(text, system=False, now=NOW, default_tz="Europe/Paris")
    kept = [line for line in lines if isinstance(line, crontab.Kept)]
    assert [k.text for k in kept] == text.splitlines()[:3]


def test_tz_never_moves_the_schedule() -> None:
    text = "TZ=Asia/Tokyo\n0 3 * * * /opt/x\n"
    for flavor in crontab.FLAVORS:
        lines = crontab.parse_crontab(text, system=False, now=NOW, flavor=flavor, default_tz="Europe/Paris")
        (job,) = [line for line in lines if isinstance(line, crontab.Job)]
        assert job.tz == "Europe/Paris", flavor  # the daemon's zone, not TZ's
        note = lines[0].note  # type: ignore[union-attr]
        assert note is not None and "TZ only sets the jobs' environment" in note


def test_cron_tz_is_honoured_only_for_cronie() -> None:
    text = "CRON_TZ=Asia/Tokyo\n0 3 * * * /opt/x\n"
    debian = crontab.parse_crontab(text, system=False, now=NOW, default_tz="Europe/Paris")
    assert [j.tz for j in debian if isinstance(j, crontab.Job)] == ["Europe/Paris"]
    assert "CRON_TZ is ignored by Debian's cron" in (debian[0].note or "")  # type: ignore[union-attr]
    cronie = crontab.parse_crontab(text, system=False, now=NOW, flavor="cronie", default_tz="Europe/Paris")
    assert [j.tz for j in cronie if isinstance(j, crontab.Job)] == ["Asia/Tokyo"]


def test_a_six_field_line_is_refused_unless_forced() -> None:
    (refused,) = crontab.parse_crontab("0 0 3 * * * /opt/six.sh\n", system=False, now=NOW)
    assert isinstance(refused, crontab.Unreadable), refused
    assert "6-field schedule" in refused.reason and "--force" in refused.reason
    (forced,) = crontab.parse_crontab("0 0 3 * * * /opt/six.sh\n", system=False, now=NOW, force=True)
    assert isinstance(forced, crontab.Job) and "6-field schedule" in forced.warnings[0]
    # in a system crontab the sixth field lands in the user's place: no user, never imported
    for force in (False, True):
        (line,) = crontab.parse_crontab("0 0 3 * * * root /opt/six.sh\n", system=True, now=NOW, force=force)
        assert isinstance(line, crontab.Unreadable) and "6-field schedule" in line.reason


def test_tz_note_never_names_a_cron_tz_zone_that_was_rejected() -> None:
    text = "CRON_TZ=Mars/Olympus\nTZ=Asia/Tokyo\n0 3 * * * /opt/x\n"
    lines = crontab.parse_crontab(text, system=False, now=NOW, flavor="cronie", default_tz="Europe/Paris")
    cron_tz, tz, job = lines
    assert isinstance(job, crontab.Unreadable) and "Mars/Olympus" in job.reason
    assert isinstance(cron_tz, crontab.Kept) and cron_tz.note is not None
    assert "unknown time zone 'Mars/Olympus'" in cron_tz.note and "left unchanged" in cron_tz.note
    assert isinstance(tz, crontab.Kept) and tz.note is not None
    assert "schedules them in Mars/Olympus" not in tz.note
    assert "not a known zone" in tz.note and "left unchanged" in tz.note
