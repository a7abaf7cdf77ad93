"""Healthchecks compatibility, checked with a maintained third-party Healthchecks client from PyPI:
``healthchecks-io`` (py-healthchecks.io, 0.4.x), unchanged, pointed at our base URL.

The library pins ``croniter < 4`` and ``httpx < 0.28`` while the monitor needs ``croniter >= 6``,
so it cannot share the test environment: it is installed from the package index into a venv of
its own (as the install test does) and run as a subprocess (``hc/hc_library_session.py``), which
prints what each call returned. What differs from Healthchecks is listed in the README
("Healthchecks compatibility"); the calls that work are asserted here, and what the monitor
stored is read back through our own API.
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

from tests.clients.conftest import Monitor
from tests.support.process import clean_env

pytestmark = pytest.mark.e2e

# the library and its pinned requirements that the test venv does not already satisfy
HC_LIBRARY = [
    "healthchecks-io>=0.4.4,<0.5",
    "croniter>=1.1,<4",
    "httpx>=0.23,<0.28",
    "pytz>=2024.1,<2025",
    "packaging>=24.1,<25",
]
# every requirement the installed library declares is met by what it imports
CHECK_REQUIREMENTS = """
import importlib.metadata as m, sys
from packaging.requirements import Requirement
bad = []
for text in m.requires("healthchecks-io") or []:
    req = Requirement(text)
    version = m.version(req.name)
    if not req.specifier.contains(version, prereleases=True):
        bad.append(f"{req.name} {version} does not satisfy {req}")
