"""The ``oncalendar`` dialect (monitor.domain.cron.calendar_events): parsing, the schedule interface,
DESIGN §4's DST rule, and ``systemd-analyze calendar`` as the oracle over generated expressions.

The oracle is Debian's systemd (``systemd-analyze calendar --iterations=N --base-time=@T``, with
``TZ=UTC`` so it prints UTC). It must be installed (``scripts/ensure-systemd.sh``; ``.ci/run``
and ``make test`` run it): without it these tests fail, they never skip.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.domain.cron import schedules
from monitor.domain.cron.calendar_events import OnCalendarSchedule, parse_oncalendar
from monitor.domain.cron.explain import explain
from monitor.domain.errors import ScheduleError, ZoneError

Z = UTC


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def ticks(expression: str, after: str, count: int = 4, tz: str = "UTC") -> list[str]:
    schedule = schedules.parse_cron(expression, "oncalendar", tz)
    return [schedules.format_utc(t) for t in schedule.next_ticks(at(after), count)]


# --------------------------------------------------------------------------- parsing


def test_parse_cron_dispatches_to_the_calendar_engine_in_any_case() -> None:
    schedule = schedules.parse_cron("Mon 12:00", "OnCalendar", "UTC")
    assert isinstance(schedule, OnCalendarSchedule)
    assert schedule.dialect is schedules.Dialect.ONCALENDAR
    assert isinstance(schedule, schedules.CronSchedule)  # the same interface as the cron dialects


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        pytest.param(
            "daily", "2026-07-01T12:00:00Z", ["2026-07-02T00:00:00Z", "2026-07-03T00:00:00Z"], id="daily"
        ),
        pytest.param(
            "Mon..Fri 09:30",
            "2026-07-03T10:00:00Z",
            ["2026-07-06T09:30:00Z", "2026-07-07T09:30:00Z"],
            id="weekdays",
        ),
        pytest.param(
            "*:0/20",
            "2026-07-01T00:05:00Z",
            ["2026-07-01T00:20:00Z", "2026-07-01T00:40:00Z"],
            id="every-20-min",
        ),
        pytest.param(
            "*-02~01",
            "2026-01-01T00:00:00Z",
            ["2026-02-28T00:00:00Z", "2027-02-28T00:00:00Z"],
            id="last-day-of-feb",
        ),
        pytest.param(
            "*-02~01",
            "2027-03-01T00:00:00Z",
            ["2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z"],
            id="leap-year",
        ),
        pytest.param(
            "Mon *-*-1..7 03:00",
            "2026-07-01T00:00:00Z",
            ["2026-07-06T03:00:00Z", "2026-08-03T03:00:00Z"],
            id="first-monday-AND",
        ),
        pytest.param(
            "quarterly",
            "2026-05-01T00:00:00Z",
            ["2026-07-01T00:00:00Z", "2026-10-01T00:00:00Z"],
            id="quarterly",
        ),
        pytest.param("2027-01-01 00:00:00", "2026-05-01T00:00:00Z", ["2027-01-01T00:00:00Z"], id="one-shot"),
        pytest.param(
            "*-*-* 12:00 Asia/Tokyo",
            "2026-07-01T00:00:00Z",
            ["2026-07-01T03:00:00Z", "2026-07-02T03:00:00Z"],
            id="line-zone",
        ),
        pytest.param(
            "12:00\n18:00 Asia/Tokyo",
            "2026-07-01T00:00:00Z",
            ["2026-07-01T09:00:00Z", "2026-07-01T12:00:00Z", "2026-07-02T09:00:00Z"],
            id="union-of-lines",
        ),
        pytest.param(
            "12:00\n12:00",
            "2026-07-01T00:00:00Z",
            ["2026-07-01T12:00:00Z", "2026-07-02T12:00:00Z"],
            id="same-instant-once",
        ),
    ],
)
def test_next_ticks(expression: str, after: str, expected: list[str]) -> None:
    assert (
        ticks(expression, after, len(expected) + (1 if expected[-1].startswith("2027-01-01") else 0))
        == expected
    )


def test_lines_without_a_zone_use_the_checks_zone() -> None:
    assert ticks("12:00", "2026-07-01T00:00:00Z", 1, tz="Europe/Berlin") == ["2026-07-01T10:00:00Z"]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        pytest.param("Mon 25:00", "Bad hour", id="bad-hour"),
        pytest.param("*-13-01", "Bad month", id="bad-month"),
        pytest.param("Funday", "Bad day-of-week", id="bad-weekday"),
        pytest.param("*-*-* 12:00 Europe/Atlantis", "Europe/Atlantis", id="unknown-zone"),
        pytest.param("12:00\nMon 99:00", "line 2 ('Mon 99:00'): Bad hour", id="names-the-line"),
        pytest.param("12:00\n\n13:00", "line 2 is empty", id="empty-line"),
        pytest.param("   ", "empty", id="empty"),
        pytest.param("*-02-30", "never fires", id="never-fires"),
        pytest.param("12:00\n*-04-31", "line 2 ('*-04-31') never fires", id="never-fires-line"),
        pytest.param("*:*:0.5", "Bad second", id="fractional-seconds"),
    ],
)
def test_bad_expressions_are_refused_with_a_clear_message(expression: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=re.escape(message)):
        schedules.parse_cron(expression, "oncalendar", "UTC")


def test_the_checks_zone_must_be_iana() -> None:
    with pytest.raises(ZoneError):
        schedules.parse_cron("12:00", "oncalendar", "+02:00")


def test_a_schedule_in_the_past_is_refused_after_now() -> None:
    schedule = schedules.parse_cron("2020-01-01", "oncalendar", "UTC")
    with pytest.raises(
        ScheduleError, match="never fires after 2026-07-01T00:00:00Z: its last tick was 2020-01-01"
    ):
        schedules.ensure_fires_after(schedule, at("2026-07-01T00:00:00Z"))


def test_ticks_end_in_2199_as_in_systemd() -> None:
    schedule = parse_oncalendar("yearly")
    assert schedule.next_tick(at("2199-06-01T00:00:00Z")) is None
    assert schedule.last_tick() == at("2199-01-01T00:00:00Z")
    assert schedule.tick_at_or_before(at("1969-12-31T00:00:00Z")) is None


# --------------------------------------------------------------------------- DST (DESIGN §4)


def test_fixed_time_in_a_gap_fires_once_after_it() -> None:
    # 2026-03-29 02:30 does not exist in Berlin: one tick at the end of the gap (03:00 CEST)
    assert ticks("*-*-* 02:30", "2026-03-28T12:00:00Z", 2, "Europe/Berlin") == [
        "2026-03-29T01:00:00Z",
        "2026-03-30T00:30:00Z",
    ]


def test_wildcard_ticks_in_a_gap_do_not_exist() -> None:
    got = ticks("*-*-* 02:*:00", "2026-03-29T00:00:00Z", 1, "Europe/Berlin")
    assert got == ["2026-03-30T00:00:00Z"]


def test_fixed_time_in_an_overlap_fires_at_the_first_occurrence() -> None:
    assert ticks("02:30", "2026-10-24T12:00:00Z", 2, "Europe/Berlin") == [
        "2026-10-25T00:30:00Z",
        "2026-10-26T01:30:00Z",
    ]


def test_wildcard_in_an_overlap_fires_at_every_occurrence() -> None:
    got = ticks("*:00/30", "2026-10-24T23:45:00Z", 4, "Europe/Berlin")
    assert got == [
        "2026-10-25T00:00:00Z",
        "2026-10-25T00:30:00Z",
        "2026-10-25T01:00:00Z",
        "2026-10-25T01:30:00Z",
    ]


# --------------------------------------------------------------------------- interface properties

instants = st.integers(
    int(at("2000-01-01T00:00:00Z").timestamp()), int(at("2060-01-01T00:00:00Z").timestamp())
)
SAMPLES = [
    ("*:0/7", "UTC"),
    ("Mon..Fri 09:00", "Europe/Berlin"),
    ("*-*-* *:00/30:00", "Europe/Berlin"),
    ("*-*-* 02:30", "America/New_York"),
    ("Sat *-*~01..07 23:59:59", "Australia/Lord_Howe"),
    ("*-02-29 12:00\nhourly Asia/Kolkata", "Europe/London"),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instants, st.sampled_from(SAMPLES), st.integers(0, 999_999))
def test_next_and_previous_ticks_agree(second: int, sample: tuple[str, str], micros: int) -> None:
    schedule = parse_oncalendar(*sample)
    instant = datetime.fromtimestamp(second, Z).replace(microsecond=micros)
    nxt = schedule.next_tick(instant)
    assert nxt is not None and nxt > instant
    assert schedule.is_tick(nxt)
    assert schedule.tick_at_or_before(nxt) == nxt
    before = schedule.prev_tick(nxt)
    assert before is None or before <= instant  # nothing between the previous tick and nxt
    latest = schedule.tick_at_or_before(instant)
    assert latest is not None and latest <= instant and schedule.next_tick(latest) == nxt
    window = list(schedule.ticks_between(latest - timedelta(days=2), nxt))
    assert window[-2:] == [latest, nxt] and window == sorted(set(window))


# --------------------------------------------------------------------------- explain


def test_explain_decodes_lines_and_lists_ticks() -> None:
    out = explain(
        "Mon..Fri 02:30\n*-*~1 23:00 UTC",
        dialect="oncalendar",
        tz="Europe/Berlin",
        count=3,
        after=at("2026-07-01T00:00:00Z"),
    )
    assert out["dialect"] == "oncalendar"
    names = [f["name"] for f in out["fields"]]
    assert names[:4] == ["line 1: day of week", "line 1: date", "line 1: time", "line 1: time zone"]
    assert out["fields"][7] == {"name": "line 2: time zone", "value": "UTC", "meaning": "the line's own zone"}
    assert out["description"].startswith(
        "At 02:30 on Monday to Friday (Europe/Berlin); and at 23:00 on the last day"
    )
    assert [n["utc"] for n in out["next"]] == [
        "2026-07-01T00:30:00Z",
        "2026-07-02T00:30:00Z",
        "2026-07-03T00:30:00Z",
    ]
    assert out["next"][0]["local"] == "2026-07-01T02:30:00+02:00"


def test_explain_says_where_systemd_differs_at_offset_changes() -> None:
    gap = explain(
        "02:30", dialect="oncalendar", tz="Europe/Berlin", count=2, after=at("2026-03-28T12:00:00Z")
    )
    assert any("catch-up" in w and "systemd skips" in w for w in gap["warnings"])
    overlap = explain(
        "*:00", dialect="oncalendar", tz="Europe/Berlin", count=3, after=at("2026-10-25T00:30:00Z")
    )
    assert any(
        "every real occurrence" in w and "systemd fires each only once" in w for w in overlap["warnings"]
    )


# --------------------------------------------------------------------------- the systemd oracle

ANALYZE = shutil.which("systemd-analyze")
_TICK_RE = re.compile(r"(?:Next elapse|Iter\. #\d+): \w+ (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC")


@pytest.fixture(scope="module")
def analyze() -> str:
    """systemd-analyze, required (scripts/ensure-systemd.sh installs Debian's systemd)."""
    assert ANALYZE is not None, (
        "systemd-analyze is missing: run scripts/ensure-systemd.sh (apt-get install systemd)"
    )
    return ANALYZE


def systemd_ticks(analyze: str, expressions: list[str], base: int, count: int) -> list[list[str]]:
    """Each expression's next ``count`` ticks after epoch second ``base``, as systemd computes them."""
    proc = subprocess.run(
        [analyze, "calendar", f"--iterations={count}", f"--base-time=@{base}", *expressions],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TZ": "UTC", "SYSTEMD_COLORS": "0", "LC_ALL": "C"},
        check=False,
    )
    assert proc.returncode == 0, f"systemd refused one of {expressions!r}: {proc.stderr}"
    blocks: list[list[str]] = []
    for line in proc.stdout.splitlines():
        if "Normalized form:" in line:
            blocks.append([])
        elif match := _TICK_RE.search(line):
            blocks[-1].append(match.group(1).replace(" ", "T") + "Z")
    assert len(blocks) == len(expressions), proc.stdout
    return blocks


def _pick(options: list[str]) -> st.SearchStrategy[str]:
    return st.sampled_from(options)


weekday = _pick(["", "", "Mon ", "Sat,Sun ", "Mon..Fri ", "Tue,Thu ", "Fri..Sun ", "Wed "])
year = _pick(["*", "*", "*", "2026..2030", "2027", "2026,2029"])
month = _pick(["*", "*", "02", "1,7", "3..5", "1/3", "12"])
day = _pick(["*", "*", "01", "15", "1..7", "1/10", "29,31", "~01", "~01..03", "28..31"])
hour = _pick(["*", "00", "02", "12", "1,13", "8..18", "0/6", "23"])
minute = _pick(["*", "00", "30", "0/15", "5,35", "10..12", "59"])
second = _pick(["", "", ":00", ":30", ":0/20", ":*"])
zone = _pick(["", "", " UTC", " Asia/Tokyo", " Asia/Kolkata", " America/Sao_Paulo"])


@st.composite
def calendar_expressions(draw: st.DrawFn, with_zone: bool = True) -> str:
    d = draw(day)
    date = f"{draw(year)}-{draw(month)}{d if d.startswith('~') else '-' + d} "
    if draw(st.booleans()) and not d.startswith("~"):
        date = ""  # no date component: every day
    time = f"{draw(hour)}:{draw(minute)}{draw(second)}"
    return f"{draw(weekday)}{date}{time}{draw(zone) if with_zone else ''}".strip()


def _fires(expression: str) -> bool:
    try:
        parse_oncalendar(expression)
    except ScheduleError:
        return False
    return True


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(calendar_expressions().filter(_fires), min_size=25, max_size=25),
    st.integers(int(at("2026-01-01T00:00:00Z").timestamp()), int(at("2030-01-01T00:00:00Z").timestamp())),
)
def test_ticks_match_systemd_analyze(analyze: str, expressions: list[str], base: int) -> None:
    """In zones without offset changes our ticks are exactly systemd's."""
    expected = systemd_ticks(analyze, expressions, base, 6)
    after = datetime.fromtimestamp(base, Z)
    for expression, theirs in zip(expressions, expected, strict=True):
        ours = [schedules.format_utc(t) for t in parse_oncalendar(expression).next_ticks(after, 6)]
        assert ours == theirs, expression


