"""The jobs file's ``[[jobs]]`` tables (DESIGN §8): defaults, every key, errors naming the key."""

from __future__ import annotations

import tomllib
from datetime import timedelta
from typing import Any

import pytest

from monitor.domain.errors import ValidationError, ValidationErrors
from monitor.domain.jobs import Catchup, ConcurrencyPolicy, parse_jobs

FULL = """
[[jobs]]
name = "billing"
schedule = "0 3 * * *"
tz = "Europe/Berlin"
command = ["python", "bill.py"]
env = { BILLING_DB = "/var/lib/billing.db" }
kill_after = 3600
grace = 300
max_runtime = 1800
concurrency_policy = "Forbid"
starting_deadline = 600
catchup = "latest"
max_catchup = 10

[[jobs]]
name = "warm-cache"
schedule = "*/30 * * * * *"
dialect = "seconds"

[jobs.http]
method = "post"
url = "https://example.com/warm"
headers = { Authorization = "Bearer x" }
body = "{}"

[[jobs]]
name = "report"
schedule = "@daily"
command = "generate-report | mail -s report ops@example.com"
"""


def test_full_file_parses_every_key() -> None:
    billing, warm, report = parse_jobs(tomllib.loads(FULL))
    assert billing.name == "billing"
    assert billing.lease_name == "job-billing"
    assert billing.schedule.tz == "Europe/Berlin"
    assert billing.command == ("python", "bill.py")
    assert billing.env == {"BILLING_DB": "/var/lib/billing.db"}
    assert billing.kill_after == timedelta(hours=1)
    assert (billing.grace, billing.max_runtime) == (300, 1800)
    assert billing.concurrency_policy is ConcurrencyPolicy.FORBID
    assert billing.starting_deadline == timedelta(minutes=10)
    assert (billing.catchup, billing.max_catchup) == (Catchup.LATEST, 10)
    assert warm.command is None and warm.http is not None
    assert (warm.http.method, warm.http.url, warm.http.body) == ("POST", "https://example.com/warm", "{}")
    assert warm.schedule.dialect.value == "seconds"
    assert report.command == ("sh", "-c", "generate-report | mail -s report ops@example.com")


def test_defaults() -> None:
    (job,) = parse_jobs({"jobs": [{"name": "a", "schedule": "* * * * *", "command": ["true"]}]})
    assert job.concurrency_policy is ConcurrencyPolicy.ALLOW
    assert job.catchup is Catchup.ALL and job.max_catchup == 100
    assert job.starting_deadline is None and job.kill_after is None and job.max_runtime is None
    assert job.schedule.tz == "UTC" and job.schedule.dialect.value == "unix"
    assert job.grace == 60


