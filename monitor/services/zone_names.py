"""Legacy time zone names → their canonical IANA names (``Europe/Kiev`` → ``Europe/Kyiv``).

The tz database keeps old names as *links* (its ``backward`` file); Healthchecks replaces such
a name with the current one when a check is saved (``Spec.check_tz``), so a check shows the name
the zone has today. The links are read from the ``tzdata`` package's compiled ``tzdata.zi``
(``L <target> <link>`` lines), the same data :mod:`zoneinfo` falls back on.
"""

from __future__ import annotations

import functools
from importlib import resources

from monitor.domain.cron import zones

# Kept as written although tzdata lists them as links to Etc/UTC / Etc/GMT: they are the names
# everyone uses (and our default), and Healthchecks keeps them too.
KEPT = frozenset({"UTC", "GMT"})


@functools.cache
def links() -> dict[str, str]:
    """Every link name of the tz database with the zone it finally names (chains followed)."""
    try:
        text = resources.files("tzdata").joinpath("zoneinfo", "tzdata.zi").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, OSError):  # no tzdata package: names as given
        return {}
    direct: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("L "):
            parts = line.split()
            if len(parts) == 3:
                direct[parts[2]] = parts[1]
    resolved: dict[str, str] = {}
    for name, target in direct.items():
        seen = {name}
        while target in direct and target not in seen:
            seen.add(target)
            target = direct[target]
        resolved[name] = target
    return resolved


def canonical_zone(name: str) -> str:
    """The current IANA name of ``name``: a legacy link (``Europe/Kiev``, ``UCT``, ``CET``,
    ``US/Eastern``) becomes its target (``Europe/Kyiv``, ``UTC``, ``Europe/Brussels``,
    ``America/New_York``); any other name, valid or not, is returned unchanged for the zone
    validation to judge. ``UTC`` and ``GMT`` stay as they are, and the other spellings of UTC
    (``UCT``, ``Etc/UCT``, ``Zulu``, ``Universal``) become ``UTC``, the name we default to."""
    if name in KEPT:
        return name
    target = links().get(name, name)
    return "UTC" if target == "Etc/UTC" else target


@functools.cache
def offered_zones() -> tuple[str, ...]:
    """The zones a form offers, sorted: every name the API accepts
    (:func:`monitor.domain.zones.zone_names`) under its current name, so no legacy link
    (``US/Eastern``) nor a non-zone (``localtime``, ``Factory``) is listed."""
    return tuple(sorted(n for n in zones.zone_names() if canonical_zone(n) == n))
