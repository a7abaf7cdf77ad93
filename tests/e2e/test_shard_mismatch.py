"""Replicas with different ``MONITOR_SHARDS`` on one PostgreSQL database, and ``monitor reshard``
while they run (DESIGN §6). Real processes, TTL 1 s, interval 0.2 s.

The migration step records ``MONITOR_SHARDS=4`` (as the deploy's migration job does); an
HTTP-only ``monitor serve`` and two ``monitor evaluate`` processes start with 4, 4 and 9. The
one configured with 9 logs ``shard_count_mismatch`` and uses 4, so only ``shard-0`` …
``shard-3`` exist and every check gets exactly one ``missed`` alert. Then ``monitor reshard``
(the CLI's ``main``) reshards to 6 (the evaluators follow: new checks in shards 4 and 5 are
alerted too, old ones are not alerted again) and to 2 (``/ready`` lists only ``shard-0`` and
``shard-1``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from monitor import cli
from monitor.domain.shards import shard_of
from monitor.storage import cluster
from monitor.storage.engine import make_engine, migrate
from tests.e2e.test_evaluation_ha import (
    API_KEY,
    _worker_env,
    alerts_of,
    assert_one_missed_alert_each,
    fetch,
    pid_of,
    ping_all,
    shard_holders,
)
from tests.support.process import MonitorProcess, throwaway_postgres, wait_until
from tests.support.receivers import free_port

pytestmark = pytest.mark.e2e

RECORDED = 4
"""``MONITOR_SHARDS`` of the first process (the migration step): the count the database records."""
SCHEDULE = {"schedule": "* * * * * *", "dialect": "seconds", "grace": 1}


def create_checks(base: str, count: int, prefix: str) -> list[str]:
    with httpx.Client(base_url=base, headers={"X-Api-Key": API_KEY}, timeout=30) as client:
        answers = [
            client.post("/api/v3/checks/", json={"name": f"{prefix}-{i}", **SCHEDULE}) for i in range(count)
        ]
    assert all(a.status_code == 201 for a in answers), [a.text for a in answers]
    return [a.json()["uuid"] for a in answers]


def _reshard(url: str, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    """``monitor reshard ARGS`` through the CLI's ``main`` (in this process: a second Python
    start-up per call would double the test's time; the evaluators are real processes)."""
    capsys.readouterr()
    assert cli.main(["reshard", "--database-url", url, *args]) == 0
    result: dict[str, object] = json.loads(capsys.readouterr().out)
    return result


def _held_by(url: str, pids: set[int], count: int) -> bool:
    holders = shard_holders(url)
    return (
        sorted(holders) == sorted(f"shard-{i}" for i in range(count))
        and {pid_of(h) for h in holders.values()} <= pids
        and None not in holders.values()
    )


async def _migrate_like_the_deploy_job(url: str) -> None:
    """What ``monitor migrate`` with ``MONITOR_SHARDS=4`` does (the compose/Kubernetes migration
    job, the first process on the database): migrate, record the shard count."""
    engine = make_engine(url)
    try:
        await migrate(engine)
        await cluster.adopt_shard_count(engine, RECORDED, datetime.now(UTC), process="migrate")
    finally:
        await engine.dispose()


@pytest.fixture
def mismatched(tmp_path: Path) -> Iterator[tuple[str, MonitorProcess, list[MonitorProcess]]]:
    with throwaway_postgres("monitor_shards") as url:
        port = free_port()
        argv = [sys.executable, "-m", "monitor", "serve", "--dev", "--no-evaluator", "--no-notifier"]
        http = MonitorProcess(
            [*argv, "--port", str(port)],
            env={
                **_worker_env(url, MONITOR_API_KEY=API_KEY, MONITOR_BASE_URL=f"http://127.0.0.1:{port}"),
                "MONITOR_SHARDS": str(RECORDED),
            },
            cwd=tmp_path,
            logs=tmp_path,
            name="http",
            port=port,
        )
        evaluators = [
            MonitorProcess(
                [sys.executable, "-m", "monitor", "evaluate"],
                env={**_worker_env(url), "MONITOR_SHARDS": str(shards)},
                cwd=tmp_path,
                logs=tmp_path,
                name=f"evaluate-{shards}",
            )
            for shards in (RECORDED, 9)
        ]
        try:
            asyncio.run(_migrate_like_the_deploy_job(url))  # records MONITOR_SHARDS=4 first
            for process in [http, *evaluators]:  # all three start together
                process.start()
            http.wait_healthy()  # default project created
            yield url, http, evaluators
        finally:
            for process in [*evaluators, http]:
                process.close()


def test_mismatched_shard_counts_evaluate_every_check_once_and_reshard_while_running(
    mismatched: tuple[str, MonitorProcess, list[MonitorProcess]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, http, evaluators = mismatched
    pids = {p.proc.pid for p in evaluators if p.proc is not None}
    wait_until(
        lambda: _held_by(url, pids, RECORDED),
        timeout=20,
        interval=0.1,
        what="shard-0..3 held, nothing beyond",
    )
    odd = evaluators[1]
    wait_until(lambda: "shard_count_mismatch" in odd.stderr, timeout=10, what="the mismatch warning")
    assert "MONITOR_SHARDS=9 but the database records 4 shards" in odd.stderr, odd.describe()
    assert "shard_count_mismatch" not in evaluators[0].stderr

    uuids = create_checks(http.base, 24, "mismatch")
    ping_all(http.base, uuids)
    alerts = assert_one_missed_alert_each(url, uuids, timeout=15)
    assert {a["shard"] for a in alerts} <= set(range(RECORDED))

    grown = _reshard(url, capsys, "6")
    assert (grown["shards_before"], grown["shards"], grown["leases_removed"]) == (RECORDED, 6, [])
    more = create_checks(http.base, 12, "grown")
    while not {shard_of(u, 6) for u in more} & {4, 5}:  # 12 random uuids miss both 1 time in 130
        more += create_checks(http.base, 1, f"grown{len(more)}")
    ping_all(http.base, more)
    wait_until(lambda: _held_by(url, pids, 6), timeout=10, interval=0.1, what="shard-0..5 held")
    later = assert_one_missed_alert_each(url, more, timeout=15)
    assert {a["shard"] for a in later} & {4, 5}  # the new shards are swept
    assert len(alerts_of(url, uuids)) == len(uuids)  # moved checks were not alerted again

    shrunk = _reshard(url, capsys, "2")
    assert shrunk["shards_before"] == 6 and shrunk["leases_removed"] == [f"shard-{i}" for i in range(2, 6)]
    wait_until(lambda: _held_by(url, pids, 2), timeout=10, interval=0.1, what="shard-0..1 held")
    ready = httpx.get(f"{http.base}/ready").json()
    assert ready["shards"] == 2
    assert sorted(lease["name"] for lease in ready["leases"]) == ["shard-0", "shard-1"]
    assert sorted(r["shard"] for r in fetch(url, "SELECT DISTINCT shard FROM checks")) == [0, 1]
    assert len(alerts_of(url, [*uuids, *more])) == len(uuids) + len(more)
    for process in [http, *evaluators]:
        assert process.proc is not None and process.proc.poll() is None, process.describe()
