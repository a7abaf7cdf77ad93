"""The time-zone hint (monitor/domain/hints.py): runs that arrive a whole number of hours, or the
zone's UTC offset, before or after their ticks, over the last five runs."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.domain.errors import ZoneError
from monitor.domain.hints import (
    RUNS_CONSIDERED,
    RunArrival,
    format_offset,
    format_span,
    hints,
    tz_mismatch_hint,
)

MIN = timedelta(minutes=1)
HOUR = timedelta(hours=1)


def daily(local_time: str, tz: str, start: str, days: int = RUNS_CONSIDERED) -> list[datetime]:
    """``days`` daily ticks at ``local_time`` in ``tz`` from date ``start``, as UTC instants."""
    zone = ZoneInfo(tz)
    first = datetime.fromisoformat(f"{start}T{local_time}")
    return [(first + timedelta(days=i)).replace(tzinfo=zone).astimezone(UTC) for i in range(days)]


def arrivals(ticks: list[datetime], *lags: timedelta) -> list[RunArrival]:
    """Each tick's run arriving ``lag`` after it (the last lag repeats)."""
    return [RunArrival(tick, tick + lags[min(i, len(lags) - 1)]) for i, tick in enumerate(ticks)]


def in_utc(ticks: list[datetime], tz: str, jitter: timedelta = timedelta(0)) -> list[RunArrival]:
    """Runs of a job whose cron keeps UTC: it fires at the tick's wall time read as UTC."""
    zone = ZoneInfo(tz)
    return [RunArrival(tick, tick.astimezone(zone).replace(tzinfo=UTC) + jitter) for tick in ticks]


# ---------------------------------------------------------------- examples


def test_new_york_check_whose_job_keeps_utc_runs_four_hours_early() -> None:
    ticks = daily("03:00", "America/New_York", "2026-07-01")
    assert tz_mismatch_hint(in_utc(ticks, "America/New_York"), "America/New_York") == (
        "runs arrive 4 h before their ticks: is tz right? the job may run in UTC"
    )


def test_berlin_check_whose_job_keeps_utc_runs_two_hours_late() -> None:
    ticks = daily("03:00", "Europe/Berlin", "2026-07-01")
    assert tz_mismatch_hint(in_utc(ticks, "Europe/Berlin"), "Europe/Berlin") == (
        "runs arrive 2 h after their ticks: is tz right? the job may run in UTC"
    )


def test_half_hour_zone_keeping_utc_is_named_though_not_whole_hours() -> None:
    ticks = daily("09:00", "Asia/Kolkata", "2026-07-01")
    assert tz_mismatch_hint(in_utc(ticks, "Asia/Kolkata", jitter=2 * MIN), "Asia/Kolkata") == (
        "runs arrive 5 h 30 min after their ticks: is tz right? the job may run in UTC"
    )


def test_series_across_a_dst_change_follows_the_zone_offset() -> None:
    # Europe/Berlin leaves CEST on 2026-10-25: a UTC job is 2 h, then 1 h, after the 03:00 tick
    ticks = daily("03:00", "Europe/Berlin", "2026-10-23")
    assert tz_mismatch_hint(in_utc(ticks, "Europe/Berlin"), "Europe/Berlin") == (
        "runs arrive 1 h to 2 h after their ticks: is tz right? the job may run in UTC"
    )


def test_utc_check_whose_job_keeps_berlin_time_names_the_offset() -> None:
    ticks = daily("03:00", "UTC", "2026-07-01")
    assert tz_mismatch_hint(arrivals(ticks, -2 * HOUR), "UTC") == (
        "runs arrive 2 h before their ticks: is tz right? the job may run at UTC+02:00"
    )
    assert tz_mismatch_hint(arrivals(ticks, 5 * HOUR + 3 * MIN), "UTC") == (
        "runs arrive 5 h after their ticks: is tz right? the job may run at UTC-05:00"
    )


def test_whole_hours_not_explained_by_one_offset_still_ask() -> None:
    # a Berlin check across the DST change, the job a constant 3 h late: no single zone explains it
    ticks = daily("03:00", "Europe/Berlin", "2026-10-23")
    assert tz_mismatch_hint(arrivals(ticks, 3 * HOUR), "Europe/Berlin") == (
        "runs arrive 3 h after their ticks: is tz right?"
    )
    varying = arrivals(ticks, 3 * HOUR, 3 * HOUR, 4 * HOUR, 3 * HOUR, 3 * HOUR)
    assert tz_mismatch_hint(varying, "UTC") == "runs arrive 3 h to 4 h after their ticks: is tz right?"


