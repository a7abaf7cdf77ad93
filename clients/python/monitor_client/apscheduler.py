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


def cron_fields(trigger: Any) -> dict[str, Any]:
    """Management API fields for a job's trigger: a period, a cron schedule when it maps onto
    5 unix fields (seconds 0, any year and week, any day of week: APScheduler numbers weekdays
    from Monday = 0, unix from Sunday = 0), else nothing."""
    interval = getattr(trigger, "interval", None)
    if isinstance(interval, timedelta):
        return {"timeout": max(int(interval.total_seconds()), 1)}
    fields = {getattr(f, "name", ""): str(f) for f in getattr(trigger, "fields", [])}
    if not fields:
        return {}
    if fields.get("second") != "0" or fields.get("year") != "*" or fields.get("week") != "*":
        return {}
    if fields.get("day_of_week") != "*":
        return {}
    expression = " ".join(fields[name] for name in ("minute", "hour", "day", "month")) + " *"
    return {"schedule": expression, "tz": str(getattr(trigger, "timezone", "UTC"))}


def enable(
    scheduler: Any,
    client: Client | None = None,
    *,
    checks: Mapping[str, str] | None = None,
    create: bool = True,
    upsert: bool = True,
) -> Client:
    """Report the runs of ``scheduler``'s jobs to the monitor.

    Args:
        scheduler: an APScheduler 3.x scheduler (``BackgroundScheduler``, ``BlockingScheduler``,
            ``AsyncIOScheduler`` …).
        client: the :class:`~monitor_client.Client` to ping with (default ``Client()``).
        checks: job id → check uuid or slug (default: the job id, slugified). With ``checks``
            given, only the jobs named in it are reported.
        create: auto-provision a check named by slug on its first ping.
        upsert: with an API key, create or update a job's check (period or cron schedule) the
            first time it is submitted.

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

    def provision(check: str, job_id: str) -> None:
        with lock:
            if check in upserted:
                return
            upserted.add(check)
        job = scheduler.get_job(job_id)
        if job is not None:
            client.upsert_check(check, **cron_fields(job.trigger))

    def listener(event: Any) -> None:
        # in the scheduler's thread: only queue the work, never wait for the monitor
        if check_of(event.job_id) is not None:
            sender.submit(handle, event)

    def handle(event: Any) -> None:
        check = check_of(event.job_id)
        if check is None:
            return
        if event.code == events.EVENT_JOB_SUBMITTED:
            if upsert and client.settings.api_key:
                provision(check, event.job_id)
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
        | events.EVENT_JOB_MAX_INSTANCES,
    )
    return client
