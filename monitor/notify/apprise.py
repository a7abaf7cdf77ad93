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
  fields, exactly as given (handed to the plugin, not round-tripped through the URL);
* builds a fresh plugin per send from a remembered parse of the channel URL
  (:func:`monitor.notify.urls.plugin_for`): parsing was a large part of a send's CPU;
* re-checks, when private targets are not allowed, that the target's host does not
  resolve to a private, loopback, link-local or reserved address — before the send and again
  at connect time (the egress guard, :mod:`monitor.notify.egress`);
* reuses, across sends, Apprise managers and keep-alive ``requests`` sessions (one send per
  session at a time, :mod:`monitor.notify.keepalive`): a burst of notices to one webhook no
  longer opens a TCP connection per notice.

:class:`AppriseChannelUrls` is the ``ChannelUrls`` port on Apprise's URL rules; the rules
themselves live in :mod:`monitor.notify.urls` (validation, targets), :mod:`monitor.notify.masking`
(secrets) and :mod:`monitor.notify.egress` (private targets).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import importlib
import logging
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from typing import Any

import apprise

from monitor.domain.errors import ValidationError
from monitor.domain.messages import Message
from monitor.notify.base import DeliveryResult
from monitor.notify.egress import Resolver, check_private_target, connect_guard, install_egress_guard
from monitor.notify.keepalive import SessionPool, install_session_routing, use_session
from monitor.notify.masking import MASK, has_masked_secrets, mask_url, redact, url_secrets
from monitor.notify.senders import DaemonPool
from monitor.notify.urls import (
    ASSET,
    EMAIL_SCHEMES,
    FORM_SCHEMES,
    JSON_SCHEMES,
    plugin_for,
    scheme_of,
    service_label,
    validate_apprise_url,
)

__all__ = ["AppriseChannelUrls", "AppriseNotifier"]

logger = logging.getLogger(__name__)

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

_HTTP_ERROR = re.compile(r"error=(\d{3})\b")

_active: contextvars.ContextVar[_SendLog | None] = contextvars.ContextVar(
    "monitor_apprise_send", default=None
)


class _SendLog:
    """Collects the ``apprise`` records (WARNING and up) emitted in the context of one send.

    One handler on the ``apprise`` logger (:class:`_ToActiveSend`) hands each record to the
    send whose context it was emitted in (Apprise runs plugins in worker threads with a copy
    of the caller's context), so sends running side by side never see each other's errors.
    A send used to attach and detach a ``logging.Handler`` of its own, which takes logging's
    process-wide lock three times per send (creating, adding, removing).
    """

    def __init__(self, secrets: list[str] | None = None) -> None:
        self.lines: list[str] = []
        self.details: list[str] = []
        self.secrets: list[str] = secrets or []

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):  # a malformed record must not break delivery
            self.lines.append(record.getMessage())


