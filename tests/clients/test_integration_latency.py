"""Clients that never slow a job down and never log a secret, with the real processes.

* ``monitor-run`` against a monitor that accepts connections and never answers: the command
  starts at once (its start ping is sent concurrently), and ``monitor-run`` imports no HTTP
  library before the job starts.
* A real Celery worker (its own process, solo pool, this machine's RabbitMQ) with the
  integration enabled: against a monitor that never answers its tasks take as long as without
  one; against a real monitor, with slug pings (the ping key in the URL) and ``--loglevel
  DEBUG``, the worker's log never shows the ping key.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import Monitor
from tests.support.process import checkout_env, wait_until
from tests.support.receivers import HttpReceiver

pytestmark = pytest.mark.e2e

MONITOR_RUN = str(Path(sys.executable).parent / "monitor-run")
BROKER = os.environ.get("MONITOR_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")

APP = """
import os, time
from celery import Celery
from monitor_client import Client, celery as monitor_celery

app = Celery("latency", broker=os.environ["BROKER"], backend="rpc://")
app.conf.update(task_default_queue=os.environ["QUEUE"], broker_connection_retry_on_startup=True)
client = Client(timeout=float(os.environ.get("CLIENT_TIMEOUT", "5")), retries=1)
monitor_celery.enable(app, client, checks={"latency.work": os.environ["CHECK"]}, upsert=False)


@app.task(name="latency.work")
def work(n):
    started = time.time()
    time.sleep(0.1)
    return [started, time.time()]
"""


def test_monitor_run_starts_the_command_at_once_when_the_monitor_never_answers(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    with HttpReceiver(path="/", hang_s=60) as silent:
        env = checkout_env(MONITOR_BASE_URL=f"http://127.0.0.1:{silent.port}")
        spawned = time.time()
        proc = subprocess.run(
            [
                MONITOR_RUN,
                "--check",
                str(uuid.uuid4()),
                "--timeout",
                "3",
                "--",
                "sh",
                "-c",
                f"date +%s.%N > {marker}",
            ],
            env=env,
            capture_output=True,
            timeout=30,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr
    waited = float(marker.read_text()) - spawned
    assert waited < 1.0, f"the command started {waited:.2f}s after monitor-run"  # not behind the start ping


def test_monitor_run_imports_no_http_library_before_the_job() -> None:
    probe = (
        "import sys, monitor_client.run_command as r\n"
        "heavy = [m for m in ('httpx', 'httpcore', 'anyio', 'ssl', 'email.utils') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=checkout_env(), capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "", out.stdout


def test_monitor_run_imports_no_argument_parser_logging_or_dataclasses_before_the_job() -> None:
    # argparse, logging, dataclasses (with inspect and ast) and json cost ~50 ms of start-up
    # together: monitor-run reads its usual command line by hand and logs only when it warns
    probe = (
        "import sys, monitor_client.run_command as r\n"
        "heavy = ('argparse', 'logging', 'dataclasses', 'inspect', 'json', 'typing', 'http.client')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=checkout_env(), capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "", out.stdout


def _worker(tmp_path: Path, queue: str, **env: str) -> subprocess.Popen[bytes]:
    (tmp_path / "latency_app.py").write_text(APP)
    environment = checkout_env(BROKER=BROKER, QUEUE=queue, **env)
    environment["PYTHONPATH"] = f"{tmp_path}:{environment['PYTHONPATH']}"
    argv = [sys.executable, "-m", "celery", "-A", "latency_app", "worker", "-P", "solo"]
    argv += ["--loglevel", "DEBUG"]
    argv += ["-Q", queue, "--without-heartbeat", "--without-mingle", "--without-gossip", "-n", f"{queue}@%h"]
    # the worker writes to its own copy of the descriptor: ours is closed once it has started
    with (tmp_path / f"worker-{queue}.log").open("wb") as log:
        return subprocess.Popen(argv, env=environment, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)


@contextlib.contextmanager
def _sender(queue: str) -> Iterator[Any]:
    """A Celery app sending to ``queue`` and reading results (``rpc://``) over RabbitMQ.

    On exit its broker connections are closed: the result consumer's own connection and the
    pooled ones (``Celery.close()`` only drops its reference to kombu's process-wide pool,
    leaving the sockets to the garbage collector; ``kombu.pools.reset()`` closes and forgets
    them, so the next app opens fresh ones)."""
    from celery import Celery
    from kombu import pools

    app = Celery("latency-sender", broker=BROKER, backend="rpc://")
    app.conf.update(task_default_queue=queue)
    try:
        yield app
    finally:
        consumer = app.backend.result_consumer
        if getattr(consumer, "_consumer", None) is not None:  # started by a result's get()
            consumer.stop()
        app.close()
        pools.reset()


def _stop(worker: subprocess.Popen[bytes], grace: float = 20.0) -> None:
    """SIGTERM, then SIGKILL once ``grace`` seconds have passed."""
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(grace)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(10)


def test_celery_task_durations_are_unaffected_by_a_monitor_that_never_answers(tmp_path: Path) -> None:
    queue = f"latency-{uuid.uuid4().hex[:8]}"
    with HttpReceiver(path="/", hang_s=60) as silent:
        worker = _worker(
            tmp_path,
            queue,
            MONITOR_BASE_URL=f"http://127.0.0.1:{silent.port}",
            MONITOR_PING_KEY="silent-ping-key-123",
            CHECK="celery-latency",
            CLIENT_TIMEOUT="2",
        )
        try:
            with _sender(queue) as app:
                results = [app.send_task("latency.work", args=[n]) for n in range(5)]
                spans = [r.get(timeout=60) for r in results]
            wait_until(lambda: silent.requests, timeout=10, what="the pings reaching the silent monitor")
        finally:
            # its client's sender thread is still waiting on the silent monitor, ping after ping;
            # how the worker shuts down is not what this test is about
            _stop(worker, grace=1.0)
    durations = [end - start for start, end in spans]
    assert all(d < 0.5 for d in durations), durations
    # a solo worker runs them one after another: with pings on the task thread (2 s each,
    # start and finish) the five would span 20 s
    total = spans[-1][1] - spans[0][0]
    assert total < 3.0, total


def test_a_celery_worker_log_at_debug_never_shows_the_ping_key(monitor: Monitor, tmp_path: Path) -> None:
    queue = f"secret-{uuid.uuid4().hex[:8]}"
    slug = f"celery-secret-{uuid.uuid4().hex[:6]}"
    worker = _worker(
        tmp_path,
        queue,
        MONITOR_BASE_URL=monitor.base,
        MONITOR_PING_KEY=monitor.ping_key,
        CHECK=slug,
        CLIENT_TIMEOUT="10",
    )
    try:
        with _sender(queue) as app:
            for result in [app.send_task("latency.work", args=[n]) for n in range(2)]:
                result.get(timeout=60)

        def reported() -> list[dict[str, Any]] | None:
            checks = monitor.api("GET", f"checks/?slug={slug}")["checks"]
            if not checks:
                return None
            pings = monitor.pings(checks[0]["uuid"])
            return pings if [p["type"] for p in pings].count("success") >= 2 else None

        wait_until(reported, timeout=30, what="the worker's pings")
    finally:
        _stop(worker)
    log = (tmp_path / f"worker-{queue}.log").read_text(errors="replace")
    assert "HTTP Request: POST" in log, log[-3000:]  # httpx did log the requests …
    assert f"/ping/****/{slug}" in log
    assert monitor.ping_key not in log  # … with the key masked
    assert monitor.api_key not in log
