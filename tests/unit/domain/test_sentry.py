"""Sentry check-ins read as pings and check settings (pure domain, no I/O)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from monitor.domain import sentry
from monitor.domain.checks import PingKind
from monitor.domain.sentry import SentryError


def refused(call: Any, status: int, starts: str) -> None:
    with pytest.raises(SentryError) as caught:
        call()
    assert caught.value.status == status
    assert str(caught.value).startswith(starts), str(caught.value)


def test_envelope_items_are_split_with_and_without_lengths() -> None:
    payload = b'{"a": "line\\nbreak"}'
    body = b'{"dsn": "http://k@h/1"}\n{"type": "check_in", "length": %d}\n%s\n{"type": "event"}\n{}\n\n' % (
        len(payload),
        payload,
    )
    envelope = sentry.parse_envelope(body)
    assert envelope.header == {"dsn": "http://k@h/1"}
    assert [(i.type, i.payload) for i in envelope.items] == [("check_in", payload), ("event", b"{}")]
    assert [i.type for i in envelope.check_ins] == ["check_in"]
    # a binary attachment whose payload holds newlines, last in the envelope without a final newline
    binary = b"\x00\n\x01"
    envelope = sentry.parse_envelope(b'{}\n{"type": "attachment", "length": 3}\n' + binary)
    assert envelope.items[0].payload == binary


def test_malformed_envelopes_name_what_is_wrong() -> None:
    refused(lambda: sentry.parse_envelope(b"[]\n"), 400, "envelope: header must be a JSON object")
    refused(lambda: sentry.parse_envelope(b'{}\n{"length": 2}\n{}\n'), 400, "item 1: header has no type")
    refused(
        lambda: sentry.parse_envelope(b'{}\n{"type": "event", "length": 1}\n{}\n'),
        400,
        "item 1: payload is longer than its length 1",
    )
    refused(lambda: sentry.parse_envelope(b'{}\n{"type": "x", "length": -1}\n'), 400, "item 1: length must")
    big = b"{" + b" " * sentry.CHECK_IN_LIMIT + b"}"
    refused(lambda: sentry.parse_envelope(b'{}\n{"type": "check_in"}\n' + big), 413, "check_in: item of")
    # an oversized item of another type is only dropped
    assert sentry.parse_envelope(b'{}\n{"type": "replay_video"}\n' + big).items[0].type == "replay_video"


def test_check_in_fields_map_to_a_ping() -> None:
    hex_id = uuid.uuid4().hex
    check_in = sentry.parse_check_in_payload(
        json.dumps(
            {"check_in_id": hex_id, "monitor_slug": "Nightly Billing (EU)", "status": "error"}
        ).encode()
    )
    assert check_in.monitor_slug == "nightly-billing-eu"
    assert check_in.status.ping_kind is PingKind.FAIL
    assert check_in.check_in_id == str(uuid.UUID(hex_id)) and check_in.answer_id == hex_id
    assert check_in.environment == "production" and check_in.check_slug == "nightly-billing-eu"
    nil = sentry.check_in_from_fields({"monitor_slug": "x", "status": "ok", "check_in_id": "0" * 32})
    assert nil.check_in_id is None and nil.answer_id == "0" * 32
    queried = sentry.query_check_in("job", {"status": "in_progress", "duration": "2.5", "environment": "dev"})
    assert (queried.status.ping_kind, queried.duration, queried.check_slug) == (
        PingKind.START,
        2.5,
        "job--dev",
    )
    assert sentry.check_in_from_fields({"monitor_slug": "x" * 80, "status": "ok"}).monitor_slug == "x" * 50


def test_bad_check_in_fields_name_the_field() -> None:
    def fields(**extra: Any) -> Any:
        return lambda: sentry.check_in_from_fields({"monitor_slug": "job", "status": "ok", **extra})

    refused(fields(status="missed"), 400, "status: must be one of in_progress, ok, error, got 'missed'")
    refused(fields(monitor_slug="!!"), 400, "monitor_slug: '!!' is empty or invalid")
    refused(fields(check_in_id="123"), 400, "check_in_id: invalid UUID")
    refused(fields(environment="e" * 65), 400, "environment: must be at most 64")
    refused(fields(environment="my env"), 400, "environment: must not contain whitespace")
    refused(fields(duration=-1), 400, "duration: must be between")
    refused(fields(duration=True), 400, "duration: must be a number")
    refused(lambda: sentry.query_check_in("job", {}), 400, "status: is required")


def test_environments_never_share_a_check() -> None:
    assert sentry.check_slug("job", "production") == "job"
    assert sentry.check_slug("job", "dev") == "job--dev"
    # a slugified monitor slug never holds "--", so ("job-dev", production) is another check
    assert sentry.check_slug(sentry.slugify("job--dev"), "production") == "job-dev"


def test_monitor_config_becomes_check_settings() -> None:
    config = sentry.parse_monitor_config(
        {
            "schedule": {"type": "crontab", "value": "0  3 * * 1-5"},
            "checkin_margin": 10,
            "max_runtime": 45,
            "timezone": "Europe/Berlin",
            "failure_issue_threshold": 3,
            "recovery_threshold": 2,
            "owner": "team:data",
        }
    )
    assert config.check_fields() == {
        "schedule": "0 3 * * 1-5",
        "dialect": "unix",
        "grace": 600,
        "max_runtime": 2700,
        "failure_threshold": 3,
        "recovery_threshold": 2,
        "tz": "Europe/Berlin",
    }
    assert config.owner_tag == "owner:team:data"
    for value, unit, seconds in ((2, "hour", 7200), (1, "month", 31 * 86400), ("3", "day", 3 * 86400)):
        interval = sentry.parse_monitor_config(
            {"schedule": {"type": "interval", "value": value, "unit": unit}}
        )
        assert interval.check_fields() == {"timeout": seconds}
    assert sentry.parse_monitor_config({**{"schedule": {"type": "crontab", "value": "@daily"}}}).grace is None
    zero = sentry.parse_monitor_config(
        {"schedule": {"type": "crontab", "value": "@hourly"}, "checkin_margin": 0}
    )
    assert zero.grace == 1


def test_invalid_monitor_config_names_the_field() -> None:
    def config(**fields: Any) -> Any:
        return lambda: sentry.parse_monitor_config(
            {"schedule": {"type": "crontab", "value": "* * * * *"}, **fields}
        )

    refused(lambda: sentry.parse_monitor_config({}), 400, "monitor_config.schedule: is required")
    refused(
        lambda: sentry.parse_monitor_config({"schedule": {"type": "cron", "value": "x"}}),
        400,
        "monitor_config.schedule.type: must be crontab or interval",
    )
    for expression in ("0 0 30 2 *", "@reboot", "0 0 * * * *", "61 * * * *"):
        refused(
            lambda e=expression: sentry.parse_monitor_config({"schedule": {"type": "crontab", "value": e}}),
            400,
            "monitor_config.schedule.value:",
        )
    refused(
        lambda: sentry.parse_monitor_config({"schedule": {"type": "interval", "value": 0, "unit": "day"}}),
        400,
        "monitor_config.schedule.value: must be a whole number at least 1",
    )
    refused(
        lambda: sentry.parse_monitor_config({"schedule": {"type": "interval", "value": 2, "unit": "year"}}),
        400,
        "monitor_config.schedule: an interval may be at most one year",
    )
    refused(config(timezone="+02:00"), 400, "monitor_config.timezone:")
    refused(config(checkin_margin=1.5), 400, "monitor_config.checkin_margin: must be a whole number")
    refused(config(max_runtime=0), 400, "monitor_config.max_runtime: must be between 1 and")
    refused(config(failure_issue_threshold=0), 400, "monitor_config.failure_issue_threshold:")
    refused(config(owner="two words"), 400, "monitor_config.owner:")


def test_only_changed_settings_are_applied() -> None:
    row = {
        "kind": "cron",
        "schedule": "*/5 * * * *",
        "dialect": "unix",
        "timeout": 86400,
        "tz": "UTC",
        "grace": 60,
        "max_runtime": 1800,
        "failure_threshold": 1,
        "recovery_threshold": 1,
        "tags": "env:production nightly",
    }
    same = sentry.parse_monitor_config({"schedule": {"type": "crontab", "value": "*/5 * * * *"}})
    assert sentry.config_changes(same, row) == {}
    margin = sentry.parse_monitor_config(
        {"schedule": {"type": "crontab", "value": "*/5 * * * *"}, "checkin_margin": 2, "owner": "user:ann"}
    )
    assert sentry.config_changes(margin, row) == {
        "grace": 120,
        "tags": "env:production nightly owner:user:ann",
    }
    interval = sentry.parse_monitor_config({"schedule": {"type": "interval", "value": 5, "unit": "minute"}})
    assert sentry.config_changes(interval, row) == {"timeout": 300}


def test_dsn_and_auth_forms_carry_the_public_key() -> None:
    assert sentry.dsn("https://mon.example.com/watch/", "abc", 7) == "https://abc@mon.example.com/watch/7"
    assert sentry.dsn("http://127.0.0.1:8000", "abc", 1) == "http://abc@127.0.0.1:8000/1"
    assert sentry.auth_key("Sentry sentry_version=7, sentry_key=abc, sentry_client=x/1") == "abc"
    assert sentry.auth_key("sentry_key=abc,sentry_version=7") == "abc"
    assert sentry.auth_key("DSN https://abc@o0.ingest.sentry.io/0") == "abc"
    assert sentry.auth_key(None) is None
    refused(lambda: sentry.auth_key("Sentry sentry_version=7"), 401, "X-Sentry-Auth: missing sentry_key")
