"""The quiet failure log, :class:`monitor.failures.FailureLog` with an injected monotonic clock."""

from __future__ import annotations

import logging

import pytest

from monitor.failures import FailureLog


def test_first_failure_traceback_then_a_counted_line_per_period_then_recovery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    log = FailureLog(
        logging.getLogger("qa.f4"), "evaluator sweep", action="evaluator_failed", clock=lambda: now[0]
    )
    caplog.set_level(logging.INFO, logger="qa.f4")
    error = ConnectionRefusedError(111, "Connect call failed")
    for _ in range(120):  # a failure every 0.5 s for 60 s
        log.failed(error)
        now[0] += 0.5
    log.succeeded()
    log.succeeded()  # nothing more to say
    records = caplog.records
    assert [r.levelname for r in records] == ["ERROR", "WARNING", "WARNING"]
    assert records[0].exc_info is not None and "evaluator sweep failed" in records[0].getMessage()
    assert all(r.exc_info is None for r in records[1:])
    assert records[1].getMessage().startswith("evaluator sweep still failing: 60 failures in the last 30 s")
    assert "database reachable again after 120 failures over 60 s" in records[2].getMessage()
    caplog.clear()
    log.failed(error)  # a new outage starts with a traceback again
    assert caplog.records[0].exc_info is not None
