"""Durable ping throughput of ``monitor serve`` against a no-op Litestar endpoint.

Method (see ``benchmarks/README.md``):

1. Start ``monitor serve`` exactly as shipped (no flags but ``--port``) on a fresh SQLite file
   in a temporary directory, or on a throwaway PostgreSQL database; create 1 000 simple checks
   through the API.
2. Start the baseline: ``benchmarks/noop_app.py`` (one Litestar route that answers ``OK``) under
   two uvicorn workers, started as ``monitor serve --workers 2`` starts them; and, for
   reference only, the same app on one worker (``no-op-1``), as ``monitor serve`` runs.
3. ``wrk -t1 -c32 --latency`` with a Lua script POSTing a short body to random ping URLs of
   those checks: 3 s warm-up on each, then no-op and monitor alternated three times (10 s each).
4. Report per run and as medians: 2xx responses per second (for monitor these are *durable*
   pings: a ping is answered only after its transaction committed), p50/p99 latency, non-2xx
   and socket errors; the ratio monitor/no-op.
5. Ping accounting: after every monitor run, the sum of ``n_pings`` over the 1 000 checks (read
   through the API) must have grown by at least the number of 2xx responses wrk counted, and by
   at most that plus the number of connections: when wrk stops, up to one request per
   connection is in flight; the server may commit and count it although wrk never reads the
   answer.

Loopback only; every phase is bounded. Exit status 1 if a monitor run had a non-2xx answer or
an acknowledged ping is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from databases import database
from harness import cpu_probe

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
API_KEY = "benchmark-key-0123456789abcdef"

LUA = """
local paths = {%(paths)s}
local body = "benchmark ping: job finished\\n"
local headers = {["Content-Type"] = "text/plain"}
local counter = 0

setup = function(thread)
  thread:set("id", counter)
  counter = counter + 1
end

init = function(args)
  math.randomseed(os.time() + id)
end

request = function()
  return wrk.format("POST", paths[math.random(#paths)], headers, body)
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests": %%d, "duration_us": %%d, "non2xx": %%d, "connect": %%d, "read": %%d, ' ..
    '"write": %%d, "timeout": %%d, "p50_us": %%d, "p99_us": %%d, "max_us": %%d}\\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Run:
    target: str
    round: int
    requests: int
    duration_s: float
    non2xx: int
    socket_errors: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    load: float = 0.0
    probe_ms: float = 0.0

    @property
    def ok(self) -> int:
        return self.requests - self.non2xx

    @property
    def ok_per_s(self) -> float:
        return self.ok / self.duration_s


class Server:
    """A child process serving HTTP on 127.0.0.1:port; stopped with SIGTERM, killed if needed."""

    def __init__(self, name: str, argv: list[str], port: int, env: dict[str, str], cwd: Path) -> None:
        self.name = name
        self.port = port
        self.log = cwd / f"{name}.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, path: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited ({self.proc.returncode}):\n{self.log.read_text()}")
            try:
                if (
                    httpx.request("POST" if path.startswith("/ping") else "GET", self.base + path).status_code
                    < 500
                ):
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise SystemExit(f"{self.name} not ready after {timeout}s:\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONITOR_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


async def create_checks(base: str, count: int) -> list[str]:
    """``count`` simple checks through the API (8 requests in flight); returns their uuids."""
    headers = {"X-Api-Key": API_KEY}
    limits = httpx.Limits(max_connections=8)
    async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits, timeout=30) as client:
        semaphore = asyncio.Semaphore(8)

        async def one(i: int) -> str:
            async with semaphore:
                r = await client.post("/api/v3/checks/", json={"name": f"bench-{i}", "timeout": 3600})
                r.raise_for_status()
                return str(r.json()["uuid"])

        return list(await asyncio.gather(*(one(i) for i in range(count))))


def total_pings(base: str, uuids: set[str]) -> int:
    r = httpx.get(base + "/api/v3/checks/", headers={"X-Api-Key": API_KEY}, timeout=60)
    r.raise_for_status()
    return sum(int(c["n_pings"]) for c in r.json()["checks"] if c["uuid"] in uuids)


def settled_pings(base: str, uuids: set[str], timeout: float = 10) -> int:
    """``total_pings`` once it stops changing (requests wrk left in flight have finished)."""
    deadline = time.monotonic() + timeout
    last = total_pings(base, uuids)
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = total_pings(base, uuids)
        if now == last:
            return now
        last = now
    return last


def wrk(url: str, script: Path, seconds: int, connections: int) -> dict[str, Any]:
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script), url]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"wrk failed ({proc.returncode}): {proc.stderr}")
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[len("RESULT ") :]))
    raise SystemExit(f"wrk printed no RESULT line:\n{proc.stdout}")


def to_run(target: str, round_: int, raw: dict[str, Any]) -> Run:
    return Run(
        target=target,
        round=round_,
        requests=raw["requests"],
        duration_s=raw["duration_us"] / 1e6,
        non2xx=raw["non2xx"],
        socket_errors=raw["connect"] + raw["read"] + raw["write"] + raw["timeout"],
        p50_ms=raw["p50_us"] / 1000,
        p99_ms=raw["p99_us"] / 1000,
        max_ms=raw["max_us"] / 1000,
        load=os.getloadavg()[0],
        probe_ms=cpu_probe(),
    )


