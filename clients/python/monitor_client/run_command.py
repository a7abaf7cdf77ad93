"""``monitor-run``: run a command and report it as one run (start, then its exit status).

Usage::

    monitor-run --check nightly-billing [--scheduled 2026-07-19T03:00:00Z] [--create] -- COMMAND ARGS…

* The command's stdout and stderr pass straight through; the last ``Ping-Body-Limit`` bytes of
  both (as they arrived, 100 000 unless the monitor says otherwise) become the finish ping's body.
* The finish ping is ``/<exit status>``; ``monitor-run`` exits with the command's status
  (``128 + N`` when a signal N ended it; 127 when the command cannot be found, 126 when it
  cannot be executed).
* SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to ``monitor-run`` are forwarded
  to the command, which decides what to do (and when to stop); the finish is reported after it
  exits.
* The command starts at once: the start ping is sent concurrently (a background thread), so a
  monitor that is down or never answers does not delay the job at all; the finish ping waits for
  the start (at most ``--timeout``) so the two arrive in order. A finish that waited for the start
  (sent :data:`monitor_client._common.LATE_FINISH` s or more after the command ended) carries
  ``finished=`` with the command's real end, so the run is not stored as lasting until the
  monitor answered (docs/design.md §5). When the start got no answer in its whole
  ``--timeout`` (a silent monitor), the finish has :data:`SILENT_FINISH_TIMEOUT` s, so
  ``monitor-run`` exits at most about ``max(the command's run time, --timeout) + 1 s`` after it
  began (instead of another ``--timeout`` more). ``monitor-run`` itself imports only
  the standard library (:mod:`monitor_client._light`): ``monitor-run -- true`` takes tens of
  milliseconds (``benchmarks/monitor_run_startup.py``).

Configuration: ``MONITOR_BASE_URL``, ``MONITOR_PING_KEY`` (checks named by slug) or
``MONITOR_API_KEY``, ``MONITOR_SCHEDULED_TIME`` (default ``--scheduled``), ``MONITOR_RUN_ID``
(used as the run id when it is a UUID, e.g. under the bundled scheduler), ``MONITOR_CHECK``
(default ``--check``), ``MONITOR_TIMEOUT`` and ``MONITOR_RETRIES`` (defaults of ``--timeout``
and ``--retries``; an unreadable value is warned about and the default used: the command
always runs).

Scope of the tick: the command gets ``MONITOR_CHECK`` (the check of this run),
``MONITOR_RUN_ID`` and ``MONITOR_SCHEDULED_TIME``; a client inside it (``monitor-run``, the
Python client, ``monitor-run.sh``) applies the latter two only to pings of that same check
(``MONITOR_CHECK`` unset: to every check), so a nested job with its own check is not bound to
the outer run's tick or id.

If our stdout is closed by its reader (``monitor-run -- yes | head -n 1``), copying stops and
the command's stdout pipe is closed, so the command gets ``EPIPE``/``SIGPIPE`` as it would in
the plain pipeline, and ``monitor-run`` exits with its status (141 for a SIGPIPE death).
Closed stdout/stderr of ``monitor-run`` itself (``>&-``) are allowed: that output is only kept
for the ping body.
"""

from __future__ import annotations

import contextlib  # imported by subprocess anyway
import os
import selectors
import signal
import subprocess
import sys
import threading
import time

from monitor_client import _common
from monitor_client._light import LightClient

TYPE_CHECKING = False  # not typing's: importing typing costs monitor-run's start-up ~10 ms
if TYPE_CHECKING:
    import argparse
    import logging
    from collections.abc import Iterator, Sequence
    from types import FrameType
    from typing import IO

# argparse and logging are imported only when needed (--help, a usage error, a warning to
# print): together they cost ~30 ms of the start-up the benchmark holds to 100 ms

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
"""Signals passed on to the command (their default action would end ``monitor-run`` and leave
the command running unreported)."""
SILENT_FINISH_TIMEOUT = _common.SILENT_FINISH_TIMEOUT
"""Seconds the finish ping may take (retries included) when the start got no answer in its
whole ``--timeout`` (:data:`monitor_client._common.SILENT_FINISH_TIMEOUT`)."""


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


def _pump(streams: list[tuple[IO[bytes], IO[bytes] | None]], tail: Tail) -> None:
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
                if sink is None:
                    continue
                try:
                    sink.write(chunk)
                    sink.flush()
                except BrokenPipeError:
                    # our reader went away (`monitor-run -- yes | head -n 1`): stop copying and
                    # close the command's pipe too, so it gets EPIPE/SIGPIPE as in the plain
                    # pipeline instead of writing for ever
                    _silence(sink)
                    selector.unregister(key.fd)
                    source.close()
                except (OSError, ValueError):  # our stream unusable: keep draining the child
                    selector.modify(key.fd, selectors.EVENT_READ, (source, None))
    finally:
        selector.close()


