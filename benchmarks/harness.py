"""What every benchmark shares: a real ``monitor serve``, a loopback webhook, rounds and goals.

Every benchmark here follows the same rules (``benchmarks/README.md``): the figure and its
baseline are measured in the same run, in alternated rounds (A, B, A, B, …), the median of at
least three rounds is compared with a fixed goal taken from the issue, the load average is
printed beside each figure (the machine is shared), and the script exits 1 when a goal is not
met.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parent.parent
API_KEY = "benchmark-api-key-0123456789"


def load_average() -> str:
    """The 1-minute load average, the core count and the CPU probe, for printing beside a figure."""
    one, _, _ = os.getloadavg()
    return f"load {one:.2f}/{os.cpu_count()} cores, probe {cpu_probe():.0f} ms"


PROBE_LOOP = 500_000


def cpu_probe() -> float:
    """Milliseconds this process takes for a fixed pure-Python loop (:data:`PROBE_LOOP`
    additions), the best of three: how fast the CPU is *now* (about 16 ms on a quiet run of the
    2-core machine these figures come from). The load average misses what a shared host's
    neighbours take: there a similar loop's time varied 1.8-fold within one hour, at a load
    under 1, and every figure measured meanwhile moved with it."""
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        total = 0
        for i in range(PROBE_LOOP):
            total += i
        best = min(best, time.perf_counter() - began)
    return best * 1000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Receiver:
    """Loopback HTTP server recording (receipt wall-clock time, JSON body) per request; answers 200."""

    def __init__(self) -> None:
        self.received: list[tuple[float, dict[str, Any]]] = []
        lock = threading.Lock()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                at = time.time()
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    payload = json.loads(body or b"{}")
                except ValueError:
                    payload = {}
                with lock:
                    received.append((at, payload))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 1024

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        """The Apprise ``json://`` URL of this receiver."""
        return f"json://127.0.0.1:{self.port}/hook"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Serve:
    """``monitor serve`` as shipped (plus ``extra`` flags) on ``database_url``, in ``work``."""

    database_url: str
    work: Path
    extra: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Serve:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MONITOR_")}
        env.update(
            PYTHONPATH=str(REPO_ROOT),
            MONITOR_DATABASE_URL=self.database_url,
            MONITOR_API_KEY=API_KEY,
            MONITOR_LOG_LEVEL="WARNING",
            **self.env,
        )
        log = (self.work / "serve.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "monitor", "serve", "--port", str(self.port), *self.extra],
            env=env,
            cwd=self.work,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.base}/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"monitor serve did not start:\n{(self.work / 'serve.log').read_text()}")
            time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, headers={"X-Api-Key": API_KEY}, timeout=60)


def alternate(rounds: int, sides: dict[str, Callable[[int], float]]) -> dict[str, list[tuple[float, str]]]:
    """Run each side once per round, in turn (A, B, A, B, …); returns (figure, load) per side and round."""
    results: dict[str, list[tuple[float, str]]] = {name: [] for name in sides}
    for index in range(rounds):
        for name, side in sides.items():
            value = side(index)
            load = load_average()
            results[name].append((value, load))
            print(f"  round {index + 1} {name}: {value:.3f} ({load})", file=sys.stderr, flush=True)
    return results


def median(values: list[tuple[float, str]]) -> float:
    return statistics.median(v for v, _ in values)


def verdict(label: str, value: float, goal: float, *, unit: str, lower_is_better: bool = True) -> bool:
    """Print ``label: value (goal …): met/NOT met`` with the load average; return whether met."""
    met = value <= goal if lower_is_better else value >= goal
    relation = "<" if lower_is_better else "≥"
    print(
        f"goal {label}: {value:.3f} {unit} (goal {relation} {goal:g} {unit}, {load_average()}):"
        f" {'met' if met else 'NOT met'}"
    )
    return met


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]
