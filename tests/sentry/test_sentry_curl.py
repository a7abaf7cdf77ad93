# ruff: noqa: E501  (the curl lines are copied as Sentry's guide writes them, unwrapped)
"""``curl`` against the HTTP check-in endpoint, line for line as Sentry's Crons HTTP guide writes it.

Only ``SENTRY_INGEST``, the project id and the public key differ: they are the monitor's DSN.
The monitors the guide expects to exist already (created in Sentry's UI) are created here
through the monitor's API; the guide's upsert creates its own.
"""

from __future__ import annotations

import json
import subprocess
import uuid

from tests.sentry.conftest import Monitor


def shell(script: str, **env: str) -> list[str]:
    """Run ``script`` with bash; its stdout lines (each curl's answer)."""
    proc = subprocess.run(["bash", "-euc", script], capture_output=True, timeout=60, check=False, env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    return [line for line in proc.stdout.decode().split("\n") if line]


def crons_url(monitor: Monitor, slug: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "SENTRY_INGEST": monitor.base,
        "SENTRY_CRONS": f"{monitor.base}/api/{monitor.project_id}/cron/{slug}/{monitor.public_key}/",
    }


def test_curl_check_ins_as_in_sentrys_guide(monitor: Monitor) -> None:
    slug = f"curl-{uuid.uuid4().hex[:6]}"
    monitor.api("POST", "checks/", {"name": slug, "slug": slug, "timeout": 3600, "grace": 60})
    answers = shell(
        """
        # 🟡 Notify Sentry your job is running:
        curl "${SENTRY_CRONS}?status=in_progress"; echo
        # Execute your scheduled task here...
        # 🟢 Notify Sentry your job has completed successfully:
        curl "${SENTRY_CRONS}?status=ok"; echo
        # 🟡 Notify Sentry your job is running in the dev environment:
        curl "${SENTRY_CRONS}?environment=dev&status=in_progress"; echo
        # 🟢 Notify Sentry your dev environment job has completed successfully:
        curl "${SENTRY_CRONS}?environment=dev&status=ok"; echo
        """,
        **crons_url(monitor, slug),
    )
    assert [json.loads(a) for a in answers] == [{"id": "0" * 32}] * 4
    for check_slug in (slug, f"{slug}--dev"):
        check = monitor.check(check_slug)
        assert check is not None
        runs = monitor.listing(check, "runs")
        assert len(runs) == 1 and runs[0]["started"] and runs[0]["finished"], runs  # paired
        assert [p["type"] for p in monitor.listing(check, "pings")] == ["start", "success"]
    dev = monitor.check(f"{slug}--dev")
    assert dev is not None and dev["tags"] == "env:dev" and dev["timeout"] == 3600


def test_curl_failure_and_overlapping_jobs_with_check_in_ids(monitor: Monitor) -> None:
    slug = f"curl-fail-{uuid.uuid4().hex[:6]}"
    monitor.api("POST", "checks/", {"name": slug, "slug": slug, "timeout": 3600})
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    answers = shell(
        """
        curl "${SENTRY_CRONS}?check_in_id=${FIRST}&status=in_progress"; echo
        curl "${SENTRY_CRONS}?check_in_id=${SECOND}&status=in_progress"; echo
        curl "${SENTRY_CRONS}?check_in_id=${SECOND}&status=ok"; echo
        # 🔴 Notify Sentry your job has failed:
        curl "${SENTRY_CRONS}?check_in_id=${FIRST}&status=error"; echo
        """,
        FIRST=first,
        SECOND=second,
        **crons_url(monitor, slug),
    )
    assert [json.loads(a)["id"] for a in answers] == [
        uuid.UUID(x).hex for x in (first, second, second, first)
    ]
    check = monitor.check(slug)
    assert check is not None
    runs = {r["rid"]: r for r in monitor.listing(check, "runs")}
    assert set(runs) == {first, second}
    assert runs[first]["outcome"] == "failed" and runs[first]["finished"] is not None
    assert runs[second]["finished"] is not None
    assert "failed" in [a["kind"] for a in monitor.listing(check, "alerts")]


def test_curl_upsert_creates_the_monitor_and_bad_input_is_refused(monitor: Monitor) -> None:
    slug = f"curl-upsert-{uuid.uuid4().hex[:6]}"
    answers = shell(
        """
        curl -X POST "${SENTRY_CRONS}" \\
            --header 'Content-Type: application/json' \\
            --data-raw '{"monitor_config": {"schedule": {"type": "crontab", "value": "0 * * * *"}, "checkin_margin": 5, "max_runtime": 30, "timezone": "America/Los_Angeles"}, "status": "ok"}'
        echo
        curl -s -w ' %{http_code}' "${SENTRY_CRONS}?status=done"; echo
        curl -s -w ' %{http_code}' "${SENTRY_INGEST}/api/${PROJECT}/cron/unknown-job/${KEY}/?status=ok"; echo
        curl -s -w ' %{http_code}' "${SENTRY_INGEST}/api/${PROJECT}/cron/unknown-job/${WRONG_KEY}/?status=ok"
        echo
        """,
        PROJECT=monitor.project_id,
        WRONG_KEY="0123456789abcdef0123456789abcdef",
        KEY=monitor.public_key,
        **crons_url(monitor, slug),
    )
    assert json.loads(answers[0]) == {"id": "0" * 32}
    check = monitor.check(slug)
    assert check is not None
    assert (check["schedule"], check["tz"], check["grace"], check["max_runtime"]) == (
        "0 * * * *",
        "America/Los_Angeles",
        300,
        1800,
    )
    assert check["n_pings"] == 1
    statuses = [a.rsplit(" ", 1) for a in answers[1:]]
    assert [s for _, s in statuses] == ["400", "404", "403"]
    assert json.loads(statuses[0][0])["detail"].startswith("status: must be one of in_progress, ok, error")
    assert monitor.check("unknown-job") is None
