"""The typed answers of ``/api/v3/checks/…`` (msgspec Structs, which Litestar encodes natively).

The fields and their presence are Healthchecks' (DESIGN §9, :func:`monitor.services.checks.check_to_dict`):
a field a check does not show is ``UNSET`` and left out of the JSON — ``schedule``/``tz``/``dialect``
for a simple check, ``timeout`` for a cron one; for a read-only key ``uuid``, the URLs that carry
it, ``channels`` and ``escalate_to``, with ``unique_key`` instead. A ``None`` field is sent as
``null``. A page carries ``next`` (the URL of the following page) only while more follow.

The bodies the endpoints accept are declared by :class:`monitor.http.api.check_bodies.CheckIn`
and read by :func:`monitor.services.checks.parse_check_fields`, whose
``{"error": "<field>: <problem>"}`` messages Healthchecks clients rely on (a decoder's own
messages would differ); a test holds the two to the same rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

T = TypeVar("T")


class CheckOut(msgspec.Struct, kw_only=True):
    """One check as the API shows it, with ``hints`` (advice from its latest runs)."""

    uuid: str | UnsetType = UNSET
    name: str
    slug: str
    tags: str
    desc: str
    kind: str
    schedule: str | UnsetType = UNSET
    tz: str | UnsetType = UNSET
    dialect: str | UnsetType = UNSET
    timeout: int | UnsetType = UNSET
    grace: int
    max_runtime: int
    failure_threshold: int
    recovery_threshold: int
    early_tolerance: int | None
    expected_runs: int
    min_runtime: int | None
    status: str
    started: bool
    last_ping: str | None
    next_ping: str | None
    n_pings: int
    manual_resume: bool
    methods: str
    subject: str
    subject_fail: str
    start_kw: str
    success_kw: str
    failure_kw: str
    filter_subject: bool
    filter_body: bool
    filter_http_body: bool
    filter_default_fail: bool
    channels: str | UnsetType = UNSET
    nag_interval: int | None
    escalate_after: int | None
    escalate_to: str | UnsetType = UNSET
    ping_url: str | UnsetType = UNSET
    update_url: str | UnsetType = UNSET
    pause_url: str | UnsetType = UNSET
    resume_url: str | UnsetType = UNSET
    badge_url: str
    unique_key: str | UnsetType = UNSET
    hints: list[str]


class ChecksPage(msgspec.Struct, kw_only=True):
    """``GET /checks/`` and a list ``POST /checks/``."""

    checks: list[CheckOut]
    next: str | UnsetType = UNSET


class PingOut(msgspec.Struct, kw_only=True):
    """One ping (:func:`monitor.services.history.list_pings`); ``body_url`` when it kept a body."""

    n: int
    type: str
    date: str | None
    scheduled: str | None
    rid: str | None
    exit_status: int | None
    duration: float | None
    scheme: str
    method: str
    remote_addr: str
    ua: str
    body_size: int
    body_url: str | None


class PingsPage(msgspec.Struct, kw_only=True):
    pings: list[PingOut]
    next: str | UnsetType = UNSET


class FlipOut(msgspec.Struct, kw_only=True):
    """One flip: when (whole seconds), ``up`` (1, 0; ``null`` for a pause or resume), why."""

    timestamp: str | None
    up: int | None
    reason: str


class FlipsPage(msgspec.Struct, kw_only=True):
    flips: list[FlipOut]
    next: str | UnsetType = UNSET


class RunOut(msgspec.Struct, kw_only=True):
    """One run by its scheduled tick (:func:`monitor.services.history.runs_page`)."""

    id: str
    rid: str | None
    scheduled: str | None
    started: str | None
    finished: str | None
    outcome: str | None
    exit_status: int | None
    duration: float | None


class RunsPage(msgspec.Struct, kw_only=True):
    runs: list[RunOut]
    next: str | UnsetType = UNSET


class NotificationOut(msgspec.Struct, kw_only=True):
    channel: str
    status: str
    attempts: int
    last_error: str | None


class AlertOut(msgspec.Struct, kw_only=True):
    """One alert with its notifications (:func:`monitor.services.history.list_alerts`)."""

    id: int
    kind: str
    scheduled: str | None
    rid: str | None
    run_id: str | None
    count: int
    created: str | None
    title: str
    message: str
    notifications: list[NotificationOut]


class AlertsPage(msgspec.Struct, kw_only=True):
    alerts: list[AlertOut]
    next: str | UnsetType = UNSET


def check_out(body: Mapping[str, Any]) -> CheckOut:
    """The typed form of a check's JSON (:func:`monitor.services.checks.render`)."""
    return msgspec.convert(body, CheckOut)


def checks_out(bodies: Sequence[Mapping[str, Any]]) -> list[CheckOut]:
    return [check_out(b) for b in bodies]


def typed(items: Sequence[Mapping[str, Any]], kind: type[T]) -> list[T]:
    """``items`` (the history service's dicts) as ``kind`` Structs."""
    return [msgspec.convert(item, kind) for item in items]


def next_of(extra: Mapping[str, Any]) -> str | UnsetType:
    """The ``next`` link :func:`monitor.http.api.paging.paged` gave, else ``UNSET``."""
    link = extra.get("next")
    return link if isinstance(link, str) else UNSET
