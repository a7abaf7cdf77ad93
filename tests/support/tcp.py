"""Plain TCP stand-ins for a monitor in trouble, for the clients' tests.

* :class:`Gate`: a forwarder to a real monitor that can be shut (connections refused and cut):
  a monitor outage without stopping the server.
* :class:`SilentListener`: a port that accepts connections and never reads or answers: a
  monitor that is hung (or stalled) with its socket still open.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Any

from tests.support.receivers import free_port


class SilentListener:
    """Accepts every connection on ``127.0.0.1:port`` and never reads from it nor answers; the
    accepted sockets stay open until :meth:`close`."""

    def __init__(self) -> None:
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.port: int = self._server.getsockname()[1]
        self.accepted = 0
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            self.accepted += 1
            self._held.append(conn)

    def close(self) -> None:
        # shutdown first: close() alone does not wake the thread blocked in accept() (Linux),
        # and the join below then waited its whole 5 s on every listener
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        for conn in self._held:
            conn.close()
        self._held.clear()
        self._thread.join(5)

    def __enter__(self) -> SilentListener:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Gate:
    """A TCP forwarder to the real monitor that can be shut (connections refused and cut), to
    make a monitor outage without stopping the module's ``monitor serve``."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self._socket = socket
        self._threading = threading
        self._open: set[Any] = set()
        self._server: Any = None
        self.up()

    def up(self) -> None:
        s = self._socket.socket()
        s.setsockopt(self._socket.SOL_SOCKET, self._socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(16)
        self._server = s
        self._threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def down(self) -> None:
        # shutdown first: close() alone leaves a listener that a thread is blocked accepting on
        # still listening (Linux), so the "outage" would let connections through
        with contextlib.suppress(OSError):
            self._server.shutdown(self._socket.SHUT_RDWR)
        self._server.close()
        for conn in list(self._open):
            with contextlib.suppress(OSError):
                conn.shutdown(self._socket.SHUT_RDWR)
            conn.close()
        self._open.clear()

    def _accept(self, server: Any) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = self._socket.create_connection(("127.0.0.1", self.upstream_port))
            self._open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                self._threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: Any, dst: Any) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            # shutdown wakes the opposite pipe's thread blocked in recv (close alone does not), so
            # that thread ends too and closes its source: no socket of the gate is left unclosed
            for sock in (dst, src):
                with contextlib.suppress(OSError):
                    sock.shutdown(self._socket.SHUT_RDWR)
                sock.close()
