"""Email pings: an SMTP listener (aiosmtpd) in the serving process, as Healthchecks' ``manage.py smtpd``.

A message to ``<uuid>@<domain>`` or ``<ping_key>+<slug>@<domain>`` (``MONITOR_PING_EMAIL_DOMAIN``)
is a ping of that check with scheme ``email``, method ``""`` and user agent
``Email from <sender>`` (Healthchecks' fields). Its kind is ``success`` unless the check's
``filter_subject`` / ``filter_body`` keyword rules say otherwise (:mod:`monitor.domain.keywords`).

* Recipients are checked at ``RCPT``: an address of another domain, of no check, or malformed
  is refused with ``550 5.1.1``, so the sending server bounces it at once.
* A message over ``MONITOR_SMTP_MESSAGE_LIMIT`` bytes is refused with ``552`` (aiosmtpd's
  ``data_size_limit``; ``SIZE`` is advertised in the EHLO answer). The stored body is the raw
  message cut to its first ``MONITOR_PING_BODY_LIMIT`` bytes, as HTTP bodies are.
* ``DATA`` is answered ``250`` only after every recipient's ping is committed: the pings go
  through the same ingest queue (group commit) as HTTP pings. A ping the database could not
  store is answered ``451`` (the sender retries later), a rate-limited one ``451 4.7.1``.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage
from html.parser import HTMLParser
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session

from monitor.domain.checks import PingKind
from monitor.domain.clock import Clock
from monitor.edge import UUID_RE
from monitor.http.ping import SLUG_RE
from monitor.services import Engine, mailbox
from monitor.services.ingest import IngestWriter, PingAnswer, PingRequest
from monitor.settings import Settings

logger = logging.getLogger(__name__)

UNKNOWN_RECIPIENT = "550 5.1.1 unknown recipient: no check has this address"


@dataclass(frozen=True, slots=True)
class Recipient:
    """A ping address: a check's ``uuid``, or a project's ``ping_key`` and a check's ``slug``."""

    uuid: str | None = None
    ping_key: str | None = None
    slug: str | None = None


def parse_recipient(address: str, domain: str) -> Recipient | None:
    """The check an address names, or ``None`` when it is malformed or of another domain.

    Args:
        address: ``local@domain`` as given in ``RCPT TO``.
        domain: the ping domain (compared case-insensitively).

    Returns:
        ``Recipient(uuid=…)`` for ``<uuid>@domain`` (the uuid in canonical form, any case, stored
        lower-case), ``Recipient(ping_key=…, slug=…)`` for ``<ping_key>+<slug>@domain`` (slug in
        ``[a-z0-9_-]``, as in ping URLs).
    """
    local, at, host = address.strip().rpartition("@")
    if not at or host.lower() != domain.lower() or not local:
        return None
    if UUID_RE.match(local):
        return Recipient(uuid=local.lower())
    key, plus, slug = local.rpartition("+")
    if plus and key and SLUG_RE.match(slug):
        return Recipient(ping_key=key, slug=slug)
    return None


