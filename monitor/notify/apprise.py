"""Deliver notifications through Apprise (DESIGN §7).

Apprise is synchronous and says little about failures (a bool, or a result whose status
is all a caller usually reads). :class:`AppriseNotifier` therefore

* runs each send in a small thread pool, bounded by the per-attempt ``timeout`` three
  ways: the plugin's socket timeouts, Apprise's own call timeout, and an
  ``asyncio.wait_for`` hard stop, so a hung target never hangs the notifier;
* captures the ``apprise`` logger's records emitted *for that send only* (a
  context-variable filter; Apprise copies the context into its worker threads), and
  turns them into an error a channel owner understands
  (``"HTTP 503 Service Unavailable from 127.0.0.1:8080: ..."``);
* adds the message's ``json_fields`` to ``json://`` / ``jsons://`` payloads as top-level
  fields, through Apprise's ``:key=value`` URL tokens;
* re-checks, when private targets are not allowed, that the target's host does not
  resolve to a private, loopback, link-local or reserved address — before the send (a clear
  error naming the host) and again at connect time: every socket the send opens checks the
  *peer address it actually connects to* (after DNS resolution), so a name that resolved to a
  public address for the check and to 127.0.0.1 a moment later (DNS rebinding) is refused.

The module-level helpers validate, mask and vet channel URLs for the management API.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import importlib
import ipaddress
import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http import HTTPStatus
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import apprise

from monitor.domain.errors import ValidationError
from monitor.domain.messages import Message
from monitor.notify.base import DeliveryResult

logger = logging.getLogger(__name__)

EMAIL_SCHEMES = frozenset({"mailto", "mailtos"})
JSON_SCHEMES = frozenset({"json", "jsons"})
FORM_SCHEMES = frozenset({"form", "forms", "xml", "xmls"})

#: Plain text for these (email readers, JSON/form/XML consumers: a program, not a chat
#: client, reads the body); Markdown for everything else.
_PLAIN_TEXT_SCHEMES = EMAIL_SCHEMES | JSON_SCHEMES | FORM_SCHEMES

#: Extra seconds granted past ``timeout`` before the asyncio hard stop, so Apprise's own
#: (more informative) timeout normally answers first.
_HARD_STOP_GRACE_S = 0.5

#: Plugin socket timeouts are set this far past the remaining budget (see above).
_SOCKET_SLACK_S = 0.25

_NOTIFY_TYPES = {
    "recovered": apprise.NotifyType.SUCCESS,
    "late": apprise.NotifyType.WARNING,
    "overlap": apprise.NotifyType.WARNING,
    "duplicate": apprise.NotifyType.WARNING,
    "maintenance": apprise.NotifyType.INFO,
    "test": apprise.NotifyType.INFO,
}

# Memory-only storage: delivery must not write Apprise caches to disk.
# Apprise 2.x runs a send with a deadline (its default service_timeout of 60 s, or
# notify(timeout=...)) on a process-wide pool of cpu+4 threads, which a few hung targets fill
# for every channel. With no deadline and async_mode off it sends in the calling thread, one of
# ours; the plugin's socket timeouts and wait_for in send() bound it instead.
_ASSET = apprise.AppriseAsset(storage_mode="memory", async_mode=False, service_timeout=0)

_HTTP_ERROR = re.compile(r"error=(\d{3})\b")


# --------------------------------------------------------------------------- URL helpers


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].strip().lower() if "://" in url else ""


def _instantiate(url: str) -> Any:
    """The Apprise plugin for ``url``, or ``None`` when Apprise cannot parse it."""
    return apprise.Apprise.instantiate(url, asset=_ASSET, suppress_exceptions=True)


def validate_apprise_url(url: str) -> None:
    """Check that Apprise can parse a channel URL.

    Args:
        url: an Apprise URL such as ``"json://hooks.example.com/alerts"`` or
            ``"mailtos://user:pass@example.com?to=oncall@example.com"``.

    Raises:
        ValidationError: field ``"url"``: empty, no ``scheme://``, a scheme Apprise does not
            know, a URL its plugin rejects, or a port outside 1-65535.
    """
    if not url or not url.strip():
        raise ValidationError("url", "must not be empty")
    scheme = _scheme(url)
    if not scheme:
        raise ValidationError("url", "not an Apprise URL (expected <service>://...)")
    plugin = _instantiate(url)
    if plugin is None:
        raise ValidationError("url", f"Apprise cannot parse this {scheme}:// URL")
    port = getattr(plugin, "port", None)
    if isinstance(port, int) and not 1 <= port <= 65535:  # Apprise itself lets 99999 through
        raise ValidationError("url", f"port {port} is out of range 1-65535")


#: What a masked secret looks like in a channel URL (Apprise's privacy rendering uses it too).
MASK = "****"

#: Query parameter names that carry secrets (matched anywhere in the name, any case):
#: ``token``, ``access_token``, ``apikey``, ``api_key``, ``secret``, ``password``, ``auth`` …
_SECRET_PARAM = re.compile(r"token|key|secret|pass|pwd|auth|sig|credential|session|cookie|bearer", re.I)


def _secret_param(name: str) -> bool:
    """Whether a query parameter's value is a secret: an HTTP header (``+name`` on json/form/xml
    URLs), a passed-through GET argument (``-name``), or a name that looks like a secret."""
    name = unquote(name)
    return name[:1] in ("+", "-") or _SECRET_PARAM.search(name) is not None


def _mask_query(url: str) -> str:
    """``url`` with the value of every secret-looking query parameter replaced by :data:`MASK`."""
    base, hash_, fragment = url.partition("#")
    head, question, query = base.partition("?")
    if not question:
        return url
    parts = []
    for item in query.split("&"):
        name, equals, value = item.partition("=")
        parts.append(f"{name}={MASK}" if equals and value and _secret_param(name) else item)
    return f"{head}?{'&'.join(parts)}{hash_}{fragment}"


def _secret_values(url: str) -> list[str]:
    """The values (as written and percent-decoded) of ``url``'s secret-looking query parameters."""
    query = url.partition("#")[0].partition("?")[2]
    values: set[str] = set()
    for item in query.split("&"):
        name, equals, value = item.partition("=")
        if equals and value and _secret_param(name):
            values |= {value, unquote(value), unquote(value.replace("+", " "))}
    return [v for v in values if len(v) >= 3]


