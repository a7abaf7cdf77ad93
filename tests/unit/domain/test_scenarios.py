"""The shared run scenarios, through the pure domain (DESIGN §5)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from monitor.domain import detection
from monitor.domain.checks import CheckSpec, CheckState, PingKind, SimpleSchedule
from monitor.domain.cron import schedules
from monitor.domain.detection import PingIn
from monitor.domain.runs import RunBook, tick_outcome
from tests.scenarios import Scenario, parse_instant, ping_kind_and_status, scenario_files

EPSILON = timedelta(milliseconds=1)


def make_spec(check: dict[str, object]) -> CheckSpec:
    schedule: schedules.CronSchedule | SimpleSchedule
    if "schedule" in check:
        schedule = schedules.parse_cron(
            str(check["schedule"]), str(check.get("dialect", "unix")), str(check.get("tz", "UTC"))
        )
    else:
        schedule = SimpleSchedule(period=timedelta(seconds=int(check["timeout"])))  # type: ignore[call-overload]
    return CheckSpec(
        schedule=schedule,
        grace=timedelta(seconds=int(check["grace"])),  # type: ignore[call-overload]
        max_runtime=timedelta(seconds=int(check.get("max_runtime", 1800))),  # type: ignore[call-overload]
        failure_threshold=int(check.get("failure_threshold", 1)),  # type: ignore[call-overload]
        recovery_threshold=int(check.get("recovery_threshold", 1)),  # type: ignore[call-overload]
        early_tolerance=(
            timedelta(seconds=int(check["early_tolerance"]))  # type: ignore[call-overload]
            if check.get("early_tolerance") is not None
            else None
        ),
        expected_runs=int(check.get("expected_runs", 1)),  # type: ignore[call-overload]
        min_runtime=(
            timedelta(seconds=int(check["min_runtime"]))  # type: ignore[call-overload]
            if check.get("min_runtime") is not None
            else None
        ),
    )


def simulate(scenario: Scenario) -> tuple[list[tuple[str, str]], str, CheckState, RunBook]:
    spec = make_spec(scenario.check)
    state = CheckState()
    book = RunBook()
    alerts: list[tuple[str, str]] = []
    seen_keys: set[tuple[str, str]] = set()

    def record(fx: detection.Effects) -> None:
        for a in fx.alerts:
            if a.new:
                assert a.scheduled is not None
                alerts.append((a.kind.value, detection.iso(a.scheduled)))

    def evaluate_until(t: datetime) -> None:
        for _ in range(100_000):
            due = state.next_due
            if due is None or not due + EPSILON < t:
                break
            record(detection.evaluate(spec, state, book, due + EPSILON))

    now = scenario.created
    for step in scenario.steps:
        now = parse_instant(step["at"])
        evaluate_until(now)
        if "ping" in step:
            kind, exit_status = ping_kind_and_status(step["ping"])
            key = step.get("idempotency_key")
            if key is not None:
                if (key, kind) in seen_keys:
                    continue
                seen_keys.add((key, kind))
            ping = PingIn(
                kind=PingKind(kind),
                received=now,
                scheduled=parse_instant(step["scheduled"]) if "scheduled" in step else None,
                rid=step.get("rid"),
                exit_status=exit_status,
            )
            record(detection.apply_ping(spec, state, book, ping))
        elif step.get("pause"):
            record(detection.pause(state, now))
        elif step.get("resume"):
            record(detection.resume(state, now))
        else:
            record(detection.evaluate(spec, state, book, now))
    return sorted(alerts), detection.status(state, now).value, state, book


@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: p.stem)
def test_scenario(path: object) -> None:
    scenario = Scenario.load(path)  # type: ignore[arg-type]
    alerts, status, _, book = simulate(scenario)
    assert alerts == scenario.expected_alerts()
    assert status == scenario.expect["status"]
    for tick in scenario.expect.get("ticks", []):
        instant = parse_instant(tick["scheduled"])
        assert tick_outcome(book, instant) == tick["outcome"], tick
        if "runs" in tick:
            assert len(book.runs_of(instant)) == tick["runs"], tick
