"""Keyword filters: what a ping's body or an email's subject says it is (Healthchecks' filters).

Pure: no I/O, no clock. The rules are Healthchecks' (``hc/api/models.py``, fields
``filter_subject``, ``filter_body``, ``filter_http_body``, ``filter_default_fail``,
``start_kw``, ``success_kw``, ``failure_kw``; ``manage.py smtpd``):

* Each keyword list is comma-separated; items are stripped of surrounding whitespace and empty
  items are dropped. A list *matches* a text when any item is a substring of it,
  **case-sensitively** (``FAIL`` does not match ``failed``).
* The lists are tried in the order failure → success → start; the first that matches decides.
  When none matches, the ping is ``fail`` if ``filter_default_fail`` is set, else ``ign``
  (stored, no effect).
* ``filter_http_body`` applies to HTTP success pings sent to the bare ping URL (no ``/start``,
  ``/fail``, ``/log``, ``/<exit status>``: an explicit action is what the job said); the text is
  the body, decoded as UTF-8 with replacement. A ping without a body matches nothing.
* ``filter_subject`` / ``filter_body`` apply to email pings; the text is the subject, the body
  (text/plain part, plus the text of a text/html part), or both joined by a newline. An email
  ping of a check with neither flag is a success.
* ``methods: "POST"`` and ``manual_resume`` take precedence (they are applied after this, in
  :func:`monitor.domain.detection.apply_ping`, and turn any run ping into ``ign``).
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.domain.checks import PingKind

KEYWORDS_LIMIT = 200
"""Longest keyword list, in characters (Healthchecks' ``start_kw``/``success_kw``/``failure_kw``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class KeywordFilter:
    """A check's keyword settings (the v3 API fields of the same names).

    Attributes:
        filter_subject: classify email pings by their subject.
        filter_body: classify email pings by their body.
        filter_http_body: classify HTTP success pings (bare ping URL) by their body.
        filter_default_fail: a filtered ping that matches no keyword is ``fail`` (else ``ign``).
        start_kw, success_kw, failure_kw: comma-separated keyword lists.
    """

    filter_subject: bool = False
    filter_body: bool = False
    filter_http_body: bool = False
    filter_default_fail: bool = False
    start_kw: str = ""
    success_kw: str = ""
    failure_kw: str = ""


def split_keywords(text: str) -> tuple[str, ...]:
    """The items of a comma-separated keyword list, stripped, empty items dropped.

    ``"FAIL, ERROR,,"`` → ``("FAIL", "ERROR")``.
    """
    return tuple(item for item in (part.strip() for part in text.split(",")) if item)


def matches(text: str, keywords: str) -> bool:
    """Whether any keyword of the comma-separated list ``keywords`` occurs in ``text`` (case-sensitive)."""
    return any(keyword in text for keyword in split_keywords(keywords))


def classify_text(text: str, rules: KeywordFilter) -> PingKind:
    """The kind of a filtered ping whose text is ``text``: failure, then success, then start keywords.

    Returns:
        ``FAIL``, ``SUCCESS`` or ``START`` for the first list that matches; when none does,
        ``FAIL`` if ``rules.filter_default_fail`` else ``IGN``.
    """
    if matches(text, rules.failure_kw):
        return PingKind.FAIL
    if matches(text, rules.success_kw):
        return PingKind.SUCCESS
    if matches(text, rules.start_kw):
        return PingKind.START
    return PingKind.FAIL if rules.filter_default_fail else PingKind.IGN


def classify_http(
    rules: KeywordFilter, kind: PingKind, exit_status: int | None, body: bytes | None
) -> PingKind:
    """The kind an HTTP ping is stored as, given the URL's ``kind`` and ``exit_status``.

    Args:
        rules: the check's keyword settings.
        kind: what the URL says (``SUCCESS`` for the bare ping URL).
        exit_status: the URL's exit status (``/0`` … ``/255``), or ``None``.
        body: the stored body bytes (already cut to the body limit), or ``None``.

    Returns:
        ``kind`` unchanged unless ``rules.filter_http_body`` is set and the ping is a bare
        success; then :func:`classify_text` of the body decoded as UTF-8 (with replacement).
    """
    if not rules.filter_http_body or kind is not PingKind.SUCCESS or exit_status is not None:
        return kind
    text = body.decode("utf-8", "replace") if body else ""
    return classify_text(text, rules)


def classify_email(rules: KeywordFilter, subject: str, body_text: str) -> PingKind:
    """The kind an email ping is stored as.

    Args:
        rules: the check's keyword settings.
        subject: the decoded ``Subject`` header ("" when absent).
        body_text: the message's text (text/plain part and the text of a text/html part).

    Returns:
        ``SUCCESS`` when neither ``filter_subject`` nor ``filter_body`` is set; otherwise
        :func:`classify_text` of the selected parts joined by a newline.
    """
    if not (rules.filter_subject or rules.filter_body):
        return PingKind.SUCCESS
    chunks = []
    if rules.filter_subject:
        chunks.append(subject)
    if rules.filter_body:
        chunks.append(body_text)
    return classify_text("\n".join(chunks), rules)
