"""The pure crontab reader behind ``monitor import-crontab``."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from monitor.domain.cron import crontab

NOW = datetime(2026, 7, 19, 12, 0, tzinfo=UTC)


def _one(text: str, *, system: bool = False) -> crontab.Line:
    [line] = crontab.parse_crontab(text, system=system, now=NOW)
    return line


@pytest.mark.parametrize(
    ("command", "slug"),
    [
        pytest.param("cd / && run-parts --report /etc/cron.hourly", "run-parts-cron-hourly", id="run-parts"),
        pytest.param("/usr/local/bin/backup.sh --full > /var/log/b.log 2>&1", "backup", id="script"),
        pytest.param("/usr/bin/php /var/www/app/cron.php", "cron", id="interpreter"),
        pytest.param("FOO=1 nice -n 10 /opt/x/Job.PL", "job", id="assignment-and-wrapper"),
        pytest.param("test -x /a || ( cd / && run-parts /etc/cron.daily )", "run-parts-cron-daily", id="or"),
        pytest.param('echo "unbalanced', "echo", id="bad-quoting"),
        pytest.param("cd /tmp && sh -c '/opt/x/report.py --all; exit 4'", "report", id="sh-c"),
    ],
)
def test_slug_names_the_program_that_does_the_work(command: str, slug: str) -> None:
    line = _one(f"0 3 * * * {command}")
    # the program's name, then a hash of (user, command) that keeps the slug stable
    assert isinstance(line, crontab.Job) and re.fullmatch(rf"{slug}-[0-9a-f]{{6}}", line.slug), line.slug


def test_user_crontab_job_fields_and_grace_from_the_schedule() -> None:
    line = _one("*/15 * * * * /opt/sync.sh")
    assert isinstance(line, crontab.Job)
    assert (line.schedule, line.tz, line.user, line.command) == ("*/15 * * * *", "UTC", None, "/opt/sync.sh")
    assert line.grace == 225  # a quarter of 15 minutes
    minutely, daily = _one("* * * * * a"), _one("@daily b")
    assert isinstance(minutely, crontab.Job) and minutely.grace == 60  # at least a minute
    assert isinstance(daily, crontab.Job) and daily.grace == 3600  # at most an hour


def test_cronie_cron_tz_sets_the_zone_of_the_following_jobs_and_tz_never_does() -> None:
    lines = crontab.parse_crontab(
        "0 1 * * * a\nTZ=America/New_York\n0 2 * * * b\nCRON_TZ='Europe/Berlin'\n0 3 * * * c\n",
        system=False,
        now=NOW,
        flavor="cronie",
    )
    assert [x.tz for x in lines if isinstance(x, crontab.Job)] == ["UTC", "UTC", "Europe/Berlin"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param("@reboot /x", "@reboot has no schedule to watch", id="reboot"),
        pytest.param("@fortnightly /x", "unknown macro", id="macro"),
        pytest.param("0 25 * * * /x", "schedule '0 25 * * *'", id="hour-out-of-range"),
        pytest.param("0 0 30 2 * /x", "never fires", id="never"),
        pytest.param("0 3 * * *", "not a job line", id="no-command"),
        pytest.param("0 5 * * * date +%Y", "unescaped %", id="percent"),
        pytest.param("CRON_TZ=Mars/Base\n0 1 * * * /x", "tz: unknown time zone", id="zone"),
    ],
)
def test_unreadable_lines_are_reported_with_their_number(text: str, reason: str) -> None:
    last = crontab.parse_crontab(text, system=False, now=NOW, flavor="cronie")[-1]
    assert isinstance(last, crontab.Unreadable), last
    assert last.reason.startswith(f"line {last.line}: ") and reason in last.reason
    assert last.text == text.splitlines()[-1]


def test_system_format_reads_the_user_field() -> None:
    line = _one("17 * * * * root cd / && run-parts /etc/cron.hourly", system=True)
    assert isinstance(line, crontab.Job) and (line.user, line.command) == (
        "root",
        "cd / && run-parts /etc/cron.hourly",
    )
    missing = _one("30 2 * * * carol", system=True)
    assert isinstance(missing, crontab.Unreadable) and "no command after the user field" in missing.reason


def test_slugs_are_unique_within_a_file_and_take_a_prefix() -> None:
    lines = crontab.parse_crontab(
        "0 1 * * * /a/backup.sh\n0 2 * * * /b/backup.sh\n0 3 * * * /b/backup.sh\n0 3 * * * /b/backup.sh\n",
        system=False,
        now=NOW,
        prefix="Web1",
    )
    slugs = [x.slug for x in lines if isinstance(x, crontab.Job)]
    assert len(set(slugs)) == 4 and all(re.fullmatch(r"web1-backup-[0-9a-f]{6}(-2)?", s) for s in slugs)
    assert slugs[3] == slugs[2] + "-2"  # the very same line twice


def test_slugs_do_not_depend_on_line_positions() -> None:
    """A line added above (or a schedule changed) must not hand a job another check."""
    before = crontab.parse_crontab("0 1 * * * echo one\n0 2 * * * echo two\n", system=False, now=NOW)
    after = crontab.parse_crontab(
        "*/5 * * * * echo zero\n0 1 * * * echo one\n30 2 * * * echo two\n", system=False, now=NOW
    )
    old = [x.slug for x in before if isinstance(x, crontab.Job)]
    new = [x.slug for x in after if isinstance(x, crontab.Job)]
    assert new[1:] == old and new[0] not in old


def test_six_field_line_is_left_unchanged() -> None:
    line = _one("0 0 3 * * * /opt/x.sh")
    assert isinstance(line, crontab.Unreadable) and "6-field" in line.reason
    assert isinstance(plain := _one("0 3 * * * /opt/x.sh"), crontab.Job) and plain.warnings == ()


def test_runner_is_written_as_given_and_quoted() -> None:
    line = _one("0 3 * * * /opt/x.sh")
    assert isinstance(line, crontab.Job)
    text = crontab.rewrite(line, "u", runner="/opt/my tools/monitor-run")
    assert text == "0 3 * * * '/opt/my tools/monitor-run' --check u -- /bin/sh -c '/opt/x.sh'"


def test_a_line_that_already_pings_is_kept() -> None:
    line = _one("0 4 * * * curl -fsS https://hc-ping.com/0b5ad9c4-3b1f-4a52-8a4e-6f3a1c2f6d11")
    assert isinstance(line, crontab.Kept) and line.note is not None and "already pings" in line.note


def test_rewrite_wraps_the_command_in_sh_c_with_quotes_kept() -> None:
    line = _one("0 3 * * * root echo 'it''s' | tee /tmp/x \\% done", system=True)
    assert isinstance(line, crontab.Job)
    assert crontab.rewrite(line, "0b5ad9c4-3b1f-4a52-8a4e-6f3a1c2f6d11") == (
        "0 3 * * * root monitor-run --check 0b5ad9c4-3b1f-4a52-8a4e-6f3a1c2f6d11 -- "
        "/bin/sh -c 'echo '\\''it'\\'''\\''s'\\'' | tee /tmp/x \\% done'"
    )
    curl = crontab.rewrite(line, "x", style="curl", ping_url="http://m/ping/u")
    assert curl.startswith("0 3 * * * root RID=$(cat /proc/sys/kernel/random/uuid); ")
    assert '"http://m/ping/u/$RC?rid=$RID"' in curl


def _slugs(text: str) -> list[str]:
    return [x.slug for x in crontab.parse_crontab(text, system=False, now=NOW) if isinstance(x, crontab.Job)]


def test_removing_a_repeated_command_never_hands_its_slug_to_the_other() -> None:
    both = _slugs("0 4 * * * /bin/foo\n0 5 * * * /bin/foo\n")
    assert len(set(both)) == 2
    # whichever line is left, or comes first, it never gets the other line's slug
    assert _slugs("0 5 * * * /bin/foo\n")[0] != both[0]
    assert _slugs("0 4 * * * /bin/foo\n")[0] != both[1]
    assert _slugs("0 5 * * * /bin/foo\n0 4 * * * /bin/foo\n") == both[::-1]
    assert _slugs("0 5 * * * /bin/foo\n0 1 * * * /bin/bar\n0 4 * * * /bin/foo\n")[::2] == both[::-1]


def test_repeated_command_under_another_shell_is_another_job() -> None:
    slugs = _slugs("0 4 * * * /bin/foo\nSHELL=/bin/bash\n0 4 * * * /bin/foo\n")
    assert len(set(slugs)) == 2 and not slugs[1].endswith("-2")
    # the same line twice under one shell: an occurrence suffix
    assert (
        _slugs("0 4 * * * /bin/foo\n0 4 * * * /bin/foo\n")[1]
        == _slugs("0 4 * * * /bin/foo\n0 4 * * * /bin/foo\n")[0] + "-2"
    )
