"""A job that reports the ticks of a ``seconds`` schedule and misses some on purpose.

Run as ``python -m tests.support.pinger --base URL --period 2 --log FILE --chaos FILE UUID…``.
At each tick (every ``period`` seconds of UTC, as ``*/2 * * * * *`` fires) plus 0.1 s it pings
every check with real ``curl`` (``?scheduled=<tick>``, as the clients send it), except that
while the ``--chaos`` file exists it skips a check's tick with probability ``--skip`` (seeded by
tick and check, so some skips come in pairs); if a chaos has gone a whole acknowledged tick without
a skip, the next tick's first check is skipped, so every chaos misses at least one tick (a draw of
no skip at all left the tests with nothing to judge). One JSON line per check and tick goes to the log:
``{"uuid", "tick" (unix s), "pinged" (bool), "acked" (unix s or null)}``. Stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

CURL = ("curl", "-fsS", "-m", "10", "--retry", "3")


def skipped(tick: int, uuid: str, probability: float) -> bool:
    """Whether the job misses ``uuid``'s tick ``tick`` (deterministic)."""
    return random.Random(f"{tick}:{uuid}").random() < probability


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--period", type=int, default=2)
    parser.add_argument("--skip", type=float, default=0.3)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--chaos", type=Path, required=True)
    parser.add_argument("uuids", nargs="+")
    args = parser.parse_args(argv)
    stop = False

    def on_term(_signum: int, _frame: FrameType | None) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    with args.log.open("a", buffering=1) as log:
        tick = (int(time.time()) // args.period + 1) * args.period
        skips = acked_rounds = 0  # of the chaos so far
        while not stop:
            delay = tick + 0.1 - time.time()
            if delay > 0:
                time.sleep(delay)
            if stop:
                break
            chaos = args.chaos.exists()
            scheduled = datetime.fromtimestamp(tick, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            wanted = [u for u in args.uuids if not (chaos and skipped(tick, u, args.skip))]
            if not chaos:
                skips = acked_rounds = 0
            elif skips == 0 and acked_rounds > 0 and len(wanted) == len(args.uuids):
                wanted = wanted[1:]
            skips += len(args.uuids) - len(wanted) if chaos else 0
            acked: float | None = None
            if wanted:
                urls = [f"{args.base}/ping/{u}?scheduled={scheduled}" for u in wanted]
                done = subprocess.run([*CURL, *urls], capture_output=True, timeout=60, check=False)
                if done.returncode == 0 and done.stdout == b"OK" * len(urls):
                    acked = time.time()
                    acked_rounds += 1 if chaos else 0
            for uuid in args.uuids:
                pinged = uuid in wanted
                line = {"uuid": uuid, "tick": tick, "pinged": pinged, "acked": acked if pinged else None}
                log.write(json.dumps(line) + "\n")
            tick += args.period
            while tick + 0.1 < time.time() - args.period:  # fell far behind: those ticks are missed
                for uuid in args.uuids:
                    log.write(json.dumps({"uuid": uuid, "tick": tick, "pinged": False, "acked": None}) + "\n")
                tick += args.period
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
