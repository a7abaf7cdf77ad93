"""The bundled scheduler with real processes (DESIGN §8).

One throwaway PostgreSQL database and one real ``monitor serve`` are shared by the module;
each test starts its own ``monitor scheduler`` replicas (TTL 1 s) on its own jobs file, and
jobs run as real shell commands on ``seconds`` schedules. What the tests read back: the files
the jobs write, the ``job_claims`` rows, ``/ready`` (which replica holds ``job-<name>``) and the
monitor's own API (runs, pings, alerts) — the scheduler reports there like any client.

1. Three replicas, ``*/2 * * * * *``: every tick exactly once, no gaps, across a SIGKILL of
   the lease holder; the runs API shows each run bound to its tick with outcome and duration.
2. A 5 s job on a 2 s schedule under each concurrency policy.
3. Ten ticks of downtime, restarted under each catch-up setting.
4. Fenced billing: a replica stalled past its lease has its stale write refused.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monitor.scheduler.runner import HOLDER_DIED
from tests.support.process import REPO_ROOT, MonitorProcess, wait_until
from tests.support.scheduler_stack import Stack, lines, parse, scheduler_stack
from tests.support.tcp import Gate

pytestmark = pytest.mark.e2e

API_KEY = "scheduler-e2e-key-0123456789"
TTL = "1"
EXAMPLE = REPO_ROOT / "examples" / "fenced_billing"


def iso(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    directory = tmp_path_factory.mktemp("scheduler")
    with scheduler_stack(directory, "monitor_sched", api_key=API_KEY, lease_ttl=TTL) as shared:
        yield shared


def stop(*processes: MonitorProcess) -> None:
    for p in processes:
        if p.proc is not None and p.proc.poll() is None:
            assert p.terminate(15) == 0, p.describe()


def echo_job(name: str, out: Path, schedule: str = "*/2 * * * * *", **keys: str) -> str:
    extra = "".join(f'{k} = "{v}"\n' for k, v in keys.items())
    return (
        f'[[jobs]]\nname = "{name}"\nschedule = "{schedule}"\ndialect = "seconds"\n{extra}'
        f"command = 'echo \"$MONITOR_SCHEDULED_TIME $MONITOR_ATTEMPT $MONITOR_FENCING_TOKEN\" >> {out}'\n"
    )


@pytest.mark.slow
def test_three_replicas_run_every_tick_once_across_a_sigkill_of_the_holder(stack: Stack) -> None:
    out = stack.directory / "every2s.txt"
    replicas = [stack.scheduler("replica", echo_job("every2s", out)) for _ in range(3)]
    victim: MonitorProcess | None = None
    try:
        wait_until(lambda: len(lines(out)) >= 4, timeout=40, what="4 ticks")
        # kill between ticks (mid-period) so no run is in flight when the holder dies
        time.sleep((1.0 - time.time() % 2) % 2 or 0.01)
        holder = stack.lease("job-every2s")
        assert holder is not None and holder["holder"], holder
        pid = int(holder["holder"].rsplit(":", 1)[1])
        (victim,) = [p for p in replicas if p.proc is not None and p.proc.pid == pid]
        victim.proc.kill()  # type: ignore[union-attr]
        victim.proc.wait(5)  # type: ignore[union-attr]
        killed_at = datetime.now(UTC)
        wait_until(
            lambda: any(parse(line[0]) >= killed_at + timedelta(seconds=7) for line in lines(out)),
            timeout=40,
            what="4 ticks after the kill",
        )
        after = stack.lease("job-every2s")
        assert after is not None and after["holder"] != holder["holder"]
        assert int(after["token"]) > int(holder["token"])
    finally:
        stop(*[p for p in replicas if p is not victim])
        for p in replicas:
            p.close()
    rows = lines(out)
    ticks = [parse(r[0]) for r in rows]
    counts = Counter(ticks)
    assert all(c == 1 for c in counts.values()), counts  # exactly once
    expected = [
        ticks[0] + timedelta(seconds=2 * i)
        for i in range(int((max(ticks) - ticks[0]).total_seconds()) // 2 + 1)
    ]
    assert sorted(ticks) == expected  # no gaps
    tokens = sorted({int(r[2]) for r in rows})
    # the first holder's and its successor's (a loaded machine may miss a 1 s TTL renewal and
    # hand over once more: still fenced, tokens only grow tick after tick)
    assert len(tokens) >= 2, tokens
    by_time = [int(r[2]) for r in sorted(rows, key=lambda r: parse(r[0]))]
    assert by_time == sorted(by_time), by_time
    attempts = Counter(r[1] for r in rows)
    assert set(attempts) <= {"1", "2"} and attempts["2"] <= len(tokens) - 1, attempts  # ≤ 1 orphan a handover

    # 4. the monitor's runs API: every run bound to its tick, with outcome and duration
    def all_reported() -> list[dict[str, Any]] | None:
        runs = [r for r in stack.runs("every2s") if r["outcome"] is not None]
        return runs if len(runs) >= len(ticks) else None

    runs = wait_until(all_reported, timeout=30, what="every run reported")
    by_tick = {parse(r["scheduled"]): r for r in runs}
    assert set(by_tick) == set(ticks)
    for tick in ticks:
        run = by_tick[tick]
        assert run["outcome"] == "on_time" and run["exit_status"] == 0, run
        # bound to its tick; the start is reported soon after it (generous: a loaded machine)
        assert run["duration"] is not None and 0 <= run["duration"] < 10, run
        assert tick <= parse(run["started"]) < tick + timedelta(seconds=10), run
    # the replicas ping the scheduler's own liveness check (a dead scheduler is itself an alert)
    liveness = stack.check("monitor-scheduler")
    assert liveness["kind"] == "simple" and liveness["n_pings"] >= 3 and liveness["status"] == "up", liveness
    token_of = {parse(r[0]): r[2] for r in rows}
    table = ["| scheduled | started | finished | outcome | duration s | token |", "|---|---|---|---|---|---|"]
    for run in sorted(runs, key=lambda r: r["scheduled"]):
        table.append(
            f"| {run['scheduled']} | {run['started']} | {run['finished']} | {run['outcome']} | "
            f"{run['duration']} | {token_of[parse(run['scheduled'])]} |"
        )
    (stack.directory / "timeline.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))
    print(f"SIGKILLed holder {holder['holder']} (token {holder['token']}) at {iso(killed_at)}")


POLICY_JOBS = "".join(
    f'[[jobs]]\nname = "pol-{policy.lower()}"\nschedule = "*/2 * * * * *"\ndialect = "seconds"\n'
    f'command = ["sleep", "5"]\nconcurrency_policy = "{policy}"\n\n'
    for policy in ("Allow", "Forbid", "Replace", "BufferOne", "BufferAll")
)


def _overlapping(rows: list[dict[str, Any]]) -> bool:
    spans = sorted(
        (r["started_at"], r["finished_at"] or datetime.max.replace(tzinfo=UTC))
        for r in rows
        if r["started_at"]
    )
    return any(b[0] < a[1] for a, b in itertools.pairwise(spans))


@pytest.mark.slow
def test_a_5s_job_on_a_2s_schedule_under_each_policy(stack: Stack) -> None:
    scheduler = stack.scheduler("policies", POLICY_JOBS, grace=0.5)
    try:
        wait_until(lambda: stack.claims("pol-allow"), timeout=15, what="the first tick")
        first = stack.claims("pol-allow")[0]["tick"]
        wait_until(
            lambda: datetime.now(UTC) > first + timedelta(seconds=12.5),
            timeout=20,
            interval=0.2,
            what="6 ticks",
        )
        claims = {
            p: stack.claims(f"pol-{p}") for p in ("allow", "forbid", "replace", "bufferone", "bufferall")
        }
    finally:
        stop(scheduler)
        scheduler.close()
    window = [first + timedelta(seconds=2 * i) for i in range(7)]  # ticks 0 … 12 s

    def ran(p: str) -> list[dict[str, Any]]:
        return [r for r in claims[p] if r["started_at"] is not None]

    def skipped(p: str) -> dict[datetime, str]:
        return {r["tick"]: r["reason"] for r in claims[p] if r["state"] == "skipped"}

    # Allow: every tick starts on time, runs overlap, and the monitor raises overlap alerts
    assert [r["tick"] for r in ran("allow")][:7] == window
    assert _overlapping(ran("allow"))
    uuid = stack.check("pol-allow")["uuid"]
    alerts = wait_until(
        lambda: [a for a in stack.api(f"/api/v3/checks/{uuid}/alerts/")["alerts"] if a["kind"] == "overlap"],
        timeout=10,
        what="overlap alerts",
    )
    assert {parse(a["scheduled"]) for a in alerts} <= set(window[1:])
    # Forbid: never two at once; the ticks that came due meanwhile are skipped and reported
    assert not _overlapping(ran("forbid"))
    assert [r["tick"] for r in ran("forbid")][:3] == [window[0], window[3], window[6]]
    assert skipped("forbid") == {t: "forbid" for t in (window[1], window[2], window[4], window[5])}
    forbid_uuid = stack.check("pol-forbid")["uuid"]
    pings = stack.api(f"/api/v3/checks/{forbid_uuid}/pings/?limit=1000")["pings"]
    assert {parse(p["scheduled"]) for p in pings if p["type"] == "skip"} >= {window[1], window[2]}
    # Replace: every tick starts; each run is terminated (SIGTERM: exit 143) by the next
    assert [r["tick"] for r in ran("replace")][:7] == window
    terminated = [r for r in ran("replace") if r["tick"] in window[:6]]
    assert all(r["exit_status"] == 143 for r in terminated), terminated
    replace_runs = {parse(r["scheduled"]): r for r in stack.runs("pol-replace")}
    assert all(
        replace_runs[t]["outcome"] == "failed" and replace_runs[t]["exit_status"] == 143 for t in window[:6]
    )
    # BufferOne: one tick waits for the run in progress, later ones are skipped
    one = ran("bufferone")
    assert not _overlapping(one)
    assert [r["tick"] for r in one][:3] == [window[0], window[1], window[3]]
    assert one[1]["started_at"] >= window[0] + timedelta(seconds=5)  # started when tick 0's run ended
    early = {t: r for t, r in skipped("bufferone").items() if t <= window[4]}  # tick 10 s races run 2's end
    assert early == {window[2]: "buffer_full", window[4]: "buffer_full"}
    # BufferAll: every tick queued and run in order, none skipped
    every = ran("bufferall")
    assert not _overlapping(every) and not skipped("bufferall")
    assert [r["tick"] for r in every] == window[: len(every)] and len(every) >= 3


CATCHUP_JOBS = "".join(
    echo_job(f"catch-{mode}", Path("{dir}") / f"catch-{mode}.txt", "* * * * * *", catchup=mode)
    for mode in ("all", "latest", "none")
)


@pytest.mark.slow
def test_ten_ticks_of_downtime_under_each_catchup_setting(stack: Stack) -> None:
    jobs = CATCHUP_JOBS.replace("{dir}", str(stack.directory))
    outs = {m: stack.directory / f"catch-{m}.txt" for m in ("all", "latest", "none")}
    first = stack.scheduler("catchup", jobs)
    try:
        wait_until(lambda: all(len(lines(o)) >= 2 for o in outs.values()), timeout=30, what="2 ticks each")
    finally:
        stop(first)
        first.close()
    stopped_at = datetime.now(UTC)
    time.sleep(10.5)  # ten ticks of a one-second schedule go by
    second = stack.scheduler("catchup", jobs)
    try:
        wait_until(
            lambda: all(
                any(parse(r[0]) > stopped_at + timedelta(seconds=13) for r in lines(o)) for o in outs.values()
            ),
            timeout=40,
            what="ticks after the restart",
        )
        claims = {m: stack.claims(f"catch-{m}") for m in outs}
    finally:
        stop(second)
        second.close()
    for mode, rows in claims.items():
        ran_before = [r["tick"] for r in rows if r["tick"] <= stopped_at and r["state"] != "skipped"]
        last_before = max(ran_before)
        restart = min(r["claimed_at"] for r in rows if r["tick"] > last_before)  # the new holder's first act
        missed = [r for r in rows if last_before < r["tick"] <= restart]
        assert len(missed) >= 10, (mode, missed)
        ticks = [r["tick"] for r in missed]
        assert ticks == [last_before + timedelta(seconds=i + 1) for i in range(len(ticks))]  # none lost
        ran = [r["tick"] for r in missed if r["state"] == "finished"]
        skipped = [r["tick"] for r in missed if r["state"] == "skipped"]
        if mode == "all":
            assert ran == ticks and not skipped
        elif mode == "latest":
            assert ran == ticks[-1:] and skipped == ticks[:-1]
        else:
            assert not ran and skipped == ticks
        assert {r["reason"] for r in missed if r["state"] == "skipped"} <= {"catchup"}
        # the runs happened with their original scheduled times, in order
        written = [parse(line[0]) for line in lines(outs[mode])]
        assert [t for t in written if last_before < t <= restart] == ran
        started = [r for r in missed if r["state"] == "finished"]
        assert [r["tick"] for r in sorted(started, key=lambda r: r["started_at"])] == ran
        # and every skipped one reached the monitor as a skip ping
        uuid = stack.check(f"catch-{mode}")["uuid"]
        pings = wait_until(
            lambda uuid=uuid, n=len(skipped): (
                [
                    p
                    for p in stack.api(f"/api/v3/checks/{uuid}/pings/?limit=1000")["pings"]
                    if p["type"] == "skip"
                ]
                if n
                else [True]
            ),
            timeout=30,
            what="skip pings",
        )
        if skipped:
            assert {parse(p["scheduled"]) for p in pings} == set(skipped)


def test_fenced_billing_refuses_a_stalled_replicas_stale_write(stack: Stack) -> None:
    """examples/fenced_billing: stall the lease holder and its run past the TTL (SIGSTOP)."""
    db = stack.directory / "billing.db"
    trace = stack.directory / "billing.trace"
    jobs = (
        '[[jobs]]\nname = "billing"\nschedule = "*/3 * * * * *"\ndialect = "seconds"\n'
        f'command = ["{sys.executable}", "{EXAMPLE / "bill.py"}"]\nconcurrency_policy = "Forbid"\n'
        f'[jobs.env]\nBILLING_DB = "{db}"\nBILLING_TRACE = "{trace}"\nBILLING_WORK_SECONDS = "2"\n'
    )
    replicas = [stack.scheduler("billing", jobs) for _ in range(2)]
    stalled: list[int] = []
    try:
        start = wait_until(lambda: lines(trace), timeout=15, what="a billing run")[0]
        token, job_pid, tick = int(start[1]), int(start[2]), start[3]
        holder = stack.lease("job-billing")
        assert holder is not None and int(holder["token"]) == token
        holder_pid = int(holder["holder"].rsplit(":", 1)[1])
        for pid in (holder_pid, job_pid):  # the replica and its run stall mid-work
            os.kill(pid, signal.SIGSTOP)
            stalled.append(pid)
        # PostgreSQL ends the stalled holder's lease session within a TTL; the other replica
        # takes the lease with a higher token and runs the next tick, which charges
        new = wait_until(
            lambda: (row := stack.lease("job-billing")) and int(row["token"]) > token and row,
            timeout=10,
            what="the takeover",
        )
        assert new["holder"] != holder["holder"]
        wait_until(lambda: _charges(db, int(new["token"])), timeout=10, what="a charge under the new token")
        # the run wakes first and writes; its replica, once awake, would end a run still going
        # (overtaken by the newer holder's), so it wakes only after the run has exited
        os.kill(job_pid, signal.SIGCONT)
        stalled.remove(job_pid)
        wait_until(
            lambda: _query(db, "SELECT tick, token, highest FROM rejections"), timeout=10, what="the refusal"
        )
        wait_until(lambda: _exited(job_pid), timeout=10, what="the refused run's exit")
        for pid in stalled:
            os.kill(pid, signal.SIGCONT)
        stalled.clear()
        assert _query(db, "SELECT tick, token, highest FROM rejections") == [(tick, token, int(new["token"]))]
        assert all(row[1] >= int(new["token"]) for row in _query(db, "SELECT tick, token FROM charges"))
        assert tick not in {row[0] for row in _query(db, "SELECT tick, token FROM charges")}
        # the refused run reached the monitor as a failed run with the refusal as its output
        run = wait_until(
            lambda: next((r for r in stack.runs("billing") if r["scheduled"] == tick and r["outcome"]), None),
            timeout=10,
            what="the refused run's report",
        )
        assert run["outcome"] == "failed" and run["exit_status"] == 3, run
    finally:
        for pid in stalled:
            os.kill(pid, signal.SIGCONT)
        stop(*replicas)
        for p in replicas:
            p.close()


def _exited(pid: int) -> bool:
    """Whether process ``pid`` has exited (a zombie its stopped parent has not reaped, or gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    import sqlite3

    if not db.exists():
        return []
    conn = sqlite3.connect(db, timeout=10)
    try:
        return list(conn.execute(sql).fetchall())
    except sqlite3.OperationalError:  # the tables do not exist yet
        return []
    finally:
        conn.close()


def _charges(db: Path, token: int) -> list[tuple[Any, ...]]:
    return [row for row in _query(db, "SELECT tick, token FROM charges") if row[1] == token]


@pytest.mark.slow
def test_sigkill_of_the_holder_at_any_moment_20_times(stack: Stack) -> None:
    """20×: SIGKILL the holder at a random moment of the period (possibly mid-run): no tick runs
    twice, at most one runs again as attempt 2, and a tick missing from the output can only be one
    whose start the dead holder had recorded (killed between recording it and spawning)."""
    import random

    for i in range(20):
        name = f"loop{i}"
        out = stack.directory / f"{name}.txt"
        job = echo_job(name, out).replace("command = 'echo", "command = 'sleep 0.3; echo")
        replicas = [stack.scheduler(name, job) for _ in range(3)]
        try:
            wait_until(lambda out=out: len(lines(out)) >= 2, timeout=20, what="2 ticks")
            time.sleep(random.uniform(0, 2))
            holder = stack.lease(f"job-{name}")
            assert holder is not None and holder["holder"]
            pid = int(holder["holder"].rsplit(":", 1)[1])
            os.kill(pid, signal.SIGKILL)
            killed_at = datetime.now(UTC)
            wait_until(
                lambda out=out, k=killed_at: any(parse(r[0]) >= k + timedelta(seconds=5) for r in lines(out)),
                timeout=20,
                what="ticks after the kill",
            )
        finally:
            stop(*[p for p in replicas if p.proc is not None and p.proc.pid != pid])
            for p in replicas:
                p.close()
        time.sleep(0.5)  # a run the dead replica left behind finishes its write
        rows = lines(out)
        ticks = [parse(r[0]) for r in rows]
        assert all(c == 1 for c in Counter(ticks).values()), rows
        attempts = Counter(r[1] for r in rows)
        assert set(attempts) <= {"1", "2"} and attempts["2"] <= 1, rows
        claims = {c["tick"]: c for c in stack.claims(name)}
        span = [
            min(ticks) + timedelta(seconds=2 * k)
            for k in range(int((max(ticks) - min(ticks)).total_seconds()) // 2 + 1)
        ]
        for tick in set(span) - set(ticks):
            # the dead holder's (its zombie is dead too: the test has not reaped it), closed by
            # the successor as died with it
            claim = claims[tick]
            assert claim["token"] == int(holder["token"]), (tick, claim)
            assert claim["state"] == "finished" and claim["reason"] == HOLDER_DIED, (tick, claim)


def test_reporter_keeps_pings_across_an_outage_and_a_refused_check_blocks_no_other(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    """In-process reporter against the real monitor (through a gate): a check the monitor refuses
    (grace over a year, as an unvalidated file would send) is logged once and the other job is
    still reported; pings made while the monitor is unreachable arrive, in order, when it is back."""
    import dataclasses
    import logging

    from monitor.domain.jobs import parse_job
    from monitor.scheduler.reporter import HttpReporter

    port = int(stack.monitor.base.rsplit(":", 1)[1])
    gate = Gate(port)
    raw = {"schedule": "*/2 * * * * *", "dialect": "seconds", "command": "true"}
    bad = dataclasses.replace(parse_job({**raw, "name": "rep-bad"}, 0), grace=99_999_999_999)
    good = parse_job({**raw, "name": "rep-good"}, 1)
    caplog.set_level(logging.WARNING, logger="monitor.scheduler.reporter")
    reporter = HttpReporter(f"http://127.0.0.1:{gate.port}", API_KEY, [bad, good])

    def finished() -> list[dict[str, Any]]:
        if not stack.api("/api/v3/checks/?slug=rep-good")["checks"]:
            return []
        return [r for r in stack.runs("rep-good") if r["outcome"]]

    try:
        base = datetime.now(UTC).replace(microsecond=0)
        base -= timedelta(seconds=base.second % 2)
        for job in (bad, good):
            reporter.start(job, base, 1, "11111111-1111-4111-8111-111111111111")
            reporter.finish(job, base, 1, "11111111-1111-4111-8111-111111111111", 0, b"ok")
        wait_until(lambda: len(finished()) >= 1, timeout=20, what="run 1")
        refusals = [r for r in caplog.records if getattr(r, "action", "") == "check_refused"]
        assert len(refusals) == 1 and "rep-bad" in refusals[0].getMessage()
        assert not stack.api("/api/v3/checks/?slug=rep-bad")["checks"]
        gate.down()  # the monitor is unreachable
        later = [base + timedelta(seconds=2 * i) for i in (1, 2, 3)]
        rids = [f"2222222{i}-2222-4222-8222-222222222222" for i in range(3)]
        for tick, rid in zip(later, rids, strict=True):
            reporter.start(good, tick, 1, rid)
            reporter.finish(good, tick, 1, rid, 3, b"failed")
        time.sleep(5.0)  # longer than the client's own retries (0.5 + 1 + 2 s): ours keep going
        gate.up()
        runs = wait_until(
            lambda: (rs := finished()) and len(rs) >= 4 and rs,
            timeout=30,
            what="the runs reported during the outage",
        )
        by_tick = {parse(r["scheduled"]): r for r in runs}
        assert set(later) <= set(by_tick)  # none lost, each bound to its own tick
        assert all(by_tick[t]["exit_status"] == 3 for t in later)
        # the shared liveness check: its period is set when created, never reset by a replica
        # configured otherwise (this reporter says 60 s)
        before = stack.api("/api/v3/checks/?slug=monitor-scheduler")["checks"]
        reporter.liveness()
        after = wait_until(
            lambda: (
                (c := stack.api("/api/v3/checks/?slug=monitor-scheduler")["checks"])
                and c[0]["n_pings"] > (before[0]["n_pings"] if before else 0)
                and c[0]
            ),
            timeout=20,
            what="a liveness ping",
        )
        assert after["timeout"] == (before[0]["timeout"] if before else 60)
    finally:
        reporter.close(5.0)
        gate.down()
