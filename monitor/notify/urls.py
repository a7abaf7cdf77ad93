"""Apprise URLs as Apprise reads them: the plugin behind a URL, its scheme, the host it connects to.

Shared by the masking (:mod:`monitor.notify.masking`), the egress guard
(:mod:`monitor.notify.egress`) and the adapter (:mod:`monitor.notify.apprise`): validation of a
channel URL, the host a delivery connects to, the per-target concurrency key, a label that
never holds a secret, and the ``json://`` payload tokens.
"""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import quote, urlsplit

import apprise

from monitor.domain.errors import ValidationError

__all__ = [
    "ASSET",
    "EMAIL_SCHEMES",
    "FORM_SCHEMES",
    "JSON_SCHEMES",
    "plugin_for",
    "scheme_of",
    "service_label",
    "target_host",
    "target_key",
    "validate_apprise_url",
    "with_json_fields",
]

EMAIL_SCHEMES = frozenset({"mailto", "mailtos"})
JSON_SCHEMES = frozenset({"json", "jsons"})
FORM_SCHEMES = frozenset({"form", "forms", "xml", "xmls"})


# Memory-only storage: delivery must not write Apprise caches to disk.
# Apprise 2.x runs a send with a deadline (its default service_timeout of 60 s, or
# notify(timeout=...)) on a process-wide pool of cpu+4 threads, which a few hung targets fill
# for every channel. With no deadline and async_mode off it sends in the calling thread, one of
# ours; the plugin's socket timeouts and wait_for in send() bound it instead.
ASSET = apprise.AppriseAsset(storage_mode="memory", async_mode=False, service_timeout=0)


def scheme_of(url: str) -> str:
    """The scheme of ``url``, lower case (``"json"``), or ``""`` when it has no ``scheme://``."""
    return url.split("://", 1)[0].strip().lower() if "://" in url else ""


def plugin_for(url: str) -> Any:
    """The Apprise plugin for ``url``, or ``None`` when Apprise cannot parse it."""
    return apprise.Apprise.instantiate(url, asset=ASSET, suppress_exceptions=True)


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
    scheme = scheme_of(url)
    if not scheme:
        raise ValidationError("url", "not an Apprise URL (expected <service>://...)")
    plugin = plugin_for(url)
    if plugin is None:
        raise ValidationError("url", f"Apprise cannot parse this {scheme}:// URL")
    port = getattr(plugin, "port", None)
    if isinstance(port, int) and not 1 <= port <= 65535:  # Apprise itself lets 99999 through
        raise ValidationError("url", f"port {port} is out of range 1-65535")


def target_host(url: str) -> tuple[str, int | None] | None:
    """The host (and port) a delivery to ``url`` connects to, if the URL chooses one.

    Services whose endpoint is fixed by Apprise (``slack://``, ``discord://``, ``tgram://``
    ...) return ``None``: their URL "host" is a token, not a place to connect to.
    """
    plugin = plugin_for(url)
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
        target = target_host(url)
    except Exception:  # an unparseable URL fails at send time; any key will do here
        target = None
    if target is None:
        return scheme_of(url)
    host, port = target
    return f"{host}:{port}" if port else host


def service_label(url: str) -> str:
    """A short label for a channel URL: Apprise's service name plus the host it delivers to
    (``"JSON hooks.example.com"``, ``"Email smtp.example.com"``, ``"Telegram"``). Never a
    secret: fixed-endpoint services (whose URL "host" is a token) get the service name only."""
    plugin = plugin_for(url)
    if plugin is None:
        return scheme_of(url) or "channel"
    service = str(getattr(plugin, "service_name", "") or scheme_of(url) or "channel")
    target = target_host(url)
    return f"{service} {target[0]}" if target else service


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
    if scheme_of(url) not in JSON_SCHEMES or not fields:
        return url
    base, hash_, fragment = url.partition("#")
    tokens = "&".join(f":{quote(key, safe='')}={quote(value, safe='')}" for key, value in fields.items())
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}{tokens}{hash_}{fragment}"


# --------------------------------------------------------------------------- log capture
