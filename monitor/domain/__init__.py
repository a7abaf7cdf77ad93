"""domain layer."""

from __future__ import annotations
