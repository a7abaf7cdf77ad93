"""Jobs instrumented with the real ``sentry-sdk`` Crons API, run as their own process.

``python sdk_python.py DSN PREFIX COMPRESSION [ENVIRONMENT]``: every monitor slug starts with
PREFIX; COMPRESSION is the transport's ``br`` or ``gzip``. Runs debug-logged, so the SDK's own
report of each answer it got is on stderr.
"""

from __future__ import annotations

import contextlib
import sys
import time

import sentry_sdk
from sentry_sdk.crons import capture_checkin, monitor

dsn, prefix, compression = sys.argv[1:4]
environment = sys.argv[4] if len(sys.argv) > 4 else None
sentry_sdk.init(
    dsn=dsn,
    debug=True,
    environment=environment,
    _experiments={"transport_compression_algo": compression},
)

crontab = {
    "schedule": {"type": "crontab", "value": "*/5 * * * *"},
    "checkin_margin": 2,
    "max_runtime": 10,
    "timezone": "Europe/Berlin",
    "failure_issue_threshold": 2,
    "recovery_threshold": 3,
    "owner": "team:ops",
}
hourly = {"schedule": {"type": "interval", "value": 1, "unit": "hour"}, "checkin_margin": 5}

# capture_checkin with monitor_config: start, then the finish with the start's id and a duration
check_in_id = capture_checkin(
    monitor_slug=f"{prefix}-configured", status="in_progress", monitor_config=crontab
)
time.sleep(0.3)
capture_checkin(
    monitor_slug=f"{prefix}-configured",
    check_in_id=check_in_id,
    status="ok",
    duration=0.3,
    monitor_config=crontab,
)
# capture_checkin without monitor_config, for a check created through the monitor's API
capture_checkin(monitor_slug=f"{prefix}-precreated", status="ok")


@monitor(monitor_slug=f"{prefix}-decorated", monitor_config=hourly)
def nightly() -> None:
    time.sleep(0.2)


@monitor(monitor_slug=f"{prefix}-broken", monitor_config=hourly)
def broken() -> None:
    raise RuntimeError("the export failed")


nightly()
with contextlib.suppress(RuntimeError):
    broken()
with monitor(monitor_slug=f"{prefix}-context", monitor_config=hourly):
    time.sleep(0.1)
# an error event in the same transport: accepted and dropped by the monitor
sentry_sdk.capture_message("this event goes nowhere")
sentry_sdk.flush(timeout=20)
print(check_in_id)