def _silence(sink: IO[bytes]) -> None:
    """Point a broken stdout/stderr at /dev/null (no "Exception ignored … BrokenPipeError" at exit)."""
    try:
        fd = sink.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (OSError, ValueError):
        pass


def _say(message: str) -> None:
    """A line on our stderr, if we have one."""
    if sys.stderr is not None:
        with contextlib.suppress(OSError, ValueError):
            print(message, file=sys.stderr)


def _env_number(name: str, default: float, kind: type[int] | type[float]) -> float:
    """``$name`` as a number ≥ 0, or ``default`` with a warning when it is not one."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or value != value or value < 0 or value == float("inf"):
        what = "a whole number" if kind is int else "a number of seconds"
        _say(f"monitor-run: {name}={raw!r} is not {what}; using {default:g}")
        return default
    return value


def _parser(timeout: float, retries: int) -> argparse.ArgumentParser:
    """The full command line parser: its help, its usage errors, and every spelling
    :func:`_parse` leaves to it (``--check=…`` prefixes such as ``--chec``, a bad number)."""
    import argparse

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
        default=timeout,
        help="seconds per ping, retries included (env MONITOR_TIMEOUT, default 10)",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=retries,
        help="retries of a ping (env MONITOR_RETRIES, default 3)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS…]")
    return parser


class Arguments:
    """The parsed command line (the attributes :func:`_parser` would give)."""

    def __init__(self, timeout: float, retries: int) -> None:
        self.check: str | None = os.environ.get("MONITOR_CHECK")
        self.scheduled: str | None = None
        self.create = False
        self.base_url: str | None = None
        self.timeout = timeout
        self.retries = retries
        self.command: list[str] = []


VALUED = {"--check": "check", "--scheduled": "scheduled", "--base-url": "base_url"}


def _parse(argv: list[str]) -> Arguments:
    """The command line, read as :func:`_parser` reads it.

    The usual spellings (``--check X``, ``--check=X``, ``--create``, ``--timeout N``,
    ``--retries N``, ``--base-url U``, ``--scheduled T``, then ``--`` or the first word that is
    not an option) are read here without importing :mod:`argparse`; anything else (``--help``,
    an abbreviation, an unknown option, a missing or unreadable value) is handed to argparse,
    which prints the help or the usage error (exit status 2) exactly as it always did.
    """
    timeout = _env_number("MONITOR_TIMEOUT", 10.0, float)
    retries = int(_env_number("MONITOR_RETRIES", 3, int))
    args = Arguments(timeout, retries)
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "--" or not word.startswith("-") or word == "-":
            args.command = argv[index:]
            return args
        name, has_value, value = word.partition("=")
        if name == "--create" and not has_value:
            args.create = True
            index += 1
            continue
        if name not in VALUED and name not in ("--timeout", "--retries"):
            break  # --help, -h, an abbreviation, an unknown option: argparse's business
        if not has_value:
            if index + 1 >= len(argv) or argv[index + 1].startswith("-"):
                break  # a missing value (or one argparse might read as an option)
            value = argv[index + 1]
            index += 1
        index += 1
        try:
            if name == "--timeout":
                args.timeout = float(value)
            elif name == "--retries":
                args.retries = int(value)
            else:
                setattr(args, VALUED[name], value)
        except ValueError:
            break
    else:
        return args
    namespace = _parser(timeout, retries).parse_args(argv)  # exits on --help or a usage error
    parsed = Arguments(timeout, retries)
    for attribute in vars(parsed):
        setattr(parsed, attribute, getattr(namespace, attribute))
    return parsed


def _log_to_stderr(logger: logging.Logger) -> None:
    """Where the client's warnings go: ``monitor-run: …`` lines on stderr (nowhere after
    ``2>&-``). Run by the client when it first logs (:func:`monitor_client._common.on_first_log`)."""
    import logging

    if sys.stderr is not None:
        logging.basicConfig(level=logging.WARNING, format="monitor-run: %(message)s", stream=sys.stderr)
    else:  # `2>&-`: nowhere to warn
        logger.addHandler(logging.NullHandler())
        logger.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``monitor-run`` console script; returns the command's exit status."""
    args = _parse(list(sys.argv[1:] if argv is None else argv))
    _common.on_first_log(_log_to_stderr)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        _say("monitor-run: no command given (monitor-run --check CHECK -- COMMAND …)")
        return 2
    if not args.check:
        _say("monitor-run: --check (or MONITOR_CHECK) is required")
        return 2

    inherited = _common.env_applies(args.check)  # the tick of an outer monitor-run's check?
    run_id = os.environ.get("MONITOR_RUN_ID", "") if inherited else ""
    rid = run_id.lower() if _common.is_uuid(run_id) else _common.uuid4_text()
    scheduled = args.scheduled or (os.environ.get("MONITOR_SCHEDULED_TIME") if inherited else None) or None
    client = LightClient(args.base_url, timeout=args.timeout, retries=args.retries)
    start = _StartPing(client, args.check, rid=rid, scheduled=scheduled, create=args.create)
    start.thread.start()  # concurrently: the command starts now, whatever the monitor does
    status, tail, ended = _execute(command, args.check, rid, scheduled, client.body_limit)
    with _signals_held():
        start.thread.join(args.timeout)  # the start first (its own timeout bounds it), then the finish
        client.ping(
            args.check,
            exit_status=status,
            rid=rid,
            scheduled=scheduled,
            body=tail,
            create=args.create,
            # waited for a slow start: the finish says when the command really ended
            finished=_common.late_finish(ended, time.time()),
            # a monitor that left the start unanswered for its whole timeout gets a short finish
            timeout=min(args.timeout, SILENT_FINISH_TIMEOUT) if start.silent(args.timeout) else None,
        )
    return status


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """While the finish ping goes out, the signals ``_execute`` forwarded are ignored: the
    command has ended, and one that cut the ping short would let the monitor record a status
    other than the one this process exits with (the ping takes at most about twice
    ``--timeout``)."""
    previous = {sig: signal.signal(sig, lambda signum, frame: None) for sig in FORWARDED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _StartPing:
    """The start ping, sent from a thread while the command runs; remembers how it went."""

    def __init__(
        self, client: LightClient, check: str, *, rid: str, scheduled: str | None, create: bool
    ) -> None:
        self.result: _common.PingResult | None = None
        self.took = 0.0
        self.began = time.time()
        """When the command started (unix seconds): a start that goes out late says so."""
        self.thread = threading.Thread(
            target=self._send,
            args=(client, check, rid, scheduled, create),
            name="monitor-run-start",
            daemon=True,
        )

    def _send(self, client: LightClient, check: str, rid: str, scheduled: str | None, create: bool) -> None:
        began = time.monotonic()
        # a start that goes out late (this process stopped before it could send it) says
        # when the command really started (docs/design.md §5)
        started = _common.late_start(self.began, time.time())
        self.result = client.ping(
            check, "start", rid=rid, scheduled=scheduled, create=create, started=started
        )
        self.took = time.monotonic() - began

    def silent(self, timeout: float) -> bool:
        """The monitor gave the start no answer for (about) its whole ``timeout``: still waiting,
        or it ended unanswered at its deadline — not a quick refusal (a monitor restarting, whose
        finish keeps the full timeout to come back)."""
        if self.thread.is_alive():
            return True
        return _common.finish_timeout(self.result, self.took, timeout) is not None


def _execute(
    command: list[str], check: str, rid: str, scheduled: str | None, limit: int
) -> tuple[int, bytes, float]:
    """Run ``command`` with output passed through and signals forwarded; (exit status, output
    tail, the instant it ended in unix seconds). The end is when the command exited, not when its
    output was drained: a background child holding the pipes open may keep us up to 2 s longer."""
    env = dict(os.environ, MONITOR_RUN_ID=rid, MONITOR_CHECK=check)
    env.pop("MONITOR_SCHEDULED_TIME", None)
    if scheduled:
        env["MONITOR_SCHEDULED_TIME"] = scheduled
    tail = Tail(limit)
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    except OSError as error:
        status = 127 if isinstance(error, FileNotFoundError) else 126
        message = f"monitor-run: cannot run {command[0]!r}: {error.strerror or error}"
        _say(message)
        return status, (message + "\n").encode(), time.time()

    def forward(signum: int, frame: FrameType | None) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    assert proc.stdout is not None and proc.stderr is not None
    streams: list[tuple[IO[bytes], IO[bytes] | None]] = [
        (proc.stdout, sys.stdout.buffer if sys.stdout is not None else None),
        (proc.stderr, sys.stderr.buffer if sys.stderr is not None else None),
    ]
    pump = threading.Thread(target=_pump, args=(streams, tail), daemon=True)
    pump.start()
    try:
        code = proc.wait()
        ended = time.time()
        # a background grandchild may hold the pipes open: do not wait for it
        pump.join(timeout=2.0)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    status = 128 - code if code < 0 else code
    return min(status, 255), tail.value(), ended


if __name__ == "__main__":
    raise SystemExit(main())
