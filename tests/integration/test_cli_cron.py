"""``monitor cron explain`` prints the same document as ``GET /api/v3/cron/explain`` (DESIGN §4)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.process import checkout_env


def _explain(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", "cron", "explain", *args],
        capture_output=True,
        env=checkout_env(),
        timeout=60,
        check=False,
    )


def test_explain_prints_fields_description_warnings_and_next_ticks() -> None:
    proc = _explain("30 2 * * *", "--tz", "Europe/Berlin", "--count", "2", "--after", "2026-03-28T00:00:00Z")
    assert proc.returncode == 0, proc.stderr.decode()
    document = json.loads(proc.stdout)
    assert set(document) == {"schedule", "tz", "dialect", "fields", "description", "warnings", "next"}
    assert [f["name"] for f in document["fields"]] == [
        "minute",
        "hour",
        "day of month",
        "month",
        "day of week",
    ]
    # the spring-forward gap: 02:30 does not exist on 2026-03-29, the tick is 03:00 CEST (DESIGN §4)
    assert document["next"] == [
        {"utc": "2026-03-28T01:30:00Z", "local": "2026-03-28T02:30:00+01:00"},
        {"utc": "2026-03-29T01:00:00Z", "local": "2026-03-29T03:00:00+02:00"},
    ]
    assert any("DST" in w or "daylight" in w.lower() or "gap" in w for w in document["warnings"])


def test_explain_names_the_field_of_a_bad_expression() -> None:
    proc = _explain("0 0 13 * 8")
    assert proc.returncode == 2
    assert json.loads(proc.stdout) == {"error": "schedule: field 5 (day of week): 8 is out of range 0-7"}
    assert b"Traceback" not in proc.stderr


def test_explain_rejects_an_unknown_zone_and_a_never_firing_expression() -> None:
    zone = _explain("0 3 * * *", "--tz", "Mars/Olympus")
    assert zone.returncode == 2 and json.loads(zone.stdout)["error"].startswith("tz: ")
    never = _explain("0 0 30 2 *")
    assert never.returncode == 2 and "never fires" in json.loads(never.stdout)["error"]
    after = _explain("0 3 * * *", "--after", "yesterday")
    assert after.returncode == 2 and json.loads(after.stdout)["error"].startswith("after")
