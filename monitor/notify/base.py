"""The notification ports: what services need from a delivery adapter, implemented by
``monitor.notify.apprise`` and injected by the edges.

* :class:`Notifier`: deliver one message to one channel (``services.dispatch``, channel tests).
* :class:`ChannelUrls`: the rules of channel URLs — parse, mask, name, private-target check
  (``services.channels``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from monitor.domain.messages import Message


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    """The outcome of one delivery attempt.

    Attributes:
        ok: the target accepted the notification.
        error: why not, in words for the channel's owner (``"HTTP 503 Service Unavailable
            from 127.0.0.1:8080 ..."``, ``"timed out after 10s"``); ``None`` when ``ok``.
        permanent: retrying cannot help (a refused private target, an unparseable URL, an
            HTTP 4xx answer); the dispatcher stops retrying this notification.
    """

    ok: bool
    error: str | None
    permanent: bool = False

    @classmethod
    def delivered(cls) -> DeliveryResult:
        """A successful attempt."""
        return cls(ok=True, error=None)

    @classmethod
    def failed(cls, error: str, *, permanent: bool = False) -> DeliveryResult:
        """A failed attempt.

        Args:
            error: the reason, one line.
            permanent: ``True`` when retrying cannot succeed.
        """
        return cls(ok=False, error=error, permanent=permanent)


class Notifier(Protocol):
    """Delivers rendered messages to channel URLs."""

    async def send(self, url: str, message: Message, *, timeout: float) -> DeliveryResult:  # noqa: ASYNC109
        """Deliver ``message`` to the channel at ``url``, within ``timeout`` seconds.

        Args:
            url: the channel's Apprise URL (secrets included; never log it unmasked).
            message: the rendered alert.
            timeout: the per-attempt budget in seconds; a target that has not answered by
                then yields ``DeliveryResult(ok=False, error="timed out after <timeout>s")``.

        Returns:
            The attempt's :class:`DeliveryResult`. Implementations never raise for delivery
            problems; they report them in the result.
        """
        ...


class ChannelUrls(Protocol):
    """The rules of channel URLs (Apprise's: :class:`monitor.notify.apprise.AppriseChannelUrls`)."""

    def validate(self, url: str) -> None:
        """Refuse a URL the adapter cannot deliver to.

        Raises:
            ValidationError: naming ``url``.
        """
        ...

    def check_target(self, url: str, allow_private: bool) -> None:
        """Refuse a URL whose host resolves to a non-public address unless ``allow_private``
        (DESIGN §7). Blocking: it resolves the host.

        Raises:
            ValidationError: naming ``url`` and the address.
        """
        ...

    def mask(self, url: str) -> str:
        """``url`` with its secrets shown as ``****``."""
        ...

    def has_masked_secrets(self, url: str) -> bool:
        """Whether ``url`` contains a masked secret (``****``)."""
        ...

    def label(self, url: str) -> str:
        """A human name for the target (``"JSON hooks.example.com"``), never a secret."""
        ...
