"""Unit tests of the cron engine: malformed input, dialects, API contract, DST rule, bounds."""

from __future__ import annotations

import itertools
import random
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone

import pytest

from monitor.domain.cron.schedules import Dialect, ensure_fires_after, format_utc, parse_cron, validate_zone
from monitor.domain.errors import ScheduleError, ZoneError

T0 = datetime(2024, 1, 1, tzinfo=UTC)

# (expression, dialect, field named in the error or None for whole-expression errors, message part)
MALFORMED: list[tuple[str, str, str | None, str]] = [
    ("61 * * * *", "unix", "minute", "field 1 (minute): 61 is out of range 0-59"),
    ("0 24 * * *", "unix", "hour", "field 2 (hour): 24 is out of range 0-23"),
    ("0 0 0 * *", "unix", "day of month", "field 3 (day of month): 0 is out of range 1-31"),
    ("0 0 32 * *", "unix", "day of month", "32 is out of range 1-31"),
    ("0 0 * 13 *", "unix", "month", "field 4 (month): 13 is out of range 1-12"),
    ("0 0 * 0 *", "unix", "month", "0 is out of range 1-12"),
    ("0 0 * * 8", "unix", "day of week", "field 5 (day of week): 8 is out of range 0-7"),
    ("x * * * *", "unix", "minute", "'x' is not a number"),
    ("0 0 * FOO *", "unix", "month", "'FOO' is not a number or a month name"),
    ("0 0 * * FUN", "unix", "day of week", "'FUN' is not a number or a day name"),
    ("*/0 * * * *", "unix", "minute", "step 0 is out of range 1-60"),
    ("*/61 * * * *", "unix", "minute", "step 61 is out of range 1-60"),
    ("0 */x * * *", "unix", "hour", "step 'x' is not a number"),
    ("1,,2 * * * *", "unix", "minute", "empty item"),
    ("1- * * * *", "unix", "minute", "a number is missing"),
    ("1-2-3 * * * *", "unix", "minute", "is not a range"),
    ("0 0 L * L", "unix", "day of week", "'L' alone is not a day"),
    ("0 0 * * 5#6", "unix", "day of week", "occurrence 6 is out of range 1-5"),
    ("0 0 * * 5#0", "unix", "day of week", "occurrence 0 is out of range 1-5"),
    ("0 0 * * 8#1", "unix", "day of week", "8 is out of range 0-7"),
    ("0 0 * * #1", "unix", "day of week", "is not n#k"),
    ("0 0 * * 9L", "unix", "day of week", "9 is out of range 0-7"),
    ("0 0 32W * *", "unix", "day of month", "32 is out of range 1-31"),
    ("0 0 W * *", "unix", "day of month", "is not L, LW, L-n or nW"),
    ("0 0 L-31 * *", "unix", "day of month", "31 is out of range 0-30"),
    ("0 0 XL * *", "unix", "day of month", "is not L, LW, L-n or nW"),
    ("L * * * *", "unix", "minute", "only allowed in the day fields"),
    ("0 5W * * *", "unix", "hour", "only allowed in the day fields"),
    ("0 0 * 1#2 *", "unix", "month", "only allowed in the day fields"),
    ("? * * * *", "unix", "minute", "'?' is only allowed"),
    ("0 0 * ? *", "unix", "month", "'?' is only allowed"),
    ("0 0 * * 1-8", "unix", "day of week", "8 is out of range 0-7"),
    ("60 * * * * *", "seconds", "second", "field 1 (second): 60 is out of range 0-59"),
    ("0 60 * * * *", "seconds", "minute", "field 2 (minute): 60 is out of range 0-59"),
    ("0 0 0 * * 8", "seconds", "day of week", "field 6 (day of week): 8 is out of range 0-7"),
    ("0 0 0 * * 0", "quartz", "day of week", "field 6 (day of week): 0 is out of range 1-7"),
    ("0 0 0 * * 1", "quartz", "day of week", "exactly one of day of month and day of week must be '?'"),
    ("0 0 0 ? * ?", "quartz", "day of month", "not both"),
    ("0 0 0 1 * ? 1969", "quartz", "year", "field 7 (year): 1969 is out of range 1970-2099"),
    ("0 0 0 1 * ? 2100", "quartz", "year", "2100 is out of range 1970-2099"),
    # Quartz: a year range does not wrap around (it is not every year)
    (
        "0 0 0 15 * ? 2026-2025",
        "quartz",
        "year",
        "field 7 (year): '2026-2025': the start year must not be greater than the end year",
    ),
    ("0 0 0 32 * ?", "quartz", "day of month", "field 4 (day of month): 32 is out of range 1-31"),
    ("0 0 25 * * ?", "quartz", "hour", "field 3 (hour): 25 is out of range 0-23"),
    ("0 0 0 ? * 8#1", "quartz", "day of week", "8 is out of range 1-7"),
    # whole-expression problems: no field
    ("", "unix", None, "empty"),
    ("   ", "unix", None, "empty"),
    ("* * * *", "unix", None, "expects 5 fields"),
    ("0 0 0 * * *", "unix", None, "dialect 'seconds' reads 6 fields with seconds first; dialect 'quartz'"),
    ("0 0 0 1 * ? 2030", "unix", None, "dialect 'quartz' reads 7 fields"),
    ("0 0 * * *", "seconds", None, "dialect 'unix' reads 5 fields"),
    ("0 0 * * *", "quartz", None, "expects 6 or 7 fields"),
    ("@reboot", "unix", None, "@reboot is not supported"),
    ("@every 5m", "unix", None, "unknown macro"),
    ("0 0 30 2 *", "unix", None, "never fires"),
    ("0 0 31 4,6,9,11 *", "unix", None, "never fires"),
    ("0 0 0 30 2 ?", "quartz", None, "never fires"),
    ("0 0 * * *", "vixie", None, "unknown dialect 'vixie'"),
]


