"""A throwaway PostgreSQL cluster that a test runs (and restarts) itself — never the shared server.

``initdb`` + ``pg_ctl`` from ``/usr/lib/postgresql/*/bin`` (or ``$PATH``), as a non-root user
(``nobody`` when the tests run as root: PostgreSQL refuses to run as root), in a temporary
directory that user owns, listening on 127.0.0.1 on a free port with trust authentication.
:meth:`PgCluster.restart` stops it (``immediate``: like a crash, recovery replays the WAL; or
``fast``) and starts it again on the same port and data directory.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Self

from tests.support.receivers import free_port

RUN_AS = "nobody"
"""Non-root user the cluster runs as when the tests run as root."""


def pg_bin(name: str) -> str:
    """Path of PostgreSQL's ``name`` binary (the newest installed major version first)."""
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=_major, reverse=True)
    if candidates:
        return candidates[0]
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"PostgreSQL's {name} is required (apt-get install postgresql)")
    return found


def _major(path: str) -> int:
    try:
        return int(Path(path).parts[-3])
    except ValueError:
        return 0


class PgCluster:
    """One PostgreSQL cluster in a temporary directory.

    Args:
        settings: extra ``postgres -c`` settings (``{"max_connections": "200"}``).
    """

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.settings = {
            "listen_addresses": "127.0.0.1",
            "max_connections": "200",
            "fsync": "off",  # a test cluster: crash safety against the OS is not under test
            "full_page_writes": "off",
            **(settings or {}),
        }
        self._user: dict[str, Any] = {}
        if os.geteuid() == 0:
            entry = pwd.getpwnam(RUN_AS)
            self._user = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        self.root = Path(tempfile.mkdtemp(prefix="monitor-pg-", dir="/tmp"))
        os.chmod(self.root, 0o755)
        if self._user:
            os.chown(self.root, self._user["user"], self._user["group"])
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self.restarts: list[float] = []

    # --------------------------------------------------------------- commands

    def _run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "HOME": str(self.root)}
        done = subprocess.run(
            list(argv), env=env, cwd=self.root, capture_output=True, text=True, timeout=timeout, **self._user
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr}{self.tail()}")
        return done

    def tail(self, chars: int = 3000) -> str:
        try:
            return "\n--- postgres.log ---\n" + self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def init(self) -> Self:
        self._run(
            pg_bin("initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        return self

    def start(self) -> Self:
        options = " ".join(f"-c {k}={v}" for k, v in self.settings.items())
        options += f" -p {self.port} -k {self.root}"
        self._run(
            pg_bin("pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )
        return self

    def stop(self, mode: str = "fast") -> None:
        self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def restart(self, mode: str = "immediate", down_for: float = 0.0) -> float:
        """Stop (``immediate``: no checkpoint, every session cut), stay down ``down_for``
        seconds, start again; returns the seconds the server was unreachable."""
        began = time.monotonic()
        self.stop(mode)
        time.sleep(down_for)
        self.start()
        down = time.monotonic() - began
        self.restarts.append(down)
        return down

    def running(self) -> bool:
        done = subprocess.run(
            [pg_bin("pg_ctl"), "-D", str(self.data), "status"],
            capture_output=True,
            timeout=10,
            check=False,
            **self._user,
        )
        return done.returncode == 0

    def createdb(self, name: str) -> str:
        """Create database ``name``; returns its SQLAlchemy async URL."""
        self._run(pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
        return self.url(name)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    def close(self) -> None:
        """Stop the server (if it runs) and delete its directory."""
        try:
            if self.data.exists() and self.running():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            return self.init().start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()
