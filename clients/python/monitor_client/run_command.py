"""``monitor-run``: run a command and report it as one run (start, then its exit status).

Usage::

    monitor-run --check nightly-billing [--scheduled 2026-07-19T03:00:00Z] [--create] -- COMMAND ARGS…

* The command's stdout and stderr pass straight through; the last ``Ping-Body-Limit`` bytes of
  both (as they arrived, 100 000 unless the monitor says otherwise) become the finish ping's body.
* The finish ping is ``/<exit status>``; ``monitor-run`` exits with the command's status
  (``128 + N`` when a signal N ended it; 127 when the command cannot be found, 126 when it
  cannot be executed).
* SIGTERM, SIGINT and SIGHUP sent to ``monitor-run`` are forwarded to the command, which
  decides when to stop; the finish is reported after it exits.
* The monitor being down never stops or delays the command by more than ``--timeout`` per ping.

Configuration: ``MONITOR_BASE_URL``, ``MONITOR_PING_KEY`` (checks named by slug) or
``MONITOR_API_KEY``, ``MONITOR_SCHEDULED_TIME`` (default ``--scheduled``), ``MONITOR_RUN_ID``
(used as the run id when it is a UUID, e.g. under the bundled scheduler), ``MONITOR_CHECK``
(default ``--check``), ``MONITOR_TIMEOUT`` and ``MONITOR_RETRIES`` (defaults of ``--timeout``
and ``--retries``).
"""

from __future__ import annotations

import argparse
import logging
import os
import selectors
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Sequence
from types import FrameType
from typing import BinaryIO

from monitor_client._client import Client
from monitor_client._common import UUID_RE

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Tail:
    """The last ``limit`` bytes written to it, from several threads."""

    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 0)
        self._data = bytearray()
        self._lock = threading.Lock()

    def write(self, chunk: bytes) -> None:
        with self._lock:
            self._data += chunk
            if len(self._data) > 2 * self.limit + 65536:
                del self._data[: len(self._data) - self.limit]

    def value(self) -> bytes:
        with self._lock:
            return bytes(self._data[-self.limit :]) if self.limit else b""


def _pump(streams: list[tuple[BinaryIO, BinaryIO]], tail: Tail) -> None:
    """Copy each (source, sink) pair as data arrives, keeping the tail of both in arrival order.

    One thread reads both pipes, and when both have data the one registered first (stdout) is
    read first: a command that writes its output and then an error line gets them in that
    order in the tail (two reader threads could swap them).
    """
    selector = selectors.DefaultSelector()
    order = {source.fileno(): index for index, (source, _) in enumerate(streams)}
    for source, sink in streams:
        selector.register(source.fileno(), selectors.EVENT_READ, (source, sink))
    try:
        while selector.get_map():
            ready = sorted(selector.select(), key=lambda event: order[event[0].fd])
            for key, _ in ready:
                source, sink = key.data
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fd)
                    source.close()
                    continue
                tail.write(chunk)
                try:
                    sink.write(chunk)
                    sink.flush()
                except (OSError, ValueError):  # our own stdout closed: keep draining the child
                    pass
    finally:
        selector.close()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="monitor-run",
        description="Run COMMAND and report it to the monitor as one run (start, then exit status).",
        epilog="Environment: MONITOR_BASE_URL, MONITOR_PING_KEY or MONITOR_API_KEY, MONITOR_SCHEDULED_TIME.",
    )
    parser.add_argument(
        "--check",
        default=os.environ.get("MONITOR_CHECK"),
        help="the check's uuid or slug (env MONITOR_CHECK)",
    )
    parser.add_argument("--scheduled", help="the tick this run belongs to (default $MONITOR_SCHEDULED_TIME)")
    parser.add_argument("--create", action="store_true", help="create a check named by slug if missing")
    parser.add_argument("--base-url", help="the monitor's address (default $MONITOR_BASE_URL)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=float(os.environ.get("MONITOR_TIMEOUT") or 10.0),
        help="seconds per ping, retries included (env MONITOR_TIMEOUT, default 10)",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=int(os.environ.get("MONITOR_RETRIES") or 3),
        help="retries of a ping (env MONITOR_RETRIES, default 3)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS…]")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``monitor-run`` console script; returns the command's exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="monitor-run: %(message)s", stream=sys.stderr)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("monitor-run: no command given (monitor-run --check CHECK -- COMMAND …)", file=sys.stderr)
        return 2
    if not args.check:
        print("monitor-run: --check (or MONITOR_CHECK) is required", file=sys.stderr)
        return 2

    run_id = os.environ.get("MONITOR_RUN_ID", "")
    rid = run_id.lower() if UUID_RE.match(run_id) else str(uuid.uuid4())
    scheduled = args.scheduled or os.environ.get("MONITOR_SCHEDULED_TIME") or None
    client = Client(args.base_url, timeout=args.timeout, retries=args.retries)
    try:
        client.ping(args.check, "start", rid=rid, scheduled=scheduled, create=args.create)
        status, tail = _execute(command, rid, scheduled, client.body_limit)
        client.ping(
            args.check, exit_status=status, rid=rid, scheduled=scheduled, body=tail, create=args.create
        )
    finally:
        client.close()
    return status


def _execute(command: list[str], rid: str, scheduled: str | None, limit: int) -> tuple[int, bytes]:
    """Run ``command`` with output passed through and signals forwarded; (exit status, output tail)."""
    env = dict(os.environ, MONITOR_RUN_ID=rid)
    if scheduled:
        env["MONITOR_SCHEDULED_TIME"] = scheduled
    tail = Tail(limit)
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    except OSError as error:
        status = 127 if isinstance(error, FileNotFoundError) else 126
        message = f"monitor-run: cannot run {command[0]!r}: {error.strerror or error}\n"
        sys.stderr.write(message)
        return status, message.encode()

    def forward(signum: int, frame: FrameType | None) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    assert proc.stdout is not None and proc.stderr is not None
    streams = [(proc.stdout, sys.stdout.buffer), (proc.stderr, sys.stderr.buffer)]
    pump = threading.Thread(target=_pump, args=(streams, tail), daemon=True)
    pump.start()
    try:
        code = proc.wait()
        # a background grandchild may hold the pipes open: do not wait for it
        pump.join(timeout=2.0)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    status = 128 - code if code < 0 else code
    return min(status, 255), tail.value()


if __name__ == "__main__":
    raise SystemExit(main())
