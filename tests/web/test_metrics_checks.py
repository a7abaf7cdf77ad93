"""``/metrics`` per-check series, ping/alert/notification counts and sweep durations,
parsed with prometheus-client's own parser, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitor.services import sweeps
from monitor.settings import Settings
from tests.conftest import Api
from tests.e2e.test_metrics import Samples, scrape, series, value
from tests.support.app import create_check, list_of
from tests.support.process import REPO_ROOT
from tests.support.receivers import HttpReceiver


@pytest.fixture
def settings_factory(settings_factory: Callable[..., Settings]) -> Callable[..., Settings]:
    """This module's app exports the per-check series (MONITOR_METRICS_PER_CHECK=1)."""

    def make(**overrides: Any) -> Settings:
        return settings_factory(**{"metrics_per_check": True, **overrides})

    return make


def check_value(found: Samples, metric: str, **labels: str) -> float:
    return found[(metric, tuple(sorted(labels.items())))]


async def test_per_check_status_and_last_ping_age(api: Api) -> None:
    good = await create_check(api, name="good job")
    bad = await create_check(api, name="bad job")
    never = await create_check(api, name="never pinged")
    await api.client.get(f"/ping/{good['uuid']}")
    await api.client.get(f"/ping/{bad['uuid']}/start")
    await api.client.get(f"/ping/{bad['uuid']}/fail")
    api.clock.advance(42)
    found = await scrape(api)
    assert check_value(found, "monitor_check_up", uuid=good["uuid"], name="good job") == 1
    assert check_value(found, "monitor_check_up", uuid=bad["uuid"], name="bad job") == 0
    assert check_value(found, "monitor_check_status", uuid=bad["uuid"], name="bad job", status="down") == 1
    assert check_value(found, "monitor_check_status", uuid=bad["uuid"], name="bad job", status="up") == 0
    assert (
        check_value(found, "monitor_check_status", uuid=never["uuid"], name="never pinged", status="new") == 1
    )
    assert check_value(found, "monitor_check_last_ping_age_seconds", uuid=good["uuid"], name="good job") == 42
    ages = series(found, "monitor_check_last_ping_age_seconds")
    assert all(dict(labels)["uuid"] != never["uuid"] for labels in ages)
    assert value(found, "monitor_pings_total", kind="success") == 1
    assert value(found, "monitor_pings_total", kind="start") == 1
    assert value(found, "monitor_pings_total", kind="fail") == 1
    assert value(found, "monitor_alerts_total", kind="failed") == 1


async def test_notification_results_and_sweep_durations(api: Api, http_receiver: HttpReceiver) -> None:
    channel = await api.client.post(
        "/api/v3/channels/", json={"name": "hook", "url": http_receiver.url}, headers=api.headers
    )
    assert channel.status_code == 201, channel.text
    check = await create_check(api, name="noisy", channels="*")
    await api.client.get(f"/ping/{check['uuid']}/fail")
    found = await scrape(api)
    assert value(found, "monitor_notifications", status="pending") == 1
    before = sweeps.snapshot()
    sweeps.record_sweep(0.25)
    found = await scrape(api)
    assert value(found, "monitor_evaluator_sweep_duration_seconds_count") == before.count + 1
    assert value(found, "monitor_evaluator_last_sweep_duration_seconds") == 0.25


async def test_grafana_dashboard_queries_only_exported_metrics(api: Api) -> None:
    check = await create_check(api, name="graphed")
    await api.client.get(f"/ping/{check['uuid']}")
    sweeps.record_sweep(0.1)
    text = (await api.client.get("/metrics")).text
    exported = set()
    for family in text_string_to_metric_families(text):  # families without samples count too
        exported |= {family.name, f"{family.name}_total", f"{family.name}_sum", f"{family.name}_count"}
    dashboard = json.loads((REPO_ROOT / "deploy" / "grafana" / "monitor-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    used = {name for expr in exprs for name in re.findall(r"\bmonitor_[a-z_]+", expr)}
    assert used and used <= exported, used - exported


async def test_counts_by_status_without_per_check_series(
    api: Api, settings_factory: Callable[..., Settings]
) -> None:
    from monitor.http.metrics import read_snapshot

    good = await create_check(api, name="good job")
    bad = await create_check(api, name="bad job")
    await create_check(api, name="never pinged")
    await api.client.get(f"/ping/{good['uuid']}")
    await api.client.get(f"/ping/{bad['uuid']}/start")
    await api.client.get(f"/ping/{bad['uuid']}/fail")
    paused = await create_check(api, name="paused")
    await api.client.get(f"/ping/{paused['uuid']}/start")
    assert (
        await api.client.post(f"/api/v3/checks/{paused['uuid']}/pause", headers=api.headers)
    ).status_code == 200
    found = await scrape(api)
    counts = {dict(labels)["status"]: v for (name, labels), v in found.items() if name == "monitor_checks"}
    assert counts == {"new": 1, "up": 1, "grace": 0, "down": 1, "paused": 1}
    assert value(found, "monitor_checks_started") == 1  # the paused check's run is still going
    # without the setting the per-check series are absent; the counts are there either way
    ttl = timedelta(seconds=api.settings.lease_ttl)
    snapshot = await read_snapshot(api.engine, api.clock.now(), 16, ttl, per_check=False)
    assert snapshot.checks == () and dict(snapshot.checks_by_status)["down"] == 1


async def test_the_counters_never_go_down_when_retention_prunes_or_a_check_is_deleted(
    api: Api, http_receiver: HttpReceiver
) -> None:
    from monitor.notify.apprise import AppriseNotifier
    from monitor.services.dispatch import deliver_due
    from monitor.services.retention import Retention

    channel = await api.client.post(
        "/api/v3/channels/", json={"name": "hook", "url": http_receiver.url}, headers=api.headers
    )
    assert channel.status_code == 201, channel.text
    kept = await create_check(api, name="kept", channels="*")
    gone = await create_check(api, name="gone", channels="*")
    for check in (kept, gone):
        for _ in range(4):
            await api.client.get(f"/ping/{check['uuid']}/log")
        await api.client.get(f"/ping/{check['uuid']}/fail")  # an alert and its notification
    async with AppriseNotifier(allow_private_targets=True) as notifier:
        assert await deliver_due(api.engine, notifier, api.clock.now(), settings=api.settings) == 2
    before = await scrape(api)
    assert value(before, "monitor_pings_total", kind="log") == 8
    assert value(before, "monitor_alerts_total", kind="failed") == 2
    assert value(before, "monitor_notification_attempts_total", result="ok") == 2

    api.clock.advance(200 * 86_400)  # past the 90 days of history
    await Retention(api.engine, api.settings.replace(ping_retention=1)).pass_(api.clock.now())
    assert len(await list_of(api, kept["uuid"], "pings")) == 1
    assert (await api.client.delete(f"/api/v3/checks/{gone['uuid']}", headers=api.headers)).status_code == 200

    after = await scrape(api)
    for name, labels in (
        ("monitor_pings_total", {"kind": "log"}),
        ("monitor_pings_total", {"kind": "fail"}),
        ("monitor_alerts_total", {"kind": "failed"}),
        ("monitor_notification_attempts_total", {"result": "ok"}),
    ):
        assert value(after, name, **labels) == value(before, name, **labels), (name, labels)
    await api.client.get(f"/ping/{kept['uuid']}/log")
    assert value(await scrape(api), "monitor_pings_total", kind="log") == 9