@dataclass
class Target:
    """A monitor under measurement: its server, Lua script and check uuids."""

    server: Server
    script: Path
    uuids: set[str]


def start_monitor(name: str, url: str, args: argparse.Namespace, work: Path, **env: str) -> Target:
    """``monitor serve --port P`` as shipped (``env``: extra ``MONITOR_*``) with ``args.checks``
    checks created through the API."""
    port = free_port()
    server = Server(
        name,
        [sys.executable, "-m", "monitor", "serve", "--port", str(port)],
        port,
        child_env(
            MONITOR_DATABASE_URL=url,
            MONITOR_API_KEY=API_KEY,
            MONITOR_BASE_URL=f"http://127.0.0.1:{port}",
            **env,
        ),
        work,
    )
    try:
        server.wait_ready("/health")
        started = time.monotonic()
        uuids = asyncio.run(create_checks(server.base, args.checks))
    except BaseException:
        server.stop()
        raise
    print(f"[{name}] created {len(uuids)} checks in {time.monotonic() - started:.1f}s", flush=True)
    script = work / f"pings-{name}.lua"
    script.write_text(LUA % {"paths": ", ".join(f'"/ping/{u}"' for u in uuids)})
    return Target(server, script, set(uuids))


def measure_monitor(
    target: Target, label: str, round_: int, args: argparse.Namespace, accounting: list[tuple[int, int]]
) -> Run:
    """One measured wrk run against ``target``, its pings accounted for (``accounting``)."""
    before = settled_pings(target.server.base, target.uuids)
    run = to_run(label, round_, wrk(target.server.base, target.script, args.duration, args.connections))
    accounting.append((run.ok, settled_pings(target.server.base, target.uuids) - before))
    return run


def bench_backend(
    backend: str, args: argparse.Namespace, noop: Server, work: Path, noop_one: Server | None = None
) -> dict[str, Any]:
    """Long because it alternates every target of the backend round by round, each started and
    stopped around them."""
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(database(backend, work))
        monitor = start_monitor(f"monitor-{backend}", url, args, work)
        stack.callback(monitor.server.stop)
        one_process = None
        if args.reference_one_process and backend == "sqlite":
            # the same server with the ping writes in the API process: what the child process buys
            (work / "one-process").mkdir(exist_ok=True)
            other = stack.enter_context(database(backend, work / "one-process"))
            one_process = start_monitor("monitor-1p", other, args, work, MONITOR_INGEST_PROCESS="0")
            stack.callback(one_process.server.stop)
        wrk(noop.base, monitor.script, args.warmup, args.connections)
        if noop_one is not None:
            wrk(noop_one.base, monitor.script, args.warmup, args.connections)
        for target in (monitor, one_process):
            if target is not None:
                wrk(target.server.base, target.script, args.warmup, args.connections)
        runs: list[Run] = []
        accounting: list[tuple[int, int]] = []
        for round_ in range(1, args.rounds + 1):
            runs.append(
                to_run("no-op", round_, wrk(noop.base, monitor.script, args.duration, args.connections))
            )
            if noop_one is not None:
                one = wrk(noop_one.base, monitor.script, args.duration, args.connections)
                runs.append(to_run("no-op-1", round_, one))
            if one_process is not None:
                runs.append(measure_monitor(one_process, "mon-1p", round_, args, accounting))
            runs.append(measure_monitor(monitor, "monitor", round_, args, accounting))
            print(f"[{backend}] round {round_}: {runs[-1].ok_per_s:,.0f} /s", flush=True)
    return {"backend": backend, "runs": runs, "accounting": accounting}


GOAL_RATIO = 0.30
"""Goal: durable pings per second at least 0.30 of the no-op Litestar app, on both backends."""
GOAL_P99_MS = 50.0
"""Goal: monitor's p99 latency under the same load."""


