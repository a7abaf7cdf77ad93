"""Celery integration: every beat-scheduled task run reported as one run, with its tick.

One call enables it, in the module that defines the Celery app (so beat and the workers both
run it)::

    from monitor_client import celery as monitor_celery

    app = Celery("billing")
    monitor_celery.enable(app)          # Client() from MONITOR_* variables

What it does:

* **beat** (``beat_init`` signal): each task beat sends carries two headers, ``monitor_check``
  (the entry's name as a slug, or ``checks[entry name]``) and ``monitor_scheduled`` (the tick the
  entry was due at: the crontab time, or ``last_run_at + run_every``, not the moment beat woke
  up; see :func:`entry_tick`). With an API key, beat also upserts a
  check per entry at start: a ``crontab`` becomes a cron check in ``app.conf.timezone``
  (:func:`cron_expression`; one that cron cannot express is a simple check instead, late at
  worst and never a wrong schedule: :func:`check_fields`), a ``timedelta`` a simple check
  with that period. The upserts are sent by a background thread
  (:data:`sender`, a bounded queue): beat never waits for the monitor, down or not, before
  sending its first task.
* **worker** (``task_prerun``, ``task_success``, ``task_failure``, ``task_revoked``): ``start``
  before the task, then ``success`` or ``fail`` (exception type, message and traceback as body).
  The run id is the Celery task id, so a retried task (same id) is one run and its repeated
  ``start`` is stored as a retransmission. Tasks not sent by beat are reported when their
  name is in ``checks``.

The worker's pings never run on the task's thread: each is handed to :data:`sender` (one
background thread, a bounded queue, FIFO so a run's ``start`` precedes its finish), so a monitor
that is down or never answers neither fails nor slows a task (see
:mod:`monitor_client._background`). ``sender.drain(timeout)`` waits for the queued pings (it
also runs at exit).

Checks upserted at beat start get a grace derived from the entry's period (half of it, between
30 s and one hour, :func:`monitor_client._common.grace_for_period`) unless ``grace=`` is given.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from monitor_client import _common
from monitor_client._background import Sender
from monitor_client._client import Client
from monitor_client._common import failure_body

HEADER_CHECK = "monitor_check"
HEADER_SCHEDULED = "monitor_scheduled"
SKIPPED_ENTRIES = frozenset({"celery.backend_cleanup"})
#: the longest period (seconds, a year) the monitor accepts for a simple check's ``timeout``
MAX_TIMEOUT = 31_536_000
#: sends beat's check upserts and the worker's pings off their threads
#: (``sender.drain(timeout)`` waits for them)
sender = Sender("monitor-celery")


def _queue() -> Sender:
    """:data:`sender`, looked up when used (signal handlers take a ``sender`` argument too)."""
    return sender


def slugify(name: str) -> str:
    """A check slug for a beat entry name (``[a-z0-9_-]``, at most 100 characters)."""
    return _common.slugify(name, "celery-task")


def entry_tick(entry: Any) -> datetime:
    """The instant a beat entry is due at, in UTC (from its schedule and ``last_run_at``).

    For a ``crontab``: the first cron time after the last run, computed in the schedule's zone
    (``remaining_delta``, exact); for a ``timedelta`` schedule ``last_run_at + run_every``,
    truncated to whole seconds when ``run_every`` is at least one (the monitor shows ticks in
    whole seconds, truncated: rounding up could show a tick after the run's start, and
    consecutive ticks stay distinct); otherwise beat's own estimate,
    ``now + remaining_estimate(last_run_at)``.
    """
    schedule = entry.schedule
    last_run_at = entry.last_run_at
    run_every = getattr(schedule, "run_every", None)
    tick: datetime
    if hasattr(schedule, "_orig_minute") and hasattr(schedule, "remaining_delta"):
        start, delta, _now = schedule.remaining_delta(last_run_at)
        tick = start + delta
    elif isinstance(run_every, timedelta) and not getattr(schedule, "relative", False):
        tick = schedule.maybe_make_aware(last_run_at).astimezone(UTC) + run_every
        if run_every >= timedelta(seconds=1):
            # last_run_at is beat's clock at the previous send (microseconds): the tick is cut
            # to the second, as the monitor shows ticks, so it never reads as after the start
            tick = tick.replace(microsecond=0)
    else:
        tick = schedule.now() + schedule.remaining_estimate(last_run_at)
    if tick.tzinfo is None:
        tick = tick.replace(tzinfo=UTC)
    return tick.astimezone(UTC)


class Untranslatable(ValueError):
    """A ``crontab`` that no 5-field unix expression fires at exactly the same times."""


_ALL_DAYS_OF_MONTH = frozenset(range(1, 32))
_ALL_DAYS_OF_WEEK = frozenset(range(7))
#: days of month 1-7 hold the first of each weekday, 8-14 the second, ... (``n#k`` in cron)
_WEEKS = {k: frozenset(range(7 * k - 6, 7 * k + 1)) for k in range(1, 5)}


def _and_days(fields: list[str], schedule: Any) -> None:
    """Rewrite the DOM and DOW ``fields`` so that cron ANDs them as Celery does.

    Celery fires when the day of month **and** the day of week match
    (``celery.schedules.crontab``: ``day in day_of_month and dow_num in day_of_week``); cron
    and the monitor (DESIGN §4, no dialect differs) OR the two fields when both are
    restricted, i.e. neither text starts with ``*``. Such a pair is rewritten: a field that
    lists every value becomes ``*``; days of month made of whole weeks (1-7, 8-14, 15-21,
    22-28) become ``n#k`` days of week with a ``*`` day of month (``1-7`` + ``mon`` =
    ``1#1``, the first Monday).

    Raises:
        Untranslatable: any other pair (``13`` + ``fri``: no cron expression fires only on
            a Friday the 13th).
    """
    if fields[2].startswith("*") or fields[4].startswith("*"):
        return  # cron ANDs too
    dom = frozenset(int(d) for d in schedule.day_of_month)
    dow = frozenset(int(d) % 7 for d in schedule.day_of_week)
    if dom >= _ALL_DAYS_OF_MONTH:
        fields[2] = "*"
        return
    if dow >= _ALL_DAYS_OF_WEEK:
        fields[4] = "*"
        return
    weeks = [k for k, days in _WEEKS.items() if days <= dom]
    if weeks and dom == frozenset().union(*(_WEEKS[k] for k in weeks)):
        fields[2] = "*"
        fields[4] = ",".join(f"{d}#{k}" for d in sorted(dow) for k in weeks)
        return
    raise Untranslatable(
        f"day of month {fields[2]!r} and day of week {fields[4]!r} must both match in Celery, "
        "while cron fires when either does"
    )


def cron_expression(schedule: Any) -> str | None:
    """A ``crontab`` schedule as a 5-field unix expression that fires at the same times, or
    ``None`` for other schedules.

    Raises:
        Untranslatable: a restricted day of month together with a restricted day of week
            that cron cannot AND (see :func:`_and_days`).
    """
    fields: list[str] = []
    for attribute in (
        "_orig_minute",
        "_orig_hour",
        "_orig_day_of_month",
        "_orig_month_of_year",
        "_orig_day_of_week",
    ):
        if not hasattr(schedule, attribute):
            return None
        value = getattr(schedule, attribute)
        if isinstance(value, str | int):
            fields.append(str(value).replace(" ", ""))
        elif isinstance(value, set | frozenset | list | tuple):
            fields.append(",".join(str(v) for v in sorted(value)))
        else:
            return None
    _and_days(fields, schedule)
    return " ".join(fields)


def period_of(schedule: Any, now: datetime | None = None) -> float | None:
    """Seconds between a beat schedule's runs: its ``run_every``, or for a ``crontab`` the
    shortest gap among its next 12 times (computed by Celery itself); ``None`` if unknown."""
    run_every = getattr(schedule, "run_every", None)
    if isinstance(run_every, timedelta) and not hasattr(schedule, "_orig_minute"):
        return run_every.total_seconds()
    gaps = fire_gaps(schedule, now)
    return min(gaps) if gaps else None


def fire_times(schedule: Any, now: datetime | None = None, count: int = 12) -> list[datetime]:
    """A ``crontab``'s next ``count`` fire times after ``now`` (default: the clock), computed
    by Celery itself (``remaining_delta``); empty for other schedules."""
    if not hasattr(schedule, "remaining_delta"):
        return []
    last = (now or datetime.now(UTC)).astimezone(schedule.tz) if hasattr(schedule, "tz") else now
    times = []
    for _ in range(count):
        start, delta, _now = schedule.remaining_delta(last)
        last = start + delta
        times.append(last)
    return times


def fire_gaps(schedule: Any, now: datetime | None = None, count: int = 12) -> list[float]:
    """Seconds between a ``crontab``'s next ``count`` fire times (:func:`fire_times`)."""
    times = fire_times(schedule, now, count)
    return [(b - a).total_seconds() for a, b in itertools.pairwise(times) if b > a]


