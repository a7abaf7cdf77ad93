"""Dashboard login: session cookies, CSRF tokens, the login and logout pages.

* The session cookie ``monitor_session`` holds a random token (the database keeps its SHA-256);
  it is ``HttpOnly``, ``SameSite=Lax``, and ``Secure`` when ``MONITOR_BASE_URL`` is https.
* CSRF: every form of a logged-in user carries the session's token (``csrf_token`` field),
  compared in constant time. The login form, used before any session exists, carries a
  double-submit token: a random value in the ``monitor_csrf`` cookie and in the form.
* An anonymous visitor of a page is redirected to ``/login?next=<page>``.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from http import HTTPStatus
from typing import Any
from urllib.parse import quote, urlsplit

from litestar import Controller, HttpMethod, Request, Response, post, route
from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie, ResponseHeader
from litestar.exceptions import HTTPException
from litestar.exceptions import ValidationException as LitestarValidation
from litestar.handlers.base import BaseRouteHandler
from litestar.response import Redirect, Template
from litestar.types import ExceptionHandlersMap

from monitor.domain.errors import Conflict, MonitorError, NotFound, ScheduleError, ValidationError, ZoneError
from monitor.edge import services_of
from monitor.services import users
from monitor.settings import Settings

SESSION_COOKIE = "monitor_session"
LOGIN_CSRF_COOKIE = "monitor_csrf"
logger = logging.getLogger(__name__)

Req = Request[Any, Any, Any]


class LoginRequired(Exception):
    """Raised by :func:`require_session` for an anonymous visitor; answered with a redirect."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


class CsrfRejected(Exception):
    """A form came without the right CSRF token; answered with 403."""


def _secure(settings: Settings) -> bool:
    return settings.base_url.lower().startswith("https://")


def session_cookie(settings: Settings, value: str, *, max_age: int | None) -> Cookie:
    """The session cookie (``max_age`` 0 deletes it)."""
    return Cookie(
        key=SESSION_COOKIE,
        value=value,
        path="/",
        httponly=True,
        samesite="lax",
        secure=_secure(settings),
        max_age=max_age,
    )


def safe_next(value: str | None) -> str:
    """A local path to go to after login (never another site: no ``//host`` nor a scheme)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


async def current_session(request: Req) -> users.Session | None:
    """The request's live session, or ``None``."""
    token = request.cookies.get(SESSION_COOKIE)
    if not token:
        return None
    services = services_of(request.app.state)
    return await users.find_session(services.engine, token, services.clock.now())


async def require_session(request: Req) -> users.Session:
    """The request's session (looked up once per request: :func:`csrf_guard` may have).

    Raises:
        LoginRequired: no live session (the page redirects to ``/login?next=…``).
    """
    session = request.scope.get("state", {}).get("monitor_session")
    if not isinstance(session, users.Session):
        session = await current_session(request)
        if session is not None:
            request.scope.setdefault("state", {})["monitor_session"] = session
    if session is None:
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise LoginRequired(path)
    return session


NOT_PAGES = ("/api/", "/ping/", "/b/", "/badge/", "/metrics", "/health", "/ready", "/schema", "/static/")
"""Path prefixes that are never a dashboard page (no session is looked up for them)."""


