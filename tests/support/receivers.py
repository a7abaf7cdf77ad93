"""Real delivery targets on 127.0.0.1 for notification tests.

Both receivers run in background threads, so they work the same from sync tests, async
tests (the event loop is never blocked by the server) and from code that delivers in a
worker thread (Apprise). Each one records what arrived and offers blocking and async
``wait_for_*`` helpers with a timeout.

* :class:`HttpReceiver`: an HTTP server recording method, path, headers and body of each
  request; ``fail_first=N`` answers 503 (or ``fail_status``) to the first N requests, ``hang_s`` delays every
  answer (a hung target), ``status`` sets the normal answer.
* :class:`SmtpReceiver`: an aiosmtpd ``Controller`` recording each message, parsed with
  :mod:`email`; ``url`` is an Apprise ``mailto://`` URL that delivers to it in plain SMTP
  (no TLS, no AUTH).
"""

from __future__ import annotations

import asyncio
import email
import email.message
import email.policy
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

HOST = "127.0.0.1"


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _wait(
    condition: threading.Condition, ready: Callable[[], bool], timeout: float, what: Callable[[], str]
) -> None:
    deadline = time.monotonic() + timeout
    with condition:
        while not ready():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"timed out after {timeout}s waiting for {what()}")
            condition.wait(remaining)


async def _async_wait(ready: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what()}")
        await asyncio.sleep(0.01)


# --------------------------------------------------------------------------- HTTP


@dataclass(frozen=True, kw_only=True)
class ReceivedRequest:
    """One request an :class:`HttpReceiver` received.

    Attributes:
        method: ``"POST"``, ``"GET"``, ...
        path: the request target, with its query string (``"/hook?x=1"``).
        headers: header names lower-cased → values (the last one wins on repeats).
        body: the raw body bytes.
        status: the status code the receiver answered (or is about to answer) with.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (undecodable bytes replaced)."""
        return self.body.decode("utf-8", errors="replace")

    @property
    def json(self) -> Any:
        """The body parsed as JSON; raises ``ValueError`` if it is not JSON."""
        return json.loads(self.body)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        receiver = self.server.receiver
        status = receiver._record(self.command, self.path, dict(self.headers.items()), body)
        if receiver.hang_s > 0:
            # An Event, not time.sleep: stop() releases hung handlers at once.
            receiver._release.wait(receiver.hang_s)
        payload = json.dumps({"status": status}).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client gave up (timeout) before we answered
            pass

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: tests read ``receiver.requests`` instead of stderr."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # socketserver's default listen backlog is 5: fifty deliveries connecting at once on a
    # loaded host overflowed it, and the kernel reset the connections it could not queue
    request_queue_size = 128

    def __init__(self, receiver: HttpReceiver) -> None:
        self.receiver = receiver
        super().__init__((HOST, 0), _Handler)


