"""http/api layer."""

from __future__ import annotations