class _ToActiveSend(logging.Handler):
    """The ``apprise`` logger's handler: passes each record to the send in progress in the
    record's context (:data:`_active`), if any."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)

    def handle(self, record: logging.LogRecord) -> bool:
        send = _active.get()
        if send is not None and self.filter(record):
            send.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        self.handle(record)


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
logging.getLogger("apprise").addHandler(_ToActiveSend())


_APPRISE_LOGGER = logging.getLogger("apprise")


@contextmanager
def _capture_apprise_log(secrets: list[str] | None = None) -> Iterator[_SendLog]:
    # A failed send's reason comes from Apprise's WARNING records: whatever the process's
    # logging configuration did meanwhile (a root level above WARNING, a fileConfig or
    # dictConfig that disabled existing loggers), they must still reach _ToActiveSend.
    if _APPRISE_LOGGER.disabled:
        _APPRISE_LOGGER.disabled = False
    if not _APPRISE_LOGGER.isEnabledFor(logging.WARNING):
        _APPRISE_LOGGER.setLevel(logging.WARNING)
    handler = _SendLog(secrets)
    token = _active.set(handler)
    try:
        yield handler
    finally:
        _active.reset(token)


@functools.lru_cache(maxsize=1024)
def _secrets_of(url: str) -> tuple[str, ...]:
    """:func:`url_secrets` of a channel URL, remembered: working them out parses the URL with
    Apprise twice (a sixth of a webhook send's CPU), and a channel's URL is the same for every
    one of its sends. The secrets stay in this process's memory, as the channel rows do."""
    return tuple(url_secrets(url))


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
    process told to stop stayed alive until a hung SMTP connection timed out); the threads
    are reused (:class:`~monitor.notify.senders.DaemonPool`). The abandoned row's claim
    expires and another notifier retries it (DESIGN §6).
    """

    def __init__(
        self, *, allow_private_targets: bool = False, max_workers: int = 32, resolve: Resolver | None = None
    ) -> None:
        self.allow_private_targets = allow_private_targets
        self._resolve = resolve
        if not allow_private_targets:
            install_egress_guard()  # a sender that refuses private targets never runs unguarded
        self._slots = threading.BoundedSemaphore(max_workers)
        self._senders = DaemonPool(max_workers, name="apprise-send")
        self._closed = False
        # Reused across sends: a keep-alive session each (HTTP plugins), and Apprise managers
        # (building one reads the locale catalogues from disk, a tenth of a webhook send's CPU).
        install_session_routing()
        self._sessions = SessionPool(keep=max_workers)
        self._managers: list[apprise.Apprise] = []

    async def __aenter__(self) -> AppriseNotifier:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Refuse new sends; sends stuck on hung targets are abandoned (daemon threads)."""
        self._closed = True
        self._senders.close()
        self._sessions.close()

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
        try:
            self._senders.submit(
                functools.partial(self._run_in_thread, loop, future, context, url, message, timeout)
            )
        except RuntimeError:  # closed since the check above
            self._slots.release()
            return DeliveryResult.failed("the notifier is shutting down")
        try:
            result = await asyncio.wait_for(future, timeout + _HARD_STOP_GRACE_S)
        except TimeoutError:
            return DeliveryResult.failed(f"timed out after {timeout:g}s")
        except Exception as exc:  # never raise delivery problems into the dispatcher
            logger.exception("apprise send crashed", extra={"action": "notify_crashed", "url": mask_url(url)})
            return DeliveryResult.failed(
                redact(f"delivery crashed: {type(exc).__name__}: {exc}", list(_secrets_of(url)))
            )
        if result.error:
            # Apprise's log lines and exception texts may quote a token-bearing URL.
            result = DeliveryResult.failed(
                redact(result.error, list(_secrets_of(url))), permanent=result.permanent
            )
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
        scheme = scheme_of(url)

        if not self.allow_private_targets:
            # Checked again at send time: DNS may have changed since the channel was saved.
            try:
                check_private_target(url, allow_private=False, resolve=self._resolve)
            except ValidationError as exc:
                return DeliveryResult.failed(str(exc), permanent=not exc.problem.startswith("cannot resolve"))

        # A plugin of its own for this send, from the channel URL's remembered parse.
        plugin = plugin_for(url, message.json_fields)
        if plugin is None:
            return DeliveryResult.failed(f"url: Apprise cannot parse this {scheme}:// URL", permanent=True)

        remaining = max(0.05, deadline - time.monotonic())
        # The plugin's own socket timeouts bound the send (Apprise's notify(timeout=...) runs
        # plugins on its small process-wide pool, which a few hung targets fill, blocking every
        # other channel's delivery); the event loop side is bounded by wait_for in send().
        # The budget replaces Apprise's class defaults (4 s each, which would end every slower
        # answer at 4 s whatever MONITOR_NOTIFY_TIMEOUT says); a channel URL's own rto=/cto=
        # (set on the instance by Apprise's URL parser) still wins when it is shorter.
        socket_limit = remaining + _SOCKET_SLACK_S
        for attribute in ("socket_connect_timeout", "socket_read_timeout"):
            if hasattr(plugin, attribute):
                own = vars(plugin).get(attribute)
                setattr(plugin, attribute, socket_limit if own is None else min(float(own), socket_limit))

        secrets = list(_secrets_of(url))
        result, log, refused = self._notify(plugin, message, scheme in _PLAIN_TEXT_SCHEMES, secrets)
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
        read_limit = getattr(plugin, "socket_read_timeout", None)
        if read_limit is not None and any("read timed out" in d.lower() for d in [*lines, *log.details]):
            # the plugin's own read timeout (shorter than the budget) ended it: the same news
            return DeliveryResult.failed(f"timed out after {float(read_limit):g}s")
        return _describe_failure(lines, list(dict.fromkeys(log.details)), plugin, scheme)

    def _notify(
        self, plugin: Any, message: Message, plain: bool, secrets: list[str]
    ) -> tuple[Any, _SendLog, list[str]]:
        """One Apprise call for ``plugin``, in this thread, on a pooled manager and keep-alive
        session; returns Apprise's result, the send's log and the refused private addresses."""
        try:
            sender = self._managers.pop()  # list.pop/append are atomic: no lock needed
        except IndexError:
            sender = apprise.Apprise(asset=ASSET)
        sender.add(plugin)
        session = self._sessions.take()
        try:
            with (
                _capture_apprise_log(secrets) as log,
                connect_guard(not self.allow_private_targets) as refused,
                use_session(session),
            ):
                plugin.logger = _DetailLogger(plugin.logger, log.details)
                result = sender.notify(
                    body=message.body if plain else message.body_markdown,
                    title=message.title,
                    body_format=apprise.NotifyFormat.TEXT if plain else apprise.NotifyFormat.MARKDOWN,
                    notify_type=_NOTIFY_TYPES.get(
                        message.json_fields.get("kind", ""), apprise.NotifyType.FAILURE
                    ),
                )
        finally:
            self._sessions.give(session)
            sender.clear()
            self._managers.append(sender)
        return result, log, refused


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
    this module. Every method is a thin delegation to the functions of :mod:`monitor.notify.urls`,
    :mod:`monitor.notify.masking` and :mod:`monitor.notify.egress`.

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