class HttpReceiver:
    """A threaded HTTP server on ``127.0.0.1:<free port>`` that records every request.

    Args:
        path: the path that ``url``/``http_url`` point at (any path is accepted).
        fail_first: answer ``503 Service Unavailable`` (or ``fail_status``) to the first N requests.
        fail_status: the status of those failing answers.
        status: the status answered after those (default 200).
        hang_s: seconds to wait before answering each request (simulates a hung target;
            ``stop()`` releases waiting handlers).

    The attributes ``fail_first``, ``status`` and ``hang_s`` may be changed while running.
    Use as a context manager, or call ``start()`` / ``stop()``.
    """

    def __init__(
        self,
        *,
        path: str = "/hook",
        fail_first: int = 0,
        status: int = 200,
        hang_s: float = 0.0,
        fail_status: int = HTTPStatus.SERVICE_UNAVAILABLE,
    ):
        self.path = path
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.status = status
        self.hang_s = hang_s
        self._requests: list[ReceivedRequest] = []
        self._cond = threading.Condition()
        self._release = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> Self:
        """Bind a free loopback port and serve in a daemon thread; returns ``self``."""
        self._release.clear()
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release hung handlers, stop serving and close the socket."""
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # addresses
    @property
    def port(self) -> int:
        """The bound TCP port."""
        if self._server is None:
            raise RuntimeError("HttpReceiver is not started")
        return int(self._server.server_address[1])

    @property
    def http_url(self) -> str:
        """``http://127.0.0.1:PORT/hook``."""
        return f"http://{HOST}:{self.port}{self.path}"

    @property
    def url(self) -> str:
        """The Apprise URL posting JSON here: ``json://127.0.0.1:PORT/hook``."""
        return f"json://{HOST}:{self.port}{self.path}"

    # recording
    def _record(self, method: str, path: str, headers: dict[str, str], body: bytes) -> int:
        with self._cond:
            status = self.fail_status if len(self._requests) < self.fail_first else self.status
            self._requests.append(
                ReceivedRequest(
                    method=method,
                    path=path,
                    headers={k.lower(): v for k, v in headers.items()},
                    body=body,
                    status=int(status),
                )
            )
            self._cond.notify_all()
            return int(status)

    @property
    def requests(self) -> list[ReceivedRequest]:
        """A snapshot of the requests received so far, oldest first."""
        with self._cond:
            return list(self._requests)

    def wait_for_requests(self, n: int = 1, timeout: float = 5.0) -> list[ReceivedRequest]:
        """Block until at least ``n`` requests arrived; raise ``TimeoutError`` after ``timeout`` s."""
        _wait(self._cond, lambda: len(self._requests) >= n, timeout, lambda: self._what(n))
        return self.requests

    async def async_wait_for_requests(self, n: int = 1, timeout: float = 5.0) -> list[ReceivedRequest]:  # noqa: ASYNC109
        """Like :meth:`wait_for_requests`, without blocking the event loop."""
        await _async_wait(lambda: len(self._requests) >= n, timeout, lambda: self._what(n))
        return self.requests

    def _what(self, n: int) -> str:
        return f"{n} request(s) on {self.http_url} (got {len(self._requests)})"


# --------------------------------------------------------------------------- SMTP


@dataclass(frozen=True, kw_only=True)
class ReceivedMail:
    """One message an :class:`SmtpReceiver` accepted.

    Attributes:
        mail_from: the envelope sender.
        rcpt_tos: the envelope recipients.
        message: the parsed message (``email.policy.default``): ``message["Subject"]``,
            ``message.get_body(("plain",)).get_content()``.
    """

    mail_from: str
    rcpt_tos: list[str]
    message: email.message.EmailMessage

    @property
    def subject(self) -> str:
        """The decoded ``Subject`` header ("" if absent)."""
        return str(self.message.get("Subject", ""))

    @property
    def text(self) -> str:
        """The ``text/plain`` body (or the HTML one when there is no plain part)."""
        part = self.message.get_body(preferencelist=("plain", "html"))
        return "" if part is None else str(part.get_content())


@dataclass
class _SmtpHandler:
    receiver: SmtpReceiver
    seen: list[ReceivedMail] = field(default_factory=list)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or envelope.content or b""
        data = raw if isinstance(raw, bytes) else raw.encode()
        message = email.message_from_bytes(data, policy=email.policy.default)
        assert isinstance(message, email.message.EmailMessage)
        self.receiver._record(
            ReceivedMail(
                mail_from=str(envelope.mail_from),
                rcpt_tos=list(envelope.rcpt_tos),
                message=message,
            )
        )
        return "250 Message accepted for delivery"


