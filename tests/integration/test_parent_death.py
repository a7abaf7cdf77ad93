"""The parent-death request made between fork and exec (Linux)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from monitor import parent_death

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

INTERMEDIATE = """
import os, subprocess, sys
from monitor import parent_death
child = subprocess.Popen(["sleep", "30"], preexec_fn=parent_death.at_fork(os.getpid(), exit_status=0))
print(child.pid, flush=True)
sys.stdin.read()
"""


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True  # killed, waiting for init to reap it
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


def test_a_child_is_killed_when_its_parent_is_killed_even_while_stopped() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", INTERMEDIATE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        os.kill(child, signal.SIGSTOP)  # a stopped child cannot notice anything itself
        parent.kill()
        parent.wait(timeout=10)
        assert _gone(child, within=5)
    finally:
        parent.kill()
        parent.wait(timeout=10)
        if parent.stdin is not None:
            parent.stdin.close()
        if parent.stdout is not None:
            parent.stdout.close()


def test_a_child_whose_parent_ended_before_the_request_exits_with_the_given_status() -> None:
    # a pid that is not the child's parent stands for a parent that ended before the fork's
    # request: the child's parent is then another process
    arm = parent_death.at_fork(os.getpid() + 10_000_000, exit_status=7)
    assert arm is not None
    child = subprocess.run(["sleep", "30"], preexec_fn=arm, timeout=10, check=False)
    assert child.returncode == 7
