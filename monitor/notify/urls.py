"""Apprise URLs as Apprise reads them: the plugin behind a URL, its scheme, the host it connects to.

Shared by the masking (:mod:`monitor.notify.masking`), the egress guard
(:mod:`monitor.notify.egress`) and the adapter (:mod:`monitor.notify.apprise`): validation of a
channel URL, the host a delivery connects to, the per-target concurrency key, a label that
never holds a secret, and the ``json://`` payload tokens.
"""

from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlsplit

import apprise
from apprise.plugins import N_MGR
from apprise.utils.cwe312 import cwe312_loggable
from apprise.utils.parse import GET_SCHEMA_RE

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


#: Apprise's plugin registry (a process-wide singleton, the one ``Apprise.instantiate`` uses).
_PLUGINS: Any = N_MGR

#: Apprise's rendering of a URL for its log lines (``json://h...t/...``, secrets shortened).
_loggable: Callable[[str, bool], str] = cwe312_loggable

#: The logger Apprise's own URL parsing reports on (its ``apprise`` logger).
_apprise_log = logging.getLogger("apprise")


@functools.lru_cache(maxsize=4096)
def _parsed_url(url: str) -> tuple[Any, dict[str, Any]] | None:
    """Apprise's parse of ``url``: ``(plugin class, the dict its parse_url(url) returns)``.

    The steps of ``apprise.plugins.url_to_dict`` (the parse inside ``Apprise.instantiate``):
    ``/#`` kept as a path character, the scheme's plugin, else the first plugin that reads the
    URL as one of its service's native URLs (``https://discord.com/api/webhooks/...``). Parsing
    is most of a plugin's construction cost and a channel's URL is the same for each of its
    sends, so the result is remembered (bounded; unparseable URLs are remembered as ``None``).
    Callers must not change the dict: :func:`plugin_for` builds each plugin from a deep copy.

    One difference from Apprise: ``json://`` payload fields (``:key=value``) are
    percent-decoded once, like every other query value. Apprise's JSON plugin decodes them a
    second time (``a%2541`` reached the receiver as ``aA``, and so did a field value ``a%41``).

    Apprise's TRACE dump of the parse (the raw URL and every parsed value) is not emitted: it
    holds the URL's passwords and header values in clear.
    """
    candidate = url.replace("/#", "/%23")
    loggable = _loggable(url, ASSET.secure_logging)
    match = GET_SCHEMA_RE.match(candidate)
    if match is None:
        _apprise_log.error("Unsupported URL: %s", loggable)
        return None
    schema = match.group("schema").lower()
    results: dict[str, Any] | None = None
    if schema in _PLUGINS:
        results = _PLUGINS[schema].parse_url(candidate)
        if not results:
            _apprise_log.error("Unparseable %s URL %s", _PLUGINS[schema].service_name, loggable)
            return None
    else:
        for plugin_class in _PLUGINS.plugins():
            results = plugin_class.parse_native_url(candidate)
            if results:
                break
        if not results:
            _apprise_log.error("Unparseable URL %s", loggable)
            return None
    if results.get("schema") not in _PLUGINS:
        _apprise_log.error('Dictionary does not include a "schema" entry.')
        return None
    if str(results["schema"]).lower() in JSON_SCHEMES and isinstance(results.get("qsd:"), dict):
        results["payload"] = dict(results["qsd:"])  # decoded once already (see above)
    return _PLUGINS[results["schema"]], results


def plugin_for(url: str, json_fields: Mapping[str, str] | None = None) -> Any:
    """A new Apprise plugin instance for ``url``, or ``None`` when Apprise cannot parse it.

    Built as ``Apprise.instantiate(url, asset=ASSET)`` builds it (the same parse, no tags, the
    memory-only :data:`ASSET`, the same enabled checks), from a deep copy of the remembered
    parse (:func:`_parsed_url`): plugins keep per-send state and are not thread-safe, so every
    call returns an instance of its own. Apprise's DEBUG line "Loaded <service> URL: ..." is
    not emitted: its privacy rendering keeps ``+Header`` values such as ``Authorization``.

    Args:
        url: an Apprise URL such as ``"json://hooks.example.com/alerts"``.
        json_fields: for ``json://``/``jsons://`` URLs, field name → value added to the
            payload as top-level fields, exactly as given (after the URL's own ``:key=value``
            fields, which they override); ignored for other schemes.

    Returns:
        The plugin, or ``None`` when the URL does not parse, its plugin is disabled or its
        constructor rejects the values (Apprise logs why on the ``apprise`` logger). An
        exception of a plugin's URL parser itself propagates, as it does from Apprise.
    """
    parsed = _parsed_url(url)
    if parsed is None:
        return None
    plugin_class, parse = parsed
    if not plugin_class.enabled:
        _apprise_log.error("%s:// is disabled on this system.", parse["schema"])
        return None
    results = copy.deepcopy(parse)
    if json_fields and str(results["schema"]).lower() in JSON_SCHEMES:
        results["payload"] = {**results.get("payload", {}), **json_fields}
    results["tag"] = set()
    results["asset"] = ASSET
    try:
        plugin = plugin_class(**results)
    except Exception:
        loggable = _loggable(url, ASSET.secure_logging)
        _apprise_log.error("Could not load %s URL: %s", plugin_class.service_name, loggable)
        return None
    if not plugin.enabled:
        _apprise_log.error("%s:// has become disabled on this system.", parse["schema"])
        return None
    return plugin


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
    top-level field. Keys and values are percent-encoded once, so any text survives
    :func:`plugin_for`'s parse (which decodes them once). Delivery passes the fields to
    :func:`plugin_for` instead, so that every send of a channel shares one parse of its URL.

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