class _TextOfHtml(HTMLParser):
    """The text content of an HTML part (script and style dropped), for keyword matching."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.chunks.append(data)


def _part_text(message: EmailMessage, subtype: str) -> str:
    part = message.get_body((subtype,))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, ValueError, AssertionError):  # an unknown charset or a broken encoding
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else str(payload)
    return content if isinstance(content, str) else ""


def message_text(raw: bytes) -> tuple[str, str]:
    """The decoded subject and the text of a raw RFC 5322 message (what keyword filters read).

    Returns:
        ``(subject, text)``: the ``Subject`` header with encoded words decoded ("" when absent);
        the text/plain part, then the text of the text/html part, joined by a newline (as
        Healthchecks does). Malformed input never raises: what cannot be decoded is replaced.
    """
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    try:
        subject = str(message.get("subject", "") or "")
    except (ValueError, LookupError):
        subject = ""
    chunks = []
    plain = _part_text(message, "plain")
    if plain:
        chunks.append(plain)
    html = _part_text(message, "html")
    if html:
        parser = _TextOfHtml()
        parser.feed(html)
        parser.close()
        chunks.append("".join(parser.chunks))
    return subject, "\n".join(chunks)


class PingMailHandler:
    """aiosmtpd handler: recipients checked at RCPT, pings submitted at DATA."""

    def __init__(
        self, settings: Settings, clock: Clock, writer: Callable[[], IngestWriter], engine: Engine
    ) -> None:
        self.settings = settings
        self.clock = clock
        self._writer = writer
        self.engine = engine
        self.domain = settings.email_domain

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, rcpt_options: list[str]
    ) -> str:
        recipient = parse_recipient(address, self.domain)
        if recipient is None:
            return UNKNOWN_RECIPIENT
        try:
            found = await mailbox.recipient_exists(
                self.engine, uuid=recipient.uuid, ping_key=recipient.ping_key, slug=recipient.slug
            )
        except Exception as error:  # the database is down: the sender should retry, not bounce
            logger.warning("email recipient lookup failed: %s", error, extra={"action": "smtp_rcpt_failed"})
            return "451 4.3.0 storage unavailable, retry later"
        if not found:
            return UNKNOWN_RECIPIENT
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or envelope.content or b""
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogateescape")
        received = self.clock.now()
        subject, text = message_text(raw)
        peer = session.peer
        remote = peer[0] if isinstance(peer, tuple) and peer else str(peer or "")
        sender = envelope.mail_from or ""
        limit = self.settings.ping_body_limit
        requests = []
        for address in envelope.rcpt_tos:
            recipient = parse_recipient(address, self.domain)
            if recipient is None:  # cannot happen: RCPT accepted only parsed addresses
                continue
            requests.append(
                PingRequest(
                    kind=PingKind.SUCCESS,
                    received=received,
                    uuid=recipient.uuid,
                    ping_key=recipient.ping_key,
                    slug=recipient.slug,
                    method="",
                    remote_addr=remote[:64],
                    ua=f"Email from {sender}"[:200],
                    body=raw[:limit] or None,
                    body_size=len(raw),
                    scheme="email",
                    email_subject=subject,
                    email_text=text,
                )
            )
        writer = self._writer()
        answers: list[PingAnswer] = list(await asyncio.gather(*(writer.submit(r) for r in requests)))
        return _smtp_reply(answers)


def _smtp_reply(answers: list[PingAnswer]) -> str:
    """One SMTP reply for a message's pings: 250 only when every ping was committed."""
    if any(a.status == 429 for a in answers):
        return "451 4.7.1 rate limited, retry later"
    if any(a.status >= 500 for a in answers):
        return "451 4.3.0 storage unavailable, retry later"
    if any(a.status == 404 for a in answers):  # the check was deleted between RCPT and DATA
        return UNKNOWN_RECIPIENT
    if any(a.status >= 400 for a in answers):
        bad = next(a for a in answers if a.status >= 400)
        return f"550 5.6.0 {re.sub(r'[^ -~]', '?', bad.text)[:200]}"
    return "250 OK"


async def start_smtp(
    settings: Settings, clock: Clock, writer: Callable[[], IngestWriter], engine: Engine
) -> asyncio.Server:
    """Listen for email pings on ``settings.smtp_host``:``settings.smtp_port`` in the running loop.

    Bound with ``SO_REUSEPORT`` so every worker of ``serve --workers N`` shares the port.

    Raises:
        OSError: the port cannot be bound.
    """
    handler = PingMailHandler(settings, clock, writer, engine)
    loop = asyncio.get_running_loop()

    def protocol() -> Any:
        return SMTP(
            handler,
            data_size_limit=settings.smtp_message_limit,
            enable_SMTPUTF8=True,
            decode_data=False,
            hostname=handler.domain,
            ident="monitor email pings",
        )

    server = await loop.create_server(protocol, settings.smtp_host, settings.smtp_port, reuse_port=True)
    logger.info(
        "listening for email pings on %s:%s (domain %s)",
        settings.smtp_host,
        settings.smtp_port,
        handler.domain,
        extra={"action": "smtp_listening"},
    )
    return server
