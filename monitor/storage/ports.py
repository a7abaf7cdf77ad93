"""The storage ports: one protocol per aggregate, what the services may ask of the database.

A port speaks in plain values (dicts of column values, ids, domain values), never rows that
could lazy-load, and never exposes SQLAlchemy: a service holding a
:class:`monitor.storage.unit_of_work.UnitOfWork` reaches the database only through these.
The one implementation of each (:mod:`monitor.storage.stores`; :mod:`~monitor.storage.dashboard_reads`
and :mod:`~monitor.storage.maintenance_store` for the last two) serves SQLite and PostgreSQL;
``tests/storage_contract/`` runs every method against both.

Every method runs inside the unit of work's transaction; none commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from monitor.domain.runs import RunBook

if TYPE_CHECKING:
    from monitor.storage.outbox import NewAlert


class DuplicateKey(Exception):
    """A write hit a unique constraint (a slug or an email another transaction took meanwhile).

    The store rolls its savepoint back, so the unit of work stays usable; the service turns it
    into the :class:`monitor.domain.errors.Conflict` the use case names.
    """


class CheckStore(Protocol):
    """The checks aggregate: check rows (config and detection state) and their run summaries."""

    async def insert(self, values: Mapping[str, Any]) -> int:
        """Insert one check row (column values); returns its id. Raises :class:`DuplicateKey`."""
        ...

    async def insert_many(self, rows: Sequence[Mapping[str, Any]]) -> list[int]:
        """Insert rows in one statement (missing columns take their defaults); the new ids in
        the order given.

        Args:
            rows: column values per check, each with its (unique) ``uuid``.

        Raises:
            DuplicateKey: a uuid or slug is taken (no row is inserted).
        """
        ...

    async def update(self, check_id: int, changes: Mapping[str, Any]) -> None:
        """Set columns of one check. Raises :class:`DuplicateKey`."""
        ...

    async def delete(self, check_id: int) -> None:
        """Delete a check with its pings, runs, tick marks, flips, channel links, alerts and
        their notifications and attempts."""
        ...

    async def get(self, project_id: int, uuid: str, *, lock: bool = False) -> dict[str, Any] | None:
        """The project's check with this (lower-case) uuid, or ``None``; ``lock``: PostgreSQL
        ``FOR UPDATE`` (SQLite's ``BEGIN IMMEDIATE`` already excludes other writers)."""
        ...

    async def by_ids(self, check_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The rows of these checks by id (unknown ids are absent)."""
        ...

    async def uuids(self, project_id: int) -> list[str]:
        """Every uuid of the project's checks, oldest first."""
        ...

    async def query(
        self,
        project_id: int,
        *,
        tags: Sequence[str] = (),
        slug: str | None = None,
        after_id: int | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """The project's checks by id, filtered in SQL: every tag in ``tags`` is a whole word of
        the space-separated ``tags`` column; ``slug`` equal; id above ``after_id``; at most
        ``limit`` rows."""
        ...

    async def first_match(self, project_id: int, fields: Mapping[str, Any]) -> int | None:
        """The lowest id among the project's checks whose columns equal ``fields``."""
        ...

    async def slug_taken(self, project_id: int, slug: str, *, except_id: int | None = None) -> bool:
        """Whether another check of the project (not ``except_id``) has this slug."""
        ...

    async def first_taken_slug(self, project_id: int, slugs: Sequence[str]) -> str | None:
        """One of ``slugs`` a check of the project has already, or ``None``."""
        ...

    async def started_runs(self, check_ids: Sequence[int]) -> list[tuple[int, datetime]]:
        """``(check id, started_at)`` of the checks' open runs that have started."""
        ...

    async def last_pauses(self, check_ids: Sequence[int]) -> list[tuple[int, str, datetime]]:
        """``(check id, "paused" | "resumed", latest flip instant)`` for each check and reason."""
        ...

    async def oldest_due(self) -> datetime | None:
        """The earliest ``next_due`` of every check (any project, any shard), or ``None``."""
        ...

    async def escalating_to(self, project_id: int, channel_id: str) -> list[tuple[str, str, str]]:
        """``(uuid, name, escalate_to)`` of the project's checks whose ``escalate_to`` mentions
        ``channel_id`` (a substring match: the caller splits the list)."""
        ...


class ChannelStore(Protocol):
    """The channels aggregate: a project's channels and the check → channel links."""

    async def insert(self, values: Mapping[str, Any]) -> None:
        """Insert one channel row (``id``, ``project_id``, ``name``, ``url``, ``kinds``,
        ``is_default``, ``created_at``)."""
        ...

    async def get(self, project_id: int, channel_id: str) -> dict[str, Any] | None:
        """The project's channel, or ``None``."""
        ...

    async def of_project(self, project_id: int) -> list[dict[str, Any]]:
        """The project's channels, oldest first."""
        ...

    async def names(self, project_id: int, *, lock: bool = False) -> list[tuple[str, str]]:
        """``(id, name)`` of the project's channels. ``lock``: on PostgreSQL hold ``FOR KEY
        SHARE`` on them until the transaction ends, so a channel about to be linked to a check
        cannot be deleted meanwhile (a concurrent delete waits; SQLite serializes writers)."""
        ...

    async def default_ids(self, project_id: int, *, lock: bool = False) -> list[str]:
        """Ids of the project's default channels; ``lock`` as :meth:`names`."""
        ...

    async def update(self, channel_id: str, values: Mapping[str, Any]) -> None:
        """Set columns of one channel (nothing when ``values`` is empty)."""
        ...

    async def delete(self, channel_id: str) -> None:
        """Delete a channel, its check links, its notifications and their attempts."""
        ...

    async def assign(self, check_id: int, channel_ids: Sequence[str], *, replace: bool = True) -> None:
        """Link the check to ``channel_ids`` (duplicates dropped); ``replace``: drop its other
        links first (``False`` for a check that has none yet)."""
        ...

    async def assign_many(self, links: Sequence[tuple[int, str]]) -> None:
        """Insert ``(check id, channel id)`` links in one statement."""
        ...

    async def of_checks(self, check_ids: Sequence[int]) -> dict[int, list[str]]:
        """Per check id (every one given), the ids of its channels."""
        ...


class ProjectStore(Protocol):
    """The projects aggregate: projects and their hashed API keys."""

    async def insert(self, values: Mapping[str, Any]) -> int:
        """Insert a project row; returns its id."""
        ...

    async def insert_keys(self, keys: Sequence[Mapping[str, Any]]) -> None:
        """Insert ``api_keys`` rows (``project_id``, ``key_hash``, ``read_only``, ``name``,
        ``created_at``). Raises :class:`DuplicateKey` (a key another project has)."""
        ...

    async def count(self) -> int:
        """How many projects exist."""
        ...

    async def key(self, key_hash: str) -> tuple[int, bool] | None:
        """``(project id, read_only)`` of the key with this SHA-256 hex, or ``None``."""
        ...

    async def ids_named(self, name: str) -> list[int]:
        """Ids of the projects with this name, ascending."""
        ...

    async def names(self, project_ids: Sequence[int]) -> list[str]:
        """Names of these projects, by id."""
        ...

    async def lock(self, project_id: int) -> None:
        """PostgreSQL: lock the project row ``FOR NO KEY UPDATE`` until the transaction ends,
        which serialises the creators of its checks (upserts, slug auto-creation) and leaves
        the row's key alone: inserts whose foreign key names the project (``FOR KEY SHARE``)
        do not wait for it. SQLite: nothing (``BEGIN IMMEDIATE`` already)."""
        ...


class UserStore(Protocol):
    """The users aggregate: dashboard users, their project memberships and login sessions."""

    async def insert(self, values: Mapping[str, Any]) -> int:
        """Insert a user row; returns its id. Raises :class:`DuplicateKey` (email taken)."""
        ...

    async def by_email(self, email: str) -> dict[str, Any] | None:
        """The user row with this (normalized) email, or ``None``."""
        ...

    async def exists(self, user_id: int) -> bool:
        """Whether a user has this id."""
        ...

    async def update(self, user_id: int, changes: Mapping[str, Any]) -> None:
        """Set columns of one user."""
        ...

    async def delete(self, user_id: int) -> None:
        """Delete a user and their sessions (not their memberships: remove those first)."""
        ...

    async def add_session(self, values: Mapping[str, Any]) -> None:
        """Insert a ``web_sessions`` row."""
        ...

    async def session(self, token_hash: str, now: datetime) -> tuple[int, str, str, str | None] | None:
        """``(user id, csrf token, email, tz)`` of the unexpired session, or ``None``."""
        ...

    async def end_session(self, token_hash: str, now: datetime) -> None:
        """Delete this session and every session expired at ``now``."""
        ...

    async def memberships(self, user_id: int) -> list[tuple[int, bool]]:
        """``(project id, is_admin)`` of the user's projects, by project id."""
        ...

    async def membership(self, user_id: int, project_id: int) -> bool | None:
        """``is_admin`` of the user's membership of the project, ``None`` when not a member."""
        ...

    async def add_memberships(self, user_id: int, project_ids: Sequence[int], *, admin: bool) -> None:
        """Make the user a member (admin when ``admin``) of these projects."""
        ...

    async def set_admin(self, user_id: int, project_id: int, admin: bool) -> None:
        """Change the role of an existing membership."""
        ...

    async def remove_membership(self, user_id: int, project_id: int) -> None:
        """End the user's membership of the project."""
        ...

    async def admins_other_than(self, project_id: int, user_id: int) -> int:
        """How many admins the project has besides ``user_id``."""
        ...

    async def members(self, project_ids: Sequence[int]) -> list[tuple[int, str, int, bool]]:
        """``(user id, email, project id, is_admin)`` of these projects' memberships, by email
        then project id."""
        ...


class StatusStore(Protocol):
    """Read-only aggregates over the whole database for ``/ready`` and ``/metrics``: each an
    index lookup, a ``GROUP BY`` in the database, or a scan of a table with one row per lease or
    process, so a scrape stays small at 100k checks."""

    async def ping(self) -> None:
        """``SELECT 1``: raises the driver's error when the database does not answer."""
        ...

    async def stored_shard_count(self) -> int | None:
        """The shard count recorded in the database (:mod:`monitor.storage.cluster`)."""
        ...

    async def leases(self) -> list[tuple[str, str | None, int, datetime | None]]:
        """``(name, holder, token, expires_at)`` of every lease, by name."""
        ...

    async def checks_due(self, now: datetime) -> int:
        """Checks whose ``next_due`` is before ``now``."""
        ...

    async def renewed_replicas(self, role: str, since: datetime) -> int:
        """Replicas of ``role`` that renewed their row at or after ``since``."""
        ...

    async def live_processes(self, since: datetime) -> int:
        """Liveness rows renewed at or after ``since``."""
        ...

    async def last_liveness(self) -> datetime | None:
        """The latest liveness renewal, or ``None``."""
        ...

    async def outages(self) -> int:
        """Recorded outages."""
        ...

    async def all_checks(self) -> list[dict[str, Any]]:
        """Every check row (``MONITOR_METRICS_PER_CHECK`` only)."""
        ...

    async def checks_by_status(self, now: datetime) -> dict[str, int]:
        """Check counts by status, decided in SQL as :func:`monitor.domain.detection.status`."""
        ...

    async def started_count(self, now: datetime) -> int:
        """Checks with an open run started no longer than their ``max_runtime`` ago."""
        ...

    async def counts_by(self, column: str) -> list[tuple[str, int]]:
        """Row counts grouped by one of ``pings.kind``, ``alerts.kind``,
        ``notifications.status``, ``notification_attempts.ok`` (labelled ``ok`` / ``error``),
        ordered by the label. Pings, alerts and attempts count the deleted rows too
        (:mod:`monitor.storage.history_totals`), so those counts never go down."""
        ...


# --- A check's history, retention and the Sentry lookups -----------------------------------
# (implemented in monitor.storage.history_reads, retention_store and sentry_reads)


class HistoryReads(Protocol):
    """Read model of a check's past: its pings, flips, runs, tick marks, alerts and their
    notifications, newest first where a page is asked for. Rows are dicts of column values."""

    async def pings(self, check_id: int, limit: int, *, before: int | None = None) -> list[dict[str, Any]]:
        """At most ``limit`` of the check's pings by number ``n``, newest first, ``n`` below
        ``before`` if given: every column but ``body``, plus ``has_body`` (a non-empty body is
        stored)."""
        ...

    async def ping_body(self, check_id: int, n: int) -> bytes | None:
        """The stored body of ping ``n`` (``n`` within the column's 32-bit range), or ``None``
        when there is no such ping or it kept no body."""
        ...

    async def flips(
        self,
        check_id: int,
        limit: int,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        before: int | None = None,
    ) -> list[dict[str, Any]]:
        """At most ``limit`` flips by id, newest first, with ``since <= created_at < until``
        (either bound open when ``None``) and id below ``before`` if given."""
        ...

    async def runs(
        self,
        check_id: int,
        limit: int,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        after: tuple[datetime, datetime, str] | None = None,
    ) -> list[dict[str, Any]]:
        """At most ``limit`` runs newest first by ``(scheduled, first_ping_at, id)``, with
        ``since <= scheduled <= until`` (bounds open when ``None``) and, given ``after`` (the
        key of a previous page's last run), only runs ordered after it."""
        ...

    async def alerts(self, check_id: int, limit: int, *, before: int | None = None) -> list[dict[str, Any]]:
        """At most ``limit`` alerts by id, newest first, ids below ``before`` if given."""
        ...

    async def notifications(self, alert_ids: Sequence[int]) -> list[tuple[int, str, str, int, str | None]]:
        """``(alert id, channel id, status, attempts, last error)`` of these alerts'
        notifications, by notification id."""
        ...

    async def all_runs(self, check_id: int) -> list[dict[str, Any]]:
        """Every run of the check (no order)."""
        ...

    async def tick_marks(self, check_id: int) -> list[dict[str, Any]]:
        """Every tick mark of the check (no order)."""
        ...

    async def alert_ticks(self, check_id: int) -> list[tuple[str, datetime | None]]:
        """``(kind, scheduled)`` of every alert of the check, oldest first."""
        ...


class RetentionStore(Protocol):
    """Bounded storage (:mod:`monitor.services.retention`): which checks have something old,
    and deletes of one check's old rows, each capped at ``limit`` rows and driven by a
    per-check index so a transaction stays short. Every ``prune_*`` returns the rows removed."""

    async def candidates(
        self, after_id: int, *, ping_retention: int, created_before: datetime, limit: int
    ) -> list[dict[str, Any]]:
        """At most ``limit`` checks by id above ``after_id`` with more than ``ping_retention``
        pings or created before ``created_before``: their ``id``, ``kind``, ``timeout``,
        ``n_pings``, ``judged_until``, ``watch_from``, ``last_run_ping_at``, ``created_at``,
        ``episode_key``."""
        ...

    async def prune_pings(
        self,
        check_id: int,
        *,
        up_to_n: int,
        ticks_from: datetime | None,
        run_kinds: Sequence[str],
        keys_since: datetime,
        limit: int,
    ) -> int:
        """Delete pings numbered ``up_to_n`` or below that are not still needed: one of a run
        in progress (its run has no outcome), or a ping of ``run_kinds`` bound to a tick at or
        after ``ticks_from`` (any tick when ``None``). The ``Idempotency-Key`` of a deleted ping
        received after ``keys_since`` is kept (``ping_keys``), so a repeat is still recognised."""
        ...

    async def prune_keys(self, *, received_before: datetime, limit: int) -> int:
        """Forget at most ``limit`` kept keys of pings received at or before ``received_before``."""
        ...

    async def prune_runs(self, check_id: int, *, before: datetime, keep_last: int, limit: int) -> int:
        """Delete finished runs of ticks before ``before``, older than the check's
        ``keep_last``-th newest tick."""
        ...

    async def prune_ticks(self, check_id: int, *, before: datetime, keep_last: int, limit: int) -> int:
        """Delete tick marks before ``before``, older than the check's ``keep_last``-th newest."""
        ...

    async def prune_flips(self, check_id: int, *, before: datetime, keep_last: int, limit: int) -> int:
        """Delete flips created before ``before``, older (by id) than the check's
        ``keep_last``-th newest."""
        ...

    async def prune_alerts(
        self, check_id: int, *, before: datetime, keep_last: int, limit: int, keep_key: str | None = None
    ) -> int:
        """Delete alerts created before ``before``, older (by id) than the check's
        ``keep_last``-th newest, with no open notification (``OPEN_STATUSES`` of
        :mod:`monitor.storage.outbox`) and another key than ``keep_key`` — together with their
        notifications and attempts (explicitly: no reliance on cascades)."""
        ...

    async def clear_bodies(self, after_id: int, *, received_before: datetime, limit: int) -> tuple[int, int]:
        """Among the ``limit`` oldest pings with id above ``after_id``, clear the body of those
        received before ``received_before`` (the rows stay). Ping ids grow with arrival, so
        the walk stops at the first younger ping.

        Returns:
            (bodies cleared, the id to continue after next time: ``after_id`` when none of
            them was old).
        """
        ...


class SentryReads(Protocol):
    """The lookups of Sentry Crons check-ins (:mod:`monitor.services.sentry`): a DSN's public
    key to its project, a project's name and key, a check by its slug."""

    async def project_of_key(self, sentry_key: str) -> int | None:
        """The id of the project whose DSN has this public key, or ``None``."""
        ...

    async def project(self, project_id: int) -> tuple[str, str | None] | None:
        """``(name, sentry_key)`` of the project (the key ``None`` when it has none), or
        ``None`` for no such project."""
        ...

    async def check_by_slug(self, project_id: int, slug: str) -> dict[str, Any] | None:
        """The project's check row with this slug, or ``None``."""


# -- the dashboard's read model and the maintenance windows ---------------------------------------

TRIAGE_ORDER = ("down", "grace", "up", "new", "paused")
"""Check statuses in triage order (what needs a person first): the order
:meth:`DashboardReads.check_page` sorts by, decided in SQL by the first-match rule of
:func:`monitor.domain.detection.status` (paused, new, down, grace, up)."""


class DashboardReads(Protocol):
    """Read-only queries of the dashboard pages and badges: the checks list, a check's header
    and timeline, badge lookups, and the small lists the forms show. Each is bounded (an index
    lookup, a page, a ``GROUP BY``), whatever the number of checks."""

    async def project_names(self, project_ids: Sequence[int]) -> dict[int, str]:
        """``{project id: name}`` of these projects (unknown ids are absent)."""
        ...

    async def status_counts(self, project_ids: Sequence[int], now: datetime) -> dict[str, int]:
        """How many of these projects' checks have each status of :data:`TRIAGE_ORDER` at
        ``now`` (every status a key, 0 when none)."""
        ...

    async def check_page(
        self,
        project_ids: Sequence[int],
        now: datetime,
        *,
        needle: str = "",
        tag: str = "",
        status: str = "",
        offset: int = 0,
        limit: int = 50,
    ) -> tuple[int, list[dict[str, Any]]]:
        """``(matched, rows)``: how many of these projects' checks the filters keep, and the
        check rows of one page of them in triage order (:data:`TRIAGE_ORDER` at ``now``, then
        project id, name, id). Filters: ``needle`` (lower case) a substring of the lower-cased
        name or slug; ``tag`` one of the space-separated tags; ``status`` one of
        :data:`TRIAGE_ORDER` (anything else: no filter). ``%``, ``_`` and ``\\`` match
        themselves."""
        ...

    async def recent_ticks(
        self, check_ids: Sequence[int], ticks: int
    ) -> tuple[list[dict[str, Any]], list[tuple[int, datetime, str]]]:
        """``(runs, marks)`` of each check's newest ``ticks`` recorded ticks (a tick with a run
        or a tick mark): the ``runs`` rows, and ``(check id, scheduled, outcome)`` of the tick
        marks. Two queries whatever the number of checks (a window function ranks the ticks)."""
        ...

    async def episode_alerts(
        self, keys: Mapping[int, str]
    ) -> list[tuple[int, str, str, int, datetime | None, datetime]]:
        """``(check id, key, kind, count, scheduled, created_at)`` of the alerts of these checks
        whose key is among ``keys``' values (``keys``: check id → episode key; the caller keeps
        the pairs that match)."""
        ...

    async def last_body(self, check_id: int, *, failing: bool) -> tuple[bytes, str, int | None] | None:
        """``(body, kind, exit_status)`` of the check's newest ping with a body (``failing``: of
        its newest failing one — kind ``fail`` or a non-zero exit status), or ``None``. An
        indexed lookup (``uq_pings_check_n``, newest first)."""
        ...

    async def last_failure(self, check_id: int) -> tuple[int, datetime, str, int | None, bytes | None] | None:
        """``(n, received_at, kind, exit_status, body)`` of the check's newest failing ping
        (``fail`` or a non-zero exit status), or ``None``."""
        ...

    async def last_good_run(self, check_id: int) -> tuple[datetime, datetime | None] | None:
        """``(scheduled, finished_at)`` of the check's newest run (by tick) that finished with
        ``success`` and is not ``early``, or ``None``."""
        ...

    async def status_since(self, check_id: int) -> datetime | None:
        """``created_at`` of the check's newest flip (by id), or ``None``."""
        ...

    async def check_in(self, project_ids: Sequence[int], uuid: str) -> dict[str, Any] | None:
        """The check row with this uuid (as given) if it belongs to one of ``project_ids``."""
        ...

    async def window_runs(
        self, check_id: int, since: datetime, until: datetime, limit: int
    ) -> list[dict[str, Any]]:
        """The check's ``runs`` rows with a tick in ``[since, until]``, newest tick first, at
        most ``limit`` (through ``ix_runs_check_scheduled``)."""
        ...

    async def window_marks(
        self, check_id: int, since: datetime, until: datetime, limit: int
    ) -> list[tuple[datetime, str]]:
        """``(scheduled, outcome)`` of the check's tick marks in ``[since, until]``, newest
        first, at most ``limit``."""
        ...

    async def first_run_tick(self, check_id: int) -> datetime | None:
        """The tick of the check's oldest run, or ``None``."""
        ...

    async def check_by_badge(self, badge_uuid: str) -> dict[str, Any] | None:
        """The check row with this badge uuid, or ``None``."""
        ...

    async def project_by_badge_key(self, badge_key: str) -> int | None:
        """The id of the project with this badge key, or ``None``."""
        ...

    async def project_checks(self, project_id: int) -> list[dict[str, Any]]:
        """Every check row of the project (a tag badge's statuses)."""
        ...

    async def project_tags(self, project_id: int) -> list[str]:
        """The distinct tags of the project's checks, sorted."""
        ...

    async def badge_key(self, project_id: int) -> str:
        """The project's badge key (the project exists)."""
        ...

    async def recent_pings(self, check_id: int, limit: int) -> list[dict[str, Any]]:
        """The check's newest ``limit`` ``pings`` rows, newest first (``body``: bytes or
        ``None``)."""
        ...

    async def check_names(self, project_id: int) -> list[dict[str, Any]]:
        """``{"id", "uuid", "name", "slug"}`` of the project's checks, by name then id."""
        ...

    async def routed_checks(self, channel_id: str) -> set[int]:
        """Ids of the checks linked to the channel."""
        ...

    async def channel_check_counts(self, channel_ids: Sequence[str]) -> dict[str, int]:
        """``{channel id: linked checks}`` (channels without a link are absent)."""
        ...


class MaintenanceStore(Protocol):
    """The maintenance windows aggregate (``maintenance_windows``), and holding back the
    notifications of the alerts a deleted window covered."""

    async def check_id(self, project_id: int, uuid: str) -> int | None:
        """The id of the project's check with exactly this uuid, or ``None``; on PostgreSQL the
        row is held ``FOR KEY SHARE`` until the transaction ends, so the window about to
        reference it cannot race the check's delete (a concurrent delete waits)."""
        ...

    async def insert(self, values: Mapping[str, Any]) -> None:
        """Insert one window row (``id``, ``project_id``, ``created_at`` and the validated
        columns)."""
        ...

    async def windows(self, project_id: int, window_id: str | None = None) -> list[dict[str, Any]]:
        """The project's window rows (only ``window_id``'s when given), each with its check's
        uuid as ``check_uuid`` (``None`` for a project window), oldest first (``created_at``,
        then id)."""
        ...

    async def suppress_held_back(
        self,
        project_id: int,
        check_id: int | None,
        since: datetime,
        until: datetime,
        now: datetime,
        reason: str,
    ) -> int:
        """Mark ``suppressed`` (``last_error`` = ``reason``) the open notifications, unclaimed at
        ``now``, of the project's alerts created in ``[since, until)`` — of ``check_id``'s alerts
        only when given — other than maintenance summaries. Returns how many rows changed."""
        ...

    async def delete(self, window_id: str) -> None:
        """Delete one window (nothing when there is none)."""


# --- ping ingest: pings, and the runs and tick marks a batch's decisions read ----------------


class PingStore(Protocol):
    """The pings aggregate, and the check rows an ingest batch resolves and locks.

    Check rows come back as dicts of every ``checks`` column; ``lock`` methods take PostgreSQL
    row locks (``FOR UPDATE``, in id order so two batches never deadlock) until the transaction
    ends; on SQLite ``BEGIN IMMEDIATE`` already excludes other writers.
    """

    async def lock_by_uuid(self, uuids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The rows of the checks with these (lower-case) uuids, locked, keyed by uuid (unknown
        uuids are absent): one statement resolving and locking a batch addressed by uuid."""
        ...

    async def lock(self, check_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The rows of these checks, locked, keyed by id (unknown ids are absent)."""
        ...

    async def ids_by_uuid(self, uuids: Iterable[str]) -> dict[str, int]:
        """Check id per uuid, unlocked (unknown uuids are absent)."""
        ...

    async def ids_by_slug(self, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """Check id per ``(project ping_key, check slug)``, unlocked (unknown pairs absent)."""
        ...

    async def arrived(self, pairs: Iterable[tuple[int, datetime]]) -> set[tuple[int, datetime]]:
        """Which of these ``(check id, arrival)`` pings (aware UTC, to the microsecond) are stored."""
        ...

    async def project_by_ping_key(self, ping_key: str) -> int | None:
        """The id of the project with this ping key, or ``None``."""
        ...

    async def remembered(
        self, check_ids: Iterable[int], keys: Iterable[str], since: datetime
    ) -> list[tuple[int, str, str, int]]:
        """``(check id, kind, idempotency key, response status)`` of the pings of these checks
        carrying one of ``keys``, received at or after ``since`` (aware UTC); any order."""
        ...

    async def insert(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert ``pings`` rows (column values, each row the same columns) in one statement."""
        ...


class RunStore(Protocol):
    """The runs and tick marks of checks, as the run books their decisions read."""

    async def books(
        self,
        cutoffs: Mapping[int, datetime | None],
        *,
        rids: Mapping[int, Iterable[str]] | None = None,
        ticks: Mapping[int, Iterable[datetime]] | None = None,
        newest: Iterable[int] = (),
    ) -> dict[int, RunBook]:
        """Per check id of ``cutoffs``, its :class:`~monitor.domain.runs.RunBook`: every open run;
        the runs and marks bound to a tick at or after the check's cutoff (``None``: none by
        tick); the runs carrying one of its ``rids``; the runs and marks on one of its
        ``ticks`` (instants aware UTC); the newest run (latest tick, then latest arrival) of each
        check in ``newest``; and the check's newest succeeded run when the book holds a tick
        before the cutoff or a named tick is before it (:func:`monitor.domain.runs.holds_older`)."""


# --------------------------------------------------------------------------- detection and reminders
# The self-outage guard, the evaluator's sweep, the ingest's run writes, hints, email recipients,
# resharding and the time-driven notifications (implemented in ``outage_store.py`` and
# ``detection_stores.py``).


class OutageStore(Protocol):
    """Liveness rows (one per HTTP process) and the monitor outages they reveal (DESIGN §6)."""

    async def last_renewal(self) -> datetime | None:
        """The latest ``renewed_at`` of every liveness row, or ``None`` when there is none."""
        ...

    async def renew(self, name: str, roles: str, now: datetime) -> None:
        """Set this process's liveness row to ``renewed_at = now`` (inserted when missing; a
        concurrent insert of the same name is ignored)."""
        ...

    async def spans_since(self, since: datetime) -> list[tuple[datetime, datetime]]:
        """``(started_at, ended_at)`` of the outages that ended at or after ``since``."""
        ...

    async def guard_reads(self, since: datetime) -> tuple[datetime | None, list[tuple[datetime, datetime]]]:
        """:meth:`last_renewal`, and :meth:`spans_since` when it is not ``None`` (else no
        spans), in one statement: every sweep batch and ingest batch reads both."""
        ...

    async def mergeable(self, started: datetime, ended_since: datetime) -> tuple[int, datetime] | None:
        """``(id, started_at)`` of the latest-ending outage that started before ``started`` and
        ended at or after ``ended_since`` (one a new outage extends), or ``None``."""
        ...

    async def extend(self, outage_id: int, ended: datetime) -> None:
        """Move the outage's ``ended_at`` to ``ended`` when it ended earlier (never back)."""
        ...

    async def insert(self, started: datetime, ended: datetime) -> int | None:
        """Record an outage; its id, or ``None`` when one with this ``started_at`` exists."""
        ...

    async def project_ids(self) -> list[int]:
        """Every project's id, ascending (each is told of an outage)."""
        ...


class DetectionStore(Protocol):
    """The checks' detection state and books (runs, tick marks, flips), as the evaluator sweep and
    the ingest read and write them; plus the lookups by uuid or slug of ``cron explain`` and the
    email recipients."""

    async def lock_due(
        self, now: datetime, shards: Sequence[int] | None, batch: int, columns: Sequence[str]
    ) -> tuple[list[Mapping[str, Any]], int]:
        """One statement: the ``batch`` checks whose ``next_due`` is earliest and before ``now``
        (of ``shards``, or every shard when ``None``), their ``columns`` (``next_due`` among them).
        On PostgreSQL they are locked ``FOR UPDATE SKIP LOCKED``: rows another transaction holds
        (a concurrent batch of the same sweep, a ping being ingested) are left for it and for
        the next sweep, so concurrent batches take disjoint checks and never wait.

        Returns:
            The rows still due once locked, by id (a concurrent ping may have moved
            ``next_due``), and how many the selection found (fewer than ``batch``: no more
            due that is not held).
        """
        ...

    async def next_deadline(self, shards: Sequence[int] | None, after: datetime) -> datetime | None:
        """The earliest ``next_due`` later than ``after`` (aware UTC) of the checks of ``shards``
        (every shard when ``None``); ``None`` when none has one (through ``ix_checks_next_due``)."""
        ...

    async def books(
        self, cutoffs: Mapping[int, datetime | None], *, replan: bool = False
    ) -> dict[int, RunBook]:
        """Per check id, its :class:`monitor.domain.runs.RunBook` from ``cutoff`` on
        (:func:`monitor.storage.repositories.load_books`: one query per table per 500 checks).

        ``replan`` (PostgreSQL): plan these reads for the tables as they are now, not with the
        plan the server cached for the statement. A cached (generic) plan built while
        ``tick_marks`` or ``runs`` was empty scans the whole table once per check. The tables
        grow by every batch a sweep commits, and with that plan each batch's read grew with
        everything judged before it (10 000 due checks after the tables were emptied: 83 ms a
        batch on average, 1.7 s of a 2.8 s sweep). The evaluator replans the batches of a
        sweep larger than one batch; replanning costs about 1 ms a batch."""
        ...

    async def save_sweep(
        self,
        states: Sequence[Mapping[str, Any]],
        *,
        marks: Sequence[Mapping[str, Any]],
        flips: Sequence[Mapping[str, Any]],
        new_runs: Sequence[Mapping[str, Any]],
        changed_runs: Sequence[Mapping[str, Any]],
        alerts: Sequence[NewAlert] = (),
    ) -> list[int | None]:
        """Write a sweep's transitions set-at-a-time (:func:`monitor.storage.bulk.write_together`:
        one statement on PostgreSQL, one per table and kind on SQLite): ``states`` (``id`` plus
        the state columns that changed, any subset of
        :data:`~monitor.storage.repositories.STATE_COLUMNS`), new tick marks (``check_id``,
        ``scheduled``, ``outcome``; existing ones kept), flips (``check_id``, ``created_at``,
        ``up``, ``reason``, ``token``), new runs and changed runs (every ``runs`` column; a
        change of a run new in this call is written as part of its insert), and new ``alerts``
        as :func:`monitor.storage.outbox.insert_alerts` inserts them.

        Returns:
            Per alert given, in order: its new id, or ``None`` (it existed already, or repeated
            an earlier alert of the call).
        """
        ...

    async def write_effects(
        self,
        *,
        new_runs: Sequence[Mapping[str, Any]],
        changed_runs: Sequence[Mapping[str, Any]],
        marks: Sequence[Mapping[str, Any]],
        flips: Sequence[Mapping[str, Any]],
        pings: Sequence[Mapping[str, Any]] = (),
        states: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """Write the pings, runs, tick marks, flips and check states gathered over a batch
        (:func:`monitor.storage.bulk.write_together`: one statement on PostgreSQL, one per
        table and kind on SQLite). ``changed_runs`` carry the run id as ``b_id`` and the columns
        to set (their ``check_id`` is ignored; a change of a run new in this call is written as
        part of its insert, and several changes of one run as one); marks that exist already
        are kept; ``pings`` as :meth:`PingStore.insert` takes them; ``states`` as
        :func:`monitor.storage.repositories.save_state` takes them."""
        ...

    async def latest_arrivals(
        self, check_ids: Sequence[int], per_check: int
    ) -> list[tuple[int, datetime, datetime]]:
        """``(check id, scheduled, first_ping_at)`` of each check's latest ``per_check`` runs by
        first-ping arrival (ties: latest tick first), in one window-function query."""
        ...

    async def checks_named(
        self, *, uuid: str | None = None, slug: str | None = None, limit: int = 2
    ) -> list[dict[str, Any]]:
        """Check rows (every column) with this uuid, or else this slug, in any project; at most
        ``limit``."""
        ...

    async def recipient_exists(
        self, *, uuid: str | None = None, ping_key: str | None = None, slug: str | None = None
    ) -> bool:
        """Whether a check has ``uuid``, or (``uuid`` ``None``) has ``slug`` in the project whose
        ping key is ``ping_key``."""
        ...


class ShardStore(Protocol):
    """The stored shard count and the checks' shards (``monitor reshard``)."""

    async def lock_evaluator_leases(self) -> None:
        """PostgreSQL: lock every shard lease row and the legacy evaluator lease ``FOR UPDATE``
        (in name order); SQLite: nothing (``BEGIN IMMEDIATE`` already excludes writers)."""
        ...

    async def store_count(self, count: int, now: datetime) -> int | None:
        """Lock the ``cluster_settings`` row, set ``shards = count`` (``changed_at = now``).

        Returns:
            The count stored before, ``None`` when there was none (the row is created).
        """
        ...

    async def rewrite_checks(self, count: int) -> int:
        """Set every check's ``shard`` to ``uuid.int % count``; how many moved."""
        ...

    async def prune_leases(self, count: int) -> list[str]:
        """Delete the lease rows of shards ``>= count`` and the legacy one; their names."""
        ...


class ReminderStore(Protocol):
    """What the time-driven notifications read (reminders, escalations, maintenance summaries)."""

    async def open_episodes(self) -> list[dict[str, Any]]:
        """Unpaused checks in a down episode with a ``nag_interval`` or ``escalate_after``, joined
        to the episode's alert: ``id``, ``project_id``, ``uuid``, ``name``, ``slug``,
        ``check_kind``, ``tz``, ``episode_key``, ``nag_interval``, ``escalate_after``,
        ``escalate_to``, ``episode_kind``, ``scheduled``, ``opened_at``."""
        ...

    async def windows(self) -> list[dict[str, Any]]:
        """Every ``maintenance_windows`` row."""
        ...

    async def claim_summary(self, window_id: str, until: datetime) -> bool:
        """Set the window's ``summarized_until`` to ``until`` when it is unset or earlier; whether
        this call did (``False``: another notifier summarised it)."""
        ...

    async def down_checks(self, project_id: int) -> list[tuple[str | None, str]]:
        """``(name, uuid)`` of the project's unpaused checks in a down episode, by name then id."""
        ...
