"""``pip install`` of the built wheel into a fresh venv, used from an unrelated empty directory
(DESIGN §10, §11).

The wheel is built from the checkout (``pip wheel --no-deps``), installed into a new venv
without system site-packages (its dependencies come from the package index), and the console
script ``monitor`` is run from an empty temporary directory: ``migrate``, ``replay`` of a shared
scenario and ``serve`` answering ``/health`` and a ping.

"Nothing reads the checkout" is checked, not assumed: a ``sitecustomize`` module (on
``PYTHONPATH``, outside the checkout) installs an audit hook in every ``monitor`` process that
records each file opened, directory listed or SQLite database connected under the checkout.
The hook also records the migration scripts it saw opened, which proves it was active.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.process import REPO_ROOT, MonitorProcess, clean_env, curl_api, curl_ping
from tests.support.receivers import free_port

pytestmark = pytest.mark.e2e

SCENARIO = REPO_ROOT / "tests" / "cases" / "runs" / "three-replicas-duplicate.json"
API_KEY = "install-test-key-0123456789"

SITECUSTOMIZE = """
import os, sys

_CHECKOUT = {checkout!r}
_REPORT = {report!r}


def _path(value):
    if isinstance(value, int):
        return None
    try:
        value = os.fsdecode(os.fspath(value))
    except TypeError:
        return None
    return os.path.abspath(value)


def _hook(event, args):
    if event not in ("open", "os.listdir", "os.scandir", "sqlite3.connect") or not args:
        return
    path = _path(args[0])
    if path is None:
        return
    if path == _CHECKOUT or path.startswith(_CHECKOUT + os.sep):
        verdict = "CHECKOUT"
    elif os.sep + "_migrations" + os.sep in path:
        verdict = "MIGRATION"
    else:
        return
    with open(_REPORT, "a") as report:
        report.write(f"{{verdict}} {{event}} {{path}}\\n")


sys.addaudithook(_hook)
"""


def _run(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 120) -> str:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=timeout, check=False)
    assert proc.returncode == 0, (
        f"{' '.join(argv)} exited {proc.returncode}\n{proc.stdout.decode()}\n{proc.stderr.decode()}"
    )
    return proc.stdout.decode()


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv (no system site-packages) with the built wheel installed; yields its bin/."""
    root = tmp_path_factory.mktemp("install")
    wheels = root / "wheels"
    started = time.monotonic()
    _run(
        [sys.executable, "-m", "pip", "wheel", str(REPO_ROOT), "--no-deps", "-q", "-w", str(wheels)],
        cwd=root,
        env=clean_env(),
    )
    [wheel] = wheels.glob("monitor-*.whl")
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=root, env=clean_env())
    bin_dir = venv / "bin"
    _run([str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)], cwd=root, env=clean_env())
    print(f"wheel built and installed into a fresh venv in {time.monotonic() - started:.1f}s")
    yield bin_dir


@pytest.fixture
def empty_dir(tmp_path: Path) -> Path:
    work = tmp_path / "empty"
    work.mkdir()
    return work


@pytest.fixture
def audited_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """Environment whose Python processes report reads of the checkout to ``report``."""
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir()
    report = tmp_path / "audit.txt"
    report.touch()
    (hook_dir / "sitecustomize.py").write_text(
        SITECUSTOMIZE.format(checkout=str(REPO_ROOT), report=str(report))
    )
    env = clean_env()
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    env["PYTHONPATH"] = str(hook_dir)
    return env, report


def _audit(report: Path) -> tuple[list[str], list[str]]:
    lines = report.read_text().splitlines()
    return [x for x in lines if x.startswith("CHECKOUT")], [x for x in lines if x.startswith("MIGRATION")]


