"""Real ``monitor`` processes and the real ``curl`` binary, for process-level end-to-end tests.

* :class:`MonitorProcess` starts ``monitor serve`` (or any ``monitor`` command) as a child
  process with its own environment and working directory, polls ``/health`` until it answers,
  stops it with SIGTERM and always kills it in ``close()``. stdout and stderr go to files (no
  pipe can fill up and stall the server); :attr:`MonitorProcess.stdout` reads them back.
* :func:`curl_ping` runs ``curl -fsS -m 10 --retry 3 …`` exactly as a crontab line would;
  :func:`curl_api` calls the management API with ``curl`` and returns status and JSON.
* :func:`throwaway_postgres` creates an empty PostgreSQL database (``CREATE DATABASE``, as
  ``tests/conftest.py`` does) and drops it afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import asyncpg

REPO_ROOT = Path(__file__).resolve().parents[2]
CURL = "curl"
CRONTAB_CURL = (CURL, "-fsS", "-m", "10", "--retry", "3")
PG_ADMIN_URL = os.environ.get(
    "MONITOR_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)

T = TypeVar("T")


def clean_env(**extra: str) -> dict[str, str]:
    """The current environment without any ``MONITOR_*`` variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONITOR_")}
    env.update(extra)
    return env


def checkout_env(**extra: str) -> dict[str, str]:
    """:func:`clean_env` with the checkout on ``PYTHONPATH`` (``python -m monitor`` from any cwd)."""
    env = clean_env(**extra)
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


def sleep_until(instant: float) -> None:
    """Sleep until the wall-clock ``instant`` (``time.time()`` seconds); at once if it has passed."""
    time.sleep(max(0.0, instant - time.time()))


def _run_curl(args: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(list(args), capture_output=True, timeout=timeout, check=False)


def curl_ping(url: str, *extra: str) -> str:
    """``curl -fsS -m 10 --retry 3 [extra…] URL`` as a crontab line; asserts success, returns the body."""
    proc = _run_curl([*CRONTAB_CURL, *extra, url])
    if proc.returncode != 0:
        raise AssertionError(
            f"curl {' '.join([*extra, url])} failed ({proc.returncode}): {proc.stderr.decode().strip()}"
        )
    return proc.stdout.decode()


def curl_api(base: str, method: str, path: str, api_key: str | None, body: Any = None) -> tuple[int, Any]:
    """Call the management API with ``curl``; returns (HTTP status, parsed JSON or text)."""
    args = [CURL, "-sS", "-m", "10", "-X", method, "-w", "\n%{http_code}"]
    if api_key is not None:
        args += ["-H", f"X-Api-Key: {api_key}"]
    if body is not None:
        args += ["-H", "Content-Type: application/json", "--data-raw", json.dumps(body)]
    proc = _run_curl([*args, base + path])
    if proc.returncode != 0:
        raise AssertionError(f"curl {method} {path} failed ({proc.returncode}): {proc.stderr.decode()}")
    text, _, status = proc.stdout.decode().rpartition("\n")
    try:
        return int(status), json.loads(text)
    except ValueError:
        return int(status), text


def wait_until(
    probe: Callable[[], T | None], *, timeout: float, interval: float = 0.1, what: str = "condition"
) -> T:
    """Call ``probe`` until it returns something truthy; ``TimeoutError`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


class MonitorProcess:
    """One ``monitor`` child process.

    Args:
        argv: the full command (e.g. ``[sys.executable, "-m", "monitor", "serve", "--port", "8123"]``).
        env: its environment.
        cwd: its working directory.
        logs: directory for ``<name>.stdout`` / ``<name>.stderr``.
        name: file name stem for the logs.
    """

    def __init__(
        self, argv: Sequence[str], *, env: dict[str, str], cwd: Path, logs: Path, name: str, port: int = 0
    ):
        self.argv = list(argv)
        self.port = port
        self.env = env
        self.cwd = cwd
        self.out_path = logs / f"{name}.stdout"
        self.err_path = logs / f"{name}.stderr"
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def serve(
        cls,
        port: int,
        *,
        env: dict[str, str],
        cwd: Path,
        logs: Path,
        name: str,
        dev: bool = True,
        python: str = sys.executable,
    ) -> MonitorProcess:
        """``python -m monitor serve [--dev] --port PORT``."""
        argv = [python, "-m", "monitor", "serve", "--port", str(port)]
        if dev:
            argv.insert(4, "--dev")
        return cls(argv, env=env, cwd=cwd, logs=logs, name=name, port=port)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MonitorProcess:
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            self.proc = subprocess.Popen(self.argv, env=self.env, cwd=self.cwd, stdout=out, stderr=err)
        return self

    @property
    def stdout(self) -> str:
        return self.out_path.read_text(errors="replace") if self.out_path.exists() else ""

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace") if self.err_path.exists() else ""

    def describe(self) -> str:
        return f"--- stdout ---\n{self.stdout[-3000:]}\n--- stderr ---\n{self.stderr[-5000:]}"

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Poll ``GET /health`` with curl until it answers 200 (or the process dies)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"monitor exited with {self.proc.returncode} before /health\n{self.describe()}"
                )
            probe = _run_curl([CURL, "-fsS", "-m", "1", f"{self.base}/health"], timeout=5)
            if probe.returncode == 0:
                return
            if time.monotonic() >= deadline:
                raise AssertionError(f"/health did not answer within {timeout}s\n{self.describe()}")
            time.sleep(0.05)

    def terminate(self, timeout: float = 10.0) -> int:
        """SIGTERM and wait; returns the exit code (raises if it does not exit in time)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"monitor did not exit within {timeout}s of SIGTERM\n{self.describe()}"
            ) from None

    def close(self) -> None:
        """Kill the process if it still runs (always call this, in ``finally``)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> MonitorProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(_dsn(PG_ADMIN_URL), timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@contextmanager
def throwaway_postgres(prefix: str = "monitor_e2e") -> Iterator[str]:
    """An empty PostgreSQL database (no template: the process under test migrates it)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    except (OSError, asyncpg.PostgresError) as error:
        raise RuntimeError(f"PostgreSQL at {PG_ADMIN_URL} is required for the tests: {error}") from error
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def count_pings(database_url: str, check_uuids: Sequence[str]) -> int:
    """Sum of ``n_pings`` over the given checks, read straight from the database."""
    from sqlalchemy import func, select

    from monitor.storage import tables as t
    from monitor.storage.engine import make_engine

    async def go() -> int:
        engine = make_engine(database_url)
        try:
            async with engine.connect() as conn:
                total = await conn.execute(
                    select(func.coalesce(func.sum(t.checks.c.n_pings), 0)).where(
                        t.checks.c.uuid.in_(list(check_uuids))
                    )
                )
                return int(total.scalar_one())
        finally:
            await engine.dispose()

    return asyncio.run(go())