def report(results: list[dict[str, Any]], connections: int) -> bool:
    good = True
    header = (
        f"{'backend':9} {'target':8} {'round':>5} {'2xx/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
        f"{'non-2xx':>8} {'sock err':>8} {'load':>6} {'probe':>6}"
    )
    print()
    print(header)
    print("-" * len(header))
    for result in results:
        for run in result["runs"]:
            print(
                f"{result['backend']:9} {run.target:8} {run.round:>5} {run.ok_per_s:>9,.0f} "
                f"{run.p50_ms:>8.2f} {run.p99_ms:>8.2f} {run.max_ms:>8.1f} "
                f"{run.non2xx:>8} {run.socket_errors:>8} {run.load:>6.2f} {run.probe_ms:>4.0f}ms"
            )
    print()
    summary = (
        f"{'backend':9} {'no-op /s':>9} {'monitor /s':>10} {'ratio':>6} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'non-2xx':>8} {'pings ok':>9} {'no-op-1 /s':>10} {'ratio-1':>7} {'mon-1p /s':>9} {'× 1p':>6}"
    )
    print(summary)
    print("-" * len(summary))
    for result in results:
        noop = [r for r in result["runs"] if r.target == "no-op"]
        mon = [r for r in result["runs"] if r.target == "monitor"]
        noop_rate = statistics.median(r.ok_per_s for r in noop)
        mon_rate = statistics.median(r.ok_per_s for r in mon)
        non2xx = sum(r.non2xx for r in mon)
        counted_ok = all(ok <= counted <= ok + connections for ok, counted in result["accounting"])
        good = good and non2xx == 0 and counted_ok
        one = [r.ok_per_s for r in result["runs"] if r.target == "no-op-1"]
        reference = (
            f" {statistics.median(one):>10,.0f} {mon_rate / statistics.median(one):>7.3f}" if one else ""
        )
        one_process = [r.ok_per_s for r in result["runs"] if r.target == "mon-1p"]
        if one_process:
            reference += (
                f" {statistics.median(one_process):>9,.0f} {mon_rate / statistics.median(one_process):>6.3f}"
            )
        print(
            f"{result['backend']:9} {noop_rate:>9,.0f} {mon_rate:>10,.0f} {mon_rate / noop_rate:>6.3f} "
            f"{statistics.median(r.p50_ms for r in mon):>7.2f} "
            f"{statistics.median(r.p99_ms for r in mon):>7.2f} "
            f"{non2xx:>8} {'yes' if counted_ok else 'NO':>9}{reference}"
        )
        for ok, counted in result["accounting"]:
            print(
                f"    {result['backend']}: wrk 2xx {ok:,}, n_pings grew by {counted:,} "
                f"(in flight at the end: {counted - ok})"
            )
    if any(r.target == "no-op-1" for result in results for r in result["runs"]):
        print(
            "no-op-1 (the no-op on one worker, as `monitor serve` runs) and ratio-1 are for reference;"
            " the goal's baseline is the two-worker no-op"
        )
    if any(r.target == "mon-1p" for result in results for r in result["runs"]):
        print(
            "mon-1p (monitor with MONITOR_INGEST_PROCESS=0: its pings stored in the API process) and"
            " × 1p (monitor ÷ mon-1p) are for reference"
        )
    print()
    for result in results:
        noop = [r for r in result["runs"] if r.target == "no-op"]
        mon = [r for r in result["runs"] if r.target == "monitor"]
        ratio = statistics.median(r.ok_per_s for r in mon) / statistics.median(r.ok_per_s for r in noop)
        p99 = statistics.median(r.p99_ms for r in mon)
        load = statistics.median(r.load for r in mon)
        probe = statistics.median(r.probe_ms for r in mon)
        for label, met, figure in (
            ("durable pings/s ÷ no-op ≥ 0.30", ratio >= GOAL_RATIO, f"{ratio:.3f}"),
            ("p99 < 50 ms", p99 < GOAL_P99_MS, f"{p99:.1f} ms"),
        ):
            print(
                f"goal {result['backend']}: {label}: {figure} (load {load:.2f}/{os.cpu_count()} cores,"
                f" probe {probe:.0f} ms):"
                f" {'met' if met else 'NOT met'}"
            )
            good = good and met
    return good


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--backends", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    parser.add_argument("--checks", type=int, default=1000)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--duration", type=int, default=10, help="seconds per measured run")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of warm-up per target")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--noop-runner",
        choices=["monitor", "uvicorn-cli"],
        default="monitor",
        help="start the no-op's 2 workers like 'monitor serve' does (default) or with the uvicorn CLI",
    )
    parser.add_argument(
        "--reference-noop",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure the no-op on one worker (reported for reference, not a goal)",
    )
    parser.add_argument(
        "--reference-one-process",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="SQLite: also measure monitor with MONITOR_INGEST_PROCESS=0 (for reference, not a goal)",
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get install -y wrk (Debian package)", file=sys.stderr)
        return 2
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="monitor-bench-") as tmp:
        work = Path(tmp)
        port = free_port()
        if args.noop_runner == "uvicorn-cli":
            argv = [
                sys.executable, "-m", "uvicorn", "noop_app:app", "--app-dir", str(HERE), "--workers", "2",
                "--host", "127.0.0.1", "--port", str(port), "--no-access-log", "--log-level", "warning",
            ]  # fmt: skip
        else:
            argv = [sys.executable, str(HERE / "noop_app.py"), str(port)]
        noop = Server("noop", argv, port, child_env(), work)
        noop_one = None
        if args.reference_noop:
            one_port = free_port()
            one_argv = [sys.executable, str(HERE / "noop_app.py"), str(one_port), "1"]
            noop_one = Server("noop-1", one_argv, one_port, child_env(), work)
        try:
            noop.wait_ready(f"/ping/{uuid.uuid4()}")
            if noop_one is not None:
                noop_one.wait_ready(f"/ping/{uuid.uuid4()}")
            for backend in args.backends.split(","):
                results.append(bench_backend(backend.strip(), args, noop, work, noop_one))
        finally:
            noop.stop()
            if noop_one is not None:
                noop_one.stop()
    return 0 if report(results, args.connections) else 1


if __name__ == "__main__":
    raise SystemExit(main())