@pytest.mark.parametrize(
    "lag",
    [timedelta(0), 4 * MIN, -4 * MIN, 30 * MIN, 2 * HOUR + 6 * MIN, -(90 * MIN)],
    ids=["on-time", "4-min-late", "4-min-early", "half-hour", "2h06", "minus-90-min"],
)
def test_no_hint_for_lags_that_are_not_whole_hours(lag: timedelta) -> None:
    ticks = daily("03:00", "UTC", "2026-07-01")
    assert tz_mismatch_hint(arrivals(ticks, lag), "UTC") is None


@pytest.mark.parametrize("edge", [5 * MIN, -5 * MIN])
def test_five_minutes_off_the_hour_still_counts(edge: timedelta) -> None:
    ticks = daily("03:00", "UTC", "2026-07-01")
    found = tz_mismatch_hint(arrivals(ticks, 4 * HOUR + edge), "UTC")
    assert found is not None and found.startswith("runs arrive 4 h after")
    assert (
        tz_mismatch_hint(arrivals(ticks, 4 * HOUR + edge + timedelta(seconds=edge / abs(edge))), "UTC")
        is None
    )


def test_one_run_breaking_the_pattern_means_no_hint() -> None:
    ticks = daily("03:00", "America/New_York", "2026-07-01")
    runs = in_utc(ticks, "America/New_York")
    runs[2] = RunArrival(ticks[2], ticks[2] + MIN)  # one on time
    assert tz_mismatch_hint(runs, "America/New_York") is None


def test_lags_on_both_sides_mean_no_hint() -> None:
    ticks = daily("03:00", "UTC", "2026-07-01")
    assert tz_mismatch_hint(arrivals(ticks, 2 * HOUR, -2 * HOUR, 2 * HOUR), "UTC") is None


def test_fewer_than_five_runs_give_no_hint() -> None:
    ticks = daily("03:00", "America/New_York", "2026-07-01", days=RUNS_CONSIDERED - 1)
    assert tz_mismatch_hint(in_utc(ticks, "America/New_York"), "America/New_York") is None
    assert tz_mismatch_hint([], "UTC") is None


def test_only_the_latest_five_runs_count() -> None:
    ticks = daily("03:00", "America/New_York", "2026-06-01", days=10)
    runs = arrivals(ticks[:5], MIN) + in_utc(ticks[5:], "America/New_York")  # tz fixed, then broken
    assert tz_mismatch_hint(runs, "America/New_York") is not None
    fixed = in_utc(ticks[:5], "America/New_York") + arrivals(ticks[5:], MIN)  # broken, then fixed
    assert tz_mismatch_hint(fixed, "America/New_York") is None


def test_hints_are_for_cron_checks_only() -> None:
    ticks = daily("03:00", "America/New_York", "2026-07-01")
    runs = in_utc(ticks, "America/New_York")
    assert hints("cron", "America/New_York", runs) == [
        "runs arrive 4 h before their ticks: is tz right? the job may run in UTC"
    ]
    assert hints("simple", "UTC", arrivals(ticks, 4 * HOUR)) == []
    assert hints("cron", "UTC", arrivals(ticks, MIN)) == []


def test_an_unknown_zone_is_refused() -> None:
    ticks = daily("03:00", "UTC", "2026-07-01")
    with pytest.raises(ZoneError, match="unknown time zone"):
        tz_mismatch_hint(arrivals(ticks, 4 * HOUR), "Mars/Olympus")


@pytest.mark.parametrize(
    ("span", "text"),
    [
        (4 * HOUR, "4 h"),
        (5 * HOUR + 30 * MIN, "5 h 30 min"),
        (45 * MIN, "45 min"),
        (HOUR + timedelta(seconds=59), "1 h"),
    ],
)
def test_format_span(span: timedelta, text: str) -> None:
    assert format_span(span) == text


@pytest.mark.parametrize(
    ("offset", "text"),
    [
        (2 * HOUR, "UTC+02:00"),
        (-4 * HOUR, "UTC-04:00"),
        (5 * HOUR + 30 * MIN, "UTC+05:30"),
        (timedelta(0), "UTC"),
    ],
)
def test_format_offset(offset: timedelta, text: str) -> None:
    assert format_offset(offset) == text


