"""Render alert facts into messages through template files (DESIGN §7).

The templates are Jinja2 files shipped in the package (``monitor/notify/templates/``, see its
README) and may be overridden file by file from a directory (``MONITOR_TEMPLATES_DIR``). The
environment is sandboxed: an override cannot reach Python internals. The wording per kind
(sentences, details) is computed by the pure :func:`monitor.domain.messages.context`; the
templates arrange it.
"""

from __future__ import annotations

import functools
from pathlib import Path

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from monitor.domain import messages
from monitor.domain.messages import AlertFacts, Message

PARTS = ("title.j2", "body.txt.j2", "body.md.j2")


@functools.lru_cache(maxsize=8)
def environment(templates_dir: str | None = None) -> SandboxedEnvironment:
    """The Jinja2 environment for an override directory (``None``: package templates only).

    Cached per directory: template files are read once per process (restart to pick up edits).
    """
    loaders: list[jinja2.BaseLoader] = []
    if templates_dir:
        loaders.append(jinja2.FileSystemLoader(str(Path(templates_dir))))
    loaders.append(jinja2.PackageLoader("monitor.notify", "templates"))
    env = SandboxedEnvironment(
        loader=jinja2.ChoiceLoader(loaders),
        autoescape=False,  # plain text and Markdown, never HTML
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,  # as documented above: no stat() of every template file per render
    )
    env.filters["md"] = messages.md_escape
    return env


@functools.lru_cache(maxsize=256)
def _template(templates_dir: str | None, kind: str, part: str) -> jinja2.Template:
    """The template for ``kind``'s ``part``: ``<kind>.<part>`` if a file has it, else the
    generic ``<part>``; looked up once per process (a miss raises inside Jinja every time)."""
    return environment(templates_dir).select_template([f"{kind}.{part}", part])


def _render_part(templates_dir: str | None, kind: str, part: str, context: dict[str, object]) -> str:
    return _template(templates_dir, kind, part).render(context)


def render(facts: AlertFacts, *, templates_dir: str | None = None) -> Message:
    """Render ``facts`` into a title, a plain body, a Markdown body and ``json://`` fields.

    Args:
        facts: what happened (see :class:`monitor.domain.messages.AlertFacts`).
        templates_dir: ``MONITOR_TEMPLATES_DIR``; files there win over the package's.

    Returns:
        The :class:`Message`. The title is one line (newlines collapsed) and at most 300
        characters; bodies end with one newline.

    Raises:
        jinja2.TemplateError: an override template is broken (the package's are tested).
    """
    context = messages.context(facts)
    title, body = _title_and_body(templates_dir, facts.kind, context)
    body_md = _render_part(templates_dir, facts.kind, "body.md.j2", context).strip("\n") + "\n"
    return Message(title=title, body=body, body_markdown=body_md, json_fields=messages.json_fields(facts))


def render_text(facts: AlertFacts, *, templates_dir: str | None = None) -> tuple[str, str]:
    """The title and plain body of :func:`render` alone: what an alert row stores (the
    dispatcher renders every part again from the stored facts when it delivers). The
    Markdown body and the ``json://`` fields are not made: at 10 000 alerts in one sweep they
    were a third of the rendering.

    Args and errors as :func:`render`; returns ``(title, body)``.
    """
    return _title_and_body(templates_dir, facts.kind, messages.context(facts))


def stored_text(title: str, message: str, facts: str | None) -> tuple[str, str]:
    """An alert row's title and plain body: its stored text, or when it stored none, its text
    rendered from its stored facts with the package templates (what it would have stored).

    Alerts raised by the evaluator and the ingest store their facts only: at 10 000 alerts in
    one sweep, rendering text that is read only when someone opens the check's history was a
    quarter of the sweep. Rows from before that stored both.

    Args:
        title: ``alerts.title`` (``""`` when not stored).
        message: ``alerts.message`` (``""`` when not stored).
        facts: ``alerts.facts`` (:func:`monitor.domain.messages.facts_to_json`), or ``None``.

    Returns:
        ``(title, body)``: the title at most 300 characters, the body ending with a newline;
        the stored pair unchanged when the row has a title or no facts.

    Raises:
        ValueError: ``facts`` is not a JSON object of facts.
    """
    if title or not facts:
        return title, message
    return _text_of_facts(facts)


@functools.lru_cache(maxsize=1024)
def _text_of_facts(facts: str) -> tuple[str, str]:
    return render_text(messages.facts_from_json(facts))


def _title_and_body(templates_dir: str | None, kind: str, context: dict[str, object]) -> tuple[str, str]:
    title = " ".join(_render_part(templates_dir, kind, "title.j2", context).split())
    body = _render_part(templates_dir, kind, "body.txt.j2", context).strip("\n") + "\n"
    return title[:300], body