def _away_from_changes(tz: str, ticks: list[str], after: datetime) -> list[str]:
    """The ticks before the zone's first offset change after ``after``, less a day of margin."""
    changes = schedules.offset_changes(tz, after, after + timedelta(days=3 * 366))
    cutoff = changes[0][0] - timedelta(days=1) if changes else None
    return [t for t in ticks if cutoff is None or at(t) < cutoff]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        calendar_expressions(with_zone=False).filter(lambda e: _fires(f"{e} Europe/Berlin")),
        min_size=20,
        max_size=20,
    ),
    st.integers(int(at("2026-01-01T00:00:00Z").timestamp()), int(at("2030-01-01T00:00:00Z").timestamp())),
)
def test_ticks_match_systemd_analyze_in_a_dst_zone_away_from_changes(
    analyze: str, expressions: list[str], base: int
) -> None:
    """Europe/Berlin: identical up to the next offset change (where DESIGN §4 and systemd differ)."""
    lines = [f"{e} Europe/Berlin" for e in expressions]
    expected = systemd_ticks(analyze, lines, base, 6)
    after = datetime.fromtimestamp(base, Z)
    for line, theirs in zip(lines, expected, strict=True):
        ours = [schedules.format_utc(t) for t in parse_oncalendar(line).next_ticks(after, 6)]
        assert _away_from_changes("Europe/Berlin", ours, after) == _away_from_changes(
            "Europe/Berlin", theirs, after
        ), line


