"""Wiring of the dashboard into the Litestar app: templates, static files, route handlers."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any
from urllib.parse import quote

from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig

from monitor.web import auth, badges, pages, reasons

HERE = Path(__file__).resolve().parent


def _relative(delta_s: float) -> str:
    seconds = abs(delta_s)
    if seconds < 1:
        return "now"
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min"), (1, "s")):
        if seconds >= size:
            amount = int(seconds // size)
            text = f"{amount} {unit}"
            break
    return f"{text} ago" if delta_s < 0 else f"in {text}"


def ago(instant: datetime | str | None, now: datetime) -> str:
    """``"5 min ago"`` / ``"in 3 h"`` of an aware instant (or ISO text) relative to ``now``."""
    if instant is None:
        return "never"
    if isinstance(instant, str):
        instant = datetime.fromisoformat(instant.replace("Z", "+00:00"))
    return _relative((instant - now).total_seconds())


def utc(instant: datetime | str | None) -> str:
    """``2026-07-18 02:00:00 UTC`` (``—`` for none)."""
    if instant is None:
        return "—"
    if isinstance(instant, str):
        instant = datetime.fromisoformat(instant.replace("Z", "+00:00"))
    return instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def isoz(instant: datetime | str | None) -> str:
    if instant is None:
        return ""
    if isinstance(instant, str):
        return instant
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def local(instant: datetime | str | None, zone: tzinfo) -> str:
    """``2026-07-18 04:00:00 CEST``: an aware instant (or ISO text) in a check's zone (``—`` for
    none)."""
    if instant is None:
        return "—"
    if isinstance(instant, str):
        instant = datetime.fromisoformat(instant.replace("Z", "+00:00"))
    return instant.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z")


def at(instant: datetime | str | None, zone: tzinfo | None) -> str:
    """An instant in the reader's zone: ``2026-07-18 04:00:00 CEST`` (UTC when ``zone`` is
    ``None`` or UTC)."""
    return local(instant, zone or UTC)


def seconds(value: int | float | None) -> str:
    """A duration in whole seconds as words: ``3600`` → ``1 h (3600 s)``."""
    if value is None:
        return "—"
    words = reasons.duration_words(float(value))
    return words if words.endswith(" s") and " " not in words[:-2] else f"{words} ({int(value)} s)"


def _favicon(color: str) -> str:
    drawing = (
        "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'>"
        f"<circle cx='8' cy='8' r='7' fill='{color}'/></svg>"
    )
    return "data:image/svg+xml," + quote(drawing)


FAVICON_OK = _favicon("#1a7f37")
FAVICON_DOWN = _favicon("#d1242f")
"""The tab's icon: green, or red while a check of the page is down."""


def _configure(engine: JinjaTemplateEngine) -> None:
    env = engine.engine
    env.filters.update(ago=ago, utc=utc, isoz=isoz, local=local, at=at, seconds=seconds)
    env.globals.update(favicon_ok=FAVICON_OK, favicon_down=FAVICON_DOWN)
    env.globals.update(pages.template_globals())
    env.trim_blocks = True
    env.lstrip_blocks = True


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    """Jinja2 templates from the package (autoescaped: Litestar's Jinja engine turns it on)."""
    return TemplateConfig(
        directory=HERE / "templates", engine=JinjaTemplateEngine, engine_callback=_configure
    )


def route_handlers() -> list[Any]:
    """Everything the dashboard serves: pages, login, badges, static files."""
    return [
        auth.LoginController,
        pages.DashboardController,
        badges.BadgeController,
        badges.BadgesApiController,
        create_static_files_router(path="/static", directories=[HERE / "static"], include_in_schema=False),
    ]
