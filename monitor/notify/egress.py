"""The egress (SSRF) guard: channel URLs and delivery sockets never reach non-public addresses (DESIGN §7).

When private targets are not allowed (``MONITOR_ALLOW_PRIVATE_TARGETS`` off), two checks apply:

* :func:`check_private_target` (when a channel is saved, and again before each send) resolves
  the target's host and refuses private, loopback, link-local or reserved addresses with an
  error naming the host;
* the connect-time guard (:func:`install_egress_guard`, :func:`connect_guard`): every socket a
  guarded send opens checks the *peer address it actually connects to* (after DNS resolution),
  so a name that resolved to a public address for the check and to 127.0.0.1 a moment later
  (DNS rebinding) is refused.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from monitor.domain.errors import ValidationError
from monitor.notify.urls import target_host

__all__ = [
    "PrivateTargetRefused",
    "Resolver",
    "check_private_target",
    "connect_guard",
    "egress_guard_installed",
    "install_egress_guard",
]


def _non_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether ``ip`` is not a public unicast address.

    Covers loopback (127/8, ::1), private (10/8, 172.16/12, 192.168/16, fc00::/7 incl.
    fd00::/8), link-local and cloud metadata (169.254/16 incl. 169.254.169.254, fe80::/10),
    shared/CGNAT (100.64/10), unspecified (0.0.0.0, ::), reserved, documentation and
    benchmarking ranges (``not is_global``, IANA special-purpose registries), multicast, and
    IPv4 addresses embedded in IPv6 (mapped ``::ffff:a.b.c.d``, 6to4, NAT64 well-known).
    """
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip.sixtofour is not None:
            ip = ip.sixtofour
        elif ip in _NAT64:
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return (
        not ip.is_global
        or ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
    )


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

Resolver = Callable[..., list[Any]]
"""``socket.getaddrinfo``'s shape: ``(host, port, type=...) -> [(family, type, proto, name, sockaddr)]``."""


class PrivateTargetRefused(ConnectionRefusedError):
    """A delivery tried to connect to a non-public address while private targets are off."""


_guard = threading.local()
_socket_connect = socket.socket.connect
_socket_connect_ex = socket.socket.connect_ex


def _vet_peer(sock: socket.socket, address: Any) -> None:
    """Refuse a connection to a non-public peer when this thread runs a guarded send."""
    refused: list[str] | None = getattr(_guard, "refused", None)
    if refused is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    try:
        ip = ipaddress.ip_address(str(address[0]).split("%", 1)[0])
    except (ValueError, IndexError, TypeError):
        return
    if _non_public(ip):
        refused.append(str(ip))
        raise PrivateTargetRefused(f"refused to connect to non-public address {ip}")


def _guarded_connect(self: socket.socket, address: Any) -> None:
    _vet_peer(self, address)
    _socket_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    _vet_peer(self, address)
    return _socket_connect_ex(self, address)


_install_lock = threading.Lock()


def install_egress_guard() -> None:
    """Install the connect-time egress guard for this process (DESIGN §7); idempotent.

    The hook lives on ``socket.socket.connect``/``connect_ex`` (requests/urllib3 and smtplib
    both connect through them, after their own DNS lookup) and vets a peer only in a thread
    inside a guarded send (:class:`AppriseNotifier` with private targets refused): every other
    socket of the process connects as before. The processes that send install it at start —
    ``monitor serve`` (:func:`monitor.app.create_app`'s lifespan, which also serves the
    channel test-send), ``monitor notify`` — and so does constructing a notifier that refuses
    private targets, so no sender can run unguarded. Importing this module installs nothing.
    """
    with _install_lock:
        if egress_guard_installed():
            return
        socket.socket.connect = _guarded_connect  # type: ignore[method-assign,assignment]
        socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign,assignment]


def egress_guard_installed() -> bool:
    """Whether :func:`install_egress_guard` has run in this process."""
    return socket.socket.connect is _guarded_connect


@contextmanager
def connect_guard(active: bool) -> Iterator[list[str]]:
    """While active, every socket this thread connects must reach a public address.

    Yields the list the refused addresses are appended to.
    """
    refused: list[str] = []
    if not active:
        yield refused
        return
    previous = getattr(_guard, "refused", None)
    _guard.refused = refused
    try:
        yield refused
    finally:
        _guard.refused = previous


def check_private_target(url: str, allow_private: bool, resolve: Resolver | None = None) -> None:
    """Refuse channel URLs whose host resolves to a non-public address (DESIGN §7).

    Blocking (it resolves the host); call it from a thread (``asyncio.to_thread``) in
    async code. Services with a fixed public endpoint (Slack, Discord, Telegram ...)
    pass without a lookup; email is judged by its SMTP server.

    Args:
        url: an Apprise URL.
        allow_private: ``MONITOR_ALLOW_PRIVATE_TARGETS``; when true nothing is checked.
        resolve: the resolver (default ``socket.getaddrinfo``; tests pass their own to act
            as a rebinding DNS server).

    Raises:
        ValidationError: field ``"url"``: ``"<host> resolves to a private/loopback/link-local
            address (<ip>)"`` when any resolved address is private, loopback, link-local,
            reserved, multicast or unspecified; ``"cannot resolve host <host>"`` when the
            name does not resolve.
    """
    if allow_private:
        return
    target = target_host(url)
    if target is None:
        return
    host, port = target
    try:
        infos = (resolve or socket.getaddrinfo)(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError):
        raise ValidationError("url", f"cannot resolve host {host}") from None
    for info in infos:
        address = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 scope id ("fe80::1%eth0")
        ip = ipaddress.ip_address(address)
        if _non_public(ip):
            raise ValidationError(
                "url", f"{host} resolves to a private/loopback/link-local address ({address})"
            )
