"""A scheduler replica's SIGTERM on PostgreSQL hands its idle jobs over at once (DESIGN §8).

Real ``monitor scheduler`` processes on a throwaway database (lease TTL 4 s). Replica A holds a
``Forbid`` job with a long run in progress and a job that ticks every second; replica B holds
two other every-second jobs, its fair share. On A's SIGTERM its idle job's lease is handed over
at once (B, at its share, runs its next tick within ~1.5 s, not after A's long run nor a TTL
later), the long job's lease is kept until its run ended and was
recorded, and the ticks that came due beside that run are skipped (``Forbid``), so B's first run
of it is a tick due after A's run ended, not a stale one run late.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.process import MonitorProcess, wait_until
from tests.support.scheduler_stack import Stack, lines, scheduler_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # about 30 s

API_KEY = "scheduler-shutdown-key-0123456789"
TTL = "4"
LONG = 6
"""Seconds the long job's run takes."""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    directory = tmp_path_factory.mktemp("shutdown")
    with scheduler_stack(directory, "monitor_shutdown", api_key=API_KEY, lease_ttl=TTL) as shared:
        yield shared


def job(name: str, command: str, **keys: str) -> str:
    extra = "".join(f'{k} = "{v}"\n' for k, v in keys.items())
    head = f'[[jobs]]\nname = "{name}"\nschedule = "* * * * * *"\ndialect = "seconds"\n'
    return f"{head}{extra}command = '{command}'\n"


def stamp(out: Path) -> str:
    """Appends ``<tick> <token> <unix s>`` to ``out``."""
    return f'echo "$MONITOR_SCHEDULED_TIME $MONITOR_FENCING_TOKEN $(date +%s.%N)" >> {out}'


def test_sigterm_hands_idle_jobs_over_at_once_and_keeps_only_a_running_jobs_lease(stack: Stack) -> None:
    d = stack.directory
    quick = {name: d / f"{name}.txt" for name in ("sd-tick", "sd-tock", "sd-tack")}
    long_out = d / "sd-long.txt"
    jobs = job("sd-long", f"{stamp(long_out)}; sleep {LONG}", concurrency_policy="Forbid")
    jobs += "".join(job(name, stamp(out)) for name, out in quick.items())
    a = stack.scheduler("sd-a", jobs, grace=20)
    b: MonitorProcess | None = None
    try:
        wait_until(
            lambda: lines(long_out) and all(lines(o) for o in quick.values()), timeout=20, what="A runs all"
        )
        a_pid = stack.holder_pid("sd-long")[0]
        assert a.proc is not None and a_pid == a.proc.pid
        b = stack.scheduler("sd-b", jobs, grace=20)
        assert b.proc is not None
        b_pid = b.proc.pid
        # fair share 2 of 4: A gives two idle quick jobs to B, which is then at its share (so
        # it takes A's last quick job over only as a handed-over lease, not a free one)
        wait_until(
            lambda: sorted(stack.holder_pid(n)[0] for n in quick) == sorted([a_pid, b_pid, b_pid]),
            timeout=20,
            what="B takes two",
        )
        # SIGTERM early in a long run (A keeps sd-long, which stays busy, under Forbid)
        wait_until(
            lambda: (r := lines(long_out)) and 0.5 < time.time() - float(r[-1][2]) < 1.5,
            timeout=LONG + 5,
            interval=0.05,
            what="a long run under way",
        )
        (kept,) = [n for n in quick if stack.holder_pid(n)[0] == a_pid]
        long_tick = lines(long_out)[-1][0]
        a.proc.send_signal(15)
        termed = time.time()
        first = wait_until(
            lambda: next((float(r[2]) for r in lines(quick[kept]) if float(r[2]) > termed), None),
            timeout=LONG + 10,
            interval=0.05,
            what=f"B runs {kept} after A's SIGTERM",
        )
        assert a.proc.wait(LONG + 10) == 0, a.describe()
        ended = time.time()
        long_runs = wait_until(
            lambda: (r := [x for x in lines(long_out) if x[0] > long_tick]) and r,
            timeout=15,
            interval=0.05,
            what="B runs sd-long",
        )
    finally:
        for p in (a, b):
            if p is not None and p.proc is not None and p.proc.poll() is None:
                p.terminate(30)
            if p is not None:
                p.close()
    handed = first - termed
    print(f"{kept}: B's first run {handed:.2f}s after A's SIGTERM (A's long run left {LONG}s)")
    assert handed < 1.5, handed
    # the ticks due beside A's run were skipped (Forbid): B's first run of sd-long is a tick due
    # after A's run ended and was handed over, started on time, not a stale one
    claims = {iso(c["tick"]): c for c in stack.claims("sd-long")}
    skipped = [c for c in claims.values() if c["state"] == "skipped" and iso(c["tick"]) > long_tick]
    assert skipped and all(c["reason"] == "forbid" for c in skipped), skipped
    first_long = long_runs[0]
    late = float(first_long[2]) - parse_tick(first_long[0])
    assert late < 3.0, (first_long, late)
    assert parse_tick(first_long[0]) >= ended - 3.0, (first_long, ended)


def iso(instant: object) -> str:
    from datetime import datetime

    assert isinstance(instant, datetime)
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_tick(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
