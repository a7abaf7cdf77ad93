"""The sender threads: reused daemon threads, never more than the pool's size."""

from __future__ import annotations

import threading
import time

import pytest

from monitor.notify.senders import DaemonPool


def _wait(condition: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_calls_reuse_the_threads_a_burst_started() -> None:
    pool = DaemonPool(4, name="test-send")
    seen: set[int] = set()
    lock = threading.Lock()
    done = threading.Semaphore(0)

    def call() -> None:
        with lock:
            seen.add(threading.get_ident())
        done.release()

    for _ in range(200):
        pool.submit(call)
        assert done.acquire(timeout=5)
        _wait(lambda: pool.idle == pool.threads)  # the call's thread is back waiting
    assert pool.threads == 1
    assert len(seen) == 1
    pool.close()


def test_calls_beyond_the_size_wait_for_a_thread_and_all_threads_are_daemons() -> None:
    pool = DaemonPool(3, name="test-send")
    release = threading.Event()
    running: list[threading.Thread] = []
    lock = threading.Lock()

    def call() -> None:
        with lock:
            running.append(threading.current_thread())
        release.wait(5)

    for _ in range(5):
        pool.submit(call)
    _wait(lambda: len(running) == 3)
    time.sleep(0.05)
    assert len(running) == 3 and pool.threads == 3  # the other two wait for a thread
    assert all(t.daemon and t.name == "test-send" for t in running)
    release.set()
    _wait(lambda: len(running) == 5)
    assert pool.threads == 3
    pool.close()


def test_a_call_that_raises_leaves_its_thread_serving() -> None:
    pool = DaemonPool(1, name="test-send")
    ran = threading.Event()

    def boom() -> None:
        raise RuntimeError("boom")

    pool.submit(boom)
    pool.submit(ran.set)
    assert ran.wait(5)
    assert pool.threads == 1
    pool.close()


def test_close_stops_idle_threads_and_refuses_new_calls() -> None:
    pool = DaemonPool(2, name="test-send")
    blocker = threading.Event()
    started = threading.Event()

    def hung() -> None:  # a send blocked on a dead target
        started.set()
        blocker.wait(5)

    pool.submit(hung)
    assert started.wait(5)
    pool.submit(lambda: None)
    _wait(lambda: pool.threads == 2)
    pool.close()
    _wait(lambda: pool.threads == 1)  # the idle one stopped; the hung one is not waited for
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(lambda: None)
    blocker.set()
    _wait(lambda: pool.threads == 0)


def test_the_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="size: must be at least 1"):
        DaemonPool(0, name="x")
