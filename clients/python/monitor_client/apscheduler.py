"""APScheduler 3.x integration: each job run reported as one run, bound to its scheduled fire time.

One call enables it::

    from apscheduler.schedulers.background import BackgroundScheduler
    from monitor_client import apscheduler as monitor_apscheduler

    scheduler = BackgroundScheduler()
    monitor_apscheduler.enable(scheduler)      # Client() from MONITOR_* variables

A listener on the scheduler's events sends, for a job with id ``nightly_billing`` (check slug
``nightly_billing``, or ``checks[job id]``):

* ``EVENT_JOB_SUBMITTED`` → ``start`` with ``scheduled`` = the job's *scheduled* fire time (not
  the moment it ran) and a run id derived from (job id, fire time);
* ``EVENT_JOB_EXECUTED`` → ``success``; ``EVENT_JOB_ERROR`` → ``fail`` with the exception and
  traceback as body;
* ``EVENT_JOB_MAX_INSTANCES`` → ``skip`` for each fire time APScheduler refused to start (the
  previous run was still going): the tick was skipped on purpose, not missed.

A fire time APScheduler drops as *missed* (``misfire_grace_time``) is not pinged: the monitor
sees no run for that tick and reports it missed, which is what happened. When one submission
carries several fire times (catch-up without ``coalesce``) APScheduler runs them one after
another but announces them together; the first gets its ``start`` at submission, the later ones
just before their finish, so they are not reported as overlapping.

The listener itself never pings: it hands each event to :data:`sender`, one background
thread with a bounded queue, so a monitor that is down never delays the scheduler's thread (jobs
due together start together) — see :mod:`monitor_client._background`.
``sender.drain(timeout)`` waits until the queued pings are sent (it also runs at exit).

APScheduler 4 replaces these events and is not covered.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from monitor_client import _common
from monitor_client._background import Sender
from monitor_client._client import Client

#: sends the pings of every enabled scheduler of this process, in order, off their threads
sender = Sender("monitor-apscheduler")

NAMESPACE = uuid.UUID("8a0f3c52-41d4-4c1e-9a57-53c0d3b1e4a7")


def slugify(name: str) -> str:
    """A check slug for a job id (``[a-z0-9_-]``, at most 100 characters)."""
    return _common.slugify(name, "apscheduler-job")


def run_id(job_id: str, fire_time: datetime) -> str:
    """The run id of one fire of a job: a UUID5 of (job id, fire time), the same in every process."""
    return str(uuid.uuid5(NAMESPACE, f"{job_id}@{fire_time.isoformat()}"))


class Untranslatable(ValueError):
    """A cron trigger the monitor's cron dialects cannot express exactly."""


def _values(expression: Any, minimum: int, maximum: int, shift: int = 0) -> str:
    """One APScheduler range/all expression as cron text (``shift`` moves values: weekdays)."""
    kind = type(expression).__name__
    step = getattr(expression, "step", None)
    if kind == "AllExpression":
        if shift:  # weekdays 0-6 (Monday first) → 1-7 (Sunday last)
            return "*" if not step else f"{minimum + shift}-{maximum + shift}/{step}"
        return "*" if not step else f"*/{step}"
    if kind in ("RangeExpression", "MonthRangeExpression", "WeekdayRangeExpression"):
        first = expression.first
        last = expression.last if expression.last is not None else maximum
        if first == last and not step:
            return str((first + shift) % 7 if shift else first)
        text = f"{first + shift}-{last + shift}"
        return f"{text}/{step}" if step else text
    raise Untranslatable(f"{kind} ({expression})")


def _field(trigger: Any, name: str) -> Any:
    return next(f for f in trigger.fields if f.name == name)


def _is_all(field: Any) -> bool:
    return all(type(e).__name__ == "AllExpression" and not e.step for e in field.expressions)


def _join(field: Any, minimum: int, maximum: int, shift: int = 0) -> str:
    parts = [_values(e, minimum, maximum, shift) for e in field.expressions]
    return "*" if "*" in parts else ",".join(parts)


