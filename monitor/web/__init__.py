"""The dashboard (DESIGN §9): server-rendered pages, login, badges.

Templates and static files live in this package (package data), so an installed wheel renders
the dashboard without reading anything outside the package (DESIGN §10).
"""

from __future__ import annotations
