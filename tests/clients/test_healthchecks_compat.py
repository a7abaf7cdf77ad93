"""Healthchecks compatibility, checked with a maintained third-party Healthchecks client from PyPI
(issue 7): ``healthchecks-io`` (py-healthchecks.io, 0.4.x), unchanged, pointed at our base URL.

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
# Calls that work unchanged against the monitor (see the README for the ones that do not)
COMPATIBLE = [
    "create_check",
    "upsert_by_name",
    "get_checks_by_tag",
    "get_check",
    "update_check",
    "start_ping_uuid",
    "success_ping_uuid",
    "fail_ping_uuid",
    "exit_code_ping_uuid",
    "success_ping_slug",
    "start_ping_slug",
    "check_trap",
    "get_integrations",
    "get_check_pings",
    "get_badges",
    "pause_check",
    "delete_check",
]


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


def test_healthchecks_io_library_works_unchanged_against_the_monitor(
    monitor: Monitor, hc_python: tuple[str, dict[str, str]]
) -> None:
    python, env = hc_python
    slug = "hc-library-slug"
    slug_check = monitor.create_check(name=slug, slug=slug)
    proc = subprocess.run(
        [python, str(SESSION), monitor.base, monitor.api_key, monitor.ping_key, slug],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout)
    broken = {name: report[name].get("error") for name in COMPATIBLE if not report[name]["ok"]}
    assert broken == {}, json.dumps(report, indent=1)

    created = report["create_check"]["value"]
    assert created["name"] == "hc-library" and created["timeout"] == 3600 and created["grace"] == 120
    assert report["upsert_by_name"]["value"] == created["uuid"]  # unique: ["name"] found it
    assert report["get_checks_by_tag"]["value"] == [created["uuid"]]
    assert report["update_check"]["value"]["status"] == "new"
    assert report["pause_check"]["value"] == "paused"
    assert all(report[f"{kind}_ping_uuid"]["value"] == [True, "OK"] for kind in ("start", "success", "fail"))

    # what the pings did, read through our API: the check was deleted at the end, so look at the
    # slug check, and at the uuid check's pings before the library deleted it via the session log
    assert [p["type"] for p in monitor.pings(slug_check["uuid"])] == ["success", "start"]
    user_agents = {p["ua"] for p in monitor.pings(slug_check["uuid"])}
    assert all(ua.startswith("py-healthchecks.io/") for ua in user_agents), user_agents
    status = subprocess.run(
        [
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            f"{monitor.base}/api/v3/checks/{created['uuid']}",
            "-H",
            f"X-Api-Key: {monitor.api_key}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert status.stdout == "404"  # delete_check really deleted it
