"""Per-service channel forms: the fields a person knows (a Slack webhook URL, an SMTP server,
a Telegram bot token) turned into the Apprise URL the channel stores.

Pure functions, no I/O. The URL they build is then validated by
:func:`monitor.services.channels.validate_channel`, exactly as one posted to the API — this
module only spells the URL; it never decides whether a target is allowed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from monitor.domain.errors import ValidationError


@dataclass(frozen=True, kw_only=True, slots=True)
class Field:
    """One input of a service form: ``name`` (form key ``<service>_<name>``), its label, an
    example, the input type, and whether it may stay empty."""

    name: str
    label: str
    example: str = ""
    type: str = "text"
    optional: bool = False


SERVICES: dict[str, tuple[str, tuple[Field, ...]]] = {
    "slack": (
        "Slack",
        (
            Field(
                name="webhook",
                label="Incoming webhook URL",
                example="https://hooks.slack.com/services/T000/B000/XXXX",
                type="url",
            ),
        ),
    ),
    "email": (
        "Email",
        (
            Field(name="to", label="Send to", example="oncall@example.com", type="email"),
            Field(name="host", label="SMTP server", example="smtp.example.com"),
            Field(name="port", label="SMTP port", example="587", optional=True),
            Field(name="user", label="SMTP user", optional=True),
            Field(name="password", label="SMTP password", type="password", optional=True),
            Field(
                name="sender",
                label="From address",
                example="monitor@example.com",
                type="email",
                optional=True,
            ),
            Field(
                name="security", label="Security: tls (STARTTLS/SSL) or none", example="tls", optional=True
            ),
        ),
    ),
    "webhook": (
        "Webhook (JSON POST)",
        (Field(name="url", label="Webhook URL", example="https://hooks.example.com/monitor", type="url"),),
    ),
    "discord": (
        "Discord",
        (
            Field(
                name="webhook",
                label="Webhook URL",
                example="https://discord.com/api/webhooks/123/abc",
                type="url",
            ),
        ),
    ),
    "telegram": (
        "Telegram",
        (
            Field(name="token", label="Bot token", example="123456:ABC-DEF"),
            Field(name="chat", label="Chat id", example="-1001234567890"),
        ),
    ),
    "ntfy": (
        "ntfy",
        (
            Field(name="topic", label="Topic", example="my-alerts"),
            Field(
                name="server",
                label="Server (empty: ntfy.sh)",
                example="https://ntfy.example.com",
                type="url",
                optional=True,
            ),
        ),
    ),
    "apprise": (
        "Apprise URL",
        (Field(name="url", label="Apprise URL", example="json://host/path, mailtos://…, pover://…"),),
    ),
}
"""The services the dashboard has a form for: key → (label, fields)."""


NTFY_TOPIC = re.compile(r"^[-_A-Za-z0-9]{1,64}$")
"""An ntfy topic: 1-64 letters, digits, ``-`` and ``_`` (ntfy's own rule, and Apprise's ntfy
plugin's, which drops any other topic without a word)."""


def _value(form: Mapping[str, str], service: str, field: Field) -> str:
    value = form.get(f"{service}_{field.name}", "").strip()
    if not value and not field.optional:
        raise ValidationError(f"{service}_{field.name}", f"{field.label.lower()} is required")
    return value


def _webhook_path(url: str, field: str, hosts: tuple[str, ...], prefix: str) -> list[str]:
    parts = urlsplit(url)
    if parts.scheme != "https" or parts.hostname not in hosts or not parts.path.startswith(prefix):
        raise ValidationError(field, f"must look like https://{hosts[0]}{prefix}…")
    return [p for p in parts.path[len(prefix) :].split("/") if p]


def apprise_url(service: str, form: Mapping[str, str]) -> str:
    """The Apprise URL of a filled-in service form (``form``: the posted fields).

    Raises:
        ValidationError: naming the form field that is missing or malformed.
    """
    if service not in SERVICES:
        raise ValidationError("service", f"pick one of {', '.join(SERVICES)}")
    values = {f.name: _value(form, service, f) for f in SERVICES[service][1]}
    if service == "apprise":
        return values["url"]
    if service == "slack":
        tokens = _webhook_path(values["webhook"], "slack_webhook", ("hooks.slack.com",), "/services/")
        if len(tokens) != 3:
            raise ValidationError("slack_webhook", "must end in /services/T…/B…/…")
        return "slack://" + "/".join(quote(t, safe="") for t in tokens)
    if service == "discord":
        tokens = _webhook_path(
            values["webhook"], "discord_webhook", ("discord.com", "discordapp.com"), "/api/webhooks/"
        )
        if len(tokens) != 2:
            raise ValidationError("discord_webhook", "must end in /api/webhooks/<id>/<token>")
        return "discord://" + "/".join(quote(t, safe="") for t in tokens)
    if service == "webhook":
        parts = urlsplit(values["url"])
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValidationError("webhook_url", "must be an http:// or https:// URL")
        scheme = "jsons" if parts.scheme == "https" else "json"
        return f"{scheme}://{parts.netloc}{parts.path}" + _target_query(parts.query)
    if service == "telegram":
        return f"tgram://{quote(values['token'], safe=':')}/{quote(values['chat'], safe='')}"
    if service == "ntfy":
        return _ntfy_url(values)
    return _email_url(values)


def _target_query(query: str) -> str:
    """The webhook URL's query string re-spelt for Apprise's ``json://``: ``?a=1&b=2`` →
    ``?-a=1&-b=2`` (``""`` for no query).

    Apprise's JSON plugin reads a plain ``?key=value`` as one of its own options and drops it;
    only a ``-key=value`` token becomes a query parameter of the request it sends
    (``apprise/plugins/custom_json.py``, "params" with prefix ``-``).
    """
    pairs = parse_qsl(query, keep_blank_values=True)
    return "?" + urlencode([(f"-{key}", value) for key, value in pairs]) if pairs else ""


def _ntfy_url(values: Mapping[str, str]) -> str:
    """``ntfy://topic`` (ntfy.sh) or ``ntfy[s]://server/topic`` from the ntfy form's values."""
    if not NTFY_TOPIC.match(values["topic"]):
        raise ValidationError(
            "ntfy_topic", "may contain only letters, digits, '-' and '_' (at most 64; no spaces or '/')"
        )
    topic = values["topic"]
    if not values["server"]:
        return f"ntfy://{topic}"
    parts = urlsplit(values["server"])
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValidationError("ntfy_server", "must be an http:// or https:// URL")
    return f"{'ntfys' if parts.scheme == 'https' else 'ntfy'}://{parts.netloc}/{topic}"


def _email_url(values: Mapping[str, str]) -> str:
    """``mailto[s]://user:password@host:port/?to=…`` from the email form's values."""
    security = values["security"].lower() or "tls"
    if security not in ("tls", "none"):
        raise ValidationError("email_security", "must be tls or none")
    auth = ""
    if values["user"]:
        auth = (
            quote(values["user"], safe="")
            + (":" + quote(values["password"], safe="") if values["password"] else "")
            + "@"
        )
    port = values["port"]
    if port and not (port.isascii() and port.isdigit()):
        raise ValidationError("email_port", "must be a port number")
    query = {"to": values["to"]}
    if values["sender"]:
        query["from"] = values["sender"]
    if security == "none":
        query["mode"] = "insecure"
    host = values["host"] + (f":{port}" if port else "")
    return f"{'mailtos' if security == 'tls' else 'mailto'}://{auth}{host}/?{urlencode(query)}"
