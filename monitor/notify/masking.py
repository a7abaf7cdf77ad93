"""Channel URL secrets: masking a URL for display, and redacting its secrets from texts (DESIGN §7).

:func:`mask_url` renders a channel URL for API responses, the dashboard and logs;
:func:`url_secrets` lists what it hides, so that :func:`redact` can strip those from error texts
and log lines; :func:`has_masked_secrets` spots a masked URL sent back by a client.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

from monitor.notify.urls import plugin_for, scheme_of

__all__ = ["MASK", "has_masked_secrets", "mask_url", "redact", "url_secrets"]

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
    plugin = plugin_for(url)
    if plugin is None:
        scheme = scheme_of(url)
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