@pytest.mark.slow
def test_installed_wheel_works_from_an_empty_directory(
    installed: Path, empty_dir: Path, audited_env: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    env, report = audited_env
    monitor = str(installed / "monitor")

    where = _run(
        [
            str(installed / "python"),
            "-c",
            "import monitor, monitor.storage.engine as e, monitor_client; print(monitor.__file__); "
            "print(e.migrations_dir()); print(monitor_client.__file__)",
        ],
        cwd=empty_dir,
        env=env,
    ).split()
    assert all(Path(p).is_relative_to(installed.parent) for p in where), where

    # monitor migrate: the default database ./monitor.db in the (empty) working directory
    assert json.loads(_run([monitor, "migrate"], cwd=empty_dir, env=env)) == {"migrated": True}
    assert (empty_dir / "monitor.db").is_file()

    # monitor replay FILE: exactly one JSON document on stdout (the scenario is copied out of the
    # checkout: the audit below refuses any file the installed package opens inside it)
    scenario = tmp_path / SCENARIO.name
    scenario.write_text(SCENARIO.read_text())
    expect = json.loads(scenario.read_text())["expect"]
    result: dict[str, Any] = json.loads(_run([monitor, "replay", str(scenario)], cwd=empty_dir, env=env))
    assert sorted((a["kind"], a["scheduled"]) for a in result["alerts"]) == sorted(
        (a["kind"], a["scheduled"]) for a in expect["alerts"]
    )
    assert result["status"] == expect["status"]
    ticks = {t["scheduled"]: t for t in result["ticks"]}
    for tick in expect["ticks"]:
        assert ticks[tick["scheduled"]]["outcome"] == tick["outcome"]
        assert ticks[tick["scheduled"]]["runs"] == tick["runs"]

    # monitor serve, as shipped (no --dev), answering /health and a ping
    port = free_port()
    serve_env = {**env, "MONITOR_API_KEY": API_KEY, "MONITOR_BASE_URL": f"http://127.0.0.1:{port}"}
    server = MonitorProcess(
        [monitor, "serve", "--port", str(port)],
        env=serve_env,
        cwd=empty_dir,
        logs=tmp_path,
        name="serve",
        port=port,
    )
    try:
        server.start()
        server.wait_healthy()
        status, health = curl_api(server.base, "GET", "/health", None)
        assert status == 200 and health["status"] == "ok"
        status, check = curl_api(server.base, "POST", "/api/v3/checks/", API_KEY, {"name": "installed"})
        assert status == 201, check
        assert curl_ping(check["ping_url"]) == "OK"
        status, stored = curl_api(server.base, "GET", f"/api/v3/checks/{check['uuid']}", API_KEY)
        assert status == 200 and stored["n_pings"] == 1
        # the dashboard renders from the wheel's own templates and static files
        status, login = curl_api(server.base, "GET", "/login", None)
        assert status == 200 and 'name="csrf_token"' in login, login
        status, css = curl_api(server.base, "GET", "/static/dashboard.css", None)
        assert status == 200 and ".pill" in css
        assert curl_api(server.base, "GET", "/", None)[0] == 303
        status, badge = curl_api(server.base, "GET", stored["badge_url"].removeprefix(server.base), None)
        assert status == 200 and "<svg" in badge
        made = json.loads(
            _run(
                [monitor, "user", "create", "ops@example.com", "--project", "default"],
                cwd=empty_dir,
                env={**env, "MONITOR_USER_PASSWORD": "installed password"},
            )
        )
        assert made["projects"] == ["default"]
        # the wheel ships the client too: its monitor-run reports a run
        ran = subprocess.run(
            [str(installed / "monitor-run"), "--check", check["uuid"], "--", "sh", "-c", "echo hi; exit 3"],
            cwd=empty_dir,
            env={**env, "MONITOR_BASE_URL": server.base},
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert ran.returncode == 3 and ran.stdout == b"hi\n", ran.stderr
        status, stored = curl_api(server.base, "GET", f"/api/v3/checks/{check['uuid']}", API_KEY)
        assert status == 200 and stored["n_pings"] == 3
        assert server.terminate() == 0, server.describe()
    finally:
        server.close()

    assert sorted(p.name for p in empty_dir.iterdir() if not p.name.startswith("monitor.db")) == []
    checkout_reads, migration_reads = _audit(report)
    assert checkout_reads == [], "\n".join(checkout_reads)
    assert migration_reads, "the audit hook saw no migration script opened: was it active?"
    assert all(str(installed.parent) in line for line in migration_reads), migration_reads


@pytest.mark.slow
def test_client_distribution_installs_alone_into_a_fresh_venv(tmp_path: Path, empty_dir: Path) -> None:
    """``pip install ./clients/python`` on a fresh machine: httpx is its only dependency."""
    venv = tmp_path / "client-venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, env=clean_env())
    python = str(venv / "bin" / "python")
    _run(
        [python, "-m", "pip", "install", "-q", str(REPO_ROOT / "clients" / "python")],
        cwd=tmp_path,
        env=clean_env(),
    )
    env = clean_env()
    env.pop("PYTHONPATH", None)
    shown = _run(
        [
            python,
            "-c",
            "import monitor_client, importlib.util as u; print(monitor_client.__file__); "
            "print(u.find_spec('monitor')); print(monitor_client.Client().base_url)",
        ],
        cwd=empty_dir,
        env=env,
    ).split()
    assert Path(shown[0]).is_relative_to(venv) and shown[1] == "None", shown
    assert shown[2] == "http://127.0.0.1:8000"
    installed = _run([python, "-m", "pip", "list", "--format=freeze"], cwd=empty_dir, env=env)
    assert "monitor-client==0.1.0" in installed and "httpx==" in installed
    assert (venv / "bin" / "monitor-run").exists()
    assert (Path(shown[0]).parent / "py.typed").exists()
