"""``GET /metrics``: Prometheus exposition of the cluster's state, read from the database per
scrape (DESIGN §6, §9).

Nothing here is process-global: each scrape reads one :class:`Snapshot` from the database and
renders it through a throwaway :class:`SnapshotCollector` handed straight to
``prometheus_client``'s encoder, so no ``CollectorRegistry`` (and no default ``REGISTRY``)
keeps state between scrapes, apps or tests. Every replica answers the same numbers for the
whole cluster (leases, lag, liveness are rows shared by all), so scraping any one is enough.

No key is needed unless ``MONITOR_METRICS_KEY`` is set; then ``Authorization: Bearer <key>``
(compared in constant time), else 401 ``{"error": "Authorization: …"}``.

Series:

* ``monitor_database_up`` — 1 when the database answered this scrape (else only this,
  ``monitor_build_info`` and ``monitor_shards`` are exported).
* ``monitor_shards`` — ``MONITOR_SHARDS``; ``monitor_shards_unheld`` — shard leases with no
  unexpired holder (evaluation of those checks is stalled until one is taken).
* ``monitor_lease_held{lease, holder}`` — 1 while ``holder`` holds ``lease`` unexpired, 0 when
  it is free or expired (``holder`` is ``""`` when free); ``monitor_lease_token{lease}`` — the
  fencing token; ``monitor_lease_expires_timestamp_seconds{lease}``.
* ``monitor_leases_held{holder}`` — unexpired leases per holder.
* ``monitor_evaluator_lag_seconds`` — now − the oldest overdue ``next_due`` (0 when nothing is
  overdue); ``monitor_checks_due`` — checks whose ``next_due`` has passed.
* ``monitor_evaluator_replicas`` — evaluator replicas whose heartbeat is within one TTL.
* ``monitor_live_processes`` — HTTP processes whose liveness row is fresh (within the outage
  gap, 2 × TTL); ``monitor_liveness_age_seconds`` — since the freshest liveness renewal;
  ``monitor_outage_ongoing`` — 1 when no liveness row is fresh; ``monitor_outages_total`` —
  monitor outages recorded (self-outage guard).
* ``monitor_checks{status}`` — checks per status (new, up, grace, down, paused), counted in the
  database; ``monitor_checks_started`` — checks with a run in progress.
* only with ``MONITOR_METRICS_PER_CHECK=1`` (per-check series; off by default so a scrape stays
  small at 100k checks): ``monitor_check_up{uuid, name}`` — 0 while the check is down, else 1;
  ``monitor_check_status{uuid, name, status}`` — 1 for the check's status (new, up, grace, down,
  paused), 0 for the others; ``monitor_check_started{uuid, name}`` — a run is in progress;
  ``monitor_check_last_ping_age_seconds{uuid, name}`` — since its last ping (checks never pinged
  have none).
* ``monitor_pings_total{kind}`` — pings received by kind; ``monitor_alerts_total{kind}`` — alerts
  by kind; ``monitor_notifications{status}`` — notifications by status (pending, sent, failed);
  ``monitor_notification_attempts_total{result}`` — delivery attempts, ``ok`` or ``error``. The
  three counters include the rows retention or a check's deletion removed since
  (:mod:`monitor.storage.history_totals`): they never go down.
* ``monitor_evaluator_sweep_duration_seconds`` (summary: ``_count``, ``_sum``) and
  ``monitor_evaluator_last_sweep_duration_seconds`` — this process's sweeps, as recorded through
  :func:`monitor.services.sweeps.record_sweep` (absent until the process has swept).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from litestar import MediaType, Request, Response, get
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from monitor import __version__
from monitor.domain.checks import Status
from monitor.domain.shards import LEASE_PREFIX
from monitor.http.api.common import services_of
from monitor.services import Engine, status, sweeps
from monitor.services.outages import outage_gap

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LeaseRow:
    name: str
    holder: str | None
    token: int
    expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class CheckRow:
    uuid: str
    name: str
    status: str
    started: bool
    last_ping_at: datetime | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Snapshot:
    """What one scrape exports; ``database_up`` False leaves the rest empty."""

    shards: int
    database_up: bool = True
    now: datetime | None = None
    leases: tuple[LeaseRow, ...] = ()
    oldest_due: datetime | None = None
    checks_due: int = 0
    evaluator_replicas: int = 0
    live_processes: int = 0
    last_liveness: datetime | None = None
    outages: int = 0
    ttl: timedelta = field(default=timedelta(seconds=10))
    checks: tuple[CheckRow, ...] = ()
    per_check: bool = False
    checks_by_status: tuple[tuple[str, int], ...] = ()
    checks_started: int = 0
    pings_by_kind: tuple[tuple[str, int], ...] = ()
    alerts_by_kind: tuple[tuple[str, int], ...] = ()
    notifications_by_status: tuple[tuple[str, int], ...] = ()
    attempts_by_result: tuple[tuple[str, int], ...] = ()
    sweeps: sweeps.SweepStats | None = None


async def read_snapshot(
    engine: Engine, now: datetime, shards: int, ttl: timedelta, *, per_check: bool = False
) -> Snapshot:
    """Read everything ``/metrics`` exports in one unit of work
    (:func:`monitor.services.status.metric_counts`).

    Args:
        per_check: also read every check (``MONITOR_METRICS_PER_CHECK``); otherwise only their
            counts by status, grouped in the database, so a scrape stays small at 100k checks.

    Long because every /metrics query runs in one connection, so the exposition is one consistent snapshot.
    """
    counts = await status.metric_counts(engine, now, ttl, per_check=per_check)
    return Snapshot(
        shards=shards,
        now=now,
        leases=tuple(LeaseRow(*lease) for lease in counts.leases),
        oldest_due=counts.oldest_due,
        checks_due=counts.checks_due,
        evaluator_replicas=counts.evaluator_replicas,
        live_processes=counts.live_processes,
        last_liveness=counts.last_liveness,
        outages=counts.outages,
        ttl=ttl,
        checks=tuple(CheckRow(c.uuid, c.name, c.status, c.started, c.last_ping_at) for c in counts.checks),
        per_check=per_check,
        checks_by_status=counts.checks_by_status,
        checks_started=counts.checks_started,
        pings_by_kind=counts.pings_by_kind,
        alerts_by_kind=counts.alerts_by_kind,
        notifications_by_status=counts.notifications_by_status,
        attempts_by_result=counts.attempts_by_result,
        sweeps=sweeps.snapshot(),
    )


class SnapshotCollector:
    """A ``prometheus_client`` collector over one :class:`Snapshot` (used once, then dropped)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterable[Metric]:
        return list(self._metrics())

    def _metrics(self) -> Iterator[Metric]:
        """The metric families of the snapshot.

        Long because the exposition is written family by family, each a few lines.
        """
        s = self.snapshot
        info = GaugeMetricFamily("monitor_build_info", "The monitor's version.", labels=["version"])
        info.add_metric([__version__], 1)
        yield info
        yield GaugeMetricFamily("monitor_shards", "Evaluator shards (MONITOR_SHARDS).", value=s.shards)
        yield GaugeMetricFamily(
            "monitor_database_up", "1 when the database answered this scrape.", value=int(s.database_up)
        )
        if not s.database_up or s.now is None:
            return
        now = s.now

        def live(lease: LeaseRow) -> bool:
            return lease.holder is not None and lease.expires_at is not None and lease.expires_at >= now

        held = GaugeMetricFamily(
            "monitor_lease_held",
            "1 while the holder (<host>:<pid>) holds the lease unexpired; 0 when free or expired.",
            labels=["lease", "holder"],
        )
        token = GaugeMetricFamily(
            "monitor_lease_token",
            "The lease's fencing token (grows on every change of holder).",
            labels=["lease"],
        )
        expires = GaugeMetricFamily(
            "monitor_lease_expires_timestamp_seconds",
            "When the lease expires unless renewed.",
            labels=["lease"],
        )
        per_holder: dict[str, int] = {}
        unheld = set(range(s.shards))
        for lease in s.leases:
            is_live = live(lease)
            held.add_metric([lease.name, lease.holder or ""], int(is_live))
            token.add_metric([lease.name], lease.token)
            if lease.expires_at is not None:
                expires.add_metric([lease.name], lease.expires_at.timestamp())
            if is_live and lease.holder is not None:
                per_holder[lease.holder] = per_holder.get(lease.holder, 0) + 1
                index = lease.name.removeprefix(LEASE_PREFIX)
                if lease.name.startswith(LEASE_PREFIX) and index.isdigit():
                    unheld.discard(int(index))
        yield held
        yield token
        yield expires
        by_holder = GaugeMetricFamily(
            "monitor_leases_held", "Unexpired leases per holder.", labels=["holder"]
        )
        for holder, count in sorted(per_holder.items()):
            by_holder.add_metric([holder], count)
        yield by_holder
        yield GaugeMetricFamily(
            "monitor_shards_unheld", "Shards with no unexpired lease holder.", value=len(unheld)
        )
        lag = max(0.0, (now - s.oldest_due).total_seconds()) if s.oldest_due is not None else 0.0
        yield GaugeMetricFamily(
            "monitor_evaluator_lag_seconds", "Now minus the oldest overdue next_due (0: none).", value=lag
        )
        yield GaugeMetricFamily("monitor_checks_due", "Checks whose next_due has passed.", value=s.checks_due)
        yield GaugeMetricFamily(
            "monitor_evaluator_replicas",
            "Evaluator replicas with a heartbeat within one lease TTL.",
            value=s.evaluator_replicas,
        )
        yield GaugeMetricFamily(
            "monitor_live_processes",
            "HTTP processes whose liveness row is fresh (within 2 x lease TTL).",
            value=s.live_processes,
        )
        if s.last_liveness is not None:
            age = max(0.0, (now - s.last_liveness).total_seconds())
            yield GaugeMetricFamily(
                "monitor_liveness_age_seconds", "Seconds since the freshest liveness renewal.", value=age
            )
        ongoing = s.last_liveness is not None and now - s.last_liveness > outage_gap(s.ttl)
        yield GaugeMetricFamily(
            "monitor_outage_ongoing", "1 when no monitor process renewed liveness lately.", value=int(ongoing)
        )
        yield CounterMetricFamily(
            "monitor_outages", "Monitor outages recorded by the self-outage guard.", value=s.outages
        )
        counts = GaugeMetricFamily(
            "monitor_checks", "Checks by status (new, up, grace, down, paused).", labels=["status"]
        )
        for status_value, count in s.checks_by_status:
            counts.add_metric([status_value], count)
        yield counts
        yield GaugeMetricFamily(
            "monitor_checks_started", "Checks with a run in progress.", value=s.checks_started
        )
        if s.per_check:
            yield from self._check_metrics(now)
        yield from self._history_metrics()

    def _check_metrics(self, now: datetime) -> Iterator[Metric]:
        labels = ["uuid", "name"]
        up = GaugeMetricFamily("monitor_check_up", "0 while the check is down, else 1.", labels=labels)
        status = GaugeMetricFamily(
            "monitor_check_status",
            "1 for the check's status (new, up, grace, down, paused), 0 for the others.",
            labels=[*labels, "status"],
        )
        started = GaugeMetricFamily(
            "monitor_check_started", "1 while a run of the check is in progress.", labels=labels
        )
        age = GaugeMetricFamily(
            "monitor_check_last_ping_age_seconds", "Seconds since the check's last ping.", labels=labels
        )
        for check in self.snapshot.checks:
            key = [check.uuid, check.name]
            up.add_metric(key, int(check.status != Status.DOWN))
            for value in Status:
                status.add_metric([*key, value.value], int(check.status == value))
            started.add_metric(key, int(check.started))
            if check.last_ping_at is not None:
                age.add_metric(key, max(0.0, (now - check.last_ping_at).total_seconds()))
        yield up
        yield status
        yield started
        yield age

    def _history_metrics(self) -> Iterator[Metric]:
        s = self.snapshot
        for name, help_text, label, values in (
            ("monitor_pings", "Pings received, by kind (pruned ones included).", "kind", s.pings_by_kind),
            ("monitor_alerts", "Alerts raised, by kind.", "kind", s.alerts_by_kind),
            (
                "monitor_notification_attempts",
                "Notification delivery attempts by result (ok, error).",
                "result",
                s.attempts_by_result,
            ),
        ):
            counter = CounterMetricFamily(name, help_text, labels=[label])
            for key, count in values:
                counter.add_metric([key], count)
            yield counter
        notes = GaugeMetricFamily(
            "monitor_notifications", "Notifications by status (pending, sent, failed).", labels=["status"]
        )
        for key, count in s.notifications_by_status:
            notes.add_metric([key], count)
        yield notes
        if s.sweeps is not None and s.sweeps.count:
            yield SummaryMetricFamily(
                "monitor_evaluator_sweep_duration_seconds",
                "This process's evaluator sweeps (wall clock).",
                count_value=s.sweeps.count,
                sum_value=s.sweeps.total_s,
            )
            yield GaugeMetricFamily(
                "monitor_evaluator_last_sweep_duration_seconds",
                "Duration of this process's last evaluator sweep.",
                value=s.sweeps.last_s,
            )