class SmtpReceiver:
    """An aiosmtpd SMTP server on ``127.0.0.1:<free port>``, plain SMTP (no TLS).

    Args:
        mail_from: the sender address put in :attr:`url`.
        mail_to: the recipient address put in :attr:`url`.
        username: with ``password``, the server offers AUTH (PLAIN/LOGIN, allowed without
            TLS) and accepts only these credentials; :attr:`url` then carries them
            (``mailto://user:pass@127.0.0.1:PORT/...``). Without them there is no AUTH.
        password: see ``username``.
        tls_cert: ``(certificate file, key file)``: the server then offers STARTTLS and
            requires it before MAIL; :attr:`url` becomes ``mailtos://…?mode=starttls&verify=no``
            (a self-signed certificate, loopback only).
    """

    def __init__(
        self,
        *,
        mail_from: str = "monitor@example.com",
        mail_to: str = "oncall@example.com",
        username: str | None = None,
        password: str | None = None,
        tls_cert: tuple[str, str] | None = None,
    ):
        self.tls_cert = tls_cert
        self.mail_from = mail_from
        self.mail_to = mail_to
        self.username = username
        self.password = password
        #: Logins tried, as (username, accepted) pairs.
        self.logins: list[tuple[str, bool]] = []
        self._messages: list[ReceivedMail] = []
        self._cond = threading.Condition()
        self._controller: Controller | None = None
        self._port: int | None = None

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
    ) -> AuthResult:
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        user = auth_data.login.decode()
        ok = user == self.username and auth_data.password.decode() == self.password
        self.logins.append((user, ok))
        # handled=False makes aiosmtpd answer "535 ... credentials invalid" (its default is silence).
        return AuthResult(success=ok, handled=False)

    def start(self) -> Self:
        """Start the aiosmtpd controller thread on a free loopback port; returns ``self``."""
        self._port = free_port()
        auth: dict[str, Any] = {}
        if self.username is not None and self.password is not None:
            # AUTH offered but not required, and allowed in clear text: loopback only.
            auth = {"authenticator": self._authenticate, "auth_require_tls": False}
        if self.tls_cert is not None:
            import ssl

            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*self.tls_cert)
            auth.update(tls_context=context, require_starttls=True)
        self._controller = Controller(_SmtpHandler(self), hostname=HOST, port=self._port, **auth)
        self._controller.start()
        return self

    def stop(self) -> None:
        """Stop the controller (idempotent)."""
        if self._controller is not None:
            self._controller.stop()
        self._controller = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound TCP port."""
        if self._port is None:
            raise RuntimeError("SmtpReceiver is not started")
        return self._port

    @property
    def url(self) -> str:
        """An Apprise URL delivering here over plain SMTP.

        ``mailto://`` (not ``mailtos://``) means no TLS; ``mode=insecure`` states it. Without
        ``user:pass@`` Apprise skips AUTH; with them (when the receiver has credentials)
        it logs in over the plain connection.
        """
        creds = ""
        if self.username is not None and self.password is not None:
            creds = f"{quote(self.username, safe='')}:{quote(self.password, safe='')}@"
        if self.tls_cert is not None:
            return (
                f"mailtos://{creds}{HOST}:{self.port}/?mode=starttls&verify=no"
                f"&from={self.mail_from}&to={self.mail_to}"
            )
        return f"mailto://{creds}{HOST}:{self.port}/?mode=insecure&from={self.mail_from}&to={self.mail_to}"

    def _record(self, mail: ReceivedMail) -> None:
        with self._cond:
            self._messages.append(mail)
            self._cond.notify_all()

    @property
    def messages(self) -> list[ReceivedMail]:
        """A snapshot of the messages received so far, oldest first."""
        with self._cond:
            return list(self._messages)

    def wait_for_messages(self, n: int = 1, timeout: float = 5.0) -> list[ReceivedMail]:
        """Block until at least ``n`` messages arrived; raise ``TimeoutError`` after ``timeout`` s."""
        _wait(self._cond, lambda: len(self._messages) >= n, timeout, lambda: self._what(n))
        return self.messages

    async def async_wait_for_messages(self, n: int = 1, timeout: float = 5.0) -> list[ReceivedMail]:  # noqa: ASYNC109
        """Like :meth:`wait_for_messages`, without blocking the event loop."""
        await _async_wait(lambda: len(self._messages) >= n, timeout, lambda: self._what(n))
        return self.messages

    def _what(self, n: int) -> str:
        return f"{n} message(s) on smtp://{HOST}:{self.port} (got {len(self._messages)})"
