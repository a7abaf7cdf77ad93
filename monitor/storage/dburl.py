"""``MONITOR_DATABASE_URL`` problems as one line, never a traceback.

Two kinds, with different exit statuses (README, "Exit statuses"):

* :func:`url_problem` — the URL itself is wrong (unparseable, a driver that is not async or
  not supported, a SQLite file in a directory that does not exist): a configuration error,
  found before connecting; the CLI exits 2 like any malformed setting.
* :func:`connect_problem` — a well-formed URL whose database cannot be reached or entered
  (refused port, unknown host, missing database, unknown role, wrong password, unopenable
  SQLite file): the CLI exits 1, as waiting or fixing the server may help.

Messages never contain the URL's password (SQLAlchemy's ``hide_password`` rendering).
"""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

SUPPORTED = {"sqlite": "aiosqlite", "postgresql": "asyncpg"}
"""Backends the service runs on, with their async drivers."""

EXAMPLES = "sqlite+aiosqlite:///PATH or postgresql+asyncpg://USER@HOST:PORT/DATABASE"

_CONNECT_SQLSTATE_CLASSES = ("08", "28", "3D")
"""PostgreSQL SQLSTATE classes of a refused session: connection exception, invalid
authorization (unknown role, wrong password), invalid catalog name (no such database)."""
_CONNECT_SQLSTATES = ("53300", "57P03")
"""Too many connections; the server is starting up or shutting down."""


def safe_url(url: str) -> str:
    """``url`` with its password masked (``***``); the raw text's first 40 characters when it
    does not parse (a URL that does not parse has no recognisable password)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url[:40]


def url_problem(url: str) -> str | None:
    """What is wrong with ``url`` before connecting, or ``None``.

    Checks that it parses, names a supported backend with its async driver (:data:`SUPPORTED`)
    and, for a SQLite file, that the file's directory exists. Touches the file system (one
    ``stat``), never the network.
    """
    try:
        parsed = make_url(url)
    except ArgumentError:
        return f"cannot parse {url[:40]!r} as a database URL (expected {EXAMPLES})"
    backend, _, driver = parsed.drivername.partition("+")
    wanted = SUPPORTED.get(backend)
    if wanted is None:
        return f"unsupported database {parsed.drivername!r} (expected {EXAMPLES})"
    if driver != wanted:
        return (
            f"{parsed.drivername!r} is not an async driver: use {backend}+{wanted}:// (expected {EXAMPLES})"
        )
    if backend == "sqlite" and parsed.database and parsed.database != ":memory:":
        if parsed.query.get("mode") == "memory" or parsed.database.startswith("file:"):
            return None
        folder = Path(parsed.database).expanduser().parent
        if not folder.is_dir():
            return f"the directory {str(folder)!r} of the SQLite file does not exist"
    return None


def connect_problem(error: BaseException, url: str) -> str | None:
    """A one-line description of ``error`` if it means the database at ``url`` could not be
    reached or entered, else ``None`` (then it is some other failure: let it propagate)."""
    for cause in _chain(error):
        detail: str | None = None
        if isinstance(cause, ConnectionRefusedError):
            detail = "connection refused"
        elif isinstance(cause, socket.gaierror):
            detail = f"unknown host ({cause.strerror or cause})"
        elif isinstance(cause, (ConnectionError, TimeoutError)):
            detail = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
        elif isinstance(cause, OSError) and type(cause) is OSError and "connect" in str(cause).lower():
            detail = _flat(str(cause))  # asyncio's "Multiple exceptions: [Errno 111] Connect call failed …"
        elif isinstance(cause, sqlite3.OperationalError) and "unable to open" in str(cause):
            detail = f"cannot open the SQLite file: {cause}"
        else:
            state = str(getattr(cause, "sqlstate", "") or "")
            if state[:2] in _CONNECT_SQLSTATE_CLASSES or state in _CONNECT_SQLSTATES:
                detail = _flat(str(cause))
        if detail is not None:
            return f"cannot connect to {safe_url(url)}: {detail}"
    return None


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException] = [error]
    while todo and len(seen) < 20:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, DBAPIError) and isinstance(current.orig, BaseException):
            todo.append(current.orig)
        for nxt in (current.__cause__, current.__context__):
            if nxt is not None:
                todo.append(nxt)


def _flat(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 300 else line[:297] + "..."
