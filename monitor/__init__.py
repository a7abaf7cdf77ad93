"""monitor: a dead-man's-switch service for scheduled work."""

from __future__ import annotations

__version__ = "0.1.0"