def test_systemd_differs_from_design_in_a_gap_and_an_overlap(analyze: str) -> None:
    """Pin the documented differences: systemd skips a fixed time in a gap and fires a repeated
    wall time once; DESIGN §4 fires once after the gap and at every real occurrence (wildcard)."""
    gap_base = int(at("2026-03-28T12:00:00Z").timestamp())
    [theirs] = systemd_ticks(analyze, ["*-*-* 02:30:00 Europe/Berlin"], gap_base, 2)
    assert theirs == ["2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"]
    assert ticks("*-*-* 02:30:00 Europe/Berlin", "2026-03-28T12:00:00Z", 2) == [
        "2026-03-29T01:00:00Z",
        "2026-03-30T00:30:00Z",
    ]
    overlap_base = int(at("2026-10-25T00:00:00Z").timestamp())
    [theirs] = systemd_ticks(analyze, ["*-*-* *:00/30:00 Europe/Berlin"], overlap_base, 4)
    assert theirs == [
        "2026-10-25T00:30:00Z",
        "2026-10-25T02:00:00Z",
        "2026-10-25T02:30:00Z",
        "2026-10-25T03:00:00Z",
    ]
    ours = ticks("*-*-* *:00/30:00 Europe/Berlin", "2026-10-25T00:00:00Z", 4)
    assert ours == [
        "2026-10-25T00:30:00Z",
        "2026-10-25T01:00:00Z",
        "2026-10-25T01:30:00Z",
        "2026-10-25T02:00:00Z",
    ]


# --------------------------------------------------------------------------- other users of the interface


def test_a_scheduler_job_can_run_on_a_calendar_event() -> None:
    from monitor.domain.jobs import parse_jobs

    [job] = parse_jobs(
        {
            "jobs": [
                {
                    "name": "report",
                    "schedule": "Mon..Fri 07:30",
                    "dialect": "oncalendar",
                    "tz": "Europe/Berlin",
                    "command": ["true"],
                }
            ]
        }
    )
    assert job.schedule.next_tick(at("2026-07-03T06:00:00Z")) == at("2026-07-06T05:30:00Z")