def _document(keys: dict[str, Any]) -> dict[str, Any]:
    return {"jobs": [{"name": "ok", "schedule": "* * * * *", "command": ["true"]}, keys]}


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        pytest.param({"schedule": "* * * * *", "command": "x"}, "jobs[1].name: is required", id="no-name"),
        pytest.param(
            {"name": "Bad Name", "schedule": "* * * * *", "command": "x"},
            "jobs[1].name: 'Bad Name' must match",
            id="bad-name",
        ),
        pytest.param(
            {"name": "ok", "schedule": "* * * * *", "command": "x"},
            "jobs[1].name: 'ok' is used by jobs[0]",
            id="dup",
        ),
        pytest.param(
            {"name": "monitor-scheduler", "schedule": "* * * * *", "command": "x"},
            "jobs[1].name: 'monitor-scheduler' is the scheduler's own liveness check",
            id="reserved",
        ),
        pytest.param(
            {"name": "b", "schedule": "0 0 * * 8", "command": "x"},
            "jobs[1].schedule: field 5 (day of week): 8 is out of range 0-7",
            id="bad-cron",
        ),
        pytest.param(
            {"name": "b", "schedule": "*/2 * * * * *", "command": "x"},
            "jobs[1].schedule: ",
            id="six-fields-unix",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "dialect": "vixie", "command": "x"},
            "jobs[1].dialect: ",
            id="dialect",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "tz": "+02:00", "command": "x"}, "jobs[1].tz: ", id="tz"
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *"}, "jobs[1].command: give exactly one", id="no-command"
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": "x", "http": {"url": "http://x"}},
            "jobs[1].command: give exactly one",
            id="both",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": []}, "jobs[1].command: must be", id="empty-argv"
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "http": {"url": "ftp://x"}},
            "jobs[1].http.url: must start",
            id="url",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "http": {"url": "http://x", "verb": "GET"}},
            "jobs[1].http.verb: unknown key",
            id="http-key",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": "x", "concurency_policy": "Forbid"},
            "jobs[1].concurency_policy: unknown key",
            id="typo",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": "x", "concurrency_policy": "forbid"},
            "jobs[1].concurrency_policy: 'forbid' is not one of Allow, Forbid, Replace, BufferOne, BufferAll",
            id="policy-case",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": "x", "catchup": "some"},
            "jobs[1].catchup: 'some' is not one of all, latest, none",
            id="catchup",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": "x", "max_catchup": 0},
            "jobs[1].max_catchup: must be at least 1",
            id="max-catchup",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": "x", "grace": 1.5},
            "jobs[1].grace: must be a whole number",
            id="grace",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": "x", "starting_deadline": "10s"},
            "jobs[1].starting_deadline: must be a number of seconds",
            id="deadline",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": "x", "env": {"A": 1}},
            "jobs[1].env.A: must be a string",
            id="env",
        ),
        # the bounds the check API enforces: a job it would refuse is refused by --check already
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": "x", "grace": 99999999999},
            "jobs[1].grace: must be at most 31536000",
            id="grace-over-a-year",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": "x", "max_runtime": 31536001},
            "jobs[1].max_runtime: must be at most 31536000",
            id="max-runtime-over-a-year",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": "x", "kill_after": float("nan")},
            "jobs[1].kill_after: must be a finite number",
            id="kill-after-nan",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": "x", "starting_deadline": float("inf")},
            "jobs[1].starting_deadline: must be a finite number",
            id="deadline-inf",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "http": {"url": "http://x/", "timeout": 0}},
            "jobs[1].http.timeout: must be at least 0.1",
            id="http-timeout",
        ),
    ],
)
def test_errors_name_the_key(keys: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as error:
        parse_jobs(_document(keys))
    assert str(error.value).startswith(message), str(error.value)


def test_file_needs_jobs() -> None:
    with pytest.raises(ValidationError, match="jobs: the file needs at least one"):
        parse_jobs({})
    with pytest.raises(ValidationError, match="job: unknown top-level key"):
        parse_jobs({"job": []})


@pytest.mark.parametrize(
    ("keys", "where"),
    [
        # the kernel cannot exec these: the scheduler then fails every round for the job, leaves
        # each claim `started` forever and sends no ping at all (the check stays `new`, silent)
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": ["echo", "a\x00b"]},
            "jobs[1].command",
            id="nul-in-argv",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": "echo a\x00b"},
            "jobs[1].command",
            id="nul-in-shell-command",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": "x", "env": {"A=B": "x"}},
            "jobs[1].env",
            id="equals-in-env-name",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": "x", "env": {"": "x"}},
            "jobs[1].env",
            id="empty-env-name",
        ),
        pytest.param(
            {"name": "b", "schedule": "* * * * *", "command": "x", "env": {"A": "a\x00b"}},
            "jobs[1].env.A",
            id="nul-in-env-value",
        ),
    ],
)
def test_commands_the_kernel_cannot_exec_are_refused(keys: dict[str, Any], where: str) -> None:
    with pytest.raises(ValidationError) as error:
        parse_jobs(_document(keys))
    assert str(error.value).startswith(where), str(error.value)


def test_every_invalid_job_is_named_not_only_the_first() -> None:
    document = {
        "jobs": [
            {"name": "a", "schedule": "0 0 * * 8", "command": "true"},
            {"name": "b", "schedule": "* * * * *", "command": ["true"]},
            {"name": "b", "schedule": "* * * * *", "command": ["true"]},
            {"name": "c", "schedule": "* * * * *", "command": ["echo", "a\x00b"]},
        ]
    }
    with pytest.raises(ValidationErrors) as error:
        parse_jobs(document)
    assert [e.field for e in error.value.errors] == ["jobs[0].schedule", "jobs[2].name", "jobs[3].command[1]"]
    assert str(error.value).startswith("jobs[0].schedule: field 5")  # one line: the first