# ---------------------------------------------------------------- properties

ZONES = [
    "UTC",
    "Europe/Berlin",
    "Europe/London",
    "America/New_York",
    "America/Los_Angeles",
    "Asia/Kolkata",
    "Asia/Tokyo",
    "Australia/Adelaide",
    "Pacific/Chatham",
    "America/St_Johns",
]

instants = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2035, 12, 31), timezones=st.just(UTC)
)
gaps = st.integers(min_value=3600 * 12, max_value=86400 * 40).map(lambda s: timedelta(seconds=s))
jitters = st.integers(min_value=-300, max_value=300).map(lambda s: timedelta(seconds=s))


@st.composite
def tick_series(draw: st.DrawFn, count: int = RUNS_CONSIDERED) -> list[datetime]:
    start = draw(instants)
    out = [start]
    for _ in range(count - 1):
        out.append(out[-1] + draw(gaps))
    return out


@settings(max_examples=300, deadline=None)
@given(
    tick_series(),
    st.lists(jitters, min_size=RUNS_CONSIDERED, max_size=RUNS_CONSIDERED),
    st.sampled_from(ZONES),
)
def test_runs_within_five_minutes_of_their_ticks_never_get_a_hint(
    ticks: list[datetime], lags: list[timedelta], tz: str
) -> None:
    assert tz_mismatch_hint(arrivals(ticks, *lags), tz) is None


@settings(max_examples=300, deadline=None)
@given(
    tick_series(),
    st.integers(min_value=-14, max_value=14).filter(bool),
    st.lists(jitters, min_size=RUNS_CONSIDERED, max_size=RUNS_CONSIDERED),
    st.sampled_from(ZONES),
)
def test_a_constant_whole_hour_lag_always_gets_a_hint_naming_it(
    ticks: list[datetime], hours: int, jitter: list[timedelta], tz: str
) -> None:
    runs = [RunArrival(tick, tick + hours * HOUR + j) for tick, j in zip(ticks, jitter, strict=True)]
    found = tz_mismatch_hint(runs, tz)
    assert found is not None
    side = "before" if hours < 0 else "after"
    if "to" not in found.split(":")[0]:
        # the zone's offset explains it (then its offsets are shown) or the hours are shown
        assert found.startswith(f"runs arrive {abs(hours)} h {side}") or found.endswith("in UTC")
    assert f" {side} their ticks: is tz right?" in found


@settings(max_examples=300, deadline=None)
@given(tick_series(), st.sampled_from(ZONES), jitters)
def test_a_job_keeping_utc_is_recognised_wherever_the_zone_is_off_utc(
    ticks: list[datetime], tz: str, jitter: timedelta
) -> None:
    zone = ZoneInfo(tz)
    offsets = [t.astimezone(zone).utcoffset() or timedelta(0) for t in ticks]
    runs = in_utc(ticks, tz, jitter)
    found = tz_mismatch_hint(runs, tz)
    if all(o > TOLERANCE_PLUS for o in offsets) or all(o < -TOLERANCE_PLUS for o in offsets):
        assert found is not None and found.endswith("the job may run in UTC"), (offsets, found)
    elif all(abs(o) <= timedelta(0) for o in offsets):
        assert found is None


TOLERANCE_PLUS = timedelta(minutes=10)
"""Offsets beyond the tolerance plus the jitter: the lags stay on one side of zero."""


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(instants, st.integers(min_value=-20 * 3600, max_value=20 * 3600)),
        min_size=0,
        max_size=12,
    ),
    st.sampled_from(ZONES),
    st.randoms(use_true_random=False),
)
def test_the_hint_depends_only_on_the_latest_five_runs_not_their_order(
    raw: list[tuple[datetime, int]], tz: str, rnd: random.Random
) -> None:
    runs = [RunArrival(tick, tick + timedelta(seconds=lag)) for tick, lag in raw]
    shuffled = list(runs)
    rnd.shuffle(shuffled)
    assert tz_mismatch_hint(shuffled, tz) == tz_mismatch_hint(runs, tz)
    latest = sorted(runs, key=lambda r: (r.arrived, r.tick))[-RUNS_CONSIDERED:]
    assert tz_mismatch_hint(latest, tz) == tz_mismatch_hint(runs, tz)
    if len(runs) < RUNS_CONSIDERED:
        assert tz_mismatch_hint(runs, tz) is None
