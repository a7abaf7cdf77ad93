"""Sharded, leased, fenced evaluation with real processes and real locks (DESIGN §6).

PostgreSQL: three ``monitor evaluate``, two ``monitor notify`` and one HTTP-only
``monitor serve --no-evaluator --no-notifier`` on one throwaway database, reused by the tests
of this module (TTL 1 s, interval 0.2 s). SQLite: two ``monitor evaluate`` on one file.

Checks use a ``seconds`` schedule ticking every 2 s with 1 s grace; each is pinged once, then
left silent, so each must get exactly one ``missed`` alert (its count grows with the missed
ticks) and exactly one delivered notification — whichever replica dies or stalls.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.support.process import (
    CRONTAB_CURL,
    MonitorProcess,
    checkout_env,
    throwaway_postgres,
    wait_until,
)
from tests.support.receivers import HttpReceiver, free_port

pytestmark = pytest.mark.e2e

API_KEY = "evaluation-ha-key-0123456789"
TTL = 1.0
INTERVAL = 0.2
SHARDS = 12
SCHEDULE = {"schedule": "*/2 * * * * *", "dialect": "seconds", "grace": 1, "channels": "*"}
TAKEOVER_SLACK = 0.6
"""Seconds allowed beyond TTL + one interval for process scheduling on a loaded 2-core machine
(a sweep and a rebalance run between two sleeps of the takeover round)."""


def _worker_env(url: str, **extra: str) -> dict[str, str]:
    return checkout_env(
        MONITOR_DATABASE_URL=url,
        MONITOR_LEASE_TTL=str(TTL),
        MONITOR_EVALUATE_INTERVAL=str(INTERVAL),
        MONITOR_SHARDS=str(SHARDS),
        MONITOR_ALLOW_PRIVATE_TARGETS="1",
        MONITOR_NOTIFY_BACKOFF="0.2",
        **extra,
    )


# ---------------------------------------------------------------- database access


async def _fetch(url: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"), timeout=10)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


def _sqlite_fetch(url: str, sql: str, *args: Any) -> list[dict[str, Any]]:
    import sqlite3

    path = url.removeprefix("sqlite+aiosqlite:///")
    conn = sqlite3.connect(path, timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        qmarks = sql
        for i in range(len(args), 0, -1):
            qmarks = qmarks.replace(f"${i}", "?")
        return [dict(r) for r in conn.execute(qmarks, args).fetchall()]
    finally:
        conn.close()


def fetch(url: str, sql: str, *args: Any) -> list[Any]:
    if url.startswith("sqlite"):
        return _sqlite_fetch(url, sql, *args)
    return asyncio.run(_fetch(url, sql, *args))


def shard_holders(url: str) -> dict[str, str | None]:
    rows = fetch(url, "SELECT name, holder FROM leases WHERE name LIKE 'shard-%'")
    return {r["name"]: r["holder"] for r in rows}


def pid_of(holder: str | None) -> int | None:
    return int(holder.rsplit(":", 1)[1]) if holder else None


# ---------------------------------------------------------------- the cluster


@dataclass
class Cluster:
    url: str
    directory: Path
    http: MonitorProcess
    evaluators: list[MonitorProcess] = field(default_factory=list)
    notifiers: list[MonitorProcess] = field(default_factory=list)
    receiver: HttpReceiver | None = None
    started: int = 0

    def start_worker(self, role: str) -> MonitorProcess:
        self.started += 1
        process = MonitorProcess(
            [sys.executable, "-m", "monitor", role],
            env=_worker_env(self.url),
            cwd=self.directory,
            logs=self.directory,
            name=f"{role}{self.started}",
        ).start()
        (self.evaluators if role == "evaluate" else self.notifiers).append(process)
        return process

    def live_evaluators(self) -> list[MonitorProcess]:
        return [p for p in self.evaluators if p.proc is not None and p.proc.poll() is None]

    def balanced(self, count: int) -> None:
        """Wait until ``count`` evaluators hold every shard, each at most its fair share."""
        while len(self.live_evaluators()) < count:
            self.start_worker("evaluate")
        pids = {p.proc.pid for p in self.live_evaluators() if p.proc is not None}
        share = -(-SHARDS // count)

        def ready() -> bool:
            holders = shard_holders(self.url)
            per: dict[int | None, int] = {}
            for holder in holders.values():
                per[pid_of(holder)] = per.get(pid_of(holder), 0) + 1
            return len(holders) == SHARDS and set(per) == pids and max(per.values()) <= share

        wait_until(ready, timeout=20, interval=0.1, what=f"{count} evaluators sharing {SHARDS} shards")

    def by_pid(self, pid: int) -> MonitorProcess:
        return next(p for p in self.evaluators if p.proc is not None and p.proc.pid == pid)

    def busiest(self) -> tuple[MonitorProcess, list[str]]:
        holders = shard_holders(self.url)
        counts: dict[int, list[str]] = {}
        for name, holder in holders.items():
            pid = pid_of(holder)
            if pid is not None:
                counts.setdefault(pid, []).append(name)
        pid, names = max(counts.items(), key=lambda kv: len(kv[1]))
        return self.by_pid(pid), sorted(names)

    def close(self) -> None:
        for process in [*self.evaluators, *self.notifiers, self.http]:
            process.close()


def create_checks(base: str, count: int, prefix: str) -> list[str]:
    uuids = []
    with httpx.Client(base_url=base, headers={"X-Api-Key": API_KEY}, timeout=30) as client:
        for i in range(count):
            answer = client.post("/api/v3/checks/", json={"name": f"{prefix}-{i}", **SCHEDULE})
            assert answer.status_code == 201, answer.text
            uuids.append(answer.json()["uuid"])
    return uuids


def ping_all(base: str, uuids: Sequence[str]) -> None:
    """One ping per check, by real ``curl`` processes (100 URLs each)."""
    for start in range(0, len(uuids), 100):
        urls = [f"{base}/ping/{u}" for u in uuids[start : start + 100]]
        proc = subprocess.run([*CRONTAB_CURL, *urls], capture_output=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr.decode()
        assert proc.stdout == b"OK" * len(urls)


def alerts_of(url: str, uuids: Sequence[str]) -> list[Any]:
    return fetch(
        url,
        "SELECT c.uuid, c.shard, a.kind, a.token, a.created_at, a.count FROM alerts a"
        " JOIN checks c ON c.id = a.check_id WHERE c.uuid = ANY($1::text[])"
        if not url.startswith("sqlite")
        else "SELECT c.uuid, c.shard, a.kind, a.token, a.created_at, a.count FROM alerts a"
        f" JOIN checks c ON c.id = a.check_id WHERE c.uuid IN ({','.join('?' * len(uuids))})",
        *([list(uuids)] if not url.startswith("sqlite") else uuids),
    )


def assert_one_missed_alert_each(url: str, uuids: Sequence[str], timeout: float) -> list[Any]:
    """Wait until every check has a ``missed`` alert; then exactly one, with a fencing token."""
    wait_until(
        lambda: len({a["uuid"] for a in alerts_of(url, uuids) if a["kind"] == "missed"}) == len(uuids),
        timeout=timeout,
        interval=0.2,
        what=f"a missed alert for each of {len(uuids)} checks",
    )
    time.sleep(2 * INTERVAL + 0.5)  # more sweeps, more missed ticks: still one alert each
    alerts = alerts_of(url, uuids)
    assert sorted(a["kind"] for a in alerts) == ["missed"] * len(uuids)
    assert sorted(a["uuid"] for a in alerts) == sorted(uuids)
    assert all(a["token"] is not None and a["token"] >= 1 for a in alerts)
    return alerts


def assert_one_notification_each(receiver: HttpReceiver, uuids: Sequence[str], timeout: float) -> None:
    wanted = set(uuids)

    def delivered() -> list[Any]:
        return [r.json for r in receiver.requests if r.json.get("check_uuid") in wanted]

    wait_until(lambda: len(delivered()) >= len(uuids), timeout=timeout, interval=0.2, what="deliveries")
    time.sleep(1.0)  # a doubled delivery would arrive by now
    got = delivered()
    assert sorted(p["check_uuid"] for p in got) == sorted(uuids)
    assert {p["kind"] for p in got} == {"missed"}


def _http_only_process(url: str, directory: Path) -> MonitorProcess:
    """A ``monitor serve --no-evaluator --no-notifier`` process (not started) on a free port."""
    port = free_port()
    return MonitorProcess(
        [
            sys.executable,
            "-m",
            "monitor",
            "serve",
            "--dev",
            "--no-evaluator",
            "--no-notifier",
            "--port",
            str(port),
        ],
        env=_worker_env(url, MONITOR_API_KEY=API_KEY, MONITOR_BASE_URL=f"http://127.0.0.1:{port}"),
        cwd=directory,
        logs=directory,
        name="http",
        port=port,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("ha-postgres")
    with throwaway_postgres("monitor_ha") as url, HttpReceiver() as receiver:
        http = _http_only_process(url, directory)
        cluster = Cluster(url=url, directory=directory, http=http, receiver=receiver)
        try:
            http.start()
            http.wait_healthy()  # migrated, default project created
            for _ in range(3):
                cluster.start_worker("evaluate")
            for _ in range(2):
                cluster.start_worker("notify")
            with httpx.Client(base_url=http.base, headers={"X-Api-Key": API_KEY}) as client:
                answer = client.post("/api/v3/channels/", json={"name": "hook", "url": receiver.url})
                assert answer.status_code == 201, answer.text
            cluster.balanced(3)
            yield cluster
        finally:
            cluster.close()


def test_http_only_process_runs_no_evaluator_and_no_notifier(cluster: Cluster) -> None:
    rows = fetch(cluster.url, "SELECT name, role FROM replicas")
    http_pid = cluster.http.proc.pid if cluster.http.proc else None
    assert {pid_of(r["name"]) for r in rows} == {p.proc.pid for p in cluster.live_evaluators() if p.proc}
    assert http_pid not in {pid_of(h) for h in shard_holders(cluster.url).values()}
    liveness = fetch(cluster.url, "SELECT name, roles FROM liveness")
    assert [r["roles"] for r in liveness if pid_of(r["name"]) == http_pid] == ["http"]
    ready = httpx.get(f"{cluster.http.base}/ready").json()
    assert ready["database"] == "ok" and ready["shards"] == SHARDS
    shard_rows = [lease for lease in ready["leases"] if lease["name"].startswith("shard-")]
    assert sorted(lease["name"] for lease in shard_rows) == sorted(f"shard-{i}" for i in range(SHARDS))
    for lease in shard_rows:
        host, _, pid = lease["holder"].rpartition(":")
        assert host and int(pid) in {p.proc.pid for p in cluster.live_evaluators() if p.proc}
        assert lease["token"] >= 1 and lease["expires_at"].endswith("Z")


@pytest.mark.slow
def test_300_checks_three_evaluators_two_notifiers_one_alert_and_one_delivery_each(cluster: Cluster) -> None:
    uuids = create_checks(cluster.http.base, 300, "silent")
    ping_all(cluster.http.base, uuids)
    alerts = assert_one_missed_alert_each(cluster.url, uuids, timeout=20)
    assert len({a["shard"] for a in alerts}) == SHARDS  # every shard took part
    assert cluster.receiver is not None
    assert_one_notification_each(cluster.receiver, uuids, timeout=30)


def _kill_busiest_mid_sweep(cluster: Cluster, uuids: Sequence[str]) -> float:
    """SIGKILL the replica holding most shards as the first alerts appear; returns the takeover
    time: from the kill until live replicas hold every shard."""
    wait_until(lambda: alerts_of(cluster.url, uuids), timeout=15, interval=0.05, what="the first alerts")
    victim, names = cluster.busiest()
    assert victim.proc is not None
    dead = victim.proc.pid
    victim.proc.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    victim.proc.wait(10)

    def taken_over() -> bool:
        holders = shard_holders(cluster.url)
        return len(holders) == SHARDS and all(h is not None and pid_of(h) != dead for h in holders.values())

    wait_until(taken_over, timeout=10, interval=0.02, what=f"takeover of {names} from {dead}")
    return time.monotonic() - killed_at


def _sigkill_round(cluster: Cluster, round_: int, count: int) -> float:
    cluster.balanced(3)
    uuids = create_checks(cluster.http.base, count, f"kill{round_}")
    ping_all(cluster.http.base, uuids)
    takeover = _kill_busiest_mid_sweep(cluster, uuids)
    assert takeover <= TTL + INTERVAL + TAKEOVER_SLACK, takeover
    assert_one_missed_alert_each(cluster.url, uuids, timeout=15)
    assert cluster.receiver is not None
    assert_one_notification_each(cluster.receiver, uuids, timeout=20)
    return takeover


@pytest.mark.slow
def test_sigkill_busiest_replica_mid_sweep_shards_taken_over_nothing_lost_or_doubled(
    cluster: Cluster,
) -> None:
    _sigkill_round(cluster, 0, 60)


@pytest.mark.slow
def test_sigkill_busiest_replica_twenty_times(cluster: Cluster) -> None:
    takeovers = [_sigkill_round(cluster, round_, 30) for round_ in range(1, 21)]
    print(f"takeover after SIGKILL: max {max(takeovers):.2f}s, mean {sum(takeovers) / len(takeovers):.2f}s")


@pytest.mark.slow
def test_sigstopped_leader_is_fenced_after_takeover(cluster: Cluster) -> None:
    cluster.balanced(3)
    uuids = create_checks(cluster.http.base, 60, "stall")
    victim, names = cluster.busiest()
    assert victim.proc is not None
    before = {r["name"]: r["token"] for r in fetch(cluster.url, "SELECT name, token FROM leases")}
    stale_tokens = {int(name.removeprefix("shard-")): before[name] for name in names}
    ping_all(cluster.http.base, uuids)
    victim.proc.send_signal(signal.SIGSTOP)
    stopped_at = datetime.now(UTC)
    try:
        time.sleep(2 * TTL)
        holders = shard_holders(cluster.url)
        after = {r["name"]: r["token"] for r in fetch(cluster.url, "SELECT name, token FROM leases")}
        for name in names:  # taken over while the leader was stopped
            assert pid_of(holders[name]) != victim.proc.pid, (name, holders[name])
            assert after[name] > before[name]
    finally:
        victim.proc.send_signal(signal.SIGCONT)
    # The resumed leader steps down: either a write it had under way is refused by the fence, or
    # it learns first that its lease session ended (the takeover ended it) and writes nothing.
    # What it must never do — write with its old tokens — is checked below.
    wait_until(
        lambda: "fenced_write_rejected" in victim.stderr or "lease_lost" in victim.stderr,
        timeout=5,
        interval=0.1,
        what="the resumed leader's fenced_write_rejected or lease_lost log line",
    )
    assert victim.proc.poll() is None  # it steps down and carries on
    alerts = assert_one_missed_alert_each(cluster.url, uuids, timeout=15)
    # Nothing the stale leader wrote with its old tokens got in after it was stopped.
    for table in ("alerts", "flips"):
        rows = fetch(
            cluster.url,
            f"SELECT c.shard, x.token, x.created_at FROM {table} x JOIN checks c ON c.id = x.check_id",
        )
        stale = [
            r for r in rows if stale_tokens.get(r["shard"]) == r["token"] and r["created_at"] > stopped_at
        ]
        assert stale == [], (table, stale)
    flips = fetch(
        cluster.url,
        "SELECT c.uuid FROM flips f JOIN checks c ON c.id = f.check_id"
        " WHERE c.uuid = ANY($1::text[]) AND f.up = 0",
        list(uuids),
    )
    assert sorted(r["uuid"] for r in flips) == sorted(uuids)  # one flip down each, not two
    assert all(a["token"] is not None for a in alerts)
    assert cluster.receiver is not None
    assert_one_notification_each(cluster.receiver, uuids, timeout=20)


# ---------------------------------------------------------------- SQLite


@pytest.mark.slow
def test_sqlite_two_evaluators_sigkill_holder_takeover_within_ttl(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'monitor.db'}"
    http = _http_only_process(url, tmp_path)
    cluster = Cluster(url=url, directory=tmp_path, http=http)
    try:
        http.start()
        http.wait_healthy()
        cluster.start_worker("evaluate")
        cluster.start_worker("evaluate")
        cluster.balanced(2)
        uuids = create_checks(http.base, 40, "sqlite")
        ping_all(http.base, uuids)
        takeover = _kill_busiest_mid_sweep(cluster, uuids)
        assert takeover <= TTL + INTERVAL + TAKEOVER_SLACK, takeover
        assert_one_missed_alert_each(url, uuids, timeout=15)
    finally:
        cluster.close()