def translate(trigger: Any) -> dict[str, str]:
    """An APScheduler 3 ``CronTrigger`` as ``{"schedule", "dialect", "tz"}``, field by field.

    * ``second`` other than ``0`` → the ``seconds`` dialect (6 fields, seconds first);
    * ``day_of_week``: APScheduler numbers weekdays Monday = 0 (names too): ``mon-fri`` (and
      ``from_crontab("… 1-5")``, which APScheduler 3 reads the same way: Tuesday-Saturday) is
      mapped to what APScheduler actually fires;
    * ``day="last"`` → ``L``; ``day="1st mon"`` / ``"last fri"`` → ``1#1`` / ``5L`` (day of week);
    * month names → numbers.

    Raises:
        Untranslatable: a ``year`` or ``week`` restriction, both ``day`` and ``day_of_week``
            restricted (APScheduler requires both, cron either), or an expression with no
            exact cron equivalent (the reason says which).
    """
    for name in ("year", "week"):
        if not _is_all(_field(trigger, name)):
            raise Untranslatable(f"{name}={_field(trigger, name)} has no cron field")
    day, dow = _field(trigger, "day"), _field(trigger, "day_of_week")
    kinds = {type(e).__name__ for e in day.expressions}
    dom_text = "*"
    dow_text = "*" if _is_all(dow) else _join(dow, 0, 6, shift=1)
    if kinds == {"WeekdayPositionExpression"}:
        if dow_text != "*":
            raise Untranslatable(f"day={day} together with day_of_week={dow}")
        positions = []
        for e in day.expressions:
            weekday = (e.weekday + 1) % 7
            positions.append(f"{weekday}L" if e.option_num == 5 else f"{weekday}#{e.option_num + 1}")
        dow_text = ",".join(positions)
    elif kinds == {"LastDayOfMonthExpression"}:
        dom_text = "L"
    elif kinds & {"WeekdayPositionExpression", "LastDayOfMonthExpression"}:
        raise Untranslatable(f"day={day} mixes positions with days")
    elif not _is_all(day):
        dom_text = _join(day, 1, 31)
    if dom_text != "*" and dow_text != "*":
        raise Untranslatable(
            f"day={day} and day_of_week={dow}: APScheduler fires when both match, cron when either does"
        )
    fields = [
        _join(_field(trigger, "minute"), 0, 59),
        _join(_field(trigger, "hour"), 0, 23),
        dom_text,
        _join(_field(trigger, "month"), 1, 12),
        dow_text,
    ]
    second = _join(_field(trigger, "second"), 0, 59)
    tz = str(getattr(trigger, "timezone", "UTC"))
    if second == "0":
        return {"schedule": " ".join(fields), "dialect": "unix", "tz": tz}
    return {"schedule": " ".join([second, *fields]), "dialect": "seconds", "tz": tz}


def fire_gaps(trigger: Any, now: datetime, count: int = 20) -> list[float]:
    """Seconds between the trigger's next ``count`` fire times after ``now``."""
    times: list[datetime] = []
    previous = None
    current = now
    for _ in range(count):
        fire = trigger.get_next_fire_time(previous, current)
        if fire is None:
            break
        times.append(fire)
        previous, current = fire, fire + timedelta(microseconds=1)
    return [(b - a).total_seconds() for a, b in itertools.pairwise(times) if b > a]


def cron_fields(trigger: Any, grace: int | None = None, *, job: str = "") -> dict[str, Any]:
    """Management API fields for a job's trigger, with a grace (``grace``, else half the
    shortest period between runs, 30 s to 1 h).

    An ``IntervalTrigger`` is a simple check with its period. A ``CronTrigger`` is a cron
    check (:func:`translate`); one that cannot be translated exactly is logged as a warning
    and becomes a simple check whose period is the longest gap among its next 20 fire times
    (late, never falsely missed) — never a cron check with a wrong schedule. Other triggers:
    no fields (the server's defaults).
    """
    from datetime import UTC

    fields: dict[str, Any] = {}
    interval = getattr(trigger, "interval", None)
    gaps: list[float] = []
    if isinstance(interval, timedelta):
        fields = {"timeout": max(int(interval.total_seconds()), 1)}
        gaps = [interval.total_seconds()]
    elif hasattr(trigger, "fields"):
        gaps = fire_gaps(trigger, datetime.now(UTC))
        try:
            fields = translate(trigger)
        except Untranslatable as error:
            period = max(gaps) if gaps else 86400.0
            _common.logger.warning(
                "APScheduler job %s: its trigger %s cannot be expressed as a cron schedule (%s); "
                "monitored as a simple check expecting a run every %d s instead",
                job or "?",
                trigger,
                error,
                int(period),
                extra={"action": "monitor_trigger_untranslatable"},
            )
            fields = {"timeout": max(int(period), 1)}
    if not fields:
        return {}
    if grace is not None:
        fields["grace"] = grace
    elif gaps:
        derived = _common.grace_for_period(min(gaps))
        jitter = getattr(trigger, "jitter", None) or 0  # a run may start that much after its time
        fields["grace"] = max(derived, int(jitter) + 1) if jitter else derived
    return fields


