"""Reading a crontab (``monitor import-crontab``): pure, no I/O, never reads the clock.

Understands what Vixie/cronie crontabs hold: blank lines and ``#`` comments, environment lines
(``NAME=value``, ``NAME = "value"``), ``CRON_TZ=`` / ``TZ=`` (the zone of the jobs that follow;
``CRON_TZ`` wins over ``TZ``, as in cronie), 5-field schedules and the ``@daily``-style macros,
and the user field of ``/etc/crontab`` and ``/etc/cron.d`` files (``system=True``). A job line
that cannot be read (``@reboot``, a bad expression, a missing command, an unknown zone) becomes an
:class:`Unreadable` line with its number and the reason; it is never guessed at.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import re
import shlex
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from monitor.domain.cron import schedules, zones
from monitor.domain.errors import ScheduleError, ZoneError

ENV_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")
USER_RE = re.compile(r"^[a-z_][a-z0-9_.-]*\$?$", re.IGNORECASE)
MACROS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
#: grace = a quarter of the shortest gap between ticks, kept within these bounds (seconds)
GRACE_MIN = 60
GRACE_MAX = 3600
MONITORED_RE = re.compile(r"(/ping/|monitor-run|hc-ping\.com)")
CHECK_OPTION_RE = re.compile(r"monitor-run['\"]?\s+--check[ =](\S+)")
#: a word that reads as a cron time field (a 6-field line's sixth field, in the command's place)
CRON_FIELD_RE = re.compile(r"^(\*|\?|[0-9]+([-/,][0-9*]+)*|\*/[0-9]+)$")
DEFAULT_SHELL = "/bin/sh"
"""The shell cron runs commands with when the crontab sets no ``SHELL=``."""
FLAVORS = ("debian", "cronie")
"""Cron daemons whose zone rules :func:`parse_crontab` follows (see the module docstring)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    """A job line that can be monitored.

    Attributes:
        line: 1-based line number in the file.
        text: the line as written.
        schedule: the 5-field expression or macro, as written.
        tz: the IANA zone in force for the line (``CRON_TZ``/``TZ``, default ``"UTC"``).
        user: the user field (system crontabs), else ``None``.
        command: the command, as written (shell syntax, cron's ``%`` rules).
        slug: a check slug unique within the file: the command's program name and a hash of
            (user, command), and of the schedule and shell when the command is repeated in the
            file, so it does not depend on the line's position and a re-import after lines
            were added, removed or moved finds the same check (see :func:`job_slug`).
        grace: seconds, a quarter of the shortest gap between the schedule's ticks, 60-3600.
        warnings: doubts about the line worth telling the user (a 6-field schedule …).
        shell: the shell cron runs the command with (the ``SHELL=`` in force, else ``/bin/sh``).
    """

    line: int
    text: str
    schedule: str
    tz: str
    user: str | None
    command: str
    slug: str
    grace: int
    warnings: tuple[str, ...] = ()
    shell: str = DEFAULT_SHELL


@dataclass(frozen=True, kw_only=True, slots=True)
class Unreadable:
    """A line left as it is, with the reason (``"line 7: @reboot has no schedule to watch"``)."""

    line: int
    text: str
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Kept:
    """A blank, comment or environment line, or a job that is already monitored."""

    line: int
    text: str
    note: str | None = None


Line = Job | Unreadable | Kept


def _zone_value(raw: str) -> str:
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return value


OPERATORS = frozenset({"&&", "||", ";", "|", "(", ")", "&", "{", "}", ";;"})
WRAPPERS = frozenset({"nice", "ionice", "timeout", "chronic", "sudo", "exec", "nohup", "env", "time"})
NOT_THE_JOB = frozenset({"cd", "test", "[", "true", ":", "exit", "sleep", "export"})