print("\\n".join(bad))
sys.exit(1 if bad else 0)
"""
SESSION = Path(__file__).parent / "hc" / "hc_library_session.py"
# Every call of the library's sync and async clients (CheckTrap included) works against the
# monitor, except get_check_flips: see test_get_check_flips_reads_a_bare_list.
CALLS = [
    "create_check",
    "upsert_by_name",
    "get_checks",
    "get_checks_by_tag",
    "get_check",
    "update_check",
    "start_ping_uuid",
    "success_ping_uuid",
    "fail_ping_uuid",
    "exit_code_ping_uuid",
    "success_ping_slug",
    "start_ping_slug",
    "fail_ping_slug",
    "exit_code_ping_slug",
    "check_trap",
    "get_check_pings",
    "get_integrations",
    "get_badges",
    "pause_check",
    "delete_check",
]
COMPATIBLE = [f"sync.{c}" for c in [*CALLS, "check_trap_failing", "readonly_get_checks"]]
COMPATIBLE += [f"async.{c}" for c in CALLS]


@pytest.fixture(scope="module")
def hc_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A python that imports ``healthchecks-io`` with every requirement it declares satisfied.

    The library and its pinned pure-Python requirements go (``--no-deps``) into a directory
    that comes first on ``PYTHONPATH``; the rest it needs (pydantic, httpcore, anyio …) are the
    test venv's, which satisfy its ranges. A whole fresh venv would do too but costs 10-25 s of
    downloads per run.
    """
    target = tmp_path_factory.mktemp("hc-lib")
    started = time.monotonic()
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), *HC_LIBRARY],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(),
        check=False,
    )
    assert install.returncode == 0, f"pip install {HC_LIBRARY} failed:\n{install.stderr[-3000:]}"
    env = clean_env(PYTHONPATH=str(target))
    check = subprocess.run(
        [sys.executable, "-c", CHECK_REQUIREMENTS],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    print(f"{HC_LIBRARY[0]} ready in {time.monotonic() - started:.1f}s")
    yield sys.executable, env


@pytest.fixture(scope="module")
def session(monitor: Monitor, hc_python: tuple[str, dict[str, str]]) -> dict[str, Any]:
    """One run of hc/hc_library_session.py: every call of the library, sync then async."""
    python, env = hc_python
    slug = "hc-library-slug"
    slug_check = monitor.create_check(name=slug, slug=slug)
    monitor.api("POST", "channels/", {"name": "ops mail", "url": "mailto://ops@example.org"})
    monitor.api("POST", "channels/", {"name": "ops hook", "url": "json://127.0.0.1:9/hook"})
    proc = subprocess.run(
        [python, str(SESSION), monitor.base, monitor.api_key, monitor.readonly_key, monitor.ping_key, slug],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout)
    report["slug_check"] = slug_check
    return report


def _http_status(url: str, key: str) -> str:
    status = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", url, "-H", f"X-Api-Key: {key}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return status.stdout


def test_healthchecks_io_library_works_unchanged_against_the_monitor(
    monitor: Monitor, session: dict[str, Any]
) -> None:
    report = session
    broken = {name: report[name].get("error") for name in COMPATIBLE if not report[name]["ok"]}
    assert broken == {}, json.dumps(report, indent=1)

    for mode, name, timeout, grace in (
        ("sync", "hc-library", 3600, 120),
        ("async", "hc-library-async", 600, 60),
    ):
        created = report[f"{mode}.create_check"]["value"]
        assert created["name"] == name and created["timeout"] == timeout and created["grace"] == grace
        assert report[f"{mode}.upsert_by_name"]["value"] == created["uuid"]  # unique: ["name"] found it
        assert report[f"{mode}.get_checks_by_tag"]["value"] == [created["uuid"]]
        assert created["uuid"] in report[f"{mode}.get_checks"]["value"]
        assert report[f"{mode}.pause_check"]["value"] == "paused"
        assert all(
            report[f"{mode}.{kind}_ping_uuid"]["value"] == [True, "OK"] for kind in ("start", "success")
        )
        integrations = report[f"{mode}.get_integrations"]["value"]
        assert sorted((i["name"], i["kind"]) for i in integrations) == [
            ("ops hook", "webhook"),
            ("ops mail", "email"),
        ]
        badges = report[f"{mode}.get_badges"]["value"]
        assert {"*", created["tags"]} <= set(badges)
        assert badges["*"]["shields"].endswith("*.shields?states=2")
        # delete_check really deleted it
        assert _http_status(f"{monitor.base}/api/v3/checks/{created['uuid']}", monitor.api_key) == "404"
    updated = report["sync.update_check"]["value"]
    assert (
        updated["status"] == "new"
    )  # (its Check model has no tz: Europe/Kiev is accepted, and stored as Kyiv)
    assert report["sync.check_trap_failing"]["value"] == "raised"

    # what the pings did, read through our API: the uuid checks were deleted at the end, so look
    # at the slug check: sync success/start/fail/0 + trap start/fail, then async likewise
    kinds = [p["type"] for p in monitor.pings(report["slug_check"]["uuid"])]
    assert kinds == [
        "success",
        "start",
        "fail",
        "success",
        "start",
        "fail",
        "success",
        "start",
        "fail",
        "success",
    ]
    user_agents = {p["ua"] for p in monitor.pings(report["slug_check"]["uuid"])}
    assert {ua.split("/")[0] for ua in user_agents} == {"py-healthchecks.io", "py-healthchecks.io-async"}


def test_a_readonly_client_sees_no_uuid_and_no_pings(session: dict[str, Any]) -> None:
    """The library's read-only mode: checks come without uuid and ping URL (its ``Check.uuid``
    is then None, as its docstring expects), pings are refused (401 → its HCAPIAuthError) and
    writes too (403, also HCAPIAuthError)."""
    checks = session["sync.readonly_get_checks"]["value"]
    assert checks and all(c["uuid"] is None and c["ping_url"] is None and c["unique_key"] for c in checks)
    assert session["sync.readonly_get_check_pings"]["error"].startswith("HCAPIAuthError")
    assert session["sync.readonly_create_check"]["error"].startswith("HCAPIAuthError")


def test_get_check_flips_reads_a_bare_list(session: dict[str, Any]) -> None:
    """Kept on purpose: the library's get_check_flips() iterates the answer as a bare list (the
    shape of Healthchecks' docs), while Healthchecks' code — and the monitor — answer
    ``{"flips": [...]}``. Iterating the object gives its key, so the library fails on both."""
    for mode in ("sync", "async"):
        error = session[f"{mode}.get_check_flips"]["error"]
        assert error.startswith("TypeError"), error
