"""``monitor replay``: the shared scenarios through the real services on a real database."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.services.replay import load_scenario, replay
from tests.scenarios import RUN_CASES, scenario_files
from tests.support.process import checkout_env


@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: p.stem)
async def test_replay_matches_the_scenario(path: Path, database_url: str) -> None:
    scenario = load_scenario(path)
    result = await replay(scenario, database_url=database_url)
    expect = scenario["expect"]
    assert sorted((a["kind"], a["scheduled"]) for a in result["alerts"]) == sorted(
        (a["kind"], a["scheduled"]) for a in expect["alerts"]
    )
    assert result["status"] == expect["status"]
    ticks = {t["scheduled"]: t for t in result["ticks"]}
    for tick in expect.get("ticks", []):
        got = ticks[tick["scheduled"]]
        assert got["outcome"] == tick["outcome"], tick
        if "runs" in tick:
            assert got["runs"] == tick["runs"], tick


def test_the_command_prints_exactly_one_json_document(tmp_path: Path) -> None:
    case = RUN_CASES / "missed-once-per-episode.json"
    proc = subprocess.run(
        [sys.executable, "-m", "monitor", "replay", str(case)],
        capture_output=True,
        cwd=tmp_path,
        env=checkout_env(),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    document = json.loads(proc.stdout)  # one document, nothing else on stdout
    assert set(document) == {"alerts", "status", "ticks"}
    assert document["alerts"] == [{"kind": "missed", "scheduled": "2026-07-19T03:00:00Z"}]
    assert document["status"] == "down"
    assert all(t["scheduled"].endswith("Z") and len(t["scheduled"]) == 20 for t in document["ticks"])
    assert list(tmp_path.iterdir()) == []  # the temporary database is gone


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "monitor", "replay", str(tmp_path / "nope.json")],
        capture_output=True,
        env=checkout_env(),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert b"cannot read" in proc.stderr
    assert b"Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "content",
    [
        {"steps": []},
        {"check": {"schedule": "61 * * * *", "grace": 60}, "created": "2026-07-17T12:00:00Z", "steps": []},
        {"check": {"schedule": "0 3 * * *", "grace": 60}, "created": "yesterday", "steps": []},
        {
            "check": {"schedule": "0 3 * * *", "grace": 60},
            "created": "2026-07-17T12:00:00Z",
            "steps": [{"ping": "start"}],
        },
        [],
    ],
    ids=["no-check", "bad-schedule", "bad-created", "step-without-at", "not-an-object"],
)
def test_an_invalid_scenario_is_a_clear_error(tmp_path: Path, content: object) -> None:
    scenario = tmp_path / "bad.json"
    scenario.write_text(json.dumps(content))
    proc = subprocess.run(
        [sys.executable, "-m", "monitor", "replay", str(scenario)],
        capture_output=True,
        env=checkout_env(),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr.decode()
    assert b"not a valid scenario" in proc.stderr
    assert b"Traceback" not in proc.stderr


def _replay_cli(tmp_path: Path, scenario: object) -> subprocess.CompletedProcess[bytes]:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(scenario))
    return subprocess.run(
        [sys.executable, "-m", "monitor", "replay", str(path)],
        capture_output=True,
        env=checkout_env(),
        timeout=60,
        check=False,
    )


BASE = {"check": {"schedule": "0 3 * * *", "grace": 600}, "created": "2026-07-17T12:00:00Z"}


def test_scheduled_as_unix_seconds_and_refused_pings_are_reported(tmp_path: Path) -> None:
    """QA: unix seconds were refused as 'Invalid isoformat'; refused pings vanished silently."""
    scenario = {
        **BASE,
        "steps": [
            {"at": "2026-07-18T03:00:10Z", "ping": "success", "scheduled": 1784343600},
            {"at": "2026-07-18T03:00:20Z", "ping": "skip", "scheduled": "2026-07-18T05:00:00Z"},
        ],
    }
    proc = _replay_cli(tmp_path, scenario)
    assert proc.returncode == 0, proc.stderr.decode()
    ticks = json.loads(proc.stdout)["ticks"]
    assert ticks == [{"scheduled": "2026-07-18T03:00:00Z", "outcome": "on_time", "runs": 1}]
    assert b"step 2: ping refused: 400 scheduled: " in proc.stderr


@pytest.mark.parametrize(
    ("steps", "field"),
    [
        ([{"at": "2026-07-18T03:00:10Z", "ping": 256}], "ping"),
        ([{"at": "2026-07-18T03:00:10Z", "ping": "succes"}], "ping"),
        ([{"at": "2026-07-18T03:00:10Z", "ping": "start", "rid": "not-a-uuid"}], "rid"),
        ([{"at": "2026-07-18T03:00:10Z"}, {"at": "2026-07-18T02:00:00Z"}], "at"),
    ],
    ids=["exit-256", "typo-kind", "bad-rid", "out-of-order"],
)
def test_steps_the_ping_endpoint_would_refuse_are_errors(tmp_path: Path, steps: object, field: str) -> None:
    proc = _replay_cli(tmp_path, {**BASE, "steps": steps})
    assert proc.returncode == 2
    assert f"not a valid scenario: {field}: ".encode() in proc.stderr, proc.stderr