def enable(
    scheduler: Any,
    client: Client | None = None,
    *,
    checks: Mapping[str, str] | None = None,
    create: bool = True,
    upsert: bool = True,
    grace: int | None = None,
) -> Client:
    """Report the runs of ``scheduler``'s jobs to the monitor.

    Args:
        scheduler: an APScheduler 3.x scheduler (``BackgroundScheduler``, ``BlockingScheduler``,
            ``AsyncIOScheduler`` …).
        client: the :class:`~monitor_client.Client` to ping with (default ``Client()``).
        checks: job id → check uuid or slug (default: the job id, slugified). With ``checks``
            given, only the jobs named in it are reported.
        create: auto-provision a check named by slug on its first ping.
        upsert: with an API key, create or update each job's check (period or cron schedule,
            :func:`cron_fields`) when the job is added (jobs added before the scheduler starts:
            when it starts; jobs already there: now), not at its first fire.
        grace: seconds of grace of the upserted checks (default: half the shortest period
            between runs, 30 s to 1 h).

    Returns:
        The client in use.
    """
    from apscheduler import events

    client = client or Client()
    names = dict(checks) if checks is not None else None
    started: dict[tuple[str, datetime], threading.Event] = {}
    upserted: set[str] = set()
    lock = threading.Lock()

    def check_of(job_id: str) -> str | None:
        if names is None:
            return slugify(job_id)
        return names.get(job_id)

    def start(check: str, job_id: str, fire_time: datetime) -> None:
        key = (job_id, fire_time)
        with lock:
            # EXECUTED may be dispatched (pool thread) before SUBMITTED (scheduler thread): the
            # first of the two sends the start, and a fire time is remembered after its finish
            if key in started:
                return
            started[key] = done = threading.Event()
            while len(started) > 1000:
                del started[next(iter(started))]
        try:
            client.ping(check, "start", rid=run_id(job_id, fire_time), scheduled=fire_time, create=create)
        finally:
            done.set()

    def provision(check: str, job: Any, again: bool = False) -> None:
        with lock:
            if check in upserted and not again:
                return
            upserted.add(check)
        try:
            fields = cron_fields(job.trigger, grace, job=job.id)
        except Exception:  # an unusual trigger: a check with the server's defaults
            fields = {}
        client.upsert_check(check, **fields)

    def provision_by_id(job_id: str, again: bool) -> None:
        check = check_of(job_id)
        job = scheduler.get_job(job_id)
        if check is not None and job is not None:
            provision(check, job, again)

    def listener(event: Any) -> None:
        # in the scheduler's thread: only queue the work, never wait for the monitor
        if check_of(event.job_id) is None:
            return
        if event.code in (events.EVENT_JOB_ADDED, events.EVENT_JOB_MODIFIED):
            if upsert and client.settings.api_key:
                sender.submit(provision_by_id, event.job_id, event.code == events.EVENT_JOB_MODIFIED)
            return
        sender.submit(handle, event)

    def handle(event: Any) -> None:
        check = check_of(event.job_id)
        if check is None:
            return
        if event.code == events.EVENT_JOB_SUBMITTED:
            if event.scheduled_run_times:
                start(check, event.job_id, event.scheduled_run_times[0])
        elif event.code == events.EVENT_JOB_MAX_INSTANCES:
            for fire_time in event.scheduled_run_times:
                client.ping(check, "skip", scheduled=fire_time, create=create)
        elif event.code in (events.EVENT_JOB_EXECUTED, events.EVENT_JOB_ERROR):
            fire_time = event.scheduled_run_time
            start(check, event.job_id, fire_time)  # no-op when sent at submission
            with lock:
                done = started.get((event.job_id, fire_time))
            if done is not None:
                done.wait(client.settings.timeout)
            if event.code == events.EVENT_JOB_EXECUTED:
                kind, body = "success", None
            else:
                error = event.exception
                body = f"{type(error).__name__}: {error}\n\n{event.traceback or ''}"
                kind = "fail"
            client.ping(
                check,
                kind,
                rid=run_id(event.job_id, fire_time),
                scheduled=fire_time,
                body=body,
                create=create,
            )

    scheduler.add_listener(
        listener,
        events.EVENT_JOB_SUBMITTED
        | events.EVENT_JOB_EXECUTED
        | events.EVENT_JOB_ERROR
        | events.EVENT_JOB_MAX_INSTANCES
        | events.EVENT_JOB_ADDED
        | events.EVENT_JOB_MODIFIED,
    )
    if upsert and client.settings.api_key:
        for job in scheduler.get_jobs():  # added before enable(): their checks now
            check = check_of(job.id)
            if check is not None:
                sender.submit(provision, check, job)
    return client
