"""The notifier port: what ``services.dispatch`` needs to deliver one message to one channel."""

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
