"""Client edge cases, each pinned against real servers and processes.

Misbehaving servers are real sockets (:class:`EvilServer`): one that drips its answer a byte a
second, one that answers ``503`` with an unusable ``Retry-After``, and a proxy to the real
``monitor serve`` that loses the first answer after the monitor committed the ping.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.date import DateTrigger
from celery import Celery, signals
from celery.beat import Service
from monitor_client import AsyncClient, Client, _common
from monitor_client import apscheduler as monitor_apscheduler
from monitor_client import celery as monitor_celery
from monitor_client._background import Sender

from tests.clients.conftest import Monitor
from tests.support.process import REPO_ROOT, wait_until
from tests.support.receivers import HttpReceiver

pytestmark = pytest.mark.e2e

MONITOR_RUN = str(Path(sys.executable).parent / "monitor-run")
SHELL_WRAPPER = str(REPO_ROOT / "clients" / "shell" / "monitor-run.sh")
DASH = "/bin/dash" if os.path.exists("/bin/dash") else "/bin/sh"


class EvilServer:
    """A raw-socket HTTP server misbehaving as ``mode`` says (each connection in a thread).

    Modes: ``drip-body`` (headers, then a 1000-byte body at 1 byte/s), ``drip-headers`` (the
    status line and headers at 1 byte/s), ``503:<Retry-After value>``, ``drop-first:<base>``
    (forwards to ``base`` and loses the first answer).
    """

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.requests: list[bytes] = []
        self._stop = threading.Event()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(50)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> EvilServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(2)
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _read_request(self, conn: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        return head + b"\r\n\r\n" + body

    def _drip(self, conn: socket.socket, data: bytes) -> None:
        for byte in data:
            if self._stop.wait(1.0 if byte else 0):
                return
            conn.sendall(bytes([byte]))

    def _handle(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(5)
            request = self._read_request(conn)
            self.requests.append(request)
            if self.mode == "drip-body":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
                self._drip(conn, b"x" * 1000)
            elif self.mode == "drip-headers":
                self._drip(conn, b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1000)
            elif self.mode.startswith("503:"):
                value = self.mode.split(":", 1)[1].encode()
                conn.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: " + value + b"\r\n"
                    b"Content-Length: 4\r\nConnection: close\r\n\r\noops"
                )
            elif self.mode.startswith("drop-first:"):
                self._forward(conn, request, self.mode.split(":", 1)[1], first=len(self.requests) == 1)
        except OSError:
            pass
        finally:
            conn.close()

    def _forward(self, conn: socket.socket, request: bytes, upstream: str, *, first: bool) -> None:
        head, _, body = request.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.lower() not in ("host", "content-length", "connection"):
                headers[name] = value.strip()
        answer = httpx.request(method, upstream + target, headers=headers, content=body, timeout=10)
        if first:
            return  # the monitor stored the ping; its answer is lost on the way back
        conn.sendall(
            f"HTTP/1.1 {answer.status_code} X\r\nContent-Length: {len(answer.content)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + answer.content
        )


def _tick() -> datetime:
    return datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)


def _z(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


# 1 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["drip-body", "drip-headers"])
def test_a_slow_drip_server_holds_a_sync_call_no_longer_than_the_timeout(mode: str) -> None:
    with EvilServer(mode) as server:
        client = Client(server.base, timeout=1.0, retries=3, backoff=0.05)
        started = time.monotonic()
        result = client.ping(str(uuid.uuid4()))
        elapsed = time.monotonic() - started
        client.close()
    assert not result.ok and result.error is not None, result
    assert elapsed < 1.8, elapsed  # httpx alone: read timeouts never fire at a byte a second


def test_monitor_run_starts_and_ends_the_command_within_the_timeout_of_a_dripping_monitor(
    monitor: Monitor,
) -> None:
    with EvilServer("drip-headers") as server:
        started = time.monotonic()
        proc = subprocess.run(
            [
                MONITOR_RUN,
                "--check",
                str(uuid.uuid4()),
                "--timeout",
                "1",
                "--",
                "sh",
                "-c",
                "echo ran; exit 6",
            ],
            env=monitor.env(MONITOR_BASE_URL=server.base),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        elapsed = time.monotonic() - started
    assert (proc.returncode, proc.stdout) == (6, "ran\n"), proc.stderr
    assert elapsed < 2 * 1.0 + 3.0, elapsed  # two bounded pings and the interpreter's start


# 2 ------------------------------------------------------------------------------------------


def test_retry_after_values_are_sanitized_never_raised() -> None:
    now = datetime(2026, 11, 29, 13, 0, tzinfo=UTC)
    parse = _common.parse_retry_after
    assert parse("3") == 3.0 and parse(" 0.5 ") == 0.5
    for bad in ("nan", "NaN", "inf", "-inf", "-5", "1e400", "soon", "", "Wed, 99 Foo 2015"):
        assert parse(bad, now) is None, bad
    assert parse("99999999999999999999") == _common.RETRY_AFTER_MAX
    assert parse("Sun, 29 Nov 2026 13:00:30 GMT", now) == 30.0
    assert parse("Sun, 29 Nov 2026 12:00:00 GMT", now) == 0.0  # in the past: at once
    assert parse(None) is None
    assert all(not math.isnan(parse(v, now) or 0.0) for v in ("nan", "inf"))


@pytest.mark.parametrize("value", ["nan", "inf", "-3", "Sun, 06 Nov 1994 08:49:37 GMT"])
def test_a_503_with_an_unusable_retry_after_is_retried_without_raising(value: str) -> None:
    with EvilServer(f"503:{value}") as server:
        client = Client(server.base, timeout=3, retries=2, backoff=0.05)
        result = client.ping(str(uuid.uuid4()))
        client.close()
    assert (result.ok, result.status) == (False, 503)
    assert len(server.requests) == 3


# 5 ------------------------------------------------------------------------------------------


def test_a_ping_retried_after_a_lost_answer_is_stored_once(monitor: Monitor) -> None:
    check = monitor.create_check()
    with EvilServer(f"drop-first:{monitor.base}") as proxy:
        client = Client(proxy.base, timeout=5, retries=2, backoff=0.05)
        result = client.ping(check["uuid"], body="the run")
        client.close()
    assert result.ok, result
    assert len(proxy.requests) == 2
    keys = {
        line.split(b":", 1)[1].strip()
        for request in proxy.requests
        for line in request.split(b"\r\n")
        if line.lower().startswith(b"idempotency-key:")
    }
    assert len(keys) == 1  # one key per logical call, reused by its retry
    assert [p["type"] for p in monitor.pings(check["uuid"])] == ["success"]  # not a duplicate


# 6 ------------------------------------------------------------------------------------------


def test_a_refused_scheduled_is_dropped_and_the_ping_still_stored(
    monitor: Monitor, caplog: pytest.LogCaptureFixture
) -> None:
    check = monitor.create_check(schedule="* * * * *", grace=120)
    future = datetime.now(UTC) + timedelta(days=3)
    naive = _tick().replace(tzinfo=None)
    with caplog.at_level(logging.WARNING, logger="monitor_client"), Client(monitor.base) as client:
        garbage = client.ping(check["uuid"], "start", scheduled="yesterday-ish")
        ahead = client.ping(check["uuid"], "fail", scheduled=_z(future), body="it broke")
        spaced = client.ping(check["uuid"], "log", scheduled=naive.strftime("%Y-%m-%d %H:%M"))
        plain = client.ping(check["uuid"], "log", scheduled=naive.isoformat())
    assert [r.ok for r in (garbage, ahead, spaced, plain)] == [True] * 4
    pings = monitor.pings(check["uuid"])
    assert [p["type"] for p in pings] == ["start", "fail", "log", "log"]
    assert pings[1]["scheduled"] != _z(future)  # the server bound them to a tick itself
    # naive ISO text is read as UTC by the client
    assert [p["scheduled"] for p in pings[2:]] == [_z(naive), _z(naive)]
    refused = [r for r in caplog.records if "refused scheduled" in r.getMessage()]
    assert len(refused) == 1 and refused[0].levelno == logging.WARNING  # warned once


def test_monitor_run_with_a_malformed_scheduled_time_still_reports_the_failure(monitor: Monitor) -> None:
    slug = f"sched-{uuid.uuid4().hex[:8]}"
    proc = subprocess.run(
        [MONITOR_RUN, "--check", slug, "--create", "--", "sh", "-c", "echo broken; exit 3"],
        env=monitor.env(MONITOR_SCHEDULED_TIME="not a time"),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 3
    assert proc.stderr.count("refused scheduled") == 1, proc.stderr
    [check] = monitor.api("GET", f"checks/?slug={slug}")["checks"]
    pings = monitor.pings(check["uuid"])
    assert [(p["type"], p["exit_status"]) for p in pings] == [("start", None), ("fail", 3)]
    assert pings[0]["rid"] == pings[1]["rid"]


# 7 ------------------------------------------------------------------------------------------


def test_the_tick_and_run_id_do_not_leak_into_nested_checks(monitor: Monitor) -> None:
    outer, middle, inner = (monitor.create_check(schedule="* * * * *", grace=120) for _ in range(3))
    tick = _z(_tick())
    script = f"from monitor_client import Client\nClient().ping({inner['uuid']!r}, 'log', body='inner')\n"
    nested = f'{DASH} {SHELL_WRAPPER} {middle["uuid"]} {sys.executable} -c "{script}"'
    proc = subprocess.run(
        [MONITOR_RUN, "--check", outer["uuid"], "--", "sh", "-c", nested],
        env=monitor.env(MONITOR_SCHEDULED_TIME=tick),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    outer_pings = monitor.pings(outer["uuid"])
    assert [p["scheduled"] for p in outer_pings] == [tick, tick]
    middle_pings = monitor.pings(middle["uuid"])
    assert len(middle_pings) == 2 and tick not in {p["scheduled"] for p in middle_pings}
    assert middle_pings[0]["rid"] != outer_pings[0]["rid"]
    inner_pings = monitor.pings(inner["uuid"])
    assert [(p["type"], p["rid"]) for p in inner_pings] == [("log", None)]
    assert inner_pings[0]["scheduled"] != tick


# 10, 12 -------------------------------------------------------------------------------------


def test_monitor_run_behaves_like_the_plain_pipeline_when_its_reader_goes_away(monitor: Monitor) -> None:
    check = monitor.create_check()
    with subprocess.Popen(
        [MONITOR_RUN, "--check", check["uuid"], "--", "yes"],
        env=monitor.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:  # closes the pipes on the way out
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"y\n"
        proc.stdout.close()  # `| head -n 1`
        assert proc.wait(timeout=20) == 128 + signal.SIGPIPE
        assert proc.stderr is not None and b"Traceback" not in proc.stderr.read()
    assert [(p["type"], p["exit_status"]) for p in monitor.pings(check["uuid"])] == [
        ("start", None),
        ("fail", 141),
    ]


def test_monitor_run_with_bad_env_numbers_and_closed_streams_still_runs_and_reports(
    monitor: Monitor, tmp_path: Path
) -> None:
    check = monitor.create_check()
    marker = tmp_path / "ran"
    proc = subprocess.run(
        [
            "sh",
            "-c",
            f'"$0" --check {check["uuid"]} -- sh -c "echo ran > {marker}; echo lost; exit 5" >&- 2>&-',
            MONITOR_RUN,
        ],
        env=monitor.env(MONITOR_TIMEOUT="abc", MONITOR_RETRIES="1.5"),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 5, proc
    assert marker.read_text() == "ran\n"
    pings = monitor.pings(check["uuid"])
    assert [(p["type"], p["exit_status"]) for p in pings] == [("start", None), ("fail", 5)]
    assert monitor.body(check["uuid"], pings[1]["n"]) == b"lost\n"
    warned = subprocess.run(
        [MONITOR_RUN, "--check", check["uuid"], "--", "true"],
        env=monitor.env(MONITOR_TIMEOUT="abc", MONITOR_RETRIES="1.5"),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert warned.returncode == 0
    assert "MONITOR_TIMEOUT='abc' is not a number" in warned.stderr
    assert "MONITOR_RETRIES='1.5' is not a whole number" in warned.stderr


# 11 -----------------------------------------------------------------------------------------


def test_shell_wrapper_passes_stdin_and_ignores_a_non_uuid_run_id(monitor: Monitor) -> None:
    check = monitor.create_check()
    proc = subprocess.run(
        [DASH, SHELL_WRAPPER, check["uuid"], "sh", "-c", 'read line; echo "got $line"; exit 7'],
        input="from stdin\n",
        env=monitor.env(MONITOR_RUN_ID="job-42"),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (7, "got from stdin\n"), proc.stderr
    pings = monitor.pings(check["uuid"])
    assert [(p["type"], p["exit_status"]) for p in pings] == [("start", None), ("fail", 7)]
    assert pings[0]["rid"] == pings[1]["rid"] and pings[0]["rid"] != "job-42"


@pytest.mark.slow
def test_shell_wrapper_reports_the_commands_status_after_sigterm_every_time(monitor: Monitor) -> None:
    """The race: the shell could reap the command while `wait` was interrupted → 143, not 7."""
    check = monitor.create_check()
    statuses = []
    for _ in range(20):
        proc = subprocess.Popen(
            [
                DASH,
                SHELL_WRAPPER,
                check["uuid"],
                "sh",
                "-c",
                'trap "exit 7" TERM; echo r; while :; do sleep 0.02; done',
            ],
            env=monitor.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdout is not None and proc.stdout.readline() == b"r\n"
        proc.send_signal(signal.SIGTERM)
        statuses.append(proc.wait(timeout=20))
        proc.stdout.close()
    assert statuses == [7] * 20


def _wrapper_paused(tmp_path: Path, before: str, after: str) -> str:
    """A copy of the shell wrapper paused for a second before the first line equal to
    ``before`` (or after the first equal to ``after``): it makes the file ``paused`` in
    ``tmp_path`` and sleeps, which widens a window in which a signal may come so a test can
    aim a signal at it (:func:`_wait_until_paused`)."""
    lines = Path(SHELL_WRAPPER).read_text().splitlines()
    at = lines.index(before) if before else lines.index(after) + 1
    lines.insert(at, _pause(tmp_path))
    copy = tmp_path / "monitor-run.sh"
    copy.write_text("\n".join(lines) + "\n")
    return str(copy)


TRAPS_TERM = 'trap "exit 7" TERM; echo r; while :; do sleep 0.02; done'


def _pause(tmp_path: Path) -> str:
    """Shell that marks the pause begun (the file ``paused``) and then sleeps a second."""
    return f": > '{tmp_path / 'paused'}'; sleep 1"


def _wait_until_paused(tmp_path: Path, proc: subprocess.Popen[bytes]) -> None:
    """Block until the wrapper copy reached its pause (at most 20 s, then fail): a fixed delay
    before the signal missed the pause on a loaded machine, which had not reached it yet."""
    deadline = time.monotonic() + 20
    while not (tmp_path / "paused").exists():
        assert proc.poll() is None, "the wrapper ended before its pause"
        assert time.monotonic() < deadline, "the wrapper did not reach its pause in 20 s"
        time.sleep(0.01)


def _terminated_while_paused(
    monitor: Monitor, check: str, script: str, tmp_path: Path, **env: str
) -> tuple[int, bytes, bool]:
    """Run ``script`` (a paused copy of the wrapper) on a command that only makes a marker
    file, SIGTERM it within the pause; its exit status, its stderr, and whether the command
    ran."""
    marker = tmp_path / "ran"
    proc = subprocess.Popen(
        [DASH, script, check, "sh", "-c", f'touch "{marker}"'],
        env=monitor.env(**env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _wait_until_paused(tmp_path, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    return proc.returncode, err, marker.exists()


def test_shell_wrapper_forwards_a_sigterm_sent_as_soon_as_the_command_printed(
    monitor: Monitor, tmp_path: Path
) -> None:
    """The wrapper's traps are in before the command starts: a pause right after the command
    is started (where a loaded machine may stop the shell) does not leave it unprotected."""
    check = monitor.create_check()
    script = _wrapper_paused(tmp_path, before="", after="exec 3<&-")
    proc = subprocess.Popen(
        [DASH, script, check["uuid"], "sh", "-c", TRAPS_TERM],
        env=monitor.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"r\n"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 7
    proc.stdout.close()
    pings = monitor.pings(check["uuid"])
    assert [(p["type"], p["exit_status"]) for p in pings] == [("start", None), ("fail", 7)]


def test_shell_wrapper_does_not_start_a_command_stopped_before_it_began(
    monitor: Monitor, tmp_path: Path
) -> None:
    """SIGTERM before the command starts: it is never run, and the run fails with 143."""
    check = monitor.create_check()
    stdin_line = "{ command exec 3<&0; } 2>/dev/null || exec 3</dev/null"
    script = _wrapper_paused(tmp_path, before=stdin_line, after="")
    status, err, ran = _terminated_while_paused(monitor, check["uuid"], script, tmp_path)
    assert status == 143, err
    assert b"SIGTERM came before the command started; it was not run" in err
    assert not ran
    pings = monitor.pings(check["uuid"])
    assert [(p["type"], p["exit_status"]) for p in pings] == [("start", None), ("fail", 143)]


def test_shell_wrapper_stopped_before_its_work_directory_exists_still_reports_and_cleans_up(
    monitor: Monitor, tmp_path: Path
) -> None:
    """The traps are the wrapper's first work: SIGTERM while it is still setting up (before
    ``mktemp``) stops the job with both pings sent and nothing left in ``$TMPDIR``."""
    check = monitor.create_check()
    mktemp_line = 'work=$(mktemp -d "${TMPDIR:-/tmp}/monitor-run.XXXXXX") || exit 70'
    script = _wrapper_paused(tmp_path, before=mktemp_line, after="")
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    status, err, ran = _terminated_while_paused(monitor, check["uuid"], script, tmp_path, TMPDIR=str(scratch))
    assert status == 143, err
    assert not ran
    assert list(scratch.iterdir()) == []
    pings = monitor.pings(check["uuid"])
    assert [(p["type"], p["exit_status"]) for p in pings] == [("start", None), ("fail", 143)]


def test_shell_wrapper_passes_on_a_signal_that_came_while_the_command_was_being_forked(
    monitor: Monitor, tmp_path: Path
) -> None:
    """The forked child keeps the wrapper's traps until it resets them: a signal sent to it
    then would be taken by the inherited trap and lost (the wrapper then waited for ever). The
    wrapper holds it until the child's start mark exists."""
    check = monitor.create_check()
    source = Path(SHELL_WRAPPER).read_text()
    child_start = "{ trap - TERM HUP USR1 USR2;"
    assert source.count(child_start) == 1
    script = tmp_path / "monitor-run.sh"
    script.write_text(source.replace(child_start, "{ " + _pause(tmp_path) + "; " + child_start[2:]))
    with subprocess.Popen(
        [DASH, str(script), check["uuid"], "sh", "-c", TRAPS_TERM],
        env=monitor.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as proc:
        _wait_until_paused(tmp_path, proc)  # the child is forked, its traps still the wrapper's
        proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=20)  # a lost signal: the wrapper waits for ever
        # passed on once the start mark exists, just before the command's exec: 7 when the
        # command's own trap was set by then, 143 (128 + SIGTERM) when a loaded host ran the
        # wrapper first; the command got it either way (it would otherwise loop for ever)
        assert status in (7, 143)
        assert proc.stdout is not None
        assert proc.stdout.read() in ((b"", b"r\n") if status == 7 else (b"",))  # "r" follows the trap
    pings = monitor.pings(check["uuid"])
    assert [(p["type"], p["exit_status"]) for p in pings] == [("start", None), ("fail", status)]


