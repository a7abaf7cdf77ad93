"""``monitor_client.Client`` / ``AsyncClient`` against a real ``monitor serve`` process.

Every call of the client is made for real over HTTP and checked by reading back what the server
stored (pings, bodies, runs). The "monitor is down" cases use a port nobody listens on and a
real HTTP server that never answers in time (tests.support.receivers.HttpReceiver).
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from monitor_client import AsyncClient, Client, PingResult

from tests.clients.conftest import BODY_LIMIT, Monitor
from tests.support.receivers import HttpReceiver, free_port

pytestmark = pytest.mark.e2e


def _slug() -> str:
    return f"job-{uuid.uuid4().hex[:10]}"


def _tick() -> datetime:
    """A recent whole minute (the server refuses a ``scheduled`` in the future)."""
    return datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)


def _client(monitor: Monitor, **kwargs: Any) -> Client:
    kwargs.setdefault("api_key", monitor.api_key)
    kwargs.setdefault("ping_key", monitor.ping_key)
    return Client(monitor.base, **kwargs)


def test_every_ping_kind_by_uuid_is_stored_with_rid_scheduled_and_body(monitor: Monitor) -> None:
    check = monitor.create_check(schedule="* * * * *", grace=120)
    tick = _tick()
    rid = str(uuid.uuid4())
    with _client(monitor) as client:
        results = [
            client.ping(check["uuid"], "start", rid=rid, scheduled=tick),
            client.ping(check["uuid"], "log", rid=rid, scheduled=tick, body="halfway"),
            client.ping(check["uuid"], exit_status=0, rid=rid, scheduled=tick, body=b"done\n"),
            client.ping(check["uuid"], "fail", scheduled=tick.isoformat(), body="broken"),
            client.ping(check["uuid"], "skip", scheduled=int(tick.timestamp()) + 60),
            client.ping(check["uuid"], exit_status=3, scheduled=tick + timedelta(minutes=1)),
            client.ping(check["uuid"]),
        ]
    assert [r.ok for r in results] == [True] * 7, results
    assert results[0] == PingResult(True, 200, BODY_LIMIT, None, "OK")
    pings = monitor.pings(check["uuid"])
    assert [p["type"] for p in pings] == ["start", "log", "success", "fail", "skip", "fail", "success"]
    assert [p["rid"] for p in pings[:3]] == [rid, rid, rid]
    assert pings[0]["scheduled"] == tick.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert pings[2]["exit_status"] == 0 and pings[5]["exit_status"] == 3
    assert monitor.body(check["uuid"], pings[1]["n"]) == b"halfway"
    assert monitor.body(check["uuid"], pings[2]["n"]) == b"done\n"


def test_slug_pings_use_the_ping_key_and_create_provisions(monitor: Monitor) -> None:
    slug = _slug()
    with _client(monitor) as client:
        missing = client.ping(slug)
        created = client.ping(slug, create=True)
        again = client.ping(slug, "start")
    assert (missing.ok, missing.status, missing.error) == (False, 404, "404 not found")
    assert (created.ok, created.status, created.text) == (True, 201, "Created")
    assert again.ok
    [check] = monitor.api("GET", f"checks/?slug={slug}")["checks"]
    assert [p["type"] for p in monitor.pings(check["uuid"])] == ["success", "start"]


def test_slug_without_ping_key_is_looked_up_with_the_api_key(monitor: Monitor) -> None:
    slug = _slug()
    check = monitor.create_check(name=slug, slug=slug)
    with Client(monitor.base, api_key=monitor.api_key) as client:
        assert client.ping(slug).ok
        assert client.ping(slug, "log", body="x").ok
        unknown = client.ping(_slug())
        fresh = _slug()
        provisioned = client.ping(fresh, "start", create=True)  # upserted through the API, then pinged
    assert [p["type"] for p in monitor.pings(check["uuid"])] == ["success", "log"]
    assert provisioned.ok
    [made] = monitor.api("GET", f"checks/?slug={fresh}")["checks"]
    assert [p["type"] for p in monitor.pings(made["uuid"])] == ["start"]
    assert not unknown.ok and unknown.status is None and "no check with slug" in str(unknown.error)


def test_upsert_check_creates_then_updates_and_get_check_reads(monitor: Monitor) -> None:
    slug = _slug()
    with _client(monitor) as client:
        first = client.upsert_check(slug, schedule="0 3 * * *", tz="Europe/Berlin", grace=600)
        second = client.upsert_check(slug, schedule="30 3 * * *", tz="Europe/Berlin", grace=600)
        by_slug = client.get_check(slug)
        assert first is not None and second is not None and by_slug is not None
        by_uuid = client.get_check(first["uuid"])
        no_key = Client(monitor.base).upsert_check(_slug())
    assert first["uuid"] == second["uuid"] == by_slug["uuid"]
    assert (first["name"], first["slug"], first["schedule"]) == (slug, slug, "0 3 * * *")
    assert by_uuid is not None and by_uuid["schedule"] == "30 3 * * *"
    assert no_key is None


def test_body_is_cut_to_its_last_ping_body_limit_bytes(monitor: Monitor) -> None:
    check = monitor.create_check()
    output = "".join(f"line {i:05d}\n" for i in range(1000))  # 11 000 bytes
    with _client(monitor) as client:
        client.ping(check["uuid"], "log")  # learns Ping-Body-Limit from the answer
        assert client.body_limit == BODY_LIMIT
        result = client.ping(check["uuid"], "fail", body=output)
    assert result.ok
    last = monitor.pings(check["uuid"])[-1]
    stored = monitor.body(check["uuid"], last["n"])
    assert stored == output.encode()[-BODY_LIMIT:]
    assert stored.endswith(b"line 00999\n")


def test_idempotency_key_header_stores_a_retried_ping_once(monitor: Monitor) -> None:
    check = monitor.create_check()
    with _client(monitor) as client:
        a = client.ping(check["uuid"], headers={"Idempotency-Key": "billing:2026-07-19:1:success"})
        b = client.ping(check["uuid"], headers={"Idempotency-Key": "billing:2026-07-19:1:success"})
    assert a.ok and b.ok
    assert len(monitor.pings(check["uuid"])) == 1


def test_bad_arguments_never_raise(monitor: Monitor, caplog: pytest.LogCaptureFixture) -> None:
    with _client(monitor) as client:
        bad_kind = client.ping(str(uuid.uuid4()), "finished")
        bad_status = client.ping(str(uuid.uuid4()), exit_status=256)
        bad_slug = client.ping("Not A Slug")
        skip_without_tick = client.ping(_slug(), "skip")
        not_a_string = client.ping(None, "start")  # type: ignore[arg-type]
        with client.run(None) as run:  # type: ignore[arg-type]
            pass
    assert not any(r.ok for r in (bad_kind, bad_status, bad_slug, skip_without_tick, not_a_string))
    assert run.finished is not None and run.finished.error is not None
    assert bad_kind.error is not None and bad_kind.error.startswith("kind:")
    assert bad_status.error is not None and bad_status.error.startswith("exit_status:")
    assert skip_without_tick.error is not None and skip_without_tick.error.startswith("scheduled:")


def test_scheduled_defaults_to_monitor_scheduled_time(
    monitor: Monitor, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = monitor.create_check(schedule="* * * * *")
    tick = _tick().strftime("%Y-%m-%dT%H:%M:%SZ")
    monkeypatch.setenv("MONITOR_SCHEDULED_TIME", tick)
    with _client(monitor) as client, client.run(check["uuid"]) as run:
        run.log("running")
    assert [p["scheduled"] for p in monitor.pings(check["uuid"])] == [tick, tick, tick]


def test_run_on_success_sends_start_then_success_with_one_rid(monitor: Monitor) -> None:
    check = monitor.create_check(schedule="* * * * *", grace=120)
    with _client(monitor) as client, client.run(check["uuid"], scheduled=_tick()) as run:
        run.log("step 1")
        run.output = "all good"
    pings = monitor.pings(check["uuid"])
    assert [p["type"] for p in pings] == ["start", "log", "success"]
    assert {p["rid"] for p in pings} == {run.rid}
    assert run.started is not None and run.started.ok and run.finished is not None and run.finished.ok
    assert run.duration is not None and run.duration >= 0
    assert monitor.body(check["uuid"], pings[-1]["n"]) == b"all good"
    [stored_run] = monitor.runs(check["uuid"])
    assert stored_run["rid"] == run.rid and stored_run["outcome"] == "on_time"


def test_run_on_exception_sends_fail_with_type_message_and_traceback(monitor: Monitor) -> None:
    check = monitor.create_check()

    def charge() -> None:
        raise ValueError("card declined for invoice 42")

    with _client(monitor) as client, pytest.raises(ValueError), client.run(check["uuid"]):
        charge()
    pings = monitor.pings(check["uuid"])
    assert [p["type"] for p in pings] == ["start", "fail"]
    body = monitor.body(check["uuid"], pings[-1]["n"]).decode()
    assert body.startswith("ValueError: card declined for invoice 42")
    assert "Traceback (most recent call last)" in body and "in charge" in body


def test_run_on_keyboard_interrupt_sends_fail_and_reraises(monitor: Monitor) -> None:
    check = monitor.create_check()
    with _client(monitor) as client, pytest.raises(KeyboardInterrupt), client.run(check["uuid"]):
        raise KeyboardInterrupt
    pings = monitor.pings(check["uuid"])
    assert [p["type"] for p in pings] == ["start", "fail"]
    assert monitor.body(check["uuid"], pings[-1]["n"]).startswith(b"KeyboardInterrupt")


def test_run_on_system_exit_sends_its_status(monitor: Monitor) -> None:
    check = monitor.create_check()
    with _client(monitor) as client:
        with pytest.raises(SystemExit), client.run(check["uuid"]):
            sys.exit(4)
        with pytest.raises(SystemExit), client.run(check["uuid"]):
            sys.exit(0)
    pings = monitor.pings(check["uuid"])
    assert [(p["type"], p["exit_status"]) for p in pings] == [
        ("start", None),
        ("fail", 4),
        ("start", None),
        ("success", None),
    ]


def test_decorator_wraps_sync_and_async_functions(monitor: Monitor) -> None:
    sync_slug, async_slug = _slug(), _slug()
    client = _client(monitor)

    @client.monitored(sync_slug, create=True)
    def add(a: int, b: int) -> int:
        return a + b

    @client.monitored(async_slug, create=True)
    async def crash() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("async boom")

    try:
        assert add(2, 3) == 5
        with pytest.raises(RuntimeError, match="async boom"):
            asyncio.run(crash())
    finally:
        client.close()
    assert add.__name__ == "add"
    for slug, kinds in ((sync_slug, ["start", "success"]), (async_slug, ["start", "fail"])):
        [check] = monitor.api("GET", f"checks/?slug={slug}")["checks"]
        pings = monitor.pings(check["uuid"])
        assert [p["type"] for p in pings] == kinds
        assert len({p["rid"] for p in pings}) == 1


async def test_async_client_every_call(monitor: Monitor) -> None:
    slug = _slug()
    async with AsyncClient(monitor.base, api_key=monitor.api_key, ping_key=monitor.ping_key) as client:
        check = await client.upsert_check(slug, schedule="* * * * *", grace=120)
        assert check is not None
        assert (await client.get_check(slug) or {}).get("uuid") == check["uuid"]
        assert (await client.ping(slug, "log", body="by slug")).ok
        assert (await client.ping(check["uuid"], exit_status=0, scheduled=_tick())).ok
        async with client.run(slug) as run:
            await run.log("inside")
        with pytest.raises(KeyError):
            async with client.run(slug):
                raise KeyError("missing row")

        @client.monitored(slug)
        async def job() -> str:
            return "done"

        assert await job() == "done"
        with pytest.raises(TypeError):
            client.monitored(slug)(lambda: None)
    kinds = [p["type"] for p in monitor.pings(check["uuid"])]
    assert kinds == ["log", "success", "start", "log", "success", "start", "fail", "start", "success"]
    fail = monitor.pings(check["uuid"])[6]
    assert monitor.body(check["uuid"], fail["n"]).startswith(b"KeyError: 'missing row'")


def test_retries_a_503_with_backoff_then_succeeds() -> None:
    with HttpReceiver(path="/", fail_first=2) as receiver:
        client = Client(f"http://127.0.0.1:{receiver.port}", timeout=5, retries=3, backoff=0.05)
        result = client.ping(str(uuid.uuid4()))
        client.close()
    assert result.ok and result.status == 200
    assert [r.status for r in receiver.requests] == [503, 503, 200]


def test_a_refused_ping_is_not_retried() -> None:
    with HttpReceiver(path="/", status=404) as receiver:
        client = Client(f"http://127.0.0.1:{receiver.port}", timeout=5, retries=3, backoff=0.05)
        result = client.ping(str(uuid.uuid4()))
        client.close()
    assert not result.ok and result.status == 404 and len(receiver.requests) == 1


def test_monitor_down_job_runs_on_time_and_one_warning_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nobody listens
    client = Client(dead, timeout=2, retries=3, backoff=0.05)
    ran = []
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG, logger="monitor_client"):
        with client.run(str(uuid.uuid4())) as run:
            ran.append(True)
            run.log("still going")
        assert client.ping(str(uuid.uuid4())).ok is False
    elapsed = time.monotonic() - started
    client.close()
    assert ran == [True]
    assert elapsed < 2 * 4, elapsed  # four calls, each bounded by the timeout
    assert run.started is not None and run.started.error is not None
    assert run.started.error.startswith("unreachable: ConnectError")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]


def test_a_hung_monitor_holds_a_call_no_longer_than_the_timeout() -> None:
    with HttpReceiver(path="/", hang_s=30) as receiver:
        for client in (Client(f"http://127.0.0.1:{receiver.port}", timeout=1.0, retries=5),):
            started = time.monotonic()
            result = client.ping(str(uuid.uuid4()))
            elapsed = time.monotonic() - started
            client.close()
        assert not result.ok and result.error is not None and "Timeout" in result.error
        assert elapsed < 3.0, elapsed  # five retries of 1 s each would take 6 s

        async def go() -> tuple[PingResult, float]:
            async with AsyncClient(f"http://127.0.0.1:{receiver.port}", timeout=1.0, retries=5) as client:
                t0 = time.monotonic()
                result = await client.ping(str(uuid.uuid4()))
                return result, time.monotonic() - t0

        result, elapsed = asyncio.run(go())
    assert not result.ok and elapsed < 3.0, (result, elapsed)


def test_a_job_process_with_the_monitor_stopped_exits_with_its_own_status(monitor: Monitor) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from monitor_client import Client

        client = Client(timeout=1.5, retries=2, backoff=0.1)

        @client.monitored("nightly-billing")
        def job() -> int:
            time.sleep(0.2)
            print("job ran", flush=True)
            return 7

        sys.exit(job())
        """
    )
    env = monitor.env(MONITOR_BASE_URL=f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 7, proc.stderr
    assert proc.stdout == "job ran\n"
    assert proc.stderr.count("WARNING") <= 1 and "not delivered" in proc.stderr, proc.stderr
    assert elapsed < 0.2 + 2 * 1.5 + 5.0, elapsed  # the job, two bounded calls, interpreter start


def test_user_agent_names_the_client(monitor: Monitor) -> None:
    check = monitor.create_check()
    with _client(monitor) as client:
        client.ping(check["uuid"])
    assert monitor.pings(check["uuid"])[0]["ua"].startswith("monitor-client/")


def test_transport_argument_is_used() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, text="OK", headers={"Ping-Body-Limit": "10"})

    client = Client("http://monitor.invalid", ping_key="pk", transport=httpx.MockTransport(handler))
    result = client.ping("backup", "start", rid="0b5ad9c4-3b1f-4a52-8a4e-6f3a1c2f6d11", body="x" * 50)
    assert result == PingResult(True, 200, 10, None, "OK")
    assert (
        str(seen[0].url)
        == "http://monitor.invalid/ping/pk/backup/start?rid=0b5ad9c4-3b1f-4a52-8a4e-6f3a1c2f6d11"
    )
    client.ping("backup", body="y" * 50)
    assert seen[1].content == b"y" * 10
