"""A Celery app whose beat is monitored by ``sentry-sdk``'s ``CeleryIntegration(monitor_beat_tasks=True)``.

Imported by the real ``celery worker`` and ``celery beat`` processes that
``test_sentry_celery.py`` starts (``-A celery_jobs``), configured by environment variables:
``SENTRY_DSN`` (the monitor's DSN), ``BROKER_URL``, ``QUEUE`` (a queue of the test's own) and
``PREFIX`` (the beat entries' names, which are the monitor slugs).

``DueAtStart`` is celery's own persistent scheduler with every entry's last run set two
minutes back, so beat fires each entry as soon as it starts instead of at the next minute.
"""

from __future__ import annotations

import os
from datetime import timedelta

import sentry_sdk
from celery import Celery
from celery.beat import PersistentScheduler
from celery.schedules import crontab, schedule
from sentry_sdk.integrations.celery import CeleryIntegration

sentry_sdk.init(dsn=os.environ["SENTRY_DSN"], integrations=[CeleryIntegration(monitor_beat_tasks=True)])

PREFIX = os.environ["PREFIX"]
app = Celery("celery_jobs", broker=os.environ["BROKER_URL"])
app.conf.task_default_queue = os.environ["QUEUE"]
app.conf.timezone = "Europe/Berlin"
app.conf.broker_connection_retry_on_startup = True
app.conf.beat_schedule = {
    f"{PREFIX}-report": {"task": "celery_jobs.report", "schedule": crontab(minute="*")},
    f"{PREFIX}-sync": {"task": "celery_jobs.report", "schedule": schedule(timedelta(minutes=1))},
    f"{PREFIX}-export": {"task": "celery_jobs.export", "schedule": crontab(minute="*/1")},
}


@app.task
def report() -> str:
    return "done"


@app.task
def export() -> None:
    raise RuntimeError("the export failed")


class DueAtStart(PersistentScheduler):  # type: ignore[misc]
    def setup_schedule(self) -> None:
        super().setup_schedule()
        for entry in self.schedule.values():
            entry.last_run_at = self.app.now() - timedelta(minutes=2)
