"""Dashboard users, their projects and login sessions (DESIGN §9).

Passwords are hashed with argon2id (``argon2-cffi``'s defaults, RFC 9106's second
recommended profile). A session is a random token held in an HttpOnly cookie; only its SHA-256
is stored, next to the session's CSRF token. Login throttling: after :data:`MAX_FAILED_LOGINS`
consecutive wrong passwords the account refuses logins for :data:`LOCKOUT` (doubling with each
further failure, capped at one hour), as OWASP's authentication cheat sheet advises.
An email no account has is throttled by the same rule, so the answers (400, then 429 with the
same ``Retry-After``) do not reveal which accounts exist: its counter lives in a
:class:`LoginThrottle` kept in memory by the serving process (no table holds unknown emails;
real accounts keep theirs in ``users``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
import secrets
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from monitor.domain.cron import schedules
from monitor.domain.errors import Conflict, NotFound, ValidationError, ZoneError
from monitor.services import zone_names
from monitor.storage.ports import DuplicateKey
from monitor.storage.unit_of_work import Connection, Engine, UnitOfWork

SESSION_TTL = timedelta(days=14)
MAX_FAILED_LOGINS = 5
LOCKOUT = timedelta(seconds=30)
MAX_LOCKOUT = timedelta(hours=1)
MIN_PASSWORD = 8
# no whitespace and no control character (NUL included: PostgreSQL text cannot hold it)
EMAIL = re.compile(r"^[^@\s\x00-\x1f\x7f]{1,64}@[^@\s\x00-\x1f\x7f]{1,189}$")

_hasher = PasswordHasher()


@functools.cache
def _dummy_hash() -> str:
    """Verified against when the email is unknown, so a wrong email costs as long as a wrong
    password. Computed on first use (an argon2 hash takes ~0.1-1 s): importing this module, as
    every process does, must not pay for it."""
    return _hasher.hash("not a password of anyone")


@dataclass(frozen=True, kw_only=True, slots=True)
class User:
    """A logged-in user: id, email, the ids of the projects they may see, the ids of those they
    administer (manage their users), and the IANA zone their pages show times in (``""``: UTC)."""

    id: int
    email: str
    project_ids: tuple[int, ...]
    admin_project_ids: tuple[int, ...] = ()
    tz: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Session:
    """A live session: its user and the CSRF token every form of the session must carry."""

    user: User
    csrf_token: str


@dataclass(frozen=True, kw_only=True, slots=True)
class LoginResult:
    """``token`` (cookie value) on success; else ``error`` and, when throttled, ``retry_after`` (s)."""

    token: str | None = None
    error: str | None = None
    retry_after: int | None = None


def _lock_for(failed: int, now: datetime) -> datetime | None:
    """When ``failed`` consecutive wrong logins lock an account (or an unknown email) until."""
    if failed < MAX_FAILED_LOGINS:
        return None
    factor: int = 2 ** min(failed - MAX_FAILED_LOGINS, 20)
    return now + min(MAX_LOCKOUT, LOCKOUT * factor)


def _throttled(locked_until: datetime | None, now: datetime) -> LoginResult | None:
    if locked_until is None or locked_until <= now:
        return None
    wait = int((locked_until - now).total_seconds()) + 1
    return LoginResult(error=f"too many failed logins; try again in {wait} s", retry_after=wait)


class LoginThrottle:
    """Failed-login counters of emails no account has, keyed by the normalized email's SHA-256,
    in memory (one per serving process; the oldest of more than ``size`` entries are dropped).

    Same rule as accounts: :data:`MAX_FAILED_LOGINS` failures lock for :data:`LOCKOUT`,
    doubling per further failure, at most :data:`MAX_LOCKOUT`.
    """

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._entries: OrderedDict[str, tuple[int, datetime | None]] = OrderedDict()

    @staticmethod
    def _key(email: str) -> str:
        return hashlib.sha256(email.strip().lower().encode()).hexdigest()

    def locked_until(self, email: str) -> datetime | None:
        entry = self._entries.get(self._key(email))
        return entry[1] if entry is not None else None

    def fail(self, email: str, now: datetime) -> None:
        key = self._key(email)
        failed = self._entries.pop(key, (0, None))[0] + 1
        self._entries[key] = (failed, _lock_for(failed, now))
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)


_PROCESS_THROTTLE = LoginThrottle()


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def validate_email(email: str) -> str:
    """Lower-cased, stripped email. Raises ValidationError naming ``email``."""
    value = email.strip().lower()
    if not EMAIL.match(value):
        raise ValidationError("email", "must look like name@example.com (at most 254 characters)")
    return value


def validate_password(password: str) -> None:
    """Raises ValidationError naming ``password`` when shorter than 8 characters or over 1024."""
    if not MIN_PASSWORD <= len(password) <= 1024:
        raise ValidationError("password", f"must be {MIN_PASSWORD}-1024 characters long")


async def project_ids_by_names(conn: Connection, names: list[str]) -> list[int]:
    """Ids of the projects with these names (every project of a repeated name).

    Raises:
        ValidationError: ``project: no project named …``.
    """
    out: list[int] = []
    uow = UnitOfWork.joining(conn)
    for name in names:
        ids = await uow.projects.ids_named(name)
        if not ids:
            raise ValidationError(
                "project", f"no project named {name!r} (create it with `monitor project create`)"
            )
        out.extend(ids)
    return list(dict.fromkeys(out))


async def add_admin(
    engine: Engine, email: str, password: str, project_names: list[str], now: datetime
) -> dict[str, object]:
    """Create a user who administers the named projects (``monitor user create``: the
    operator's first users manage the others), in a unit of work of its own.

    Raises:
        ValidationError, Conflict: as :func:`project_ids_by_names` and :func:`create_user`.
    """
    async with UnitOfWork.begin(engine) as uow:
        project_ids = await project_ids_by_names(uow.connection, project_names)
        return await create_user(uow.connection, email, password, project_ids, now, admin=True)


async def create_user(
    conn: Connection,
    email: str,
    password: str,
    project_ids: list[int],
    now: datetime,
    *,
    admin: bool = False,
) -> dict[str, object]:
    """Create a user linked to ``project_ids`` (as their admin when ``admin``); returns
    ``{"id", "email", "projects"}``.

    Raises:
        ValidationError: bad ``email`` or ``password``. Conflict: the email is taken.
    """
    email = validate_email(email)
    validate_password(password)
    uow = UnitOfWork.joining(conn)
    try:
        user_id = await uow.users.insert(
            {"email": email, "password_hash": _hasher.hash(password), "created_at": now, "failed_logins": 0}
        )
    except DuplicateKey:
        raise Conflict("email: a user with this email exists") from None
    await uow.users.add_memberships(user_id, project_ids, admin=admin)
    names = await uow.projects.names(project_ids)
    return {"id": user_id, "email": email, "projects": names}


async def log_in(
    conn: Connection,
    email: str,
    password: str,
    now: datetime,
    throttle: LoginThrottle | None = None,
) -> LoginResult:
    """Check a password; on success open a session (the returned token goes in the cookie).

    A locked account (throttled) is refused without looking at the password; an unknown email
    is throttled alike through ``throttle`` (default: one per process), so a 429 does not tell
    that an account exists. An email holding NUL is an unknown one.
    """
    uow = UnitOfWork.joining(conn)
    normalized = email.strip().lower()
    # no account's email holds a NUL (refused when created), and PostgreSQL cannot compare one
    row = None if "\x00" in normalized else await uow.users.by_email(normalized)
    wrong = LoginResult(error="wrong email or password")
    if row is None:
        unknown = throttle if throttle is not None else _PROCESS_THROTTLE
        refused = _throttled(unknown.locked_until(email), now)
        if refused is not None:
            return refused
        with contextlib.suppress(VerificationError):
            _hasher.verify(_dummy_hash(), password)
        unknown.fail(email, now)
        return wrong
    refused = _throttled(row["locked_until"], now)
    if refused is not None:
        return refused
    try:
        _hasher.verify(row["password_hash"], password)
    except (VerificationError, InvalidHashError):
        failed = row["failed_logins"] + 1
        await uow.users.update(row["id"], {"failed_logins": failed, "locked_until": _lock_for(failed, now)})
        return wrong
    changes: dict[str, object] = {"failed_logins": 0, "locked_until": None}
    if _hasher.check_needs_rehash(row["password_hash"]):
        changes["password_hash"] = _hasher.hash(password)
    await uow.users.update(row["id"], changes)
    token = secrets.token_urlsafe(32)
    await uow.users.add_session(
        {
            "token_hash": token_hash(token),
            "user_id": row["id"],
            "csrf_token": secrets.token_urlsafe(32),
            "created_at": now,
            "expires_at": now + SESSION_TTL,
        }
    )
    return LoginResult(token=token)


async def session_of(conn: Connection, token: str, now: datetime) -> Session | None:
    """The live session of a cookie token, or ``None`` (unknown or expired)."""
    uow = UnitOfWork.joining(conn)
    row = await uow.users.session(token_hash(token), now)
    if row is None:
        return None
    memberships = await uow.users.memberships(row[0])
    user = User(
        id=row[0],
        email=row[2],
        project_ids=tuple(m[0] for m in memberships),
        admin_project_ids=tuple(m[0] for m in memberships if m[1]),
        tz=row[3] or "",
    )
    return Session(user=user, csrf_token=row[1])


async def log_out(conn: Connection, token: str, now: datetime) -> None:
    """End the cookie's session, and drop every expired session while at it."""
    await UnitOfWork.joining(conn).users.end_session(token_hash(token), now)


# -- project membership, managed by project admins (the dashboard's users page) -----------------


async def list_members(conn: Connection, project_ids: Sequence[int]) -> list[dict[str, Any]]:
    """The users of ``project_ids``: ``[{"id", "email", "projects": {project_id: is_admin}}]``
    (only memberships of those projects), ordered by email."""
    out: dict[int, dict[str, Any]] = {}
    for user_id, email, project_id, is_admin in await UnitOfWork.joining(conn).users.members(project_ids):
        entry = out.setdefault(user_id, {"id": user_id, "email": email, "projects": {}})
        entry["projects"][project_id] = bool(is_admin)
    return list(out.values())


async def set_membership(
    conn: Connection, user_id: int, project_id: int, *, member: bool, admin: bool = False
) -> None:
    """Add ``user_id`` to ``project_id`` (as admin when ``admin``), change their role, or remove
    them (``member=False``). A user left without any project is deleted with their sessions.

    Raises:
        NotFound: no such user. Conflict: the change would leave the project without an admin
            (every project keeps one, so its users can still be managed).
    """
    uow = UnitOfWork.joining(conn)
    if not await uow.users.exists(user_id):
        raise NotFound("user: no such user")
    current = await uow.users.membership(user_id, project_id)
    losing_admin = bool(current) and (not member or not admin)
    if losing_admin and await uow.users.admins_other_than(project_id, user_id) == 0:
        raise Conflict(
            "user: the project's last admin cannot be removed or demoted; make another admin first"
        )
    if not member:
        await uow.users.remove_membership(user_id, project_id)
        if not await uow.users.memberships(user_id):
            await uow.users.delete(user_id)
        return
    if current is None:
        await uow.users.add_memberships(user_id, [project_id], admin=admin)
    else:
        await uow.users.set_admin(user_id, project_id, admin)


async def user_id_by_email(conn: Connection, email: str) -> int:
    """The id of the user with this email.

    Raises:
        ValidationError: a malformed ``email``. NotFound: no user has it.
    """
    value = validate_email(email)
    found = await UnitOfWork.joining(conn).users.by_email(value)
    if found is None:
        raise NotFound("email: no user with this email; create the user instead")
    return int(found["id"])


async def set_zone(conn: Connection, user_id: int, tz: str) -> str:
    """Store the zone the user's pages show times in: an IANA name, or ``""`` / ``UTC``
    (stored as ``""``: the default, UTC).

    The name is judged as a check's ``tz`` is (:func:`monitor.services.checks.parse_check_fields`):
    at most 64 characters, a legacy link becomes its current name
    (:func:`monitor.services.zone_names.canonical_zone`), then
    :func:`monitor.domain.cron.schedules.validate_zone`.

    Returns:
        The stored name (``""`` for UTC).

    Raises:
        ValidationError: naming ``tz``, for a name longer than 64 characters or a zone the
            system does not know (or a fixed offset).
    """
    value = tz.strip()
    if len(value) > 64:
        raise ValidationError("tz", f"must be at most 64 characters, got {len(value)}")
    value = zone_names.canonical_zone(value)
    if value in ("", "UTC", "Etc/UTC"):
        value = ""
    else:
        try:
            schedules.validate_zone(value)
        except ZoneError as error:
            raise ValidationError("tz", str(error)) from None
    await UnitOfWork.joining(conn).users.update(user_id, {"tz": value})
    return value


# -- the dashboard's users and account pages: one unit of work each -----------------------------


async def members_overview(
    engine: Engine, project_ids: Sequence[int]
) -> tuple[dict[int, str], list[dict[str, Any]]]:
    """``({project id: name}, members)`` of ``project_ids`` (members as :func:`list_members`)."""
    async with UnitOfWork.read(engine) as uow:
        names = await uow.dashboard.project_names(project_ids)
        return names, await list_members(uow.connection, project_ids)


async def add_user(
    engine: Engine, email: str, password: str, project_ids: list[int], now: datetime, *, admin: bool
) -> None:
    """:func:`create_user` in a transaction of its own.

    Raises:
        ValidationError: bad ``email`` or ``password``. Conflict: the email is taken.
    """
    async with UnitOfWork.begin(engine) as uow:
        await create_user(uow.connection, email, password, project_ids, now, admin=admin)


MEMBERSHIP_ACTIONS = ("add", "admin", "member", "remove")
"""What :func:`change_membership` does: add a user, make them admin or a plain member, remove them."""


async def change_membership(engine: Engine, project_id: int, *, user: str, email: str, action: str) -> None:
    """Add a user to ``project_id``, change their role or remove them (``action``, one of
    :data:`MEMBERSHIP_ACTIONS`; :func:`set_membership`). The user is ``user`` (an id, as
    decimal digits; one listed in the project unless adding) or else the one with ``email``.

    Raises:
        NotFound: the user is not a member (by id) or has no account (by email).
        ValidationError: an unknown ``action``, a bad email. Conflict: as :func:`set_membership`.
    """
    async with UnitOfWork.begin(engine) as uow:
        conn = uow.connection
        if user.isdigit():
            user_id = int(user)
            listed = await list_members(conn, [project_id])
            if action != "add" and all(m["id"] != user_id for m in listed):
                raise NotFound("user: not a member of this project")
        else:
            user_id = await user_id_by_email(conn, email)
        if action not in MEMBERSHIP_ACTIONS:
            raise ValidationError("action", "must be add, admin, member or remove")
        await set_membership(conn, user_id, project_id, member=action != "remove", admin=action == "admin")


async def save_zone(engine: Engine, user_id: int, tz: str) -> str:
    """:func:`set_zone` in a transaction of its own; the stored zone (``""``: the default).

    Raises:
        ValidationError: not a zone the forms offer.
    """
    async with UnitOfWork.begin(engine) as uow:
        return await set_zone(uow.connection, user_id, tz)


async def find_session(engine: Engine, token: str, now: datetime) -> Session | None:
    """:func:`session_of` in a read of its own."""
    async with UnitOfWork.read(engine) as uow:
        return await session_of(uow.connection, token, now)


async def sign_in(
    engine: Engine, email: str, password: str, now: datetime, *, throttle: LoginThrottle
) -> LoginResult:
    """:func:`log_in` in a transaction of its own (committed whatever the result: a failed
    attempt is counted)."""
    async with UnitOfWork.begin(engine) as uow:
        return await log_in(uow.connection, email, password, now, throttle=throttle)


async def sign_out(engine: Engine, token: str, now: datetime) -> None:
    """:func:`log_out` in a transaction of its own."""
    async with UnitOfWork.begin(engine) as uow:
        await log_out(uow.connection, token, now)