def mask_url(url: str) -> str:
    """Render a channel URL with its secrets hidden, for API responses, the dashboard and logs.

    Uses Apprise's privacy rendering (``plugin.url(privacy=True)``): passwords become
    ``****`` and tokens keep only their first and last characters. On top of that,
    the values of HTTP headers (``+Authorization=…``), passed-through arguments (``-X-Token=…``)
    and of every query parameter whose name looks secret (``token``, ``key``, ``secret``,
    ``password``, ``auth``, ``apikey`` …) become ``****``.

    Args:
        url: an Apprise URL, possibly holding passwords or tokens.

    Returns:
        The masked URL. A URL Apprise cannot parse is reduced to ``"<scheme>://****"``
        (or ``"****"``), since any part of it might be a secret.
    """
    plugin = _instantiate(url)
    if plugin is None:
        scheme = _scheme(url)
        return f"{scheme}://{MASK}" if scheme else MASK
    return _mask_query(str(plugin.url(privacy=True)))


def has_masked_secrets(url: str) -> bool:
    """Whether ``url`` carries :data:`MASK` (a masked URL sent back by a client)."""
    return MASK in url or quote(MASK, safe="") in url


_URL_PARTS = re.compile(r"[/:@?&=#+,;]+")


def url_secrets(url: str) -> list[str]:
    """The parts of an Apprise URL that :func:`mask_url` hides (passwords, tokens, headers).

    Every piece of ``url`` between delimiters (``/ : @ ? & = # + , ;``) that is 3+ characters
    long and does not appear in :func:`mask_url`'s rendering counts as a secret, and so does
    each secret-looking query parameter's whole value (``Bearer X`` as well as ``X``). Longest
    first, so :func:`redact` replaces a token before any part of it.

    Args:
        url: an Apprise URL.
    """
    masked = mask_url(url)
    parts = {unquote(p) for p in _URL_PARTS.split(url.split("://", 1)[-1]) if len(p) >= 3}
    parts |= {p for p in _URL_PARTS.split(url.split("://", 1)[-1]) if len(p) >= 3}
    found = {p for p in parts if p not in masked and unquote(p) not in unquote(masked)}
    found |= set(_secret_values(url))
    found.discard(MASK)
    return sorted(found, key=len, reverse=True)


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with every secret replaced by ``****`` (error texts and log lines)."""
    for secret in secrets:
        text = text.replace(secret, "****")
    return text


def _target_host(url: str) -> tuple[str, int | None] | None:
    """The host (and port) a delivery to ``url`` connects to, if the URL chooses one.

    Services whose endpoint is fixed by Apprise (``slack://``, ``discord://``, ``tgram://``
    ...) return ``None``: their URL "host" is a token, not a place to connect to.
    """
    plugin = _instantiate(url)
    if plugin is None:
        parts = urlsplit(url)
        return (parts.hostname, parts.port) if parts.hostname else None
    smtp_host = getattr(plugin, "smtp_host", None)
    if smtp_host:
        return str(smtp_host), getattr(plugin, "port", None)
    if "host" not in getattr(plugin, "template_tokens", {}):
        return None
    host = getattr(plugin, "host", None)
    return (str(host), getattr(plugin, "port", None)) if host else None


@functools.lru_cache(maxsize=4096)
def target_key(url: str) -> str:
    """Where a delivery to ``url`` goes, as a key for per-target concurrency limits.

    ``host:port`` for URLs that name a host (``json://``, ``mailtos://`` …), else the scheme
    (``slack``, ``discord``: one service endpoint). Cached: channels are few, sends many.
    """
    try:
        target = _target_host(url)
    except Exception:  # an unparseable URL fails at send time; any key will do here
        target = None
    if target is None:
        return _scheme(url)
    host, port = target
    return f"{host}:{port}" if port else host


def service_label(url: str) -> str:
    """A short label for a channel URL: Apprise's service name plus the host it delivers to
    (``"JSON hooks.example.com"``, ``"Email smtp.example.com"``, ``"Telegram"``). Never a
    secret: fixed-endpoint services (whose URL "host" is a token) get the service name only."""
    plugin = _instantiate(url)
    if plugin is None:
        return _scheme(url) or "channel"
    service = str(getattr(plugin, "service_name", "") or _scheme(url) or "channel")
    target = _target_host(url)
    return f"{service} {target[0]}" if target else service


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
def _connect_guard(active: bool) -> Iterator[list[str]]:
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
    target = _target_host(url)
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


def with_json_fields(url: str, fields: dict[str, str]) -> str:
    """Add ``fields`` to a ``json://`` URL as Apprise ``:key=value`` payload tokens.

    Apprise's JSON plugin puts each ``:key=value`` query token into the payload as a
    top-level field. Keys and values are percent-encoded, so any text survives.

    Args:
        url: an Apprise URL; returned unchanged unless its scheme is ``json``/``jsons``.
        fields: field name → value.

    Returns:
        The URL with the tokens appended to its query string.
    """
    if _scheme(url) not in JSON_SCHEMES or not fields:
        return url
    base, hash_, fragment = url.partition("#")
    tokens = "&".join(f":{quote(key, safe='')}={quote(value, safe='')}" for key, value in fields.items())
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}{tokens}{hash_}{fragment}"


# --------------------------------------------------------------------------- log capture

_active: contextvars.ContextVar[_SendLog | None] = contextvars.ContextVar(
    "monitor_apprise_send", default=None
)


class _SendLog(logging.Handler):
    """Collects ``apprise`` records emitted in the context of one send.

    Every concurrent send attaches its own handler; each keeps only records whose context
    carries it (Apprise runs plugins in worker threads with a copy of the caller's
    context), so sends running side by side never see each other's errors.
    """

    def __init__(self, secrets: list[str] | None = None) -> None:
        super().__init__(level=logging.WARNING)
        self.lines: list[str] = []
        self.details: list[str] = []
        self.secrets: list[str] = secrets or []

    def emit(self, record: logging.LogRecord) -> None:
        if _active.get() is not self:
            return
        try:
            self.lines.append(record.getMessage())
        except Exception:  # a malformed record must not break delivery
            self.handleError(record)


class _DetailLogger:
    """Stands in for one plugin's logger: forwards everything, keeps the exception detail.

    Apprise logs the *kind* of failure at WARNING ("A Connection error occurred ...") but
    the cause ("[Errno 111] Connection refused", "(535, b'... credentials invalid')") only
    at DEBUG, which the ``apprise`` logger normally drops before any handler sees it. The
    plugin instance is private to one send, so this stays per send without touching the
    global logger's level.
    """

    def __init__(self, inner: logging.Logger, details: list[str]) -> None:
        self._inner = inner
        self._details = details

    def debug(self, msg: object, *args: object, **kwargs: Any) -> None:
        if isinstance(msg, str) and msg.startswith("Socket Exception"):
            try:
                text = msg % args if args else msg
            except (TypeError, ValueError):
                text = msg
            self._details.append(text.split(":", 1)[1].strip() if ":" in text else text)
        self._inner.debug(msg, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _SendDetailLogger(_DetailLogger):
    """Module-level stand-in for loggers Apprise helpers use directly (its SMTP transport logs
    the server's refusal, e.g. ``530 Must issue a STARTTLS command first``, only at DEBUG on
    its module logger): the detail goes to whichever send is running in this context."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner, [])

    def debug(self, msg: object, *args: object, **kwargs: Any) -> None:
        handler = _active.get()
        self._details = handler.details if handler is not None else []
        super().debug(msg, *args, **kwargs)


def _wrap_module_logger(module_name: str) -> None:
    try:
        module = importlib.import_module(module_name)
    except ImportError:  # another Apprise layout: the error text is just less detailed
        return
    inner = getattr(module, "logger", None)
    if inner is not None and not isinstance(inner, _DetailLogger):
        setattr(module, "logger", _SendDetailLogger(inner))  # noqa: B010


_wrap_module_logger("apprise.plugins.email.smtp")


#: Apprise's own privacy rendering of a secret, ``M...t`` (first and last character), as it
#: appears in its log lines about URLs it rejects: still two characters of the secret.
_PEEK = re.compile(r"(?<![\w.])[^\s'\"/:@?&=.]\.\.\.[^\s'\"/:@?&=.](?![\w.])")


class _RedactSecrets(logging.Filter):
    """Rewrites ``apprise`` records so that they never carry a channel's secrets, whatever
    handler (ours, the service's stderr, pytest's caplog) receives them: the secrets of the
    send in progress, and always Apprise's ``M...t`` peeks (validation logs them too)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True
        handler = _active.get()
        cleaned = redact(message, handler.secrets) if handler is not None and handler.secrets else message
        cleaned = _PEEK.sub(MASK, cleaned)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


logging.getLogger("apprise").addFilter(_RedactSecrets())


@contextmanager
def _capture_apprise_log(secrets: list[str] | None = None) -> Iterator[_SendLog]:
    handler = _SendLog(secrets)
    token = _active.set(handler)
    apprise_logger = logging.getLogger("apprise")
    apprise_logger.addHandler(handler)  # addHandler/removeHandler take logging's lock
    try:
        yield handler
    finally:
        apprise_logger.removeHandler(handler)
        _active.reset(token)


# --------------------------------------------------------------------------- notifier


class AppriseNotifier:
    """A :class:`monitor.notify.base.Notifier` on Apprise.

    Args:
        allow_private_targets: ``MONITOR_ALLOW_PRIVATE_TARGETS``; when false every send
            first re-checks the target host (DESIGN §7) and refuses private ones with a
            permanent failure.
        max_workers: threads running Apprise calls at once.
        resolve: the resolver of the pre-send host check (default ``socket.getaddrinfo``);
            the connect-time check always judges the address actually connected to.

    Call :meth:`aclose` (or use ``async with``) at shutdown; a send still blocked on a hung
    target is abandoned, not waited for: each send runs in a *daemon* thread, which the
    interpreter does not join at exit (a ``ThreadPoolExecutor``'s threads are joined, so a
    process told to stop stayed alive until a hung SMTP connection timed out). The
    abandoned row's claim expires and another notifier retries it (DESIGN §6).
    """

    def __init__(
        self, *, allow_private_targets: bool = False, max_workers: int = 32, resolve: Resolver | None = None
    ) -> None:
        self.allow_private_targets = allow_private_targets
        self._resolve = resolve
        if not allow_private_targets:
            install_egress_guard()  # a sender that refuses private targets never runs unguarded
        self._slots = threading.BoundedSemaphore(max_workers)
        self._closed = False

    async def __aenter__(self) -> AppriseNotifier:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Refuse new sends; sends stuck on hung targets are abandoned (daemon threads)."""
        self._closed = True

    async def send(self, url: str, message: Message, *, timeout: float) -> DeliveryResult:  # noqa: ASYNC109
        """Deliver ``message`` to the Apprise URL ``url`` within ``timeout`` seconds.

        Args:
            url: the channel's Apprise URL.
            message: the rendered alert; email and JSON targets get ``body`` (plain text),
                others ``body_markdown``; JSON targets also get ``json_fields``.
            timeout: the per-attempt budget in seconds (> 0).

        Returns:
            ``DeliveryResult(ok=True)``, or ``ok=False`` with the reason: Apprise's own log
            for this send (``"HTTP 503 Service Unavailable from host:port: ..."``),
            ``"timed out after <timeout>s"``, or the private-target refusal (permanent).
        """
        if self._closed:
            return DeliveryResult.failed("the notifier is shutting down")
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        future: asyncio.Future[DeliveryResult] = loop.create_future()
        if not self._slots.acquire(blocking=False) and not await asyncio.to_thread(
            self._slots.acquire, True, timeout
        ):
            return DeliveryResult.failed(f"timed out after {timeout:g}s waiting for a free sender thread")
        thread = threading.Thread(
            target=self._run_in_thread,
            args=(loop, future, context, url, message, timeout),
            name="apprise-send",
            daemon=True,
        )
        thread.start()
        try:
            result = await asyncio.wait_for(future, timeout + _HARD_STOP_GRACE_S)
        except TimeoutError:
            return DeliveryResult.failed(f"timed out after {timeout:g}s")
        except Exception as exc:  # never raise delivery problems into the dispatcher
            logger.exception("apprise send crashed", extra={"action": "notify_crashed", "url": mask_url(url)})
            return DeliveryResult.failed(
                redact(f"delivery crashed: {type(exc).__name__}: {exc}", url_secrets(url))
            )
        if result.error:
            # Apprise's log lines and exception texts may quote a token-bearing URL.
            result = DeliveryResult.failed(redact(result.error, url_secrets(url)), permanent=result.permanent)
        return result

    def _run_in_thread(
        self,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[DeliveryResult],
        context: contextvars.Context,
        url: str,
        message: Message,
        timeout: float,
    ) -> None:
        """A send thread's body: deliver, then hand the outcome to the event loop (if still there)."""
        try:
            outcome: DeliveryResult | BaseException = context.run(self._send_blocking, url, message, timeout)
        except BaseException as error:  # handed to the awaiting coroutine, which reports it
            outcome = error
        finally:
            self._slots.release()

        def settle() -> None:
            if future.done():
                return  # the caller gave up (timeout, shutdown)
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

        with contextlib.suppress(RuntimeError):  # the loop closed while we were sending
            loop.call_soon_threadsafe(settle)

    def _send_blocking(self, url: str, message: Message, timeout: float) -> DeliveryResult:
        deadline = time.monotonic() + timeout
        scheme = _scheme(url)

        if not self.allow_private_targets:
            # Checked again at send time: DNS may have changed since the channel was saved.
            try:
                check_private_target(url, allow_private=False, resolve=self._resolve)
            except ValidationError as exc:
                return DeliveryResult.failed(str(exc), permanent=not exc.problem.startswith("cannot resolve"))

        target_url = with_json_fields(url, message.json_fields) if scheme in JSON_SCHEMES else url
        plugin = _instantiate(target_url)
        if plugin is None:
            return DeliveryResult.failed(f"url: Apprise cannot parse this {scheme}:// URL", permanent=True)

        remaining = max(0.05, deadline - time.monotonic())
        # The plugin's own socket timeouts bound the send (Apprise's notify(timeout=...) runs
        # plugins on its small process-wide pool, which a few hung targets fill, blocking every
        # other channel's delivery); the event loop side is bounded by wait_for in send().
        socket_limit = remaining + _SOCKET_SLACK_S
        for attribute in ("socket_connect_timeout", "socket_read_timeout"):
            if hasattr(plugin, attribute):
                setattr(plugin, attribute, min(float(getattr(plugin, attribute)), socket_limit))

        sender = apprise.Apprise(asset=_ASSET)
        sender.add(plugin)
        plain = scheme in _PLAIN_TEXT_SCHEMES
        secrets = url_secrets(url)
        with _capture_apprise_log(secrets) as log, _connect_guard(not self.allow_private_targets) as refused:
            plugin.logger = _DetailLogger(plugin.logger, log.details)
            result = sender.notify(
                body=message.body if plain else message.body_markdown,
                title=message.title,
                body_format=apprise.NotifyFormat.TEXT if plain else apprise.NotifyFormat.MARKDOWN,
                notify_type=_NOTIFY_TYPES.get(
                    message.json_fields.get("kind", ""), apprise.NotifyType.FAILURE
                ),
            )
        if refused:
            host = getattr(plugin, "smtp_host", None) or getattr(plugin, "host", None) or scheme
            return DeliveryResult.failed(
                f"url: {host} resolves to a private/loopback/link-local address ({refused[0]})",
                permanent=True,
            )
        if result:
            return DeliveryResult.delivered()

        lines = list(dict.fromkeys(log.lines))  # de-duplicated, in order
        status = getattr(result, "status", None)
        if getattr(status, "name", "") == "TIMEOUT" or time.monotonic() >= deadline:
            # A socket read timeout reads as a "connection error" in Apprise's log; what
            # the channel owner needs to know is that the target did not answer in time.
            return DeliveryResult.failed(f"timed out after {timeout:g}s")
        return _describe_failure(lines, list(dict.fromkeys(log.details)), plugin, scheme)


_ERRNO = re.compile(r"\[Errno -?\d+\] [^'\")\]]+")


def _describe_failure(lines: list[str], details: list[str], plugin: Any, scheme: str) -> DeliveryResult:
    """Turn Apprise's log lines (and DEBUG exception details) for one failed send into a reason."""
    host = getattr(plugin, "smtp_host", None) or getattr(plugin, "host", None)
    port = getattr(plugin, "port", None)
    where = f"{host}:{port}" if host and port else str(host or scheme)
    said = "; ".join(line.strip() for line in lines if line.strip())
    # requests wraps the OS error in a long repr; "[Errno 111] Connection refused" is the news.
    cause = "; ".join(m.group(0) if (m := _ERRNO.search(d)) else d[:200] for d in details)
    if cause:
        said = f"{said.rstrip('.')}: {cause}" if said else cause

    match = _HTTP_ERROR.search(said)
    if match:
        code = int(match.group(1))
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        # 4xx means the request itself is wrong (bad token, gone hook), except "try later".
        permanent = 400 <= code < 500 and code not in (408, 425, 429)
        return DeliveryResult.failed(f"HTTP {code} {phrase} from {where}: {said}", permanent=permanent)
    if "refused" in cause.lower():
        return DeliveryResult.failed(f"cannot connect to {where}: connection refused")
    if scheme in EMAIL_SCHEMES:
        # smtplib errors carry the server's reply code: 5xx (e.g. 535 bad credentials) is final.
        permanent = re.search(r"\(5\d\d, ", cause) is not None
        reason = said or "Apprise gave no reason"
        return DeliveryResult.failed(f"email via {where} failed: {reason}", permanent=permanent)
    if "connection error" in said.lower():
        return DeliveryResult.failed(f"cannot connect to {where}: {said}")
    if said:
        return DeliveryResult.failed(f"{scheme}:// delivery to {where} failed: {said}")
    return DeliveryResult.failed(f"{scheme}:// delivery to {where} failed (Apprise gave no reason)")


class AppriseChannelUrls:
    """The :class:`monitor.notify.base.ChannelUrls` port on Apprise's URL rules.

    ``monitor.services.channels`` validates, masks and names channel URLs through this object,
    which the edges (:func:`monitor.app.create_app`, the CLI) hand it; services never import
    this module. Every method is a thin delegation to the module functions above.

    Args:
        resolve: the resolver of :meth:`check_target` (default ``socket.getaddrinfo``).
    """

    def __init__(self, resolve: Resolver | None = None) -> None:
        self._resolve = resolve

    def validate(self, url: str) -> None:
        """See :func:`validate_apprise_url` (raises ``ValidationError`` naming ``url``)."""
        validate_apprise_url(url)

    def check_target(self, url: str, allow_private: bool) -> None:
        """See :func:`check_private_target`; blocking (resolves the host)."""
        check_private_target(url, allow_private, self._resolve)

    def mask(self, url: str) -> str:
        """See :func:`mask_url`."""
        return mask_url(url)

    def has_masked_secrets(self, url: str) -> bool:
        """See :func:`has_masked_secrets`."""
        return has_masked_secrets(url)

    def label(self, url: str) -> str:
        """See :func:`service_label`."""
        return service_label(url)
