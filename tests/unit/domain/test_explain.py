"""Cron explain (DESIGN §4): the domain function and ``GET /api/v3/cron/explain``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from litestar import Request, Response
from litestar.testing import create_test_client
from litestar.types import ExceptionHandlersMap

from monitor.domain.cron.explain import explain
from monitor.domain.errors import ScheduleError, ValidationError, ZoneError
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
    assert out["description"] == "At 12:00, on Monday"
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
    handlers: ExceptionHandlersMap = {ValidationError: _handler}
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


# ------------------------------------------------------------------ edge cases


@pytest.mark.parametrize(
    "after",
    [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))),  # year 0 in UTC
        datetime(1, 1, 2, tzinfo=UTC),
        datetime(1899, 12, 31, 23, 59, 59, tzinfo=UTC),
        datetime(9001, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=-5))),  # year 10000 in UTC
    ],
)
@pytest.mark.parametrize(("expr", "dialect"), [("0 3 * * *", "unix"), ("0 0 0 1 1 ? 2030", "quartz")])
def test_after_outside_the_supported_range_is_a_validation_error(
    after: datetime, expr: str, dialect: str
) -> None:
    with pytest.raises(ValidationError) as info:
        explain(expr, dialect=dialect, tz="Europe/Berlin", after=after)
    assert info.value.field == "after"
    assert str(info.value) == "after: outside the supported range (years 1900-9000)"


def test_after_range_limits_are_accepted_and_never_fires_is_only_for_a_spent_year_list() -> None:
    assert (
        explain("0 3 * * *", after=datetime(1900, 1, 1, tzinfo=UTC))["next"][0]["utc"]
        == "1900-01-01T03:00:00Z"
    )
    late = explain("0 0 29 2 */7", after=datetime(9000, 12, 31, 23, 59, 59, tzinfo=UTC), count=3)
    assert [t["utc"][:4] for t in late["next"]] == ["9024", "9052", "9080"]  # Sunday 29 February
    with pytest.raises(ScheduleError, match="never fires after 9000-12-31T23:59:59Z: its last tick was 2030"):
        explain("0 0 0 1 1 ? 2030", dialect="quartz", after=datetime(9000, 12, 31, 23, 59, 59, tzinfo=UTC))
    status, body = _get({"schedule": "0 3 * * *", "after": "0001-01-01T00:00:00+01:00"})
    assert status == 400 and body["error"] == "after: outside the supported range (years 1900-9000)"


def test_or_trap_warning_says_cron_cannot_and_the_fields() -> None:
    (warning,) = [w for w in explain("0 0 13 * 5", after=AFTER)["warnings"] if "AND" in w]
    assert "cannot require both" in warning
    assert '`0 0 * * 5 [ "$(date +\\%d)" = 13 ] && your-command`' in warning
    assert "*/1" not in warning and "'#'" not in warning and "also accepts" not in warning
    # the n-th weekday written as a 7-day block: '#' expresses it
    (block,) = [w for w in explain("0 0 1-7 * 1", after=AFTER)["warnings"] if "AND" in w]
    assert "'1#1'" in block and "first Monday" in block
    # the expression already uses '#': no '#' advice
    (nth,) = [w for w in explain("0 0 1-7 * 5#3", after=AFTER)["warnings"] if "AND" in w]
    assert "fires on the 1st–7th AND on the third Friday" in nth and "also accepts" not in nth


@pytest.mark.parametrize(
    ("expr", "dialect", "description"),
    [
        ("0 0 1,15 * 5#3", "unix", "At 00:00, on the 1st and 15th of the month and on the third Friday"),
        (
            "0 0 1 * 1/2",
            "unix",
            "At 00:00, on the 1st of the month and on every Monday, Wednesday, Friday and Sunday",
        ),
        ("@weekly", "unix", "At 00:00, on Sunday"),
        ("0 0 ? * 1", "unix", "At 00:00, on Monday"),
        ("0 0 0 ? * 2", "quartz", "At 00:00, on Monday"),
        ("0 0 L-3 * *", "unix", "At 00:00, 3 days before the last day of the month"),
        ("0 0 L-1 * *", "unix", "At 00:00, 1 day before the last day of the month"),
        ("0 0 * * 1,2,4", "unix", "At 00:00, on Monday, Tuesday and Thursday"),
        ("0 0 * * 0,1", "unix", "At 00:00, on Monday and Sunday"),
        ("0 8 * * FRI-MON", "unix", "At 08:00, Friday to Monday"),
        ("0 0 * * 3,5-1", "unix", "At 00:00, Wednesday and Friday to Monday"),
    ],
)
def test_description_grammar(expr: str, dialect: str, description: str) -> None:
    assert explain(expr, dialect=dialect, after=AFTER)["description"] == description


@pytest.mark.parametrize(
    "expr",
    [
        "0 0 12 ? * 6L",
        "0 0 12 L * ?",
        "0 0 12 L-2 * ?",
        "0 0 12 ? * 2#1",
        "0 0 12 LW * ?",
        "0 0 12 15W * ?",
        "0 0 12 ? * 6-2",
    ],
)
def test_quartz_native_syntax_gets_no_debian_warning(expr: str) -> None:
    warnings = explain(expr, dialect="quartz", after=AFTER)["warnings"]
    assert not any("Debian" in w for w in warnings), warnings


def test_offset_change_warnings_are_generic_and_dated_by_the_skipped_day() -> None:
    # Pacific/Apia skipped 2011-12-30 (a date-line change, not DST)
    after = datetime(2011, 12, 28, tzinfo=UTC)
    fixed = explain("0 12 * * *", tz="Pacific/Apia", after=after)["warnings"]
    assert fixed == [
        "the tick at 2011-12-30T10:00:00Z (00:00 +14) is a catch-up: the UTC offset changes on 2011-12-30 "
        "(-10:00 to +14:00), a gap that skips 24 hours of wall time (2011-12-30 00:00 to 2011-12-31 00:00), "
        "so a fixed-time schedule fires once at the first instant after the gap"
    ]
    wild = explain("*/30 * * * *", tz="Pacific/Apia", after=datetime(2011, 12, 30, 9, tzinfo=UTC))["warnings"]
    assert len(wild) == 1 and wild[0].startswith(
        "the UTC offset changes on 2011-12-30 (-10:00 to +14:00), a gap"
    )
    assert not any("DST" in w for w in fixed + wild)
    berlin = explain("30 2 * * *", tz="Europe/Berlin", count=1, after=datetime(2026, 3, 28, 12, tzinfo=UTC))
    assert (
        "the UTC offset changes on 2026-03-29 (+01:00 to +02:00), a gap that skips 1 hour of wall time "
        "(02:00–03:00)" in berlin["warnings"][0]
    )


def test_dialect_any_case_and_schedule_length() -> None:
    out = explain("0 0 12 ? * 2", dialect="QUARTZ", after=AFTER, count=1)
    assert out["dialect"] == "quartz"
    status, body = _get(
        {"schedule": "0 0 12 ? * 2", "dialect": "Quartz", "count": "1", "after": "2026-03-27T12:00:00Z"}
    )
    assert status == 200 and body["dialect"] == "quartz"
    too_long = "0 0 * * " + ",".join(["1"] * 100)  # 207 characters
    with pytest.raises(ValidationError, match=r"^schedule: must be at most 200 characters, got 207$"):
        explain(too_long, after=AFTER)
    status, body = _get({"schedule": too_long})
    assert status == 400 and body["error"].startswith("schedule: must be at most 200 characters")
    assert _get({"schedule": "0 0 * * " + ",".join(["1"] * 96)})[0] == 200  # 199 characters