def load_page_session(app: Any) -> Any:
    """ASGI middleware: a page request carrying a session cookie has its live session looked up
    before routing and kept where :func:`require_session` finds it (one lookup per request).

    Exception handlers are synchronous and cannot look it up themselves: with it there, an error
    page (404, 403, 500 …) shows a signed-in user the same navigation as every other page
    (:func:`page_session`). A failed lookup leaves the request without one (the handler then
    answers as for a signed-out user)."""

    async def middleware(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not scope["path"].startswith(NOT_PAGES):
            request: Req = Request(scope, receive)
            if request.cookies.get(SESSION_COOKIE):
                try:
                    session = await current_session(request)
                except Exception:  # the database is down: the page's own lookup will say so
                    logger.warning("session lookup failed", extra={"action": "session_lookup"})
                    session = None
                if session is not None:
                    scope.setdefault("state", {})["monitor_session"] = session
        await app(scope, receive, send)

    return middleware


def page_session(request: Req) -> users.Session | None:
    """The session :func:`load_page_session` (or :func:`require_session`) found, or ``None``."""
    session = request.scope.get("state", {}).get("monitor_session")
    return session if isinstance(session, users.Session) else None


def check_csrf(given: str | None, expected: str | None) -> None:
    """Raises CsrfRejected unless ``given`` equals ``expected`` (constant-time)."""
    if not given or not expected or not hmac.compare_digest(given.encode(), expected.encode()):
        raise CsrfRejected()


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CSRF_HEADER = "X-CSRF-Token"


async def csrf_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Guard of every dashboard controller: a request that may write (any method but GET, HEAD,
    OPTIONS) needs a live session and its CSRF token, in the form's ``csrf_token`` field or the
    ``X-CSRF-Token`` header (the pages' scripts). Handlers then never check it themselves.

    Raises:
        LoginRequired: no live session. CsrfRejected: the token is missing or wrong.
    """
    if connection.scope.get("method", "GET") in SAFE_METHODS:
        return
    request: Req = Request(connection.scope, connection.receive)
    session = await require_session(request)
    given = request.headers.get(CSRF_HEADER)
    if not given:
        value = (await request.form()).get("csrf_token")
        given = value if isinstance(value, str) else None
    check_csrf(given, session.csrf_token)


def redirect_to_login(request: Req, error: LoginRequired) -> Response[Any]:
    if request.method in SAFE_METHODS:
        return Redirect(path="/login", query_params={"next": error.next_path}, status_code=303)
    # a form posted after the session ended (logged out in another tab, expired): nothing was
    # saved; the login page says so and leads back to the page the form came from (the
    # same-origin Referer; never to a POST URL)
    return Redirect(
        path="/login", query_params={"next": _referring_page(request), "ended": "1"}, status_code=303
    )


def _referring_page(request: Req) -> str:
    """The path and query of a same-origin ``Referer``, else ``/``."""
    referer = urlsplit(request.headers.get("referer", ""))
    if referer.netloc != request.url.netloc or referer.path.startswith("/login"):
        return "/"
    return safe_next(referer.path + (f"?{referer.query}" if referer.query else ""))


def csrf_rejected(request: Req, error: CsrfRejected) -> Response[Any]:
    return Template(
        template_name="error.html",
        context={
            "title": "Form expired",
            "message": "The form's security token is missing or stale (CSRF protection). "
            "Go back, reload the page and try again.",
            "session": None,
        },
        status_code=403,
    )


def _error_page(request: Req, title: str, message: str, status: int) -> Response[Any]:
    session = page_session(request)
    return Template(
        template_name="error.html",
        context={
            "title": title,
            "message": message,
            "session": session,
            "csrf_token": session.csrf_token if session else "",
            "status": status,
        },
        status_code=status,
        headers={"Cache-Control": "no-store"},
    )


def html_http_error(request: Req, error: HTTPException) -> Response[Any]:
    """Litestar's own errors (bad query parameter, 405 …) as an HTML page with their status."""
    if isinstance(error, LitestarValidation):
        return _error_page(request, "Bad request", f"request: {error.detail}", 400)
    return _error_page(request, HTTPStatus(error.status_code).phrase, str(error.detail), error.status_code)


def html_domain_error(request: Req, error: MonitorError) -> Response[Any]:
    """A domain error raised under a page: 404 for NotFound, 409 Conflict, else 400."""
    if isinstance(error, NotFound):
        return _error_page(request, "Not found", str(error), 404)
    if isinstance(error, Conflict):
        return _error_page(request, "Conflict", str(error), 409)
    return _error_page(request, "Bad request", str(error), 400)


def html_unexpected(request: Req, error: Exception) -> Response[Any]:
    """Anything else: logged with its stack trace, answered with an HTML 500 page (pages answer
    HTML, never the API's JSON error)."""
    logger.exception("unhandled error", extra={"action": "unhandled_error", "path": request.url.path})
    return _error_page(
        request, "Something went wrong", "An internal error occurred; it has been logged.", 500
    )


SECURITY_HEADERS = [
    # no framing (clickjacking), scripts only from /static, colours as inline style attributes
    ResponseHeader(name="X-Frame-Options", value="DENY"),
    ResponseHeader(
        name="Content-Security-Policy",
        value="default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    ),
    ResponseHeader(name="Referrer-Policy", value="same-origin"),
    ResponseHeader(name="X-Content-Type-Options", value="nosniff"),
    # a page of a logged-in user must not come back from the cache after logout (back button)
    ResponseHeader(name="Cache-Control", value="no-store"),
]
"""Headers of every dashboard page."""

EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    # pages answer errors as HTML; the most specific class wins over the app's JSON handlers
    HTTPException: html_http_error,
    LitestarValidation: html_http_error,
    MonitorError: html_domain_error,
    ValidationError: html_domain_error,
    ScheduleError: html_domain_error,
    ZoneError: html_domain_error,
    NotFound: html_domain_error,
    Conflict: html_domain_error,
    Exception: html_unexpected,
    LoginRequired: redirect_to_login,
    CsrfRejected: csrf_rejected,
}


def login_throttle(request: Req) -> users.LoginThrottle:
    """The app's counters of failed logins to unknown emails (one per app, in memory)."""
    state = request.app.state
    found = state.get("login_throttle")
    if not isinstance(found, users.LoginThrottle):
        found = users.LoginThrottle()
        state["login_throttle"] = found
    return found


def _login_page(
    settings: Settings,
    *,
    next_path: str,
    email: str = "",
    error: str | None = None,
    status: int = 200,
    headers: dict[str, str] | None = None,
    ended: bool = False,
) -> Template:
    token = secrets.token_urlsafe(32)
    context = {"csrf_token": token, "next": next_path, "email": email, "error": error, "session": None}
    return Template(
        template_name="login.html",
        context={**context, "ended": ended},
        status_code=status,
        headers=headers,
        cookies=[
            Cookie(
                key=LOGIN_CSRF_COOKIE,
                value=token,
                path="/login",
                httponly=True,
                samesite="strict",
                secure=_secure(settings),
                max_age=3600,
            )
        ],
    )


class LoginController(Controller):
    """``/login`` and ``/logout``."""

    path = "/"
    include_in_schema = False
    exception_handlers = EXCEPTION_HANDLERS
    response_headers = SECURITY_HEADERS

    @route("/login", http_method=[HttpMethod.GET, HttpMethod.HEAD])
    async def login_form(self, request: Req, next: str | None = None, ended: str = "") -> Response[Any]:
        """``?ended=1``: a form was sent after the session ended (said, nothing was saved)."""
        session = await current_session(request)
        if session is not None:
            return Redirect(path=safe_next(next), status_code=303)
        return _login_page(
            services_of(request.app.state).settings, next_path=safe_next(next), ended=ended == "1"
        )

    @post("/login", status_code=303)
    async def login(self, request: Req) -> Response[Any]:
        services = services_of(request.app.state)
        form = await request.form()
        check_csrf(form.get("csrf_token"), request.cookies.get(LOGIN_CSRF_COOKIE))
        email = str(form.get("email") or "")
        password = str(form.get("password") or "")
        next_path = safe_next(str(form.get("next") or "/"))
        result = await users.sign_in(
            services.engine, email, password, services.clock.now(), throttle=login_throttle(request)
        )
        if result.token is None:
            status = 429 if result.retry_after is not None else 400
            headers = {"Retry-After": str(result.retry_after)} if result.retry_after is not None else None
            return _login_page(
                services.settings,
                next_path=next_path,
                email=email,
                error=result.error,
                status=status,
                headers=headers,
            )
        return Redirect(
            path=next_path,
            status_code=303,
            cookies=[
                session_cookie(
                    services.settings, result.token, max_age=int(users.SESSION_TTL.total_seconds())
                ),
                Cookie(key=LOGIN_CSRF_COOKIE, value="", path="/login", max_age=0),
            ],
        )

    @post("/logout", status_code=303)
    async def logout(self, request: Req) -> Response[Any]:
        services = services_of(request.app.state)
        session = await require_session(request)
        form = await request.form()
        check_csrf(form.get("csrf_token"), session.csrf_token)
        token = request.cookies.get(SESSION_COOKIE, "")
        await users.sign_out(services.engine, token, services.clock.now())
        return Redirect(
            path="/login", status_code=303, cookies=[session_cookie(services.settings, "", max_age=0)]
        )


def login_url(next_path: str) -> str:
    return "/login?next=" + quote(next_path, safe="/")
