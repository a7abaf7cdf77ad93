"""Rendering alerts into notification text (DESIGN §7)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.domain import messages
from monitor.domain.messages import AlertFacts, humanize_duration
from monitor.notify.templates import render, stored_text

TICK = datetime(2026, 7, 19, 3, 0, tzinfo=UTC)


def make_facts(**overrides: Any) -> AlertFacts:
    values: dict[str, Any] = {
        "kind": "missed",
        "check_name": "nightly-billing",
        "check_uuid": "5f1c1f2e-0000-4000-8000-000000000001",
        "slug": "nightly-billing",
        "tz": "Europe/Berlin",
        "status": "down",
        "scheduled": TICK,
        "check_url": "https://monitor.example/checks/5f1c1f2e-0000-4000-8000-000000000001",
    }
    values.update(overrides)
    return AlertFacts(**values)


@pytest.mark.parametrize("kind", messages.KINDS)
def test_title_starts_with_check_name_and_contains_kind_verbatim(kind: str) -> None:
    message = render(make_facts(kind=kind, count=2, duration_s=60, late_by_s=60))

    assert message.title.startswith("nightly-billing: ")
    assert f": {kind} — " in message.title
    assert "\n" not in message.title


@pytest.mark.parametrize("kind", messages.KINDS)
def test_body_gives_tick_in_utc_and_in_check_zone_and_link(kind: str) -> None:
    message = render(make_facts(kind=kind))

    for body in (message.body, message.body_markdown):
        assert "2026-07-19T03:00:00Z" in body
        assert "2026-07-19 05:00 CEST (Europe/Berlin)" in body
        assert "https://monitor.example/checks/5f1c1f2e-0000-4000-8000-000000000001" in body


def test_missed_title_reads_like_a_person() -> None:
    message = render(make_facts(tz="UTC"))

    assert message.title == "nightly-billing: missed — the 03:00 run did not report"
    assert message.body.startswith("nightly-billing: the 03:00 UTC run did not report.")
    assert "(local)" not in message.body  # a UTC check needs no second rendering


def test_missed_in_a_zone_names_local_time_with_its_abbreviation() -> None:
    message = render(make_facts())

    assert message.title == "nightly-billing: missed — the 05:00 CEST run did not report"
    assert "the 03:00 UTC (05:00 Europe/Berlin) run did not report" in message.body


def test_missed_several_ticks_says_how_many() -> None:
    message = render(make_facts(count=3))

    assert "and the 2 runs before it did not report" in message.title
    assert "3 ticks missed" in message.body
    assert "Ticks missed: 3" in message.body


def test_late_says_how_late() -> None:
    message = render(make_facts(kind="late", late_by_s=25 * 60, status="up"))

    assert message.title == "nightly-billing: late — the 05:00 CEST run was 25 min late"
    assert "Late by: 25 min" in message.body


def test_failed_gives_exit_status_duration_and_log_tail() -> None:
    message = render(
        make_facts(kind="failed", exit_status=2, duration_s=42, log_tail="step 1 ok\nERROR: card declined\n")
    )

    assert message.title == "nightly-billing: failed — the 05:00 CEST run exited with status 2"
    assert "exited with status 2 after 42 s" in message.body
    assert "Exit status: 2" in message.body
    assert "ERROR: card declined" in message.body
    assert "```\nstep 1 ok\nERROR: card declined\n```" in message.body_markdown


def test_timeout_says_how_long_it_has_been_running() -> None:
    message = render(make_facts(kind="timeout", duration_s=70 * 60))

    assert message.title == "nightly-billing: timeout — the 05:00 CEST run has been running for 1 h 10 min"
    assert "past its max runtime" in message.body


def test_duplicate_names_the_runs() -> None:
    run_ids = ("a1b2c3d4-e5f6", "b1b2c3d4-e5f6", "c1b2c3d4-e5f6")
    message = render(make_facts(kind="duplicate", count=3, run_ids=run_ids))

    assert message.title == "nightly-billing: duplicate — the 05:00 CEST run ran 3 times"
    assert (
        "nightly-billing: the 03:00 UTC (05:00 Europe/Berlin) run ran 3 times"
        " (runs a1b2c3d4…, b1b2c3d4…, c1b2c3d4…)" in message.body
    )
    assert "Run ids: a1b2c3d4-e5f6, b1b2c3d4-e5f6, c1b2c3d4-e5f6" in message.body


def test_overlap_names_the_earlier_run_and_how_long_it_has_run() -> None:
    message = render(
        make_facts(
            kind="overlap",
            tz="UTC",
            scheduled=datetime(2026, 7, 19, 2, 0, tzinfo=UTC),
            other_scheduled=datetime(2026, 7, 19, 1, 0, tzinfo=UTC),
            duration_s=70 * 60,
        )
    )

    assert (
        message.title
        == "nightly-billing: overlap — the 02:00 run started while the 01:00 run was still running"
    )
    assert (
        "the 02:00 UTC run started while the 01:00 UTC run was still running (1 h 10 min so far)"
        in message.body
    )


def test_overlap_without_the_earlier_tick_still_reads() -> None:
    message = render(make_facts(kind="overlap", duration_s=600))

    assert "started while an earlier run was still running (10 min so far)" in message.body


def test_recovered() -> None:
    message = render(make_facts(kind="recovered", status="up", duration_s=30))

    assert message.title == "nightly-billing: recovered — the 05:00 CEST run succeeded"
    assert "the check is up again" in message.body


def test_dst_abbreviation_tells_winter_from_summer() -> None:
    winter = render(make_facts(scheduled=datetime(2026, 1, 19, 3, 0, tzinfo=UTC)))

    assert "2026-01-19 04:00 CET (Europe/Berlin)" in winter.body


def test_sub_minute_tick_keeps_seconds() -> None:
    message = render(make_facts(tz="UTC", scheduled=datetime(2026, 7, 19, 3, 0, 30, tzinfo=UTC)))

    assert "the 03:00:30 run" in message.title
    assert "2026-07-19T03:00:30Z" in message.body


def test_without_a_tick_speaks_of_the_last_run() -> None:
    message = render(make_facts(kind="failed", scheduled=None))

    assert message.title == "nightly-billing: failed — the last run reported failure"
    assert message.json_fields["scheduled"] == ""


def test_unknown_zone_falls_back_to_utc_instead_of_raising() -> None:
    message = render(make_facts(tz="Mars/Olympus_Mons"))

    assert "2026-07-19T03:00:00Z" in message.body


def test_json_fields() -> None:
    message = render(make_facts(slug=None))

    assert message.json_fields == {
        "kind": "missed",
        "check_uuid": "5f1c1f2e-0000-4000-8000-000000000001",
        "slug": "",
        "scheduled": "2026-07-19T03:00:00Z",
        "status": "down",
        "name": "nightly-billing",
        "url": "https://monitor.example/checks/5f1c1f2e-0000-4000-8000-000000000001",
    }


def test_log_tail_keeps_the_end_and_is_bounded() -> None:
    log = "".join(f"line {i}\n" for i in range(2000)) + "\x1b[31mFATAL\x1b[0m\x00 done"
    message = render(make_facts(kind="failed", log_tail=log))

    assert "line 0\n" not in message.body
    assert "FATAL done" in message.body
    tail = message.body.split("Last ping's log (tail):\n", 1)[1].split("\n\nCheck:", 1)[0]
    assert tail.startswith("…")
    assert len(tail) <= messages.LOG_TAIL_LIMIT + 1


def test_markdown_escapes_the_name_but_title_stays_verbatim() -> None:
    message = render(make_facts(check_name="db_backup*"))

    assert message.title.startswith("db_backup*: missed")
    assert message.body_markdown.startswith("**db\\_backup\\***:")


def test_blank_log_tail_is_left_out() -> None:
    assert "log" not in render(make_facts(log_tail="  \n")).body


def test_facts_and_message_are_frozen() -> None:
    facts = make_facts()
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts.kind = "late"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(0, "0 s", id="zero"),
        pytest.param(-5, "0 s", id="negative"),
        pytest.param(45.4, "45 s", id="seconds"),
        pytest.param(60, "1 min", id="one-minute"),
        pytest.param(25 * 60 + 10, "25 min", id="minutes"),
        pytest.param(59 * 60 + 50, "1 h", id="rounds-up-to-an-hour"),
        pytest.param(70 * 60, "1 h 10 min", id="hours-and-minutes"),
        pytest.param(3 * 86400, "3 days", id="days"),
        pytest.param(86400 + 4 * 3600, "1 day 4 h", id="day-and-hours"),
    ],
)
def test_humanize_duration(seconds: float, text: str) -> None:
    assert humanize_duration(seconds) == text


@pytest.mark.parametrize("kind", messages.EXTRA_KINDS)
def test_reminder_escalation_and_summary_titles_follow_the_title_rule(kind: str) -> None:
    facts = make_facts(
        kind=kind,
        episode_kind="missed",
        down_for_s=5400,
        reminder=2,
        window_name="deploy",
        window_start=TICK,
        window_end=TICK.replace(hour=4),
        held=("2026-07-19T03:10:00Z nightly-billing: missed — the 05:00 CEST run did not report",),
    )
    message = render(facts)

    assert message.title.startswith("nightly-billing: ")
    assert f": {kind} — " in message.title
    assert "\n" not in message.title
    assert "https://monitor.example/checks/5f1c1f2e-0000-4000-8000-000000000001" in message.body


def test_nag_says_how_long_and_which_reminder() -> None:
    message = render(make_facts(kind="nag", episode_kind="failed", down_for_s=7200, reminder=2, tz="UTC"))

    assert message.title == "nightly-billing: nag — still down after 2 h (failed the 03:00 run, reminder 2)"
    assert "Down for: 2 h" in message.body and "Reminder: 2" in message.body


def test_maintenance_summary_lists_what_was_held_back() -> None:
    held = ("2026-07-19T03:10:00Z nightly-billing: missed — the 05:00 CEST run did not report",)
    message = render(
        make_facts(
            kind="maintenance",
            scheduled=None,
            window_name="deploy",
            window_start=TICK,
            window_end=TICK.replace(hour=4),
            held=held,
        )
    )

    assert message.title == "nightly-billing: maintenance — window “deploy” ended, 1 alert held back"
    assert "Window: 2026-07-19T03:00:00Z – 2026-07-19T04:00:00Z" in message.body
    assert "Window (local): 2026-07-19 05:00 CEST (Europe/Berlin) – 2026-07-19 06:00 CEST" in message.body
    assert f"- {held[0]}" in message.body
    assert "#tick-" not in message.body  # no tick, no run link


def test_tick_link_points_at_the_run_on_the_check_page() -> None:
    message = render(make_facts())

    assert (
        "Run: https://monitor.example/checks/5f1c1f2e-0000-4000-8000-000000000001#tick-2026-07-19T03:00:00Z"
        in (message.body)
    )
    assert message.json_fields["url"] == "https://monitor.example/checks/5f1c1f2e-0000-4000-8000-000000000001"


def test_facts_survive_storage() -> None:
    facts = make_facts(kind="overlap", run_ids=("a", "b"), other_scheduled=TICK.replace(hour=2), held=("x",))

    assert messages.facts_from_json(messages.facts_to_json(facts)) == facts
    assert (
        messages.facts_from_json(
            '{"kind": "missed", "check_name": "n", "check_uuid": "u", "slug": null,'
            ' "tz": "UTC", "status": "down", "scheduled": null, "check_url": "c",'
            ' "from_the_future": 1}'
        ).kind
        == "missed"
    )


_instants = st.none() | st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
).map(lambda instant: instant.replace(microsecond=0))
_names = st.text(max_size=12)


@given(
    st.builds(
        AlertFacts,
        kind=st.sampled_from(messages.KINDS),
        check_name=_names,
        check_uuid=_names,
        slug=st.none() | _names,
        tz=st.just("UTC"),
        status=st.sampled_from(["up", "down", "new"]),
        scheduled=_instants,
        count=st.integers(0, 5),
        late_by_s=st.none() | st.floats(0, 1e6),
        duration_s=st.none() | st.floats(0, 1e6),
        exit_status=st.none() | st.integers(0, 255),
        run_ids=st.lists(_names, max_size=3).map(tuple),
        check_url=_names,
        other_scheduled=_instants,
        held=st.lists(_names, max_size=2).map(tuple),
        simple=st.booleans(),
        superseded=st.booleans(),
        runs_seen=st.none() | st.integers(0, 9),
    )
)
def test_stored_facts_read_back_equal_whichever_fields_hold_their_defaults(facts: AlertFacts) -> None:
    stored = messages.facts_to_json(facts)

    assert messages.facts_from_json(stored) == facts


def test_stored_facts_leave_out_the_fields_that_hold_their_default() -> None:
    stored = messages.facts_to_json(make_facts(kind="missed", count=1, exit_status=0))

    assert '"count"' not in stored and '"run_ids"' not in stored and '"superseded"' not in stored
    assert '"exit_status": 0' in stored  # 0 is not the default None
    assert '"slug"' in stored  # required fields are always written


def test_a_superseded_miss_says_later_runs_succeeded_and_the_check_is_up() -> None:
    one = render(make_facts(tz="UTC", status="up", superseded=True))
    assert one.title == "nightly-billing: missed — the 03:00 run never reported; later runs succeeded"
    assert "stays up" in one.body
    two = render(make_facts(tz="UTC", status="up", superseded=True, count=2))
    assert "the 03:00 run and the run after it never reported" in two.title


def test_incomplete_says_how_many_of_the_expected_runs_reported() -> None:
    message = render(make_facts(kind="incomplete", tz="UTC", runs_seen=4, runs_expected=5))
    assert message.title == "nightly-billing: incomplete — the 03:00 run: 4 of 5 runs reported"
    assert "Runs reported: 4 of 5" in message.body


def test_too_fast_says_how_long_it_took_and_the_minimum() -> None:
    message = render(make_facts(kind="too_fast", tz="UTC", duration_s=15, min_runtime_s=3000))
    assert message.title == "nightly-billing: too_fast — the 03:00 run finished too fast in 15 s"
    assert "sooner than its minimum run time of 50 min" in message.body


@pytest.mark.parametrize("kind", messages.KINDS)
def test_an_alert_that_stored_only_its_facts_reads_as_its_rendered_text(kind: str) -> None:
    facts = make_facts(kind=kind, count=3, run_ids=("a", "b"), duration_s=61.5, exit_status=2)
    stored = messages.facts_to_json(facts)
    rendered = render(facts)
    assert stored_text("", "", stored) == (rendered.title, rendered.body)


def test_an_alert_that_stored_its_text_reads_as_stored() -> None:
    stored = messages.facts_to_json(make_facts())
    assert stored_text("nightly: down", "it said this\n", stored) == ("nightly: down", "it said this\n")
    assert stored_text("project: outage", "text\n", None) == ("project: outage", "text\n")


def test_facts_encoded_from_fields_equal_the_encoded_facts() -> None:
    facts = make_facts(kind="failed", exit_status=3, duration_s=12.5, run_ids=("a", "b"))
    values = {f.name: getattr(facts, f.name) for f in dataclasses.fields(facts)}

    assert messages.encode_facts(values) == messages.facts_to_json(facts)
    defaults_left_out = {k: v for k, v in values.items() if k not in ("count", "held", "superseded")}
    assert messages.encode_facts(defaults_left_out) == messages.facts_to_json(facts)
    backwards = dict(reversed(list(defaults_left_out.items())))
    assert messages.encode_facts(backwards) == messages.facts_to_json(facts)


def test_facts_encoded_from_fields_refuse_an_unknown_or_missing_field() -> None:
    values = {f.name: getattr(make_facts(), f.name) for f in dataclasses.fields(AlertFacts)}
    with pytest.raises(ValueError, match="no such field 'colour'"):
        messages.encode_facts({**values, "colour": "red"})
    del values["check_uuid"]
    with pytest.raises(ValueError, match="check_uuid is required"):
        messages.encode_facts(values)