def check_fields(entry: Any, tz: str, grace: int | None = None) -> dict[str, Any]:
    """Management API fields for a beat entry's check: schedule and zone, or a period; and a
    grace (``grace``, else derived from the period: :func:`_common.grace_for_period`).

    A ``crontab`` that cron cannot express (:class:`Untranslatable`) is logged as a warning
    and becomes a simple check whose period is the longest gap among its next 12 fire times
    (at most :data:`MAX_TIMEOUT`, the monitor's limit, a year): late at worst, never a cron
    check with a wrong schedule (as the APScheduler integration does for its triggers).
    """
    fields: dict[str, Any] = {}
    try:
        expression = cron_expression(entry.schedule)
    except Untranslatable as error:
        gaps = fire_gaps(entry.schedule)
        longest = max(gaps) if gaps else 86400.0
        _common.logger.warning(
            "Celery beat entry %s: its schedule %s cannot be expressed as a cron schedule (%s); "
            "monitored as a simple check expecting a run every %d s instead",
            getattr(entry, "name", "?"),
            entry.schedule,
            error,
            int(longest),
            extra={"action": "monitor_schedule_untranslatable"},
        )
        fields = {"timeout": min(max(int(longest), 1), MAX_TIMEOUT)}
    else:
        run_every = getattr(entry.schedule, "run_every", None)
        if expression is not None:
            fields = {"schedule": expression, "tz": tz}
        elif isinstance(run_every, timedelta):
            fields = {"timeout": max(int(run_every.total_seconds()), 1)}
    if grace is not None:
        fields["grace"] = grace
    elif fields:
        try:
            period = period_of(entry.schedule)
        except Exception:  # an unusual schedule: the server's default grace
            period = None
        if period is not None:
            fields["grace"] = _common.grace_for_period(period)
    return fields


