"""services layer.

``Engine`` is the database handle the use cases take (each opens its own unit of work on it,
:mod:`monitor.storage.unit_of_work`); the edges hold one without importing storage.
``Connection`` is an open transaction, as a loop's fencing check receives it.
"""

from __future__ import annotations

from monitor.storage.unit_of_work import Connection, Engine

__all__ = ["Connection", "Engine"]