def test_malformed_table_is_large_enough() -> None:
    assert len(MALFORMED) >= 40


@pytest.mark.parametrize(
    ("expr", "dialect", "field", "message"), MALFORMED, ids=[f"{d}:{e!r}" for e, d, *_ in MALFORMED]
)
def test_malformed(expr: str, dialect: str, field: str | None, message: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_cron(expr, dialect)
    error = info.value
    assert error.field == field, error.message
    assert message in error.message
    assert not error.message.startswith("schedule:")
    if field is not None:
        assert error.position is not None
        assert error.message.startswith(f"field {error.position} ({field}): ")


@pytest.mark.parametrize(
    ("tz", "part"),
    [
        ("Mars/Olympus", "unknown time zone 'Mars/Olympus'"),
        ("+02:00", "fixed UTC offset"),
        ("UTC+2", "fixed UTC offset"),
        ("Etc/GMT-2", "fixed UTC offset"),
        ("", "empty"),
        ("/etc/localtime", "unknown time zone"),
        ("../../etc/passwd", "unknown time zone"),
        # differs from a real name only in case: a hint, also on case-insensitive file systems
        ("europe/berlin", "unknown time zone 'europe/berlin' (did you mean 'Europe/Berlin'?)"),
        ("utc", "unknown time zone 'utc' (did you mean 'UTC'?)"),
        ("US/EASTERN", "(did you mean 'US/Eastern'?)"),
        # the leap-second and alias trees of the zone database
        ("right/Europe/Berlin", "the 'right/' zone variants are not accepted; use 'Europe/Berlin'"),
        ("posix/Europe/Berlin", "the 'posix/' zone variants are not accepted; use 'Europe/Berlin'"),
        ("right/UTC", "not accepted"),
    ],
)
def test_bad_zones(tz: str, part: str) -> None:
    with pytest.raises(ZoneError, match=re.escape(part)):
        validate_zone(tz)
    with pytest.raises(ZoneError):
        parse_cron("* * * * *", "unix", tz)


def test_parse_is_cached_and_dialect_enum_accepted() -> None:
    a = parse_cron("*/5 * * * *", "unix", "Europe/Berlin")
    assert parse_cron("*/5 * * * *", Dialect.UNIX, "Europe/Berlin") is a
    assert a.expression == "*/5 * * * *" and a.dialect is Dialect.UNIX and a.tz == "Europe/Berlin"


def ticks(
    expr: str, dialect: str = "unix", tz: str = "UTC", start: datetime = T0 - timedelta(seconds=1), n: int = 4
) -> list[str]:
    return [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in parse_cron(expr, dialect, tz).next_ticks(start, n)]


@pytest.mark.parametrize(
    ("expr", "dialect", "expected"),
    [
        # a-a is just a (croniter reads the whole field)
        ("0 0 * * 3-3", "unix", ["2024-01-03T00:00:00Z", "2024-01-10T00:00:00Z"]),
        # a/s = a-max/s; DOW max 7 -> 1/2 = Mon, Wed, Fri, Sun
        (
            "0 0 * * 1/2",
            "unix",
            ["2024-01-01T00:00:00Z", "2024-01-03T00:00:00Z", "2024-01-05T00:00:00Z", "2024-01-07T00:00:00Z"],
        ),
        # '#' takes part in the OR rule: the 1st OR the third Friday
        ("0 0 1 * 5#3", "unix", ["2024-01-01T00:00:00Z", "2024-01-19T00:00:00Z", "2024-02-01T00:00:00Z"]),
        # W: nearest weekday; 'W' in the OR rule too (15W or Mondays)
        (
            "0 0 15W * *",
            "unix",
            [
                "2024-01-15T00:00:00Z",
                "2024-02-15T00:00:00Z",
                "2024-03-15T00:00:00Z",
                "2024-04-15T00:00:00Z",
                "2024-05-15T00:00:00Z",
                "2024-06-14T00:00:00Z",
            ],
        ),
        ("0 0 31W * *", "unix", ["2024-01-31T00:00:00Z", "2024-03-29T00:00:00Z", "2024-05-31T00:00:00Z"]),
        ("0 0 LW * *", "unix", ["2024-01-31T00:00:00Z", "2024-02-29T00:00:00Z", "2024-03-29T00:00:00Z"]),
        ("0 0 L * *", "unix", ["2024-01-31T00:00:00Z", "2024-02-29T00:00:00Z", "2024-03-31T00:00:00Z"]),
        ("0 0 * * 5L", "unix", ["2024-01-26T00:00:00Z", "2024-02-23T00:00:00Z"]),
        ("0 22-2/2 * * *", "unix", ["2024-01-01T00:00:00Z", "2024-01-01T02:00:00Z", "2024-01-01T22:00:00Z"]),
        (
            "0 0 30-2 * *",
            "unix",
            [
                "2024-01-01T00:00:00Z",
                "2024-01-02T00:00:00Z",
                "2024-01-30T00:00:00Z",
                "2024-01-31T00:00:00Z",
                "2024-02-01T00:00:00Z",
                "2024-02-02T00:00:00Z",
                "2024-03-01T00:00:00Z",
            ],
        ),
        (
            "0 0 0 1 NOV-FEB ?",
            "quartz",
            ["2024-01-01T00:00:00Z", "2024-02-01T00:00:00Z", "2024-11-01T00:00:00Z"],
        ),
        # quartz DOW: 2 = Monday, SUN = 1, 6-2 wraps Fri..Mon
        ("0 0 12 ? * 2", "quartz", ["2024-01-01T12:00:00Z", "2024-01-08T12:00:00Z"]),
        (
            "0 0 12 ? * 6-2",
            "quartz",
            [
                "2024-01-01T12:00:00Z",
                "2024-01-05T12:00:00Z",
                "2024-01-06T12:00:00Z",
                "2024-01-07T12:00:00Z",
                "2024-01-08T12:00:00Z",
            ],
        ),
        ("0 0 12 ? * 6L", "quartz", ["2024-01-26T12:00:00Z"]),
        ("0 0 12 ? * 2#1", "quartz", ["2024-01-01T12:00:00Z", "2024-02-05T12:00:00Z"]),
        ("0 0 12 L-2 * ?", "quartz", ["2024-01-29T12:00:00Z", "2024-02-27T12:00:00Z"]),
        ("0 0 0 1 1 ? 2030,2032", "quartz", ["2030-01-01T00:00:00Z", "2032-01-01T00:00:00Z"]),
        (
            "*/20 * * * * *",
            "seconds",
            ["2024-01-01T00:00:00Z", "2024-01-01T00:00:20Z", "2024-01-01T00:00:40Z"],
        ),
        ("@weekly", "quartz", ["2024-01-07T00:00:00Z"]),
        ("@daily", "seconds", ["2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z"]),
        ("@MONTHLY", "unix", ["2024-01-01T00:00:00Z", "2024-02-01T00:00:00Z"]),
        ("0 0 * jan-feb mon", "unix", ["2024-01-01T00:00:00Z", "2024-01-08T00:00:00Z"]),
    ],
)
def test_semantics(expr: str, dialect: str, expected: list[str]) -> None:
    assert ticks(expr, dialect, n=len(expected)) == expected


def test_quartz_year_list_runs_out() -> None:
    s = parse_cron("0 0 0 1 1 ? 2030", "quartz")
    assert s.next_tick(datetime(2030, 1, 1, tzinfo=UTC)) is None
    assert s.last_tick() == datetime(2030, 1, 1, tzinfo=UTC)
    ensure_fires_after(s, datetime(2029, 1, 1, tzinfo=UTC))
    with pytest.raises(ScheduleError, match="never fires after 2031-01-01T00:00:00Z"):
        ensure_fires_after(s, datetime(2031, 1, 1, tzinfo=UTC))


def test_is_fixed_time() -> None:
    assert parse_cron("30 2 * * *").is_fixed_time
    assert not parse_cron("*/30 2 * * *").is_fixed_time
    assert not parse_cron("@hourly").is_fixed_time
    assert parse_cron("0 30 2 * * *", "seconds").is_fixed_time
    assert not parse_cron("*/20 30 2 * * *", "seconds").is_fixed_time


def test_api_contract_inputs_and_outputs() -> None:
    s = parse_cron("0 10 * * *", "unix", "Europe/Berlin")
    plus5 = timezone(timedelta(hours=5))
    after = datetime(2024, 6, 1, 13, 0, 0, 123456, tzinfo=plus5)  # 08:00:00.123456Z = 10:00:00.12 CEST
    nxt = s.next_tick(after)
    assert nxt == datetime(2024, 6, 2, 8, 0, tzinfo=UTC) and nxt.tzinfo is UTC
    assert s.prev_tick(after) == datetime(2024, 6, 1, 8, 0, tzinfo=UTC)
    assert s.tick_at_or_before(datetime(2024, 6, 1, 8, 0, tzinfo=UTC)) == datetime(
        2024, 6, 1, 8, 0, tzinfo=UTC
    )
    assert s.prev_tick(datetime(2024, 6, 1, 8, 0, tzinfo=UTC)) == datetime(2024, 5, 31, 8, 0, tzinfo=UTC)
    assert s.is_tick(datetime(2024, 6, 1, 10, 0, tzinfo=timezone(timedelta(hours=2))))
    assert not s.is_tick(datetime(2024, 6, 1, 8, 0, 0, 1, tzinfo=UTC))
    assert s.next_ticks(after, 0) == []
    with pytest.raises(ValueError):
        s.next_tick(datetime(2024, 1, 1))


def test_ticks_between_is_half_open() -> None:
    s = parse_cron("0 * * * *")
    a, b = datetime(2024, 1, 1, 0, tzinfo=UTC), datetime(2024, 1, 1, 3, tzinfo=UTC)
    got = list(s.ticks_between(a, b))
    assert got == [datetime(2024, 1, 1, h, tzinfo=UTC) for h in (1, 2, 3)]
    c = datetime(2024, 1, 1, 6, tzinfo=UTC)
    assert list(s.ticks_between(a, b)) + list(s.ticks_between(b, c)) == list(s.ticks_between(a, c))
    assert list(s.ticks_between(b, a)) == []


def test_dst_fixed_time_overlap_fires_once_and_gap_catches_up() -> None:
    s = parse_cron("30 2 * * *", "unix", "Europe/Berlin")
    assert ticks("30 2 * * *", tz="Europe/Berlin", start=datetime(2026, 10, 24, 12, tzinfo=UTC), n=2) == [
        "2026-10-25T00:30:00Z",
        "2026-10-26T01:30:00Z",
    ]
    assert ticks("30 2 * * *", tz="Europe/Berlin", start=datetime(2026, 3, 28, 12, tzinfo=UTC), n=2) == [
        "2026-03-29T01:00:00Z",
        "2026-03-30T00:30:00Z",
    ]
    # several missing wall times in one gap are one catch-up tick
    assert ticks(
        "0,15,30,45 2 * * *", tz="Europe/Berlin", start=datetime(2026, 3, 28, 12, tzinfo=UTC), n=2
    ) == [
        "2026-03-29T01:00:00Z",
        "2026-03-30T00:00:00Z",
    ]
    # a catch-up tick landing on a real tick is one tick
    assert ticks("0 2,3 * * *", tz="Europe/Berlin", start=datetime(2026, 3, 28, 12, tzinfo=UTC), n=2) == [
        "2026-03-29T01:00:00Z",
        "2026-03-30T00:00:00Z",
    ]
    assert s.prev_tick(datetime(2026, 3, 29, 1, 0, 1, tzinfo=UTC)) == datetime(2026, 3, 29, 1, tzinfo=UTC)


def test_dst_wildcard_gap_and_overlap() -> None:
    # croniter fires '*/30 2 * * *' at 03:00 CEST on the spring-forward day; no tick exists there
    assert ticks("*/30 2 * * *", tz="Europe/Berlin", start=datetime(2026, 3, 28, 12, tzinfo=UTC), n=2) == [
        "2026-03-30T00:00:00Z",
        "2026-03-30T00:30:00Z",
    ]
    assert ticks("0 * * * *", tz="Europe/Berlin", start=datetime(2026, 10, 24, 23, 30, tzinfo=UTC), n=3) == [
        "2026-10-25T00:00:00Z",
        "2026-10-25T01:00:00Z",
        "2026-10-25T02:00:00Z",
    ]


def test_searches_are_bounded() -> None:
    began = time.perf_counter()
    # rare but valid: Friday 29 February (leap years where Feb 29 is a Friday), far in the future
    s = parse_cron("0 0 29 2 *", "unix", "Europe/Berlin")
    assert s.next_tick(datetime(2097, 1, 1, tzinfo=UTC)) == datetime(2104, 2, 28, 23, tzinfo=UTC)
    s2 = parse_cron("0 0 * 2 5#5")
    assert s2.next_tick(T0) is not None and s2.prev_tick(T0) is not None
    assert parse_cron("0 0 1 1 *").next_tick(datetime(9998, 6, 1, tzinfo=UTC)) is None
    assert time.perf_counter() - began < 2.0


# croniter iterates (monitor.domain.cron.iteration docstring): each kind of input it refuses or
# answers wrongly, corrected by the wrapper
@pytest.mark.parametrize(
    ("expr", "start", "expected"),
    [
        # a 31-item DOM list counting L is read by croniter as '*' (every day): 30 is not a tick in
        # January, while L is the 30th in April
        ("0 0 1-29,31,L * *", datetime(2024, 1, 28, tzinfo=UTC), ["2024-01-29", "2024-01-31", "2024-02-01"]),
        ("0 0 1-29,31,L * *", datetime(2024, 4, 28, tzinfo=UTC), ["2024-04-29", "2024-04-30", "2024-05-01"]),
        # W in a list (croniter refuses it): 2024-06-15 is a Saturday -> Friday 14th
        ("0 0 1,15W * *", datetime(2024, 5, 31, tzinfo=UTC), ["2024-06-01", "2024-06-14", "2024-07-01"]),
        ("0 0 2W,15W * *", datetime(2024, 2, 20, tzinfo=UTC), ["2024-03-01", "2024-03-15", "2024-04-02"]),
        # literals mixed with '#' (croniter refuses it): Mondays and the third Friday
        ("0 0 * * 1,5#3", datetime(2024, 1, 14, tzinfo=UTC), ["2024-01-15", "2024-01-19", "2024-01-22"]),
        # L-n (croniter refuses it), leap February included
        ("0 0 L-3 * *", datetime(2024, 1, 1, tzinfo=UTC), ["2024-01-28", "2024-02-26", "2024-03-28"]),
        # '#' and nL together, ORed with a DOM
        ("0 0 1 * 5#3,5L", datetime(2024, 1, 1, tzinfo=UTC), ["2024-01-19", "2024-01-26", "2024-02-01"]),
        # 31W in a month without a 31st: no run (croniter clamps to the 30th)
        ("0 0 31W * *", datetime(2024, 4, 1, tzinfo=UTC), ["2024-05-31", "2024-07-31"]),
    ],
)
def test_croniter_corrections(expr: str, start: datetime, expected: list[str]) -> None:
    s = parse_cron(expr)
    got = s.next_ticks(start, len(expected))
    assert [t.strftime("%Y-%m-%d") for t in got] == expected
    # the same ticks backwards
    assert [s.prev_tick(t) for t in got[1:]] == got[:-1]


def test_never_fires_through_a_filtered_token() -> None:
    # LW is always Monday-Friday; '*/7' in DOW is Sunday only, ANDed (text starts with '*')
    with pytest.raises(ScheduleError, match="never fires"):
        parse_cron("0 0 LW * */7")


@pytest.mark.parametrize(
    ("expr", "dialect", "tz"),
    [
        ("*/5 * * * *", "unix", "Europe/Berlin"),
        ("0 0 13 * 5", "unix", "UTC"),
        ("30 2 * * *", "unix", "Europe/Berlin"),
        ("0 0 * * 1,5#3", "unix", "America/New_York"),
        ("*/20 */7 1,2 * * *", "seconds", "Australia/Lord_Howe"),
        ("0 30 1 LW * ? 2025-2035", "quartz", "Europe/Berlin"),
    ],
)
def test_reused_iterators_answer_any_query_order(expr: str, dialect: str, tz: str) -> None:
    """The cached croniter cursors (resumed, re-seeded or answered from cache) agree with a plain walk."""
    s = parse_cron(expr, dialect, tz)
    start = datetime(2026, 3, 20, tzinfo=UTC)
    walk = s.next_ticks(start, 60)
    assert len(walk) == 60
    rng = random.Random(7)
    span = (walk[-1] - walk[0]).total_seconds()
    for _ in range(200):
        at = walk[0] + timedelta(seconds=rng.uniform(0, span))
        if rng.random() < 0.3:
            at = rng.choice(walk[1:-1])
        nxt = next(t for t in walk if t > at)
        prv = [t for t in walk if t < at][-1]
        assert s.next_tick(at) == nxt
        assert s.prev_tick(at) == prv
        assert s.is_tick(at) == (at in walk)


def test_concurrent_callers_do_not_share_an_iterator() -> None:
    s = parse_cron("*/7 * * * *", "unix", "Europe/Berlin")
    expected = s.next_ticks(datetime(2026, 10, 24, tzinfo=UTC), 400)

    def walk(_: int) -> list[datetime]:
        return list(s.ticks_between(datetime(2026, 10, 24, tzinfo=UTC), expected[-1]))

    with ThreadPoolExecutor(4) as pool:
        assert all(got == expected for got in pool.map(walk, range(8)))


# ------------------------------------------------------------------ edge cases


@pytest.mark.parametrize(
    "tz", ["Europe/Berlin", "UTC", "US/Eastern", "EST", "Etc/UTC", "America/Argentina/Buenos_Aires"]
)
def test_canonical_names_and_links_are_accepted(tz: str) -> None:
    assert str(validate_zone(tz)) == tz


_OFFSETS = [timezone(timedelta(hours=h)) for h in (-23, -5, 0, 1, 14, 23)]
_EXTREMES = [
    base.replace(tzinfo=tz)
    for tz in _OFFSETS
    for base in (
        datetime.min,
        datetime(1, 6, 1),
        datetime(1, 12, 31, 23, 6, 32),
        datetime(2, 1, 1),
        datetime(9997, 12, 31, 12),
        datetime(9998, 6, 1),
        datetime(9999, 12, 31),
        datetime.max,
    )
]


@pytest.mark.parametrize(
    ("expr", "dialect", "tz"),
    [
        ("0 3 * * *", "unix", "Europe/Berlin"),
        ("* * * * *", "unix", "America/New_York"),  # local mean time -4:56 in year 1
        ("*/20 * * * * *", "seconds", "Pacific/Kiritimati"),
        ("0 0 0 1 1 ? 2030", "quartz", "Europe/Berlin"),
        ("0 0 1 * 5#3", "unix", "America/St_Johns"),
        ("30 2 * * *", "unix", "Australia/Lord_Howe"),
    ],
)
def test_every_method_answers_for_any_aware_instant(expr: str, dialect: str, tz: str) -> None:
    """Years 1 and 9999 at any offset: None / False / empty, never ValueError or OverflowError."""
    s = parse_cron(expr, dialect, tz)
    for at in _EXTREMES:
        nxt, prv = s.next_tick(at), s.prev_tick(at)
        s.next_ticks(at, 2)
        s.tick_at_or_before(at)
        s.is_tick(at)
        list(itertools.islice(s.ticks_between(at, datetime.max.replace(tzinfo=UTC)), 2))
        list(itertools.islice(s.ticks_between(datetime.min.replace(tzinfo=UTC), at), 2))
        for tick in (nxt, prv):  # whatever is answered is a tick, and consistent both ways
            if tick is not None:
                assert s.is_tick(tick) and s.tick_at_or_before(tick) == tick
                before, later = s.prev_tick(tick), s.next_tick(tick)
                assert before is None or s.next_tick(before) == tick
                assert later is None or s.prev_tick(later) == tick


def test_range_ends() -> None:
    utc = parse_cron("0 3 * * *")
    assert utc.next_tick(datetime(1, 1, 1, tzinfo=UTC)) == datetime(2, 1, 1, 3, tzinfo=UTC)
    assert list(utc.ticks_between(datetime(1, 1, 1, tzinfo=UTC), datetime(2, 1, 2, tzinfo=UTC))) == [
        datetime(2, 1, 1, 3, tzinfo=UTC)
    ]
    assert utc.prev_tick(datetime(9999, 12, 31, tzinfo=UTC)) == datetime(9997, 12, 31, 3, tzinfo=UTC)
    assert utc.tick_at_or_before(datetime(9998, 1, 1, 3, tzinfo=UTC)) == datetime(9997, 12, 31, 3, tzinfo=UTC)
    assert not utc.is_tick(datetime(9998, 1, 1, 3, tzinfo=UTC))  # beyond the supported range
    assert utc.next_tick(datetime(9997, 12, 31, 3, tzinfo=UTC)) is None
    # Berlin's local mean time (+00:53:28) in year 1: no tick before year 2 UTC, and the next one after it
    berlin = parse_cron("0 3 * * *", "unix", "Europe/Berlin")
    assert berlin.tick_at_or_before(datetime(2, 1, 1, tzinfo=UTC)) is None
    assert berlin.next_tick(datetime(1, 12, 31, 23, 6, 32, tzinfo=UTC)) == datetime(
        2, 1, 1, 2, 6, 32, tzinfo=UTC
    )


def test_quartz_year_list_search_starts_at_the_list() -> None:
    s = parse_cron("0 0 0 1 1 ? 2030", "quartz", "Europe/Berlin")
    tick = datetime(2029, 12, 31, 23, tzinfo=UTC)
    asks: list[tuple[Callable[[datetime], datetime | None], datetime]] = [
        (s.prev_tick, datetime(2900, 1, 1, tzinfo=UTC)),
        (s.tick_at_or_before, datetime(9999, 1, 1, tzinfo=UTC)),
        (s.next_tick, datetime(5, 1, 1, tzinfo=UTC)),
        (s.next_tick, datetime(1000, 1, 1, tzinfo=UTC)),
    ]
    for method, at in asks:
        began = time.perf_counter()
        assert method(at) == tick
        assert time.perf_counter() - began < 0.05
    assert s.next_tick(tick) is None and s.prev_tick(tick) is None


def test_dialect_is_case_insensitive() -> None:
    assert Dialect("QUARTZ") is Dialect.QUARTZ and Dialect(" Seconds ") is Dialect.SECONDS
    s = parse_cron("0 0 0 1 * ?", "QUARTZ")
    assert s.dialect is Dialect.QUARTZ and s.dialect.value == "quartz"
    assert parse_cron("0 0 0 1 * ?", "quartz") is s
    with pytest.raises(ValueError):
        Dialect("vixie")


def test_never_fires_only_when_the_year_list_is_spent() -> None:
    late = datetime(9998, 6, 1, tzinfo=UTC)
    with pytest.raises(ScheduleError) as info:
        ensure_fires_after(parse_cron("0 0 1 1 *"), late)
    assert (
        info.value.message == "no tick after 9998-06-01T00:00:00Z within the supported range (years 2-9997)"
    )
    with pytest.raises(
        ScheduleError, match=r"^the expression never fires after 9998-06-01T00:00:00Z: its last"
    ):
        ensure_fires_after(parse_cron("0 0 0 1 1 ? 2030", "quartz"), late)
    # four-digit years, and instants whose UTC time is outside years 1-9999
    assert format_utc(datetime(2, 1, 2, tzinfo=UTC)) == "0002-01-02T00:00:00Z"
    assert format_utc(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1)))) == "0001-01-01T00:00:00+01:00"
    with pytest.raises(ScheduleError, match="within the supported range"):
        ensure_fires_after(
            parse_cron("0 0 1 1 *"), datetime.max.replace(tzinfo=timezone(timedelta(hours=-1)))
        )