def _header(task: Any, name: str) -> Any:
    request = task.request
    value = getattr(request, name, None)
    if value is None:
        headers = getattr(request, "headers", None) or {}
        value = headers.get(name) if isinstance(headers, Mapping) else None
    return value


def enable(
    app: Any,
    client: Client | None = None,
    *,
    checks: Mapping[str, str] | None = None,
    create: bool = True,
    upsert: bool = True,
    grace: int | None = None,
) -> Client:
    """Report beat-scheduled task runs of ``app`` to the monitor.

    Args:
        app: the ``celery.Celery`` application.
        client: the :class:`~monitor_client.Client` to ping with (default ``Client()``).
        checks: beat entry name or task name → check uuid or slug (default: the entry name,
            slugified; tasks not sent by beat and not named here are not reported).
        create: auto-provision a check named by slug on its first ping (ping key URLs).
        upsert: with an API key, create or update each beat entry's check when beat starts.
        grace: seconds of grace of the upserted checks (default: half the entry's period,
            30 s to 1 h).

    Returns:
        The client in use.
    """
    from celery import signals

    client = client or Client()
    names = dict(checks or {})

    def on_beat_init(sender: Any = None, **_: Any) -> None:
        if getattr(sender, "app", app) is not app:  # another app's beat in this process
            return
        scheduler = sender.scheduler
        original = scheduler.apply_async
        tz = str(getattr(scheduler.app.conf, "timezone", None) or "UTC")

        def tagged_options(entry: Any) -> dict[str, Any] | None:
            if entry.name in SKIPPED_ENTRIES:
                return None
            options = dict(entry.options or {})
            headers = dict(options.get("headers") or {})
            headers[HEADER_CHECK] = names.get(entry.name) or slugify(entry.name)
            try:
                headers[HEADER_SCHEDULED] = entry_tick(entry).isoformat().replace("+00:00", "Z")
            except Exception:  # a schedule type without an estimate: no tick, still a run
                headers.pop(HEADER_SCHEDULED, None)
            options["headers"] = headers
            return options

        def apply_async(entry: Any, producer: Any = None, advance: bool = True, **kwargs: Any) -> Any:
            try:
                options = tagged_options(entry)
            except Exception:  # never keep beat from sending the task
                options = None
            if options is None:
                return original(entry, producer=producer, advance=advance, **kwargs)
            # The entry's options are swapped for this one send (beat sends from one thread)
            # rather than the entry rebuilt: schedulers such as django-celery-beat have entry
            # classes with other constructors.
            saved = entry.options
            entry.options = options
            try:
                return original(entry, producer=producer, advance=advance, **kwargs)
            finally:
                entry.options = saved

        scheduler.apply_async = apply_async
        if upsert and client.settings.api_key:
            for name, entry in list(scheduler.schedule.items()):
                if name in SKIPPED_ENTRIES:
                    continue
                check = names.get(name) or slugify(name)
                try:
                    fields = check_fields(entry, tz, grace)
                except Exception:  # an unusual schedule type: a check without a schedule
                    fields = {}
                _queue().submit(functools.partial(client.upsert_check, check, **fields))

    def check_of(task: Any) -> str | None:
        if task is None or getattr(task, "app", app) is not app:  # another app's task
            return None
        value = _header(task, HEADER_CHECK)
        if isinstance(value, str) and value:
            return value
        return names.get(task.name)

    def on_prerun(task_id: str | None = None, task: Any = None, **_: Any) -> None:
        check = check_of(task)
        if check is None:
            return
        scheduled = _header(task, HEADER_SCHEDULED)
        _queue().submit(
            functools.partial(
                client.ping, check, "start", rid=task_id, scheduled=scheduled or None, create=create
            )
        )

    def finish(task: Any, kind: str, body: str | None = None) -> None:
        check = check_of(task)
        if check is None:
            return
        scheduled = _header(task, HEADER_SCHEDULED)
        ping = functools.partial(
            client.ping,
            check,
            kind,
            rid=task.request.id,
            scheduled=scheduled or None,
            body=body,
            create=create,
        )
        _queue().submit(ping)

    def on_success(sender: Any = None, **_: Any) -> None:
        finish(sender, "success")

    def on_failure(
        sender: Any = None, exception: BaseException | None = None, einfo: Any = None, **_: Any
    ) -> None:
        tb = getattr(einfo, "tb", None)
        body = failure_body(type(exception) if exception is not None else Exception, exception, tb)
        finish(sender, "fail", body)

    def on_revoked(sender: Any = None, request: Any = None, terminated: bool = False, **_: Any) -> None:
        if sender is not None and getattr(sender, "app", app) is not app:
            return
        check = _header(sender, HEADER_CHECK) if request is None else getattr(request, HEADER_CHECK, None)
        check = check or (names.get(sender.name) if sender is not None else None)
        if not check or request is None:
            return
        scheduled = getattr(request, HEADER_SCHEDULED, None)
        reason = "terminated" if terminated else "revoked"
        _queue().submit(
            functools.partial(
                client.ping,
                check,
                "fail",
                rid=request.id,
                scheduled=scheduled,
                body=f"task {reason}",
                create=create,
            )
        )

    uid = f"monitor_client:{id(app)}"
    signals.beat_init.connect(on_beat_init, weak=False, dispatch_uid=uid + ":beat")
    signals.task_prerun.connect(on_prerun, weak=False, dispatch_uid=uid + ":prerun")
    signals.task_success.connect(on_success, weak=False, dispatch_uid=uid + ":success")
    signals.task_failure.connect(on_failure, weak=False, dispatch_uid=uid + ":failure")
    signals.task_revoked.connect(on_revoked, weak=False, dispatch_uid=uid + ":revoked")
    return client
