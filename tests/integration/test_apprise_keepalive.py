"""AppriseNotifier's keep-alive sessions, against a real loopback HTTP/1.1 server."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

from monitor.domain.messages import Message
from monitor.notify.apprise import AppriseNotifier
from monitor.notify.keepalive import SessionPool

MESSAGE = Message(title="t", body="b", body_markdown="b", json_fields={"kind": "missed"})


class _Target:
    """Records, per request, the client's port and its Cookie header; may set a cookie, and
    closes a connection left idle for ``idle_close`` seconds (a server's keep-alive timeout)."""

    def __init__(self, *, set_cookie: bool = False, idle_close: float | None = None) -> None:
        self.seen: list[tuple[int, str | None]] = []
        lock = threading.Lock()
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = idle_close

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                with lock:
                    target.seen.append((self.client_address[1], self.headers.get("cookie")))
                self.send_response(200)
                if set_cookie:
                    self.send_header("set-cookie", "sid=secret-of-one-send; Path=/")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def target() -> Iterator[_Target]:
    server = _Target()
    yield server
    server.close()


@pytest.fixture
async def notifier() -> AsyncIterator[AppriseNotifier]:
    async with AppriseNotifier(allow_private_targets=True) as notifier:
        yield notifier


async def test_sends_one_after_another_reuse_one_connection(
    notifier: AppriseNotifier, target: _Target
) -> None:
    for _ in range(5):
        assert (await notifier.send(target.url, MESSAGE, timeout=5)).ok
    assert len(target.seen) == 5
    assert len({port for port, _ in target.seen}) == 1


async def test_a_cookie_a_target_sets_is_not_sent_again(notifier: AppriseNotifier) -> None:
    server = _Target(set_cookie=True)
    try:
        for _ in range(3):
            assert (await notifier.send(server.url, MESSAGE, timeout=5)).ok
    finally:
        server.close()
    assert [cookie for _, cookie in server.seen] == [None, None, None]
    assert len({port for port, _ in server.seen}) == 1  # the connection was reused all the same


async def test_a_connection_the_target_closed_while_idle_is_not_a_failure(notifier: AppriseNotifier) -> None:
    server = _Target(idle_close=0.2)
    try:
        assert (await notifier.send(server.url, MESSAGE, timeout=5)).ok
        await asyncio.sleep(0.6)  # the server has closed the kept-alive connection by now
        result = await notifier.send(server.url, MESSAGE, timeout=5)
    finally:
        server.close()
    assert result.ok, result.error
    assert len(server.seen) == 2
    assert server.seen[0][0] != server.seen[1][0]


async def test_requests_outside_a_send_keep_their_own_connections(
    notifier: AppriseNotifier, target: _Target
) -> None:
    assert (await notifier.send(target.url, MESSAGE, timeout=5)).ok
    http = target.url.replace("json://", "http://")
    await asyncio.to_thread(requests.post, http, data=b"{}", timeout=5)
    await asyncio.to_thread(requests.request, "POST", http, data=b"{}", timeout=5)
    ports = [port for port, _ in target.seen]
    assert len(set(ports)) == 3  # neither stock call went through the notifier's session


def test_a_session_idle_past_the_limit_is_not_reused() -> None:
    pool = SessionPool(keep=4, idle_limit=0.05)
    first = pool.take()
    pool.give(first)
    assert pool.take() is first
    pool.give(first)
    time.sleep(0.1)
    assert pool.take() is not first


def test_a_closed_pool_keeps_no_session() -> None:
    pool = SessionPool(keep=4)
    session = pool.take()
    pool.close()
    pool.give(session)
    assert pool.take() is not session