class _SlowFinish(BaseHTTPRequestHandler):
    """Answers a start ping at once and any other ping 1 s after it came (``finishing`` is set
    then); records the paths."""

    paths: ClassVar[list[str]] = []
    finishing: ClassVar[threading.Event] = threading.Event()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?")[0]
        if not path.endswith("/start"):
            type(self).finishing.set()
            time.sleep(1.0)
        type(self).paths.append(path)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"OK")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("client", ["monitor-run.sh", "monitor-run"])
def test_a_wrapper_signalled_during_its_finish_ping_still_sends_it_and_exits_alike(client: str) -> None:
    """A signal after the command ended does not cut the finish ping short: the status the
    monitor records is the status the wrapper exits with."""
    _SlowFinish.paths.clear()
    _SlowFinish.finishing.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowFinish)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    check = "11111111-2222-4333-8444-555555555555"
    wrapper = (
        [DASH, SHELL_WRAPPER, check] if client == "monitor-run.sh" else [MONITOR_RUN, "--check", check, "--"]
    )
    try:
        proc = subprocess.Popen(
            [*wrapper, "sh", "-c", "echo done"],
            env={"PATH": os.environ["PATH"], "MONITOR_BASE_URL": f"http://127.0.0.1:{server.server_port}"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert _SlowFinish.finishing.wait(20)  # the command has ended; its finish ping is out
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0, err
    assert _SlowFinish.paths == [f"/ping/{check}/start", f"/ping/{check}/0"]


# 13 -----------------------------------------------------------------------------------------


def test_generator_functions_are_refused_at_decoration() -> None:
    client = Client("http://127.0.0.1:9")

    def numbers() -> Iterator[int]:
        yield 1

    async def agen() -> Any:
        yield 1

    with pytest.raises(TypeError, match="generator"):
        client.monitored("x")(numbers)
    with pytest.raises(TypeError, match="generator"):
        client.monitored("x")(agen)
    client.close()


def test_misconfiguration_is_not_retried_and_ping_keys_are_masked() -> None:
    client = Client("http://127.0.0.1:9", timeout=5, retries=3, backoff=1.0)
    started = time.monotonic()
    result = client.ping(str(uuid.uuid4()), headers={"X-Note": "caf\u00e9 \u2615"})
    assert time.monotonic() - started < 0.5  # three retries would sleep 0.5 + 1 + 2 s
    assert not result.ok and result.error is not None and result.error.startswith("not sent:"), result
    client.close()

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot reach {request.url}")

    secret = "pk-very-secret-123"
    client = Client(
        "http://monitor.invalid", ping_key=secret, retries=0, transport=httpx.MockTransport(refuse)
    )
    result = client.ping("backup")
    client.close()
    assert result.error is not None and secret not in result.error and "****" in result.error


def test_a_base_url_without_scheme_is_read_as_http() -> None:
    with HttpReceiver(path="/") as receiver:
        client = Client(f"127.0.0.1:{receiver.port}", timeout=5, retries=0)
        result = client.ping(str(uuid.uuid4()))
        client.close()
        assert result.ok and client.base_url == f"http://127.0.0.1:{receiver.port}"


# 3, 4 ---------------------------------------------------------------------------------------


def test_apscheduler_jobs_due_together_start_together_while_the_monitor_hangs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(monitor_apscheduler, "sender", Sender("test-apscheduler"))
    starts: dict[str, float] = {}

    def job(name: str) -> None:
        starts[name] = time.monotonic()

    with HttpReceiver(path="/", hang_s=30) as receiver:
        client = Client(f"http://127.0.0.1:{receiver.port}", ping_key="pk", timeout=1.0, retries=0)
        scheduler = BackgroundScheduler(timezone="UTC")
        monitor_apscheduler.enable(scheduler, client, upsert=False)
        due = datetime.now(UTC) + timedelta(seconds=0.5)
        for name in ("a", "b", "c", "d"):
            scheduler.add_job(job, DateTrigger(run_date=due), args=[name], id=f"together-{name}")
        scheduler.start()
        try:
            # and the scheduler's thread has removed the four one-shot jobs: shut down while it
            # removes them, APScheduler raises JobLookupError in that thread
            wait_until(
                lambda: len(starts) == 4 and not scheduler.get_jobs(), timeout=10, what="the four jobs"
            )
        finally:
            scheduler.shutdown(wait=False)
        client.close()
    spread = max(starts.values()) - min(starts.values())
    assert spread < 0.5, starts  # pinging in the scheduler's thread: 1 s per job, one after another


def test_celery_beat_sends_its_first_task_without_waiting_for_check_upserts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(monitor_celery, "sender", Sender("test-celery"))
    suffix = uuid.uuid4().hex[:6]
    app = Celery(f"monitor_lazy_{suffix}", broker="memory://")
    # a queue of its own: the in-memory broker is shared by the process's other Celery tests
    app.conf.update(
        timezone="UTC", broker_connection_retry_on_startup=False, task_default_queue=f"lazy-{suffix}"
    )
    app.conf.beat_schedule = {
        f"entry-{n}-{suffix}": {"task": f"t{n}.{suffix}", "schedule": timedelta(seconds=1)} for n in range(4)
    }
    published: list[float] = []

    def on_publish(sender: Any = None, **_: Any) -> None:
        if isinstance(sender, str) and sender.endswith(suffix):
            published.append(time.monotonic())

    signals.before_task_publish.connect(on_publish, weak=False, dispatch_uid=f"lazy-{suffix}")
    with HttpReceiver(path="/", hang_s=30) as receiver:
        client = Client(f"http://127.0.0.1:{receiver.port}", api_key="k", timeout=2.0, retries=0)
        monitor_celery.enable(app, client)
        beat = Service(app, max_interval=0.1, schedule_filename=str(tmp_path / "beat-schedule"))
        thread = threading.Thread(target=beat.start, daemon=True)
        started = time.monotonic()
        thread.start()
        try:
            wait_until(lambda: published, timeout=15, what="beat's first task")
            # the upserts were made all the same, from the background sender
            wait_until(
                lambda: any(r.path == "/api/v3/checks/" for r in receiver.requests),
                timeout=5,
                what="an upsert",
            )
        finally:
            beat.stop()
            thread.join(10)
            signals.before_task_publish.disconnect(dispatch_uid=f"lazy-{suffix}")
        client.close()
    assert published[0] - started < 1.5, published[0] - started  # 4 upserts × 2 s before the fix


async def test_async_client_retries_a_refused_scheduled_without_it(monitor: Monitor) -> None:
    from monitor_client import AsyncClient

    check = monitor.create_check()
    async with AsyncClient(monitor.base, timeout=5) as client:
        result = await client.ping(check["uuid"], scheduled="garbage")
        await asyncio.sleep(0)
    assert result.ok
    assert len(monitor.pings(check["uuid"])) == 1


class _EchoingNotFound(BaseHTTPRequestHandler):
    """Answers every request ``404`` with a body that echoes the request path (ping key and all)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = f"not found: {self.path}".encode()
        self.send_response(404)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *_: Any) -> None:
        pass


def test_ping_key_is_masked_in_the_answer_text_as_in_the_error() -> None:
    secret = "pk-very-secret-456"
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoingNotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        client = Client(base, ping_key=secret, retries=0, timeout=5)
        result = client.ping("backup", create=True)
        client.close()

        async def async_ping() -> Any:
            async with AsyncClient(base, ping_key=secret, retries=0, timeout=5) as aclient:
                return await aclient.ping("backup", create=True)

        async_result = asyncio.run(async_ping())
    finally:
        server.shutdown()
        server.server_close()
    for answer in (result, async_result):
        assert answer.status == 404 and not answer.ok, answer
        assert "/ping/****/backup" in answer.text, answer
        assert secret not in answer.text and secret not in (answer.error or ""), answer