PUBLIC_METRICS_WARNING = (
    "MONITOR_METRICS_KEY is unset: /metrics is public and shows how many checks are down and how "
    "many pings and alerts there were; set MONITOR_METRICS_KEY in production"
)
"""Logged once by ``monitor serve`` (not ``--dev``) when :attr:`Settings.metrics_key` is unset
and the per-check series are off."""

PUBLIC_CHECK_METRICS_WARNING = (
    "MONITOR_METRICS_KEY is unset: /metrics is public and, with MONITOR_METRICS_PER_CHECK=1, lists "
    "every check's uuid, which is its ping credential; set MONITOR_METRICS_KEY in production"
)
"""The same, when the per-check series (labelled with each check's uuid) are on."""


def _unauthorized(message: str) -> Response[dict[str, str]]:
    return Response(
        {"error": f"Authorization: {message}"},
        status_code=401,
        media_type=MediaType.JSON,
        headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
    )


def _authorized(request: Request[Any, Any, Any], key: str) -> Response[dict[str, str]] | None:
    header = request.headers.get("authorization")
    if not header:
        return _unauthorized("missing (send Authorization: Bearer <MONITOR_METRICS_KEY>)")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return _unauthorized("expected Bearer <key>")
    if not hmac.compare_digest(given.strip().encode(), key.encode()):
        return _unauthorized("wrong key")
    return None


@get("/metrics", summary="Prometheus metrics", include_in_schema=True)
async def metrics(request: Request[Any, Any, Any]) -> Response[Any]:
    services = services_of(request.app.state)
    settings = services.settings
    if settings.metrics_key:
        refused = _authorized(request, settings.metrics_key)
        if refused is not None:
            return refused
    ttl = timedelta(seconds=settings.lease_ttl)
    try:
        # the database's count, not MONITOR_SHARDS
        shards = await status.stored_shards(services.engine) or settings.shards
        snapshot = await read_snapshot(
            services.engine, services.clock.now(), shards, ttl, per_check=services.settings.metrics_per_check
        )
    except Exception as error:
        logger.warning(
            "metrics: database unreachable: %s: %s",
            type(error).__name__,
            error,
            extra={"action": "metrics_database_unreachable"},
        )
        snapshot = Snapshot(shards=settings.shards, database_up=False)
    encoder, content_type = choose_encoder(request.headers.get("accept", ""))
    # exactly prometheus_client's content type: Litestar would append a second charset to a
    # text/* media type, and Prometheus 3 refuses a repeated parameter
    return Response(
        encoder(SnapshotCollector(snapshot)),
        media_type=content_type,
        headers={"content-type": content_type},
    )
