"""Cron explain (DESIGN §4): the domain function and ``GET /api/v3/cron/explain``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from litestar import Request, Response
from litestar.testing import create_test_client

from monitor.domain.errors import ScheduleError, ValidationError, ZoneError
from monitor.domain.explain import explain
from monitor.http.cron import CronController

AFTER = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)
KEYS = {"schedule", "tz", "dialect", "fields", "description", "warnings", "next"}


def test_shape_and_daily_description() -> None:
    out = explain("0 3 * * *", after=AFTER)
    assert set(out) == KEYS
    assert out["description"] == "At 03:00, every day"
    assert out["fields"][0] == {"name": "minute", "value": "0", "meaning": "minute 0"}
    assert [f["name"] for f in out["fields"]] == ["minute", "hour", "day of month", "month", "day of week"]
    assert out["next"][0] == {"utc": "2026-03-28T03:00:00Z", "local": "2026-03-28T03:00:00+00:00"}
    assert len(out["next"]) == 5 and out["warnings"] == []


def test_business_hours_description_and_local_offsets() -> None:
    out = explain("*/15 9-17 * * 1-5", tz="Europe/Berlin", count=2, after=AFTER)
    assert out["description"] == "Every 15 minutes, 09:00–17:59, Monday to Friday"
    assert out["next"] == [
        {"utc": "2026-03-27T12:15:00Z", "local": "2026-03-27T13:15:00+01:00"},
        {"utc": "2026-03-27T12:30:00Z", "local": "2026-03-27T13:30:00+01:00"},
    ]


def test_or_trap_warning() -> None:
    out = explain("0 0 13 * 5", after=AFTER)
    assert any("fires on the 13th AND on every Friday" in w for w in out["warnings"])
    assert explain("0 0 */2 * 3", after=AFTER)["warnings"] == []  # '*' prefix: AND, no trap


@pytest.mark.parametrize(
    ("expr", "needle"),
    [
        ("0 0 L * *", "Debian"),
        ("0 0 LW * *", "Debian"),
        ("0 0 15W * *", "Debian"),
        ("0 0 * * 5L", "Debian"),
        ("0 0 * * 5#3", "Debian"),
        ("0 8 * * FRI-MON", "wrap-around"),
        ("0 0 * * 1-7", "Quartz numbering"),
        ("0 0 ? * 1", "Quartz syntax"),
    ],
)
def test_syntax_warnings(expr: str, needle: str) -> None:
    assert any(needle in w for w in explain(expr, after=AFTER)["warnings"]), expr


def test_dst_gap_catch_up_warning() -> None:
    out = explain("30 2 * * *", tz="Europe/Berlin", count=2, after=datetime(2026, 3, 28, 12, tzinfo=UTC))
    assert out["next"][0] == {"utc": "2026-03-29T01:00:00Z", "local": "2026-03-29T03:00:00+02:00"}
    assert any("catch-up" in w for w in out["warnings"])


def test_dst_gap_wildcard_warning_only_when_relevant() -> None:
    after = datetime(2026, 3, 28, 12, tzinfo=UTC)
    assert any("gap" in w for w in explain("*/30 2 * * *", tz="Europe/Berlin", after=after)["warnings"])
    assert not any("gap" in w for w in explain("*/30 9 * * *", tz="Europe/Berlin", after=after)["warnings"])


def test_dst_overlap_warnings() -> None:
    after = datetime(2026, 10, 24, 22, tzinfo=UTC)
    fixed = explain("30 2 * * *", tz="Europe/Berlin", count=2, after=after)
    assert [t["utc"] for t in fixed["next"]] == ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]
    assert any("overlap" in w and "first occurrence" in w for w in fixed["warnings"])
    wild = explain("0 * * * *", tz="Europe/Berlin", count=5, after=after)
    local_times = [t["local"][11:] for t in wild["next"]]
    assert local_times[1:4] == ["02:00:00+02:00", "02:00:00+01:00", "03:00:00+01:00"]
    assert any("every real occurrence" in w for w in wild["warnings"])


def test_quartz_warning_and_fields() -> None:
    out = explain("0 0 12 ? * 2", dialect="quartz", tz="Europe/Berlin", count=1, after=AFTER)
    assert out["dialect"] == "quartz"
    assert out["fields"][5] == {"name": "day of week", "value": "2", "meaning": "Monday"}
    assert out["description"] == "At 12:00, Monday"
    assert any("real Quartz handles DST differently" in w for w in out["warnings"])


@pytest.mark.parametrize("count", [0, 101, -1])
def test_count_bounds(count: int) -> None:
    with pytest.raises(ValidationError) as info:
        explain("* * * * *", count=count, after=AFTER)
    assert info.value.field == "count"


def test_count_limits_accepted() -> None:
    assert len(explain("* * * * *", count=100, after=AFTER)["next"]) == 100
    assert len(explain("* * * * *", count=1, after=AFTER)["next"]) == 1


def test_domain_errors_propagate() -> None:
    with pytest.raises(ScheduleError, match="never fires"):
        explain("0 0 30 2 *", after=AFTER)
    with pytest.raises(ScheduleError, match="never fires after"):
        explain("0 0 0 1 1 ? 2020", dialect="quartz", after=AFTER)
    with pytest.raises(ZoneError):
        explain("0 0 * * *", tz="Mars/Olympus", after=AFTER)


# ------------------------------------------------------------------ HTTP


def _handler(_: Request[Any, Any, Any], exc: ValidationError) -> Response[dict[str, str]]:
    return Response({"error": str(exc)}, status_code=400)


def _get(params: dict[str, str]) -> tuple[int, Any]:
    handlers = {ValidationError: _handler}
    with create_test_client(route_handlers=[CronController], exception_handlers=handlers) as c:
        r = c.get("/api/v3/cron/explain", params=params)
        return r.status_code, r.json()


def test_http_explain_ok() -> None:
    status, body = _get(
        {"schedule": "0 9 * * 1-5", "tz": "Europe/Berlin", "count": "2", "after": "2026-03-27T12:00:00Z"}
    )
    assert status == 200
    assert set(body) == KEYS
    assert body["next"] == [
        {"utc": "2026-03-30T07:00:00Z", "local": "2026-03-30T09:00:00+02:00"},
        {"utc": "2026-03-31T07:00:00Z", "local": "2026-03-31T09:00:00+02:00"},
    ]


def test_http_after_defaults_to_now() -> None:
    status, body = _get({"schedule": "* * * * *"})
    assert status == 200 and len(body["next"]) == 5
    first = datetime.fromisoformat(body["next"][0]["utc"].replace("Z", "+00:00"))
    assert abs((first - datetime.now(UTC)).total_seconds()) < 120


@pytest.mark.parametrize(
    ("params", "prefix"),
    [
        ({"schedule": "0 0 * * 8"}, "schedule: field 5 (day of week): 8 is out of range 0-7"),
        ({"schedule": "0 0 30 2 *"}, "schedule: the expression never fires"),
        ({"schedule": "0 0 0 * * *"}, "schedule: dialect 'unix' expects 5 fields"),
        ({"schedule": "@reboot"}, "schedule: @reboot"),
        ({"schedule": "* * * * *", "tz": "Mars/Olympus"}, "tz: unknown time zone 'Mars/Olympus'"),
        ({"schedule": "* * * * *", "tz": "+02:00"}, "tz: '+02:00' is a fixed UTC offset"),
        ({"schedule": "* * * * *", "dialect": "vixie"}, "dialect: unknown dialect"),
        ({"schedule": "* * * * *", "count": "0"}, "count: "),
        ({"schedule": "* * * * *", "count": "101"}, "count: "),
        ({"schedule": "* * * * *", "count": "many"}, "count: "),
        ({"schedule": "* * * * *", "after": "yesterday"}, "after: "),
        ({"schedule": "* * * * *", "after": "2026-03-27T12:00:00"}, "after: "),
    ],
)
def test_http_bad_input_names_the_field(params: dict[str, str], prefix: str) -> None:
    status, body = _get(params)
    assert status == 400
    assert body["error"].startswith(prefix), body
