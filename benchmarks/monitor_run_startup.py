"""What ``monitor-run`` adds to a job: ``monitor-run -- true`` against ``true`` and the shell
wrapper ``clients/shell/monitor-run.sh``, medians of 10.

Method:

1. Start ``monitor serve --dev`` on a fresh SQLite file (loopback) and create one simple check.
2. Ten rounds; each round runs, in alternating order, ``true`` (the baseline: process start),
   ``monitor-run --check <uuid> -- true`` (the console script of this environment: start ping,
   the job, finish ping) and ``monitor-run.sh <uuid> true`` (POSIX sh and curl), timing each
   from spawn to exit.
3. Print the medians, and each wrapper's median minus the baseline's, with the load average
   (the figures are wall times: on a shared machine they grow with its load).

The client's bytecode is compiled first (``compileall``), as pip does when it installs the
wheel: under ``PYTHONDONTWRITEBYTECODE`` (common in development shells and CI) an editable
checkout would otherwise compile ``monitor_client``'s sources on every run, which is not what
an installed ``monitor-run`` pays.

Goal (fixed): ``monitor-run -- true`` at most 100 ms (median, wall time including both pings).
Exit status 1 when it is missed, or when a wrapper's run did not exit 0.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
API_KEY = "benchmark-key-0123456789abcdef"
GOAL_MS = 100.0
ROUNDS = 10


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = (time.perf_counter() - started) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return elapsed


def main() -> int:
    monitor_run = Path(sys.executable).parent / "monitor-run"
    shell_wrapper = REPO_ROOT / "clients" / "shell" / "monitor-run.sh"
    true = "/bin/true" if os.path.exists("/bin/true") else "true"
    client_package = REPO_ROOT / "clients" / "python" / "monitor_client"
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(client_package)], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MONITOR_")}
        env.update(
            MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{tmp}/monitor.db",
            MONITOR_API_KEY=API_KEY,
            MONITOR_BASE_URL=base,
            PYTHONPATH=str(REPO_ROOT),
        )
        server = subprocess.Popen(
            [sys.executable, "-m", "monitor", "serve", "--dev", "--port", str(port)],
            env=env,
            cwd=tmp,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("monitor serve did not start")
                time.sleep(0.1)
            check = httpx.post(
                f"{base}/api/v3/checks/",
                headers={"X-Api-Key": API_KEY},
                json={"name": "bench", "timeout": 60, "grace": 60},
                timeout=10,
            ).json()
            uuid = check["uuid"]
            client_env = {k: v for k, v in env.items() if k != "MONITOR_API_KEY"}
            variants = {
                "true": [true],
                "monitor-run -- true": [str(monitor_run), "--check", uuid, "--", true],
                "monitor-run.sh true": ["/bin/sh", str(shell_wrapper), uuid, true],
            }
            times: dict[str, list[float]] = {name: [] for name in variants}
            for argv in variants.values():  # warm the page cache once
                timed(argv, client_env)
            for round_number in range(ROUNDS):
                names = list(variants)
                if round_number % 2:
                    names.reverse()
                for name in names:
                    times[name].append(timed(variants[name], client_env))
            pings = httpx.get(
                f"{base}/api/v3/checks/{uuid}", headers={"X-Api-Key": API_KEY}, timeout=10
            ).json()["n_pings"]
        finally:
            server.terminate()
            server.wait(30)
    medians = {name: statistics.median(values) for name, values in times.items()}
    baseline = medians["true"]
    load = " / ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"monitor-run start-up, medians of {ROUNDS} (wall time from spawn to exit, both pings included)")
    print(f"  load average (1/5/15 min): {load} on {os.cpu_count()} CPUs")
    for name, median in medians.items():
        extra = "" if name == "true" else f"  (+{median - baseline:.1f} ms over true)"
        print(f"  {name:<22} {median:8.1f} ms{extra}")
    print(f"  pings stored: {pings} (expected {2 * 2 * (ROUNDS + 1)})")
    goal_met = medians["monitor-run -- true"] <= GOAL_MS
    print(
        json.dumps(
            {"goal_ms": GOAL_MS, "monitor_run_ms": round(medians["monitor-run -- true"], 1), "met": goal_met}
        )
    )
    if not goal_met:
        print(
            f"GOAL MISSED: monitor-run -- true took {medians['monitor-run -- true']:.1f} ms > {GOAL_MS:g} ms"
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
