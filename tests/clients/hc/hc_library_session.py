"""Drive the third-party ``healthchecks-io`` library (PyPI) against our monitor; print a JSON report.

Runs in its own venv (that library pins croniter < 4 and httpx < 0.28, which the monitor's own
environment cannot take). Usage: python hc_library_session.py BASE_URL API_KEY PING_KEY SLUG
Each step is recorded as {"ok": true, "value": …} or {"ok": false, "error": "Type: message"}.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from healthchecks_io import CheckCreate, CheckTrap, CheckUpdate, Client

base, api_key, ping_key, slug = sys.argv[1:5]
report: dict[str, Any] = {}


def step(name: str, action: Callable[[], Any]) -> Any:
    try:
        value = action()
    except Exception as error:  # the report says what failed and why
        report[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"[:600]}
        return None
    report[name] = {"ok": True, "value": value}
    return value


client = Client(
    api_key=api_key, ping_key=ping_key, api_url=f"{base}/api/", ping_url=f"{base}/ping/", api_version=3
)
created = step(
    "create_check",
    lambda: client.create_check(
        CheckCreate(name="hc-library", tags="hc-lib", desc="made by healthchecks-io", timeout=3600, grace=120)
    ).model_dump(mode="json"),
)
uuid = created["uuid"] if created else ""
step(
    "upsert_by_name",
    lambda: (
        client.create_check(CheckCreate(name="hc-library", tags="hc-lib", grace=300, unique=["name"])).uuid
    ),
)
step("get_checks_by_tag", lambda: [c.uuid for c in client.get_checks(tags=["hc-lib"])])
step("get_check", lambda: client.get_check(uuid).model_dump(mode="json"))
step(
    "update_check",
    lambda: client.update_check(uuid, CheckUpdate(schedule="*/5 * * * *", tz="Europe/Berlin")).model_dump(
        mode="json"
    ),
)
step("start_ping_uuid", lambda: list(client.start_ping(uuid=uuid)))
step("success_ping_uuid", lambda: list(client.success_ping(uuid=uuid, data="all good")))
step("fail_ping_uuid", lambda: list(client.fail_ping(uuid=uuid, data="broken")))
step("exit_code_ping_uuid", lambda: list(client.exit_code_ping(3, uuid=uuid)))
step("success_ping_slug", lambda: list(client.success_ping(slug=slug)))
step("start_ping_slug", lambda: list(client.start_ping(slug=slug)))


def trap() -> str:
    with CheckTrap(client, uuid=uuid) as check_trap:
        check_trap.add_log("inside the trap")
    return "ok"


step("check_trap", trap)
step("get_check_pings", lambda: [p.model_dump(mode="json") for p in client.get_check_pings(uuid)])
step("get_check_flips", lambda: [f.model_dump(mode="json") for f in client.get_check_flips(uuid)])
step(
    "get_integrations", lambda: [i.model_dump(mode="json") if i else None for i in client.get_integrations()]
)
step("get_badges", lambda: {k: v.model_dump(mode="json") for k, v in client.get_badges().items()})
step("pause_check", lambda: client.pause_check(uuid).status)
step("delete_check", lambda: client.delete_check(uuid).uuid)
print(json.dumps(report, indent=1, default=str))
