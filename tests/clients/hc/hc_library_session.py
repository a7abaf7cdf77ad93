"""Drive the third-party ``healthchecks-io`` library (PyPI) against our monitor; print a JSON report.

Runs in its own venv (that library pins croniter < 4 and httpx < 0.28, which the monitor's own
environment cannot take). Usage:
python hc_library_session.py BASE_URL API_KEY READONLY_KEY PING_KEY SLUG
Every call of the library's ``Client`` is made, then every call of its ``AsyncClient`` (step
names ``sync.<call>`` and ``async.<call>``), with ``CheckTrap`` used both ways, plus a client
holding the read-only key. Each step is recorded as {"ok": true, "value": …} or
{"ok": false, "error": "Type: message"}.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from healthchecks_io import AsyncClient, CheckCreate, CheckTrap, CheckUpdate, Client

base, api_key, readonly_key, ping_key, slug = sys.argv[1:6]
report: dict[str, Any] = {}
URLS = {"api_url": f"{base}/api/", "ping_url": f"{base}/ping/", "api_version": 3}


def record(name: str, value: Any = None, error: BaseException | None = None) -> Any:
    if error is not None:  # the report says what failed and why
        report[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"[:600]}
        return None
    report[name] = {"ok": True, "value": value}
    return value


def step(name: str, action: Callable[[], Any]) -> Any:
    try:
        return record(name, action())
    except Exception as error:
        return record(name, error=error)


async def astep(
    name: str, action: Callable[[], Awaitable[Any]], convert: Callable[[Any], Any] = lambda v: v
) -> Any:
    try:
        return record(name, convert(await action()))
    except Exception as error:
        return record(name, error=error)


def dump(value: Any) -> Any:
    return value.model_dump(mode="json") if value is not None else None


def run_sync() -> None:
    client = Client(api_key=api_key, ping_key=ping_key, **URLS)
    created = step(
        "sync.create_check",
        lambda: dump(
            client.create_check(
                CheckCreate(
                    name="hc-library", tags="hc-lib", desc="made by healthchecks-io", timeout=3600, grace=120
                )
            )
        ),
    )
    uuid = created["uuid"] if created else ""
    step(
        "sync.upsert_by_name",
        lambda: (
            client.create_check(
                CheckCreate(name="hc-library", tags="hc-lib", grace=300, unique=["name"])
            ).uuid
        ),
    )
    step("sync.get_checks", lambda: [c.uuid for c in client.get_checks()])
    step("sync.get_checks_by_tag", lambda: [c.uuid for c in client.get_checks(tags=["hc-lib"])])
    step("sync.get_check", lambda: dump(client.get_check(uuid)))
    step(
        "sync.update_check",
        lambda: dump(client.update_check(uuid, CheckUpdate(schedule="*/5 * * * *", tz="Europe/Kiev"))),
    )
    step("sync.start_ping_uuid", lambda: list(client.start_ping(uuid=uuid)))
    step("sync.success_ping_uuid", lambda: list(client.success_ping(uuid=uuid, data="all good")))
    step("sync.fail_ping_uuid", lambda: list(client.fail_ping(uuid=uuid, data="broken")))
    step("sync.exit_code_ping_uuid", lambda: list(client.exit_code_ping(3, uuid=uuid)))
    step("sync.success_ping_slug", lambda: list(client.success_ping(slug=slug)))
    step("sync.start_ping_slug", lambda: list(client.start_ping(slug=slug)))
    step("sync.fail_ping_slug", lambda: list(client.fail_ping(slug=slug)))
    step("sync.exit_code_ping_slug", lambda: list(client.exit_code_ping(0, slug=slug)))

    def trap() -> str:
        with CheckTrap(client, uuid=uuid) as check_trap:
            check_trap.add_log("inside the trap")
        return "ok"

    def failing_trap() -> str:
        try:
            with CheckTrap(client, slug=slug) as check_trap:
                check_trap.add_log("about to fail")
                raise RuntimeError("job broke")
        except RuntimeError:
            return "raised"
        return "not raised"

    step("sync.check_trap", trap)
    step("sync.check_trap_failing", failing_trap)
    step("sync.get_check_pings", lambda: [dump(p) for p in client.get_check_pings(uuid)])
    step("sync.get_check_flips", lambda: [dump(f) for f in client.get_check_flips(uuid)])
    step("sync.get_integrations", lambda: [dump(i) for i in client.get_integrations()])
    step("sync.get_badges", lambda: {k: dump(v) for k, v in client.get_badges().items()})
    step("sync.pause_check", lambda: client.pause_check(uuid).status)
    step("sync.delete_check", lambda: client.delete_check(uuid).uuid)

    readonly = Client(api_key=readonly_key, ping_key=ping_key, **URLS)
    step("sync.readonly_get_checks", lambda: [dump(c) for c in readonly.get_checks()])
    step("sync.readonly_get_check_pings", lambda: readonly.get_check_pings(uuid))
    step("sync.readonly_create_check", lambda: readonly.create_check(CheckCreate(name="nope")).uuid)


async def run_async() -> None:
    client = AsyncClient(api_key=api_key, ping_key=ping_key, **URLS)
    created = await astep(
        "async.create_check",
        lambda: client.create_check(
            CheckCreate(name="hc-library-async", tags="hc-lib-async", timeout=600, grace=60)
        ),
        dump,
    )
    uuid = created["uuid"] if created else ""
    await astep(
        "async.upsert_by_name",
        lambda: client.create_check(
            CheckCreate(name="hc-library-async", tags="hc-lib-async", grace=90, unique=["name"])
        ),
        lambda c: c.uuid,
    )
    await astep("async.get_checks", lambda: client.get_checks(), lambda cs: [c.uuid for c in cs])
    await astep(
        "async.get_checks_by_tag",
        lambda: client.get_checks(tags=["hc-lib-async"]),
        lambda cs: [c.uuid for c in cs],
    )
    await astep("async.get_check", lambda: client.get_check(uuid), dump)
    await astep("async.update_check", lambda: client.update_check(uuid, CheckUpdate(desc="async")), dump)
    await astep("async.start_ping_uuid", lambda: client.start_ping(uuid=uuid), list)
    await astep("async.success_ping_uuid", lambda: client.success_ping(uuid=uuid, data="ok"), list)
    await astep("async.fail_ping_uuid", lambda: client.fail_ping(uuid=uuid), list)
    await astep("async.exit_code_ping_uuid", lambda: client.exit_code_ping(0, uuid=uuid), list)
    await astep("async.success_ping_slug", lambda: client.success_ping(slug=slug), list)
    await astep("async.start_ping_slug", lambda: client.start_ping(slug=slug), list)
    await astep("async.fail_ping_slug", lambda: client.fail_ping(slug=slug), list)
    await astep("async.exit_code_ping_slug", lambda: client.exit_code_ping(0, slug=slug), list)

    async def trap() -> str:
        async with CheckTrap(client, uuid=uuid) as check_trap:
            check_trap.add_log("inside the async trap")
        return "ok"

    await astep("async.check_trap", trap)
    await astep(
        "async.get_check_pings", lambda: client.get_check_pings(uuid), lambda ps: [dump(p) for p in ps]
    )
    await astep(
        "async.get_check_flips", lambda: client.get_check_flips(uuid), lambda fs: [dump(f) for f in fs]
    )
    await astep("async.get_integrations", lambda: client.get_integrations(), lambda xs: [dump(i) for i in xs])
    await astep(
        "async.get_badges", lambda: client.get_badges(), lambda bs: {k: dump(v) for k, v in bs.items()}
    )
    await astep("async.pause_check", lambda: client.pause_check(uuid), lambda c: c.status)
    await astep("async.delete_check", lambda: client.delete_check(uuid), lambda c: c.uuid)


run_sync()
asyncio.run(run_async())
print(json.dumps(report, indent=1, default=str))
