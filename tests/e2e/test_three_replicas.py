"""The three-replicas bug end to end: three real ``monitor serve`` replicas on one
database, three real ``curl`` processes reporting the same tick at the same moment, one to each
replica. Exactly one ``duplicate`` alert naming 3 runs, every time, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.process import CRONTAB_CURL, MonitorProcess, checkout_env, curl_api, throwaway_postgres
from tests.support.receivers import free_port

pytestmark = pytest.mark.e2e

API_KEY = "three-replicas-key-0123456789"
REPLICAS = 3


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def replicas(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[MonitorProcess]]:
    directory = tmp_path_factory.mktemp(f"replicas-{request.param}")
    if request.param == "sqlite":
        database = iter([f"sqlite+aiosqlite:///{directory / 'monitor.db'}"])
        context = None
    else:
        context = throwaway_postgres("monitor_replicas")
        database = iter([context.__enter__()])
    url = next(database)
    processes: list[MonitorProcess] = []
    try:
        for index in range(REPLICAS):
            port = free_port()
            env = checkout_env(
                MONITOR_DATABASE_URL=url,
                MONITOR_API_KEY=API_KEY,
                MONITOR_BASE_URL=f"http://127.0.0.1:{port}",
                MONITOR_EVALUATE_INTERVAL="0.5",
            )
            process = MonitorProcess.serve(
                port, env=env, cwd=directory, logs=directory, name=f"replica{index}"
            )
            processes.append(process.start())
            # the first replica migrates and creates the project before the others start
            process.wait_healthy()
        yield processes
    finally:
        for process in processes:
            process.close()
        if context is not None:
            context.__exit__(None, None, None)


def _same_tick_from_three_processes(replicas: list[MonitorProcess], uuid: str, tick: datetime) -> None:
    scheduled = tick.strftime("%Y-%m-%dT%H:%M:%SZ")
    curls = [
        subprocess.Popen(
            [*CRONTAB_CURL, f"{replica.base}/ping/{uuid}?scheduled={scheduled}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for replica in replicas
    ]
    for curl in curls:
        out, err = curl.communicate(timeout=30)
        assert curl.returncode == 0, err.decode()
        assert out == b"OK"


def _check_duplicates(replicas: list[MonitorProcess], repetitions: int) -> None:
    base = replicas[0].base
    status, check = curl_api(
        base, "POST", "/api/v3/checks/", API_KEY, {"name": "billing", "schedule": "* * * * *"}
    )
    assert status == 201, check
    uuid = check["uuid"]
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=repetitions + 1)
    ticks = [start + timedelta(minutes=i) for i in range(repetitions)]
    for tick in ticks:
        _same_tick_from_three_processes(replicas, uuid, tick)
    status, body = curl_api(base, "GET", f"/api/v3/checks/{uuid}/alerts/?limit=1000", API_KEY)
    assert status == 200
    duplicates = [a for a in body["alerts"] if a["kind"] == "duplicate"]
    by_tick = {a["scheduled"]: a for a in duplicates}
    assert len(duplicates) == len(by_tick) == repetitions, duplicates
    for tick in ticks:
        alert = by_tick[tick.strftime("%Y-%m-%dT%H:%M:%SZ")]
        assert alert["count"] == 3, alert
    status, body = curl_api(base, "GET", f"/api/v3/checks/{uuid}/runs/?limit=1000", API_KEY)
    assert len(body["runs"]) == 3 * repetitions
    assert sorted({r["outcome"] for r in body["runs"]}) == ["duplicated", "on_time"]


def test_three_replicas_same_tick_one_duplicate_alert(replicas: list[MonitorProcess]) -> None:
    _check_duplicates(replicas, repetitions=3)


@pytest.mark.slow
def test_three_replicas_same_tick_twenty_times(replicas: list[MonitorProcess]) -> None:
    _check_duplicates(replicas, repetitions=20)


def test_replicas_share_one_database(replicas: list[MonitorProcess], tmp_path: Path) -> None:
    status, check = curl_api(replicas[1].base, "POST", "/api/v3/checks/", API_KEY, {"name": "shared"})
    assert status == 201
    for replica in replicas:
        status, got = curl_api(replica.base, "GET", f"/api/v3/checks/{check['uuid']}", API_KEY)
        assert status == 200 and got["name"] == "shared"
