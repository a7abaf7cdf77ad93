"""Impossible settings and bad database URLs are one clear line
and a documented exit status, never a traceback (README "Exit statuses")."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.settings import MAX_SHARDS, Settings, SettingsError, specs
from tests.support.process import checkout_env


def _monitor(tmp_path: Path, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=checkout_env(**env),
        input=stdin,
        timeout=60,
        check=False,
    )


# -- F2 / F5 / F6: settings bounds ------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "names"),
    [
        (
            {"MONITOR_EVALUATE_INTERVAL": "20", "MONITOR_LEASE_TTL": "10"},
            ["MONITOR_EVALUATE_INTERVAL", "MONITOR_LEASE_TTL"],
        ),
        ({"MONITOR_EVALUATE_INTERVAL": "6"}, ["MONITOR_EVALUATE_INTERVAL", "MONITOR_LEASE_TTL"]),
        ({"MONITOR_LEASE_TTL": "3000000"}, ["MONITOR_LEASE_TTL"]),
        ({"MONITOR_LEASE_TTL": "0.1"}, ["MONITOR_LEASE_TTL"]),
        ({"MONITOR_LEASE_TTL": "nan"}, ["MONITOR_LEASE_TTL"]),
        ({"MONITOR_LEASE_TTL": "inf"}, ["MONITOR_LEASE_TTL"]),
        ({"MONITOR_EVALUATE_INTERVAL": "nan"}, ["MONITOR_EVALUATE_INTERVAL"]),
        ({"MONITOR_SHARDS": str(MAX_SHARDS + 1)}, ["MONITOR_SHARDS"]),
    ],
)
def test_impossible_settings_are_refused(env: dict[str, str], names: list[str]) -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env(env)
    assert all(name in str(raised.value) for name in names), raised.value
    assert "\n" not in str(raised.value)


def test_the_edges_of_the_bounds_are_accepted() -> None:
    s = Settings.from_env(
        {"MONITOR_LEASE_TTL": "1", "MONITOR_EVALUATE_INTERVAL": "0.5", "MONITOR_SHARDS": "4096"}
    )
    assert (s.lease_ttl, s.evaluate_interval, s.shards) == (1.0, 0.5, MAX_SHARDS)
    s = Settings.from_env({"MONITOR_LEASE_TTL": "86400", "MONITOR_EVALUATE_INTERVAL": "5"})
    assert math.isclose(s.lease_ttl, 86400)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MONITOR_NOTIFY_CONCURRENCY": str(2**63)}, "MONITOR_NOTIFY_CONCURRENCY: must be at most 4096"),
        ({"MONITOR_NOTIFY_PER_HOST": "5000"}, "MONITOR_NOTIFY_PER_HOST: must be at most 4096"),
        ({"MONITOR_NOTIFY_TIMEOUT": "1e15"}, "MONITOR_NOTIFY_TIMEOUT: must be at most 3155760000"),
        ({"MONITOR_HISTORY_RETENTION": "1e11"}, "MONITOR_HISTORY_RETENTION: must be at most 3155760000"),
        ({"MONITOR_PING_BODY_RETENTION": "1e11"}, "MONITOR_PING_BODY_RETENTION: must be at most"),
        ({"MONITOR_PING_RETENTION": str(2**63)}, "MONITOR_PING_RETENTION: must be at most 2147483647"),
        ({"MONITOR_RETENTION_BATCH": "9" * 20}, "MONITOR_RETENTION_BATCH: must be at most 2147483647"),
        ({"MONITOR_INGEST_WAIT_MS": "1e15"}, "MONITOR_INGEST_WAIT_MS: must be at most 3155760000000"),
    ],
)
def test_numbers_that_would_overflow_inside_a_loop_are_refused_at_start_up(
    env: dict[str, str], message: str
) -> None:
    # they used to start, then fail every notifier or retention round with an OverflowError
    with pytest.raises(SettingsError, match=f"^{message}"):
        Settings.from_env(env)


def test_every_number_setting_has_an_upper_bound() -> None:
    unbounded = [spec.env for spec in specs() if spec.kind in (int, float) and spec.maximum is None]
    assert unbounded == []
    century = Settings.from_env(
        {"MONITOR_HISTORY_RETENTION": "3155760000", "MONITOR_PING_RETENTION": "2147483647"}
    )
    assert (century.history_retention, century.ping_retention) == (3155760000, 2**31 - 1)


def test_a_serve_with_an_overflowing_setting_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = _monitor(tmp_path, "serve", MONITOR_HISTORY_RETENTION="1e11")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "monitor: MONITOR_HISTORY_RETENTION: must be at most 3155760000, got '1e11'"
    ], proc.stderr


@pytest.mark.parametrize("command", [["evaluate"], ["scheduler", "--jobs", "jobs.toml"]])
def test_an_interval_of_two_ttls_is_refused_at_start_up(tmp_path: Path, command: list[str]) -> None:
    """A real ``monitor evaluate`` / ``monitor scheduler``: one line naming both settings, exit
    2, nothing started. (The scheduler renews its job leases every TTL/3 whatever the interval;
    the refusal is the settings' own, for every command.)"""
    (tmp_path / "jobs.toml").write_text('[[jobs]]\nname = "x"\nschedule = "* * * * *"\ncommand = "true"\n')
    proc = _monitor(
        tmp_path,
        *command,
        MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'm.db'}",
        MONITOR_EVALUATE_INTERVAL="20",
        MONITOR_LEASE_TTL="10",
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("monitor: MONITOR_EVALUATE_INTERVAL:"), proc.stderr
    assert "MONITOR_LEASE_TTL" in lines[0]
    assert not (tmp_path / "m.db").exists()


# -- F3: MONITOR_DATABASE_URL -------------------------------------------------------------

COMMANDS = [
    ["migrate"],
    ["evaluate"],
    ["notify"],
    ["reshard", "4"],
    ["project", "create", "x"],
    ["user", "create", "a@example.com"],
    ["serve", "--port", "18765"],
]

BAD_URLS = [
    ("garbage", 2, "cannot parse"),
    ("postgresql://postgres@127.0.0.1/x", 2, "postgresql+asyncpg://"),
    ("mysql+aiomysql://u:hunter2@127.0.0.1/db", 2, "unsupported database 'mysql+aiomysql'"),
    ("sqlite+aiosqlite:////no/such/dir/m.db", 2, "'/no/such/dir'"),
    ("postgresql+asyncpg://postgres:hunter2@127.0.0.1:1/x", 1, "connection refused"),
    (
        "postgresql+asyncpg://postgres@127.0.0.1:5432/monitor_no_such_db",
        1,
        'database "monitor_no_such_db" does not exist',
    ),
    ("postgresql+asyncpg://nobody_qa:hunter2@127.0.0.1:5432/postgres", 1, 'role "nobody_qa" does not exist'),
]


@pytest.mark.parametrize(("url", "status", "problem"), BAD_URLS, ids=[u for u, _, _ in BAD_URLS])
def test_a_bad_database_url_is_one_line_for_every_command(
    url: str, status: int, problem: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MONITOR_DATABASE_URL", url)
    monkeypatch.setenv("MONITOR_USER_PASSWORD", "a-password-0123")
    for command in COMMANDS:
        assert main(command) == status, command
        err = capsys.readouterr().err.strip()
        assert err.startswith("monitor: MONITOR_DATABASE_URL: "), (command, err)
        assert problem in err, (command, err)
        assert "\n" not in err and "hunter2" not in err, (command, err)


def test_a_refused_database_is_one_line_from_a_real_process(tmp_path: Path) -> None:
    for args in (["serve", "--port", "18766"], ["import-crontab", "--help"]):
        proc = _monitor(
            tmp_path, *args, MONITOR_DATABASE_URL="postgresql+asyncpg://postgres:hunter2@127.0.0.1:1/x"
        )
        if args[0] == "serve":
            assert proc.returncode == 1
            assert proc.stderr.strip() == (
                "monitor: MONITOR_DATABASE_URL: cannot connect to postgresql+asyncpg://postgres:***@127.0.0.1:1/x:"
                " connection refused"
            )
        else:  # a command that does not touch the database is not bothered
            assert proc.returncode == 0
    proc = _monitor(tmp_path, "migrate", MONITOR_DATABASE_URL="garbage")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# -- F7: serve's port and workers ---------------------------------------------------------


@pytest.mark.parametrize(
    "args", [["--port", "99999"], ["--port", "0"], ["--port", "x"], ["--workers", "0"], ["--workers", "-1"]]
)
def test_serve_refuses_a_bad_port_or_worker_count(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"monitor: {args[0]} ") and "\n" not in err, err
