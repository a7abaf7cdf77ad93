"""``monitor import-crontab FILE``: a check per crontab job, and the crontab rewritten to ping it.

The edge around :mod:`monitor.domain.cron.crontab`: reads the file, upserts one check per job through
the management API (``monitor_client``, ``unique: ["slug"]``, so running it twice updates the
same checks), prints the rewritten crontab on stdout and the report on stderr. Lines it cannot
read stay as they were and are reported with their line numbers; the exit status is then 1.

Re-importing is safe: slugs do not depend on line positions (:func:`monitor.domain.cron.crontab.job_slug`;
a job whose twin line, the same command, was added or removed keeps its check: ``_Rewrite.known_slug``),
and a line already rewritten (``… monitor-run --check <uuid> …``) is kept as it is, so it keeps
its check. The rewritten lines call ``monitor-run`` by its absolute path (cron's PATH is
``/usr/bin:/bin``): the one installed next to this Python (``sys.executable``'s directory), else
the one on ``$PATH``; ``--monitor-run PATH`` overrides it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import pwd
import shutil
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from monitor import settings
from monitor.domain.cron import crontab


def add_parser(sub: Any) -> None:
    """Register ``import-crontab`` on the ``monitor`` command's subparsers."""
    parser = sub.add_parser(
        "import-crontab",
        help="create a check per crontab job; print the crontab rewritten with the pings",
        description=(
            "Create (or update) a check per job of a crontab and print the crontab rewritten so "
            "that each job reports to its check. Lines that cannot be read are left unchanged "
            "and reported on stderr with their line numbers (exit status 1)."
        ),
    )
    parser.add_argument(
        "file", type=Path, help="a crontab: `crontab -l` output, /etc/crontab, /etc/cron.d/*; - for stdin"
    )
    form = parser.add_mutually_exclusive_group()
    form.add_argument(
        "--system",
        dest="system",
        action="store_true",
        default=None,
        help="the /etc/crontab format: a user field before the command (default for /etc/crontab, cron.d)",
    )
    form.add_argument("--user-crontab", dest="system", action="store_false", help="no user field")
    parser.add_argument(
        "--style",
        choices=["monitor-run", "curl"],
        default="monitor-run",
        help="wrap each command in monitor-run (default) or in curl calls",
    )
    parser.add_argument(
        "--cron",
        dest="flavor",
        choices=list(crontab.FLAVORS),
        default="debian",
        help="the cron daemon that runs this crontab: debian (default; Vixie cron: every job in the "
        "system zone, CRON_TZ and TZ do not move the schedule) or cronie (CRON_TZ= sets the zone "
        "of the jobs after it)",
    )
    parser.add_argument(
        "--tz",
        help="the zone the cron daemon runs in (default: this machine's, from /etc/timezone or "
        "/etc/localtime, else UTC)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="import lines that look like mistakes (a 6-field schedule, a user field in a user "
        "crontab) with a warning instead of leaving them unchanged",
    )
    parser.add_argument("--dry-run", action="store_true", help="parse and print, create no checks")
    parser.add_argument("--prefix", default="", help="put before every check slug, e.g. the host name")
    parser.add_argument("--base-url", help="the monitor's address (env MONITOR_BASE_URL)")
    parser.add_argument("--api-key", help="read-write API key of the project (env MONITOR_API_KEY)")
    parser.add_argument(
        "--monitor-run",
        dest="runner",
        help="how the rewritten lines call monitor-run (default: its absolute path, found next to "
        "this Python or on $PATH)",
    )


#: the PATH cron gives a job when the crontab sets none
CRON_PATH = "/usr/bin:/bin"


def default_runner() -> str | None:
    """The absolute path of the ``monitor-run`` installed with this Python, else on ``$PATH``."""
    beside = Path(sys.executable).parent / "monitor-run"
    if os.access(beside, os.X_OK):
        return str(beside.absolute())
    found = shutil.which("monitor-run")
    return str(Path(found).absolute()) if found else None


def runner_warning(runner: str, cron_path: str) -> str | None:
    """Why cron may not find ``runner`` with the crontab's PATH, or ``None``."""
    if "/" in runner:
        if not os.access(runner, os.X_OK):
            return f"{runner} is not an executable file here; the rewritten lines may not run"
        if str(Path(runner).parent) not in cron_path.split(":"):
            return (
                f"monitor-run is not on the crontab's PATH ({cron_path}); the rewritten lines "
                f"call it by its absolute path, {runner}"
            )
        return None
    if not any(os.access(Path(d) / runner, os.X_OK) for d in cron_path.split(":") if d):
        return (
            f"{runner!r} is not on the crontab's PATH ({cron_path}): cron will not find it; "
            "give its absolute path with --monitor-run"
        )
    return None


def _looks_like_user(word: str) -> bool:
    """A first command word that is a user of this machine and not a program."""
    try:
        pwd.getpwnam(word)
    except (KeyError, OSError):
        return False
    return shutil.which(word) is None


def system_zone() -> str:
    """This machine's IANA zone, as cron sees it: ``/etc/timezone``, else the target of the
    ``/etc/localtime`` link (``…/zoneinfo/Europe/Berlin``), else ``UTC``."""
    from zoneinfo import ZoneInfo

    candidates: list[str] = []
    with contextlib.suppress(OSError):
        candidates.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    try:
        target = os.path.realpath("/etc/localtime")
        if "/zoneinfo/" in target:
            candidates.append(target.split("/zoneinfo/", 1)[1])
    except OSError:
        pass
    for name in candidates:
        try:
            ZoneInfo(name)
        except (ValueError, OSError, KeyError):
            continue
        return name
    return "UTC"


def is_system_crontab(path: Path) -> bool:
    """``/etc/crontab`` and files in a ``cron.d`` directory have a user field."""
    resolved = path.resolve()
    return resolved == Path("/etc/crontab") or resolved.parent.name == "cron.d"


def _read(args: argparse.Namespace, err: TextIO) -> tuple[str, bool] | None:
    """The crontab's text and whether it is in the system format; ``None`` (reported) if unreadable."""
    from_stdin = str(args.file) == "-"
    try:
        if from_stdin:
            text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
        else:
            text = args.file.read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        print(f"monitor import-crontab: cannot read {args.file}: {error.strerror or error}", file=err)
        return None
    if from_stdin:
        system = bool(args.system)
    else:
        system = is_system_crontab(args.file) if args.system is None else bool(args.system)
    return text, system


def _daemon_zone(args: argparse.Namespace, err: TextIO) -> str | None:
    """The zone the cron daemon runs in (``--tz``, else this machine's); ``None`` (reported) if unknown."""
    zone = getattr(args, "tz", None) or system_zone()
    try:
        from zoneinfo import ZoneInfo

        ZoneInfo(zone)
    except (ValueError, OSError, KeyError):
        print(f"monitor import-crontab: tz: {zone!r} is not an IANA zone name", file=err)
        return None
    return zone


def _runner(args: argparse.Namespace, lines: list[crontab.Line], err: TextIO) -> str:
    """How the rewritten lines call ``monitor-run``; warns when cron's PATH would not find it."""
    runner = getattr(args, "runner", None) or default_runner()
    if runner is None:
        runner = "monitor-run"
    cron_path = CRON_PATH
    for line in lines:
        if isinstance(line, crontab.Kept):
            env = crontab.ENV_RE.match(line.text)
            if env and env.group(1) == "PATH":
                cron_path = env.group(2).strip().strip("'\"")
    if args.style == "monitor-run" and any(isinstance(x, crontab.Job) for x in lines):
        warning = runner_warning(runner, cron_path)
        if warning:
            print(f"warning: {warning}", file=err)
    return runner


@dataclass(kw_only=True, slots=True)
class _Rewrite:
    """The crontab being rewritten, line by line, and the counts for the report."""

    args: argparse.Namespace
    client: Any  # monitor_client.Client, or None for --dry-run
    base_url: str
    runner: str
    force: bool
    err: TextIO
    lines: list[str] = field(default_factory=list)
    unread: int = 0
    imported: int = 0
    suggested_system: bool = False
    claimed: set[str] = field(default_factory=set)

    def known_slug(self, job: crontab.Job) -> str:
        """``job``'s slug, or the one it had before a twin line (the same command) was added
        or removed (:func:`crontab.other_slug`) when that check has the job's schedule and the
        check by ``job``'s slug is missing or has another one (a twin's, or an earlier
        version's slug for the first of two twins): the job keeps its check, never takes a
        twin's. (The zone is not compared: the monitor stores ``Etc/UTC`` as ``UTC``.)"""
        if self.client is None:
            return job.slug
        mine = self.client.get_check(job.slug)
        if mine is not None and mine.get("schedule") == job.schedule:
            return job.slug
        other = crontab.other_slug(self.args.prefix, job)
        if other in self.claimed:
            return job.slug
        found = self.client.get_check(other)
        if found is not None and found.get("schedule") == job.schedule:
            return other
        return job.slug

    def keep(self, line: crontab.Line, message: str | None) -> None:
        """Keep ``line`` as written; ``message`` (if any) goes to the report."""
        self.lines.append(line.text)
        if message:
            print(message, file=self.err)

    def leave(self, line: crontab.Line, message: str) -> None:
        """Leave ``line`` unchanged and count it as not imported."""
        self.keep(line, message)
        self.unread += 1

    def doubt_user_field(self, job: crontab.Job) -> bool:
        """Whether ``job`` is left unchanged because its command starts with a user name."""
        first = job.command.split(None, 1)[0]
        if job.user is not None or not _looks_like_user(first):
            return False
        doubt = (
            f"line {job.line}: {first!r} looks like a user field (cron would run it as the "
            "command); if this is an /etc/crontab-style file, import it with --system"
        )
        if not self.force:
            self.leave(job, f"{doubt} (import it anyway with --force); left unchanged")
            return True
        if not self.suggested_system:
            self.suggested_system = True
            print(f"warning: {doubt}", file=self.err)
        return False

    def job(self, job: crontab.Job) -> None:
        """Upsert ``job``'s check (unless --dry-run) and rewrite its line to report to it."""
        for warning in job.warnings:
            print(f"warning: {warning}", file=self.err)
        if self.doubt_user_field(job):
            return
        job = dataclasses.replace(job, slug=self.known_slug(job))
        self.claimed.add(job.slug)
        check_ref, ping_url = job.slug, f"{self.base_url}/ping/<uuid of {job.slug}>"
        if self.client is not None:
            created = self.client.upsert_check(job.slug, **_fields(job, self.args.file))
            if created is None:
                self.leave(
                    job, f"line {job.line}: the monitor did not save check {job.slug!r}; left unchanged"
                )
                return
            check_ref, ping_url = str(created["uuid"]), str(created["ping_url"])
        self.lines.append(
            crontab.rewrite(job, check_ref, style=self.args.style, ping_url=ping_url, runner=self.runner)
        )
        self.imported += 1
        what = f"{job.slug} ({job.schedule}, {job.tz}, grace {job.grace}s)"
        print(f"line {job.line}: {what} -> {check_ref}", file=self.err)


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Carry out ``monitor import-crontab``; returns the exit status (0, 1 some lines unread, 2 error)."""
    read = _read(args, err)
    if read is None:
        return 2
    text, system = read
    zone = _daemon_zone(args, err)
    if zone is None:
        return 2
    force = bool(getattr(args, "force", False))
    lines = crontab.parse_crontab(
        text,
        system=system,
        now=datetime.now(UTC),
        prefix=args.prefix,
        flavor=getattr(args, "flavor", "debian"),
        default_tz=zone,
        force=force,
    )
    base_url = str(args.base_url or settings.read("base_url")).rstrip("/")
    api_key = args.api_key or settings.read("api_key")

    client = None
    if not args.dry_run:
        if not api_key:
            print(
                "monitor import-crontab: api_key: set MONITOR_API_KEY or --api-key (or use --dry-run)",
                file=err,
            )
            return 2
        from monitor_client import Client

        client = Client(base_url, api_key=api_key, retries=2)

    rewrite = _Rewrite(
        args=args, client=client, base_url=base_url, runner=_runner(args, lines, err), force=force, err=err
    )
    if args.style == "monitor-run" and not any(
        isinstance(x, crontab.Kept) and x.text.strip().startswith("MONITOR_BASE_URL") for x in lines
    ):
        rewrite.lines.append(f"MONITOR_BASE_URL={base_url}")
    try:
        for line in lines:
            if isinstance(line, crontab.Kept):
                rewrite.keep(line, line.note)
            elif isinstance(line, crontab.Unreadable):
                rewrite.leave(line, f"{line.reason}; left unchanged")
            else:
                rewrite.job(line)
    finally:
        if client is not None:
            client.close()
    out.write("\n".join(rewrite.lines) + "\n")
    verb = "parsed" if args.dry_run else "imported"
    print(f"{rewrite.imported} jobs {verb}, {rewrite.unread} lines left unchanged", file=err)
    return 1 if rewrite.unread else 0


def _fields(job: crontab.Job, path: Path) -> dict[str, Any]:
    tags = ["crontab"] + ([f"user-{job.user}"] if job.user else [])
    return {
        "name": job.slug if job.user is None else f"{job.slug} ({job.user})",
        "schedule": job.schedule,
        "tz": job.tz,
        "grace": job.grace,
        "tags": " ".join(tags),
        "desc": f"imported from {path}, line {job.line}: {job.text.strip()}"[:1000],
    }