def _program_slug(command: str) -> str:
    """A slug naming the job: the program of the first shell segment that does the work
    (``cd / && run-parts /etc/cron.daily`` → ``run-parts-cron-daily``, ``/opt/backup.sh`` →
    ``backup``)."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        words = command.split()
    segments: list[list[str]] = [[]]
    for word in words:
        if word in OPERATORS:
            segments.append([])
        else:
            segments[-1].append(word)
    for segment in segments:
        rest = [w for w in segment if not ("=" in w and not w.startswith(("/", ".", "-")))]
        while rest and (rest[0] in WRAPPERS or rest[0].startswith("-") or rest[0].isdigit()):
            rest.pop(0)
        if not rest or rest[0] in NOT_THE_JOB:
            continue
        name = rest[0].rsplit("/", 1)[-1]
        if name in ("sh", "bash", "dash", "zsh") and "-c" in rest[1:-1]:
            return _program_slug(rest[rest.index("-c", 1) + 1])  # the inline script's program
        scripts = [w for w in rest[1:] if not w.startswith("-")]
        if re.fullmatch(r"(python|perl|ruby|php|node|bash|sh)[0-9.]*", name) and scripts:
            name = scripts[0].rsplit("/", 1)[-1]  # the script, not its interpreter
        if name == "run-parts":
            directories = [w for w in rest[1:] if w.startswith("/")]
            if directories:
                name += "-" + directories[-1].rstrip("/").rsplit("/", 1)[-1]
        name = re.sub(r"\.(sh|py|pl|rb|php|bash)$", "", name.lower())
        slug = re.sub(r"[^a-z0-9_-]+", "-", name).strip("-")[:80]
        if slug:
            return slug
    return "cron-job"


def grace_for(schedule: schedules.CronSchedule, now: datetime) -> int:
    """A quarter of the shortest gap among the next 12 ticks after ``now``, within 60-3600 s."""
    ticks = schedule.next_ticks(now, 12)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(ticks)]
    shortest = min(gaps) if gaps else timedelta(days=1).total_seconds()
    return int(min(max(shortest / 4, GRACE_MIN), GRACE_MAX))


def parse_crontab(
    text: str,
    *,
    system: bool,
    now: datetime,
    prefix: str = "",
    flavor: str = "debian",
    default_tz: str = "UTC",
    force: bool = False,
) -> list[Line]:
    """Read every line of a crontab.

    Args:
        text: the file's content.
        system: the ``/etc/crontab`` format (a user field between the schedule and the command).
        now: an aware instant; grace is derived from the ticks after it.
        prefix: put before every slug (e.g. the host name: ``web1-backup``), lower-cased.
        flavor: ``"debian"`` (Vixie cron as Debian ships it: every job in ``default_tz``) or
            ``"cronie"`` (``CRON_TZ=`` sets the zone of the jobs after it).
        default_tz: the IANA zone the daemon runs in (the system's local zone).
        force: import lines that look like mistakes (6-field schedules) with a warning instead
            of leaving them unchanged.

    Returns:
        One :class:`Job`, :class:`Unreadable` or :class:`Kept` per line, in order. Job slugs
        are unique within the file and stable: :func:`job_slug`.

    Raises:
        ValueError: ``flavor`` is not one of :data:`FLAVORS`.
    """
    if flavor not in FLAVORS:
        raise ValueError(f"flavor: {flavor!r} is not one of {', '.join(FLAVORS)}")
    result: list[Line] = []
    cron_tz: str | None = None
    shell = DEFAULT_SHELL
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if stripped == "" or stripped.startswith("#"):
            result.append(Kept(line=number, text=raw))
            continue
        env = ENV_RE.match(raw)
        if env and not stripped.startswith("@") and not re.match(r"^[\d*]", stripped):
            name, value = env.group(1), _zone_value(env.group(2))
            if name == "SHELL":
                shell = value or DEFAULT_SHELL
            elif name == "CRON_TZ" and flavor == "cronie":
                cron_tz = value or None
            note = _environment_note(number, name, flavor, cron_tz or default_tz, default_tz)
            result.append(Kept(line=number, text=raw, note=note))
            continue
        line = _job(number, raw, stripped, system=system, tz=cron_tz or default_tz, now=now, force=force)
        if isinstance(line, Job):
            line = dataclasses.replace(line, shell=shell)
        result.append(line)
    return _with_slugs(result, prefix)


def _with_slugs(lines: list[Line], prefix: str) -> list[Line]:
    """``lines`` with each job's slug: from the line's own content, and from whether its
    command is repeated (:func:`job_slug`), unique within the file."""
    used: set[str] = set()
    commands = Counter((x.user, x.command) for x in lines if isinstance(x, Job))
    for index, line in enumerate(lines):
        if isinstance(line, Job):
            slug = job_slug(prefix, line, used, repeated=commands[line.user, line.command] > 1)
            used.add(slug)
            lines[index] = dataclasses.replace(line, slug=slug)
    return lines


def _environment_note(number: int, name: str, flavor: str, zone: str, default_tz: str) -> str | None:
    """What to tell the user about environment line ``number`` setting ``name`` (``zone``: the
    zone the following jobs are scheduled in), or ``None``. A ``zone`` that is not a known IANA
    zone (a cronie ``CRON_TZ=`` the import refuses) is never named as where cron schedules."""
    if name == "CRON_TZ" and flavor != "cronie":
        return (
            f"line {number}: CRON_TZ is ignored by Debian's cron, which schedules in the "
            f"system zone ({default_tz}); import with --cron cronie if cronie runs this crontab"
        )
    try:
        zones.validate_zone(zone)
    except ZoneError as error:
        if name == "CRON_TZ":
            return f"line {number}: CRON_TZ: {error}; the job lines after it are left unchanged"
        if name == "TZ":
            return (
                f"line {number}: TZ only sets the jobs' environment; the jobs after it are "
                f"scheduled by CRON_TZ={zone}, which is not a known zone, so they are left unchanged"
            )
        return None
    if name == "TZ":
        return (
            f"line {number}: TZ only sets the jobs' environment; cron schedules them in "
            f"{zone}, and so do their checks"
        )
    return None


def job_slug(
    prefix: str, job: Job, used: set[str] | frozenset[str] = frozenset(), *, repeated: bool = False
) -> str:
    """``[<prefix>-]<program>-<hash>``, from the line's own content, never its position.

    The hash is the first 6 hex digits of SHA-256 over (user, command), so a job keeps its slug
    (and check) when other lines are added, removed or moved, and when its schedule changes
    (the check's schedule is updated). When the file holds the same user and command more than
    once (``repeated``), each of those lines hashes its schedule too, and its ``SHELL`` when
    not ``/bin/sh``: which of them comes first does not matter, and removing one never hands
    another one its check. The very same line again (schedule, shell and all) gets ``-2``,
    ``-3`` … in order; ``used`` holds the slugs already given in the file.
    """
    base = _prefixed(prefix, job.slug)[:90]
    if repeated:
        seed = f"{job.user or ''}\0{job.schedule}\0{job.command}"
        if job.shell != DEFAULT_SHELL:
            seed += f"\0{job.shell}"
    else:
        seed = f"{job.user or ''}\0{job.command}"
    slug = f"{base}-{hashlib.sha256(seed.encode()).hexdigest()[:6]}"
    if slug not in used:
        return slug
    number = 2
    while f"{slug}-{number}" in used:
        number += 1
    return f"{slug}-{number}"


def other_slug(prefix: str, job: Job) -> str:
    """The slug ``job`` (from :func:`parse_crontab`) gets in a file where its command's
    repetition differs: the unrepeated form when it is repeated, and the other way round.

    A job whose twin line was removed (or added) had that slug on the last import, so
    ``monitor import-crontab`` keeps its check when a check by this slug exists with the
    job's schedule (:func:`job_slug`).
    """
    program = dataclasses.replace(job, slug=_program_slug(job.command))
    mine = job_slug(prefix, program, repeated=False)
    return job_slug(prefix, program, repeated=True) if job.slug == mine else mine


def _prefixed(prefix: str, slug: str) -> str:
    clean = re.sub(r"[^a-z0-9_-]+", "-", prefix.lower()).strip("-")
    return f"{clean}-{slug}"[:100] if clean else slug


def _job(
    number: int, raw: str, stripped: str, *, system: bool, tz: str, now: datetime, force: bool = False
) -> Line:
    def bad(reason: str) -> Unreadable:
        return Unreadable(line=number, text=raw, reason=f"line {number}: {reason}")

    split = _schedule_and_rest(stripped, system=system)
    if isinstance(split, str):
        return bad(split)
    schedule_text, rest = split
    user: str | None = None
    if system:
        with_user = _user_and_command(rest)
        if isinstance(with_user, str):
            return bad(with_user)
        user, rest = with_user
    if rest == "":
        return bad("no command")
    try:
        schedule = schedules.parse_cron(schedule_text, "unix", tz)
        schedules.ensure_fires_after(schedule, now)
    except ScheduleError as error:
        return bad(f"schedule {schedule_text!r}: {error}")
    except ZoneError as error:
        return bad(f"tz: {error}")
    if MONITORED_RE.search(rest):
        bound = CHECK_OPTION_RE.search(rest)
        what = f"already reports to check {bound.group(1)}" if bound else "already pings a monitor"
        return Kept(line=number, text=raw, note=f"line {number}: {what}; left as it is")
    if has_unescaped_percent(rest):
        return bad("the command holds an unescaped % (cron's stdin separator): wrap it by hand")
    warnings: list[str] = []
    first = rest.split(None, 1)[0]
    if CRON_FIELD_RE.match(first):
        doubt = (
            f"looks like a 6-field schedule (seconds or years); cron reads 5 fields, so {first!r} "
            "stands where the command goes (Debian's crontab refuses to install the whole file: "
            "'bad command'; cronie runs it as part of the command)"
        )
        if not force:
            return bad(f"{doubt} (import it anyway with --force)")
        warnings.append(f"line {number}: {doubt}")
    return Job(
        line=number,
        text=raw,
        schedule=schedule_text,
        tz=tz,
        user=user,
        command=rest,
        slug=_program_slug(rest),
        grace=grace_for(schedule, now),
        warnings=tuple(warnings),
    )


def _schedule_and_rest(stripped: str, *, system: bool) -> tuple[str, str] | str:
    """A job line's schedule (5 fields or a macro, as written) and what follows it; or why the
    line is not a job line."""
    tokens = stripped.split(None, 7 if system else 6)
    if tokens[0].startswith("@"):
        macro = tokens[0].lower()
        if macro == "@reboot":
            return "@reboot has no schedule to watch"
        if macro not in MACROS:
            return f"unknown macro {tokens[0]!r} (one of {', '.join(sorted(MACROS))})"
        return tokens[0], stripped[len(tokens[0]) :].strip()
    if len(tokens) < 6:
        return "not a job line: expected 5 schedule fields and a command"
    fields = tokens[:5]
    rest = stripped
    for field in fields:
        rest = rest[rest.index(field) + len(field) :]
    return " ".join(fields), rest.strip()


def _user_and_command(rest: str) -> tuple[str, str] | str:
    """A system crontab line's user field and command; or why the user field is wrong."""
    parts = rest.split(None, 1)
    if len(parts) < 2:
        return "no command after the user field (an /etc/crontab line is: schedule user command)"
    user, command = parts[0], parts[1].strip()
    if CRON_FIELD_RE.match(user):
        return (
            f"looks like a 6-field schedule (seconds or years); cron reads 5 fields, so {user!r} "
            "would be taken as the user"
        )
    if not USER_RE.match(user):
        return f"{user!r} is not a user name (an /etc/crontab line is: schedule user command)"
    return user, command


def has_unescaped_percent(command: str) -> bool:
    """Cron turns an unescaped ``%`` into a newline (the rest is the command's stdin)."""
    return re.search(r"(?<!\\)%", command) is not None


def rewrite(
    job: Job,
    check: str,
    *,
    style: str = "monitor-run",
    ping_url: str | None = None,
    runner: str = "monitor-run",
) -> str:
    """The job's line with the monitor wrapped around its command.

    Args:
        job: the parsed job.
        check: what to name the check by (its uuid, or its slug).
        style: ``"monitor-run"`` (``monitor-run --check CHECK -- SHELL -c 'COMMAND'``) or ``"curl"``
            (a start ping, the command, then ``curl`` of its exit status with ``rid``).
        ping_url: the check's ping URL, for ``style="curl"``.
        runner: how the line calls ``monitor-run``: best its absolute path, since cron's PATH
            (``/usr/bin:/bin``) rarely holds it; shell-quoted when needed.

    Returns:
        The new line: the same schedule (and user), the command wrapped. The command is passed
        to the crontab's shell (``job.shell``, as cron itself would run it) in single quotes,
        so its pipes, redirections, bash syntax and ``\\%`` escapes keep their meaning.
    """
    head = job.schedule if job.user is None else f"{job.schedule} {job.user}"
    shell = shlex.quote(job.shell)
    if style == "curl":
        if ping_url is None:
            raise ValueError("ping_url: needed for the curl style")
        url = ping_url
        wrapped = (
            "RID=$(cat /proc/sys/kernel/random/uuid); "
            f'curl -fsS -m 10 --retry 3 -o /dev/null "{url}/start?rid=$RID"; '
            f"{shell} -c {_quote(job.command)}; RC=$?; "
            f'curl -fsS -m 10 --retry 3 -o /dev/null "{url}/$RC?rid=$RID"'
        )
    else:
        wrapped = f"{shlex.quote(runner)} --check {check} -- {shell} -c {_quote(job.command)}"
    return f"{head} {wrapped}"


def _quote(command: str) -> str:
    return "'" + command.replace("'", "'\\''") + "'"
