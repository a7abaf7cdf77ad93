"""A real ``monitor serve`` process driven only by the real ``curl`` binary (DESIGN §11).

Each scenario runs against SQLite (a temporary file) and PostgreSQL (a throwaway database the
server migrates itself). Pings are sent exactly as crontab lines send them
(``curl -fsS -m 10 --retry 3 …``); the management API is called with curl too. Alerts go
through Apprise to a loopback HTTP receiver (``json://``) and a loopback SMTP server
(``mailto://``). Real ticks are waited for only on ``seconds`` schedules of 2 s (DESIGN §11).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.fixtures import make_http_receiver, smtp_receiver
from tests.support.process import (
    MonitorProcess,
    checkout_env,
    curl_api,
    curl_ping,
    throwaway_postgres,
    wait_until,
)
from tests.support.receivers import HttpReceiver, SmtpReceiver, free_port

__all__ = ["make_http_receiver", "smtp_receiver"]

pytestmark = pytest.mark.e2e

API_KEY = "e2e-api-key-0123456789abcdef"
BACKENDS = ["sqlite", "postgres"]


@contextmanager
def _database(backend: str, directory: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{directory / 'monitor.db'}"
    else:
        with throwaway_postgres() as url:
            yield url


@pytest.fixture(scope="module", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MonitorProcess]:
    """One ``monitor serve --dev`` per backend for the scenario tests of this module."""
    workdir = tmp_path_factory.mktemp(f"serve-{request.param}")
    with _database(request.param, workdir) as url:
        port = free_port()
        env = checkout_env(
            MONITOR_DATABASE_URL=url,
            MONITOR_API_KEY=API_KEY,
            MONITOR_BASE_URL=f"http://127.0.0.1:{port}",
            MONITOR_EVALUATE_INTERVAL="0.2",
            MONITOR_NOTIFY_BACKOFF="0.2",
        )
        process = MonitorProcess.serve(port, env=env, cwd=workdir, logs=workdir, name="serve")
        try:
            process.start()
            process.wait_healthy()
            yield process
        finally:
            process.close()


class Client:
    """The management API through curl, with the test's API key."""

    def __init__(self, base: str, api_key: str) -> None:
        self.base = base
        self.api_key = api_key

    def call(self, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        status, data = curl_api(self.base, method, path, self.api_key, body)
        assert status == expect, f"{method} {path} -> {status}: {data}"
        return data

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def create_check(self, **fields: Any) -> dict[str, Any]:
        check: dict[str, Any] = self.call("POST", "/api/v3/checks/", fields, expect=201)
        return check

    def create_channel(self, name: str, url: str) -> str:
        channel = self.call("POST", "/api/v3/channels/", {"name": name, "url": url}, expect=201)
        return str(channel["id"])

    def alerts(self, check_uuid: str) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = self.get(f"/api/v3/checks/{check_uuid}/alerts/")["alerts"]
        return alerts


def _client(server: MonitorProcess) -> Client:
    return Client(server.base, API_KEY)


# --------------------------------------------------------------------------- scenario 1


def test_crontab_of_five_jobs_pinged_with_curl(server: MonitorProcess, tmp_path: Path) -> None:
    api = _client(server)
    checks = {
        "backup": api.create_check(name="backup", schedule="0 3 * * *", tz="Europe/Berlin", grace=3600),
        "sync": api.create_check(name="sync", schedule="*/5 * * * *", grace=300),
        "report": api.create_check(name="report", schedule="0 9 * * 1-5", tz="Europe/Berlin", grace=900),
        "heartbeat": api.create_check(
            name="heartbeat", schedule="*/10 * * * * *", dialect="seconds", grace=30
        ),
        "simple": api.create_check(name="simple", timeout=60, grace=60),
    }
    for name, check in checks.items():
        assert check["status"] == "new", (name, check)
        assert check["ping_url"] == f"{server.base}/ping/{check['uuid']}"
        assert check["n_pings"] == 0
    assert checks["backup"]["tz"] == "Europe/Berlin" and checks["backup"]["kind"] == "cron"
    assert checks["heartbeat"]["dialect"] == "seconds"
    assert checks["simple"]["kind"] == "simple" and checks["simple"]["timeout"] == 60

    # 0 3 * * *  curl … /start?rid=$RID && backup.sh > backup.log; curl … --data-binary @backup.log …?rid=$RID
    backup = checks["backup"]["ping_url"]
    rid = str(uuid.uuid4())
    log = tmp_path / "backup.log"
    log.write_bytes(b"dumped 3 databases\nuploaded 1.2 GiB\n\xe2\x9c\x93 done\n")
    assert curl_ping(f"{backup}/start?rid={rid}") == "OK"
    time.sleep(0.5)  # the backup itself runs
    assert curl_ping(f"{backup}?rid={rid}", "--data-binary", f"@{log}") == "OK"
    # */5 * * * *  sync && curl … --data-raw "…"
    assert curl_ping(checks["sync"]["ping_url"], "--data-raw", "synced 42 files") == "OK"
    # 0 9 * * 1-5  report; curl … /$?
    assert curl_ping(f"{checks['report']['ping_url']}/0") == "OK"
    # the 10-second heartbeat
    assert curl_ping(checks["heartbeat"]["ping_url"]) == "OK"
    # simple: start, a log line, then the finish without rid pairs with the open run
    simple = checks["simple"]["ping_url"]
    assert curl_ping(f"{simple}/start") == "OK"
    assert curl_ping(f"{simple}/log", "--data-raw", "halfway there") == "OK"
    time.sleep(0.3)
    assert curl_ping(simple) == "OK"

    after = {name: api.get(f"/api/v3/checks/{c['uuid']}") for name, c in checks.items()}
    expected_pings = {"backup": 2, "sync": 1, "report": 1, "heartbeat": 1, "simple": 3}
    for name, check in after.items():
        assert check["n_pings"] == expected_pings[name], (name, check)
        assert check["status"] == "up", (name, check)
        assert check["started"] is False, (name, check)
        assert check["last_ping"] is not None and check["last_ping"].endswith("Z")
        assert check["next_ping"] is not None, (name, check)

    backup_uuid = checks["backup"]["uuid"]
    pings = api.get(f"/api/v3/checks/{backup_uuid}/pings/")["pings"]
    assert [(p["n"], p["type"], p["rid"]) for p in pings] == [(2, "success", rid), (1, "start", rid)]
    finish, start = pings
    assert finish["method"] == "POST" and start["method"] == "GET"
    assert finish["ua"].startswith("curl/")
    assert finish["remote_addr"] == "127.0.0.1"
    assert finish["duration"] is not None and 0.5 <= finish["duration"] < 10
    assert finish["scheduled"] == start["scheduled"] and finish["scheduled"].endswith(
        ("01:00:00Z", "02:00:00Z")
    )
    status, body = curl_api(server.base, "GET", f"/api/v3/checks/{backup_uuid}/pings/2/body", API_KEY)
    assert status == 200 and body == log.read_text()
    runs = api.get(f"/api/v3/checks/{backup_uuid}/runs/")["runs"]
    assert len(runs) == 1
    # The run binds by rule 4 (DESIGN §5) to the nearer of today's and tomorrow's 03:00 Berlin
    # ticks: today's makes it late, or on time when the test runs within the hour of grace after
    # 03:00; tomorrow's, from outside the early window, makes it early. No alert either way, as it
    # is the check's first run.
    scheduled = datetime.fromisoformat(finish["scheduled"])
    if scheduled > datetime.fromisoformat(finish["date"]):
        expected = "early"
    elif datetime.fromisoformat(start["date"]) > scheduled + timedelta(seconds=3600):
        expected = "late"
    else:
        expected = "on_time"
    assert runs[0]["rid"] == rid and runs[0]["outcome"] == expected
    assert not api.alerts(backup_uuid)
    assert runs[0]["finished"] is not None and 0.5 <= runs[0]["duration"] < 10

    sync_ping = api.get(f"/api/v3/checks/{checks['sync']['uuid']}/pings/")["pings"][0]
    assert sync_ping["type"] == "success" and sync_ping["method"] == "POST"
    status, body = curl_api(
        server.base, "GET", f"/api/v3/checks/{checks['sync']['uuid']}/pings/1/body", API_KEY
    )
    assert (status, body) == (200, "synced 42 files")

    report_ping = api.get(f"/api/v3/checks/{checks['report']['uuid']}/pings/")["pings"][0]
    assert report_ping["type"] == "success" and report_ping["exit_status"] == 0

    simple_pings = api.get(f"/api/v3/checks/{checks['simple']['uuid']}/pings/")["pings"]
    assert [p["type"] for p in simple_pings] == ["success", "log", "start"]
    assert simple_pings[0]["duration"] is not None and simple_pings[0]["duration"] >= 0.3
    simple_runs = api.get(f"/api/v3/checks/{checks['simple']['uuid']}/runs/")["runs"]
    assert len(simple_runs) == 1 and simple_runs[0]["duration"] >= 0.3

    for check in checks.values():  # no alerts: first runs never alert
        assert api.alerts(check["uuid"]) == []
    # stop the heartbeat from going down while the other tests run
    api.call("POST", f"/api/v3/checks/{checks['heartbeat']['uuid']}/pause")


# --------------------------------------------------------------------------- scenario 2


def _kind_of_request(request: Any) -> str:
    return str(request.json.get("kind", ""))


def test_stopped_job_alerts_http_and_smtp_exactly_once_then_recovers(
    server: MonitorProcess,
    make_http_receiver: Callable[..., HttpReceiver],
    smtp_receiver: SmtpReceiver,
) -> None:
    api = _client(server)
    hook = make_http_receiver()
    channels = [api.create_channel("hook", hook.url), api.create_channel("mail", smtp_receiver.url)]
    check = api.create_check(
        name="every-2s",
        schedule="*/2 * * * * *",
        dialect="seconds",
        grace=1,
        channels=",".join(channels),
    )
    uuid_ = check["uuid"]
    # the job runs once, then stops
    assert curl_ping(check["ping_url"]) == "OK"

    [request] = hook.wait_for_requests(1, timeout=10)
    [mail] = smtp_receiver.wait_for_messages(1, timeout=10)
    payload = request.json
    assert payload["kind"] == "missed" and payload["check_uuid"] == uuid_
    assert payload["title"].startswith("every-2s") and "missed" in payload["title"]
    assert mail.subject.startswith("every-2s") and "missed" in mail.subject
    assert "oncall@example.com" in mail.rcpt_tos
    down = api.get(f"/api/v3/checks/{uuid_}")
    assert down["status"] == "down"

    time.sleep(3)  # more ticks are missed, but the open episode raises nothing more
    assert len(hook.requests) == 1
    assert len(smtp_receiver.messages) == 1
    [alert] = api.alerts(uuid_)
    assert alert["kind"] == "missed"
    assert sorted((n["channel"], n["status"], n["attempts"]) for n in alert["notifications"]) == sorted(
        (c, "sent", 1) for c in channels
    )

    # the job pings again: late (it closes the episode) or recovered
    assert curl_ping(check["ping_url"]) == "OK"
    requests = hook.wait_for_requests(2, timeout=10)
    mails = smtp_receiver.wait_for_messages(2, timeout=10)
    assert _kind_of_request(requests[1]) in ("late", "recovered")
    assert any(k in mails[1].subject for k in ("late", "recovered")), mails[1].subject
    assert api.get(f"/api/v3/checks/{uuid_}")["status"] in ("up", "grace")
    api.call("POST", f"/api/v3/checks/{uuid_}/pause")


# --------------------------------------------------------------------------- scenario 3


def test_notification_retried_after_two_503s_arrives_once(
    server: MonitorProcess, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    api = _client(server)
    hook = make_http_receiver(fail_first=2)
    channel = api.create_channel("flaky", hook.url)
    check = api.create_check(
        name="flaky-target", schedule="*/2 * * * * *", dialect="seconds", grace=1, channels=channel
    )
    assert curl_ping(check["ping_url"]) == "OK"

    requests = hook.wait_for_requests(3, timeout=20)
    assert [r.status for r in requests] == [503, 503, 200]
    assert {_kind_of_request(r) for r in requests} == {"missed"}

    def delivered() -> dict[str, Any] | None:
        alerts = api.alerts(check["uuid"])
        if alerts and alerts[0]["notifications"] and alerts[0]["notifications"][0]["status"] == "sent":
            return alerts[0]
        return None

    alert = wait_until(delivered, timeout=5, what="the notification marked sent")
    assert alert["kind"] == "missed"
    [notification] = alert["notifications"]
    assert notification["channel"] == channel
    assert notification["attempts"] == 3
    assert notification["last_error"] is None
    api.call("POST", f"/api/v3/checks/{check['uuid']}/pause")
    time.sleep(1.5)  # nothing is re-sent once it succeeded
    assert len(hook.requests) == 3


# --------------------------------------------------------------------------- keys, health, SIGTERM


@pytest.mark.parametrize("backend", BACKENDS)
def test_first_start_prints_keys_once_and_sigterm_keeps_acknowledged_pings(
    backend: str, tmp_path: Path
) -> None:
    with _database(backend, tmp_path) as url:
        port = free_port()
        env = checkout_env(MONITOR_DATABASE_URL=url, MONITOR_BASE_URL=f"http://127.0.0.1:{port}")
        first = MonitorProcess.serve(port, env=env, cwd=tmp_path, logs=tmp_path, name="first")
        try:
            first.start()
            first.wait_healthy()
            lines = [line for line in first.stdout.splitlines() if line.startswith("{")]
            assert len(lines) == 1, first.describe()
            keys = json.loads(lines[0])
            api_key = keys["api_key"]
            assert api_key and keys["api_key_readonly"] and keys["ping_key"]

            status, health = curl_api(first.base, "GET", "/health", None)
            assert status == 200 and health["status"] == "ok"
            status, ready = curl_api(first.base, "GET", "/ready", None)
            assert status == 200, ready
            assert ready["database"] == "ok" and isinstance(ready["leases"], list)
            assert isinstance(ready["evaluator_lag_s"], int | float)

            api = Client(first.base, api_key)
            check = api.create_check(name="nightly", timeout=3600)
            status, _ = curl_api(
                first.base, "POST", "/api/v3/checks/", keys["api_key_readonly"], {"name": "x"}
            )
            assert status == 403
            assert curl_ping(check["ping_url"], "--data-raw", "acknowledged before SIGTERM") == "OK"
            assert curl_ping(f"{first.base}/ping/{keys['ping_key']}/auto-made?create=1") == "Created"

            started = time.monotonic()
            assert first.terminate(timeout=10) == 0, first.describe()
            assert time.monotonic() - started < 5
            assert "Traceback" not in first.stderr, first.describe()
        finally:
            first.close()

        second = MonitorProcess.serve(port, env=env, cwd=tmp_path, logs=tmp_path, name="second")
        try:
            second.start()
            second.wait_healthy()
            assert "api_key" not in second.stdout, second.describe()
            api = Client(second.base, api_key)
            stored = api.get(f"/api/v3/checks/{check['uuid']}")
            assert stored["n_pings"] == 1 and stored["status"] == "up"
            [ping] = api.get(f"/api/v3/checks/{check['uuid']}/pings/")["pings"]
            assert ping["type"] == "success" and ping["method"] == "POST"
            assert [c["slug"] for c in api.get("/api/v3/checks/?slug=auto-made")["checks"]] == ["auto-made"]
            assert second.terminate(timeout=10) == 0, second.describe()
        finally:
            second.close()
