"""Notifications through the real stack: API → outbox → dispatch → AppriseNotifier → loopback receivers.

The clock is injected: alerts are raised by ``evaluate_due`` / ``reminders.raise_due`` and
delivered by ``deliver_due`` at explicit instants (``notify_backoff=0``: retries are due at once).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from litestar.testing import AsyncTestClient

from monitor.app import create_app
from monitor.notify.apprise import AppriseNotifier
from monitor.services import channels as channel_service
from monitor.services import reminders
from monitor.services.dispatch import claim_due, claim_length, deliver, deliver_due
from monitor.services.evaluator import evaluate_due
from monitor.storage import tables as t
from tests.conftest import Api
from tests.integration.test_dispatch import add_channel, missed_check
from tests.support.app import create_check, list_of, open_api
from tests.support.fixtures import http_receiver, make_http_receiver, smtp_receiver
from tests.support.receivers import HttpReceiver, SmtpReceiver

__all__ = ["http_receiver", "make_http_receiver", "smtp_receiver"]  # fixtures, imported for pytest

SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
POSTGRES_ONLY = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
PRIVATE = "resolves to a private/loopback/link-local address"


@pytest.fixture
async def notifier() -> AsyncIterator[AppriseNotifier]:
    async with AppriseNotifier(allow_private_targets=True) as real:
        yield real


async def deliver_now(api: Api, notifier: AppriseNotifier, settings: Any = None) -> int:
    return await deliver_due(api.engine, notifier, api.clock.now(), settings=settings or api.settings)


async def raise_now(api: Api, settings: Any = None) -> int:
    return await reminders.raise_due(api.engine, api.clock.now(), settings=settings or api.settings)


async def notes(api: Api, uuid: str) -> list[tuple[str, str]]:
    """(alert kind, notification status) for every notification of the check, oldest alert first."""
    alerts = await list_of(api, uuid, "alerts")
    return [(a["kind"], n["status"]) for a in reversed(alerts) for n in a["notifications"]]


# --------------------------------------------------------------------------- messages


async def test_json_payload_carries_machine_fields_and_links(
    api: Api, notifier: AppriseNotifier, http_receiver: HttpReceiver
) -> None:
    await add_channel(api, http_receiver.url)
    check = await missed_check(api, tz="Europe/Berlin")
    await deliver_now(api, notifier)
    [request] = await http_receiver.async_wait_for_requests(1)
    payload = request.json
    base, uuid = api.settings.base_url, check["uuid"]
    assert {k: payload[k] for k in ("kind", "check_uuid", "slug", "scheduled", "status", "name", "url")} == {
        "kind": "missed",
        "check_uuid": uuid,
        "slug": "nightly",
        "scheduled": "2026-07-18T02:01:00Z",
        "status": "down",
        "name": "nightly",
        "url": f"{base}/checks/{uuid}",
    }
    assert payload["title"].startswith("nightly: missed — ")
    assert f"Check: {base}/checks/{uuid}\n" in payload["message"]
    assert f"Run: {base}/checks/{uuid}#tick-2026-07-18T02:01:00Z" in payload["message"]
    assert "**" not in payload["message"]  # JSON consumers get plain text


async def test_form_and_email_get_plain_text(
    api: Api,
    notifier: AppriseNotifier,
    make_http_receiver: Callable[..., HttpReceiver],
    smtp_receiver: SmtpReceiver,
) -> None:
    form = make_http_receiver()
    await add_channel(api, form.url.replace("json://", "form://"))
    await add_channel(api, smtp_receiver.url)
    check = await missed_check(api)
    assert await deliver_now(api, notifier) == 2
    [request] = await form.async_wait_for_requests(1)
    [mail] = await smtp_receiver.async_wait_for_messages(1)
    fields = parse_qs(request.text)
    assert fields["title"][0].startswith("nightly: missed")
    assert fields["message"][0].startswith("nightly: the run due by 02:01 UTC did not report.")
    assert "**" not in fields["message"][0]
    assert mail.subject.startswith("nightly: missed")
    assert mail.text.startswith("nightly: the run due by 02:01 UTC did not report.")
    assert f"/checks/{check['uuid']}#tick-2026-07-18T02:01:00Z" in mail.text


@pytest.fixture(scope="module")
def self_signed_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    import subprocess

    folder = tmp_path_factory.mktemp("tls")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    argv = [
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=127.0.0.1",
    ]
    subprocess.run(
        [*argv, "-keyout", key, "-out", cert],
        check=True,
        capture_output=True,
    )
    return cert, key


@SQLITE_ONLY
async def test_email_over_starttls_and_plain_smtp_refused_by_a_tls_only_server(
    api: Api, notifier: AppriseNotifier, self_signed_cert: tuple[str, str]
) -> None:
    with SmtpReceiver(tls_cert=self_signed_cert) as tls_server:
        await add_channel(api, tls_server.url, name="tls")
        plain_url = tls_server.url.replace("mailtos://", "mailto://").replace(
            "mode=starttls", "mode=insecure"
        )
        await add_channel(api, plain_url, name="plain")
        check = await missed_check(api)
        assert await deliver_now(api, notifier) == 2
        [mail] = await tls_server.async_wait_for_messages(1)
        assert mail.subject.startswith("nightly: missed")
        alerts = await list_of(api, check["uuid"], "alerts")
        errors = [n["last_error"] for n in alerts[0]["notifications"] if n["status"] != "sent"]
        assert len(errors) == 1 and "STARTTLS" in errors[0], errors


async def test_templates_directory_overrides_package_templates(
    api: Api, notifier: AppriseNotifier, http_receiver: HttpReceiver, tmp_path: Path
) -> None:
    (tmp_path / "title.j2").write_text("{{ name }}: {{ kind }} [ops] — {{ title_sentence }}\n")
    (tmp_path / "missed.body.txt.j2").write_text("MISSED {{ scheduled_utc }} {{ tick_url }}\n")
    settings = api.settings.replace(templates_dir=str(tmp_path))
    await add_channel(api, http_receiver.url)
    check = await missed_check(api)
    await deliver_now(api, notifier, settings)
    [request] = await http_receiver.async_wait_for_requests(1)
    assert request.json["title"].startswith("nightly: missed [ops] — ")
    tick = f"{api.settings.base_url}/checks/{check['uuid']}#tick-2026-07-18T02:01:00Z"
    assert request.json["message"].strip() == f"MISSED 2026-07-18T02:01:00Z {tick}"


# --------------------------------------------------------------------------- delivery


@SQLITE_ONLY
async def test_500_target_is_retried_then_given_up_with_apprises_error(
    api: Api, notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    receiver = make_http_receiver(status=500)
    await add_channel(api, receiver.url)
    check = await missed_check(api)
    settings = api.settings.replace(notify_max_attempts=3)
    for _ in range(4):
        await deliver_now(api, notifier, settings)
        api.clock.advance(1)
    assert [r.status for r in receiver.requests] == [500, 500, 500]
    [alert] = await list_of(api, check["uuid"], "alerts")
    [note] = alert["notifications"]
    assert (note["status"], note["attempts"]) == ("failed", 3)
    assert note["last_error"].startswith(f"HTTP 500 Internal Server Error from 127.0.0.1:{receiver.port}")


@SQLITE_ONLY
async def test_target_that_times_out_is_retried_then_given_up(
    api: Api, notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    receiver = make_http_receiver(hang_s=5)
    await add_channel(api, receiver.url)
    check = await missed_check(api)
    settings = api.settings.replace(notify_max_attempts=2, notify_timeout=0.5)
    await deliver_now(api, notifier, settings)
    [alert] = await list_of(api, check["uuid"], "alerts")
    assert [(n["status"], n["attempts"], n["last_error"]) for n in alert["notifications"]] == [
        ("pending", 1, "timed out after 0.5s")
    ]
    api.clock.advance(1)
    await deliver_now(api, notifier, settings)
    [alert] = await list_of(api, check["uuid"], "alerts")
    assert [(n["status"], n["attempts"], n["last_error"]) for n in alert["notifications"]] == [
        ("failed", 2, "timed out after 0.5s")
    ]
    assert len(receiver.requests) == 2


async def test_sender_whose_claim_was_taken_over_does_not_send(
    api: Api, notifier: AppriseNotifier, http_receiver: HttpReceiver
) -> None:
    """DESIGN §6: a stalled sender (SIGSTOP, GC pause) past its claim must not re-deliver."""
    await add_channel(api, http_receiver.url)
    check = await missed_check(api)
    now = api.clock.now()
    [stalled] = await claim_due(api.engine, now, settings=api.settings, limit=10)
    # The stalled sender's claim expires; another sender takes the row over and delivers it.
    later = now + claim_length(api.settings) + timedelta(seconds=1)
    [taker] = await claim_due(api.engine, later, settings=api.settings, limit=10)
    assert taker.token != stalled.token
    assert (await deliver(api.engine, notifier, taker, lambda: later, settings=api.settings)) is not None
    # The stalled sender wakes up: its claim is gone, so it sends nothing and records nothing.
    assert (await deliver(api.engine, notifier, stalled, lambda: later, settings=api.settings)) is None
    await asyncio.sleep(0.2)
    assert len(http_receiver.requests) == 1
    [alert] = await list_of(api, check["uuid"], "alerts")
    assert [(n["status"], n["attempts"]) for n in alert["notifications"]] == [("sent", 1)]


@POSTGRES_ONLY
async def test_postgres_claims_skip_rows_locked_by_another_sender(
    api: Api, http_receiver: HttpReceiver
) -> None:
    await add_channel(api, http_receiver.url)
    await missed_check(api)
    async with api.engine.connect() as other:
        transaction = await other.begin()
        await other.execute(t.notifications.select().with_for_update())  # another sender mid-claim
        # Without SKIP LOCKED this would wait for the other transaction.
        claimed = await asyncio.wait_for(
            claim_due(api.engine, api.clock.now(), settings=api.settings, limit=10), timeout=5
        )
        await transaction.rollback()
    assert claimed == []
    assert len(await claim_due(api.engine, api.clock.now(), settings=api.settings, limit=10)) == 1


async def test_flapping_check_is_held_then_coalesced_into_one_digest(
    api: Api, notifier: AppriseNotifier, http_receiver: HttpReceiver
) -> None:
    await add_channel(api, http_receiver.url)
    settings = api.settings.replace(notify_rate_limit=2, notify_rate_window=600.0)
    steady = await create_check(api, name="steady", timeout=60, grace=10, channels="*")
    flappy = await create_check(api, name="flappy", timeout=60, grace=10, channels="*")
    for _ in range(3):  # fail, recover, fail, recover, ...: six alerts
        assert (await api.client.get(f"/ping/{flappy['uuid']}/fail")).status_code == 200
        api.clock.advance(1)
        assert (await api.client.get(f"/ping/{flappy['uuid']}")).status_code == 200
        api.clock.advance(1)
    assert (await api.client.get(f"/ping/{steady['uuid']}/fail")).status_code == 200
    flaps = [k for k, _ in await notes(api, flappy["uuid"])]
    assert flaps == ["failed", "recovered"] * 3
    assert await deliver_now(api, notifier, settings) == 7
    await http_receiver.async_wait_for_requests(3)
    assert sorted(s for _, s in await notes(api, flappy["uuid"])) == ["held"] * 4 + ["sent"] * 2
    assert await notes(api, steady["uuid"]) == [("failed", "sent")]  # other checks are not held back
    api.clock.advance(300)  # the window still holds two sends
    assert await deliver_now(api, notifier, settings) == 0
    api.clock.advance(301)
    assert await deliver_now(api, notifier, settings) == 4  # claimed; the first carries the others
    [*_, digest] = await http_receiver.async_wait_for_requests(4)
    assert digest.json["kind"] == "digest" and digest.json["count"] == "4"
    title = digest.json["title"]  # which two went out first depends on the concurrent senders
    assert title.startswith("flappy: ") and title.endswith(" — 4 notifications held back by the rate limit")
    assert "failed" in title and "recovered" in title
    assert digest.json["message"].count("flappy: ") >= 4
    assert sorted(s for _, s in await notes(api, flappy["uuid"])) == ["coalesced"] * 3 + ["sent"] * 3
    await asyncio.sleep(0.2)
    assert len(http_receiver.requests) == 4


# --------------------------------------------------------------------------- channels API


async def test_project_default_channels_route_new_checks(api: Api, http_receiver: HttpReceiver) -> None:
    default = await add_channel(api, http_receiver.url, name="default", default=True)
    await add_channel(api, http_receiver.url, name="opt-in")
    plain = await create_check(api, name="plain")
    assert plain["channels"] == default
    explicit = await create_check(api, name="explicit", channels="")
    assert explicit["channels"] == ""


@SQLITE_ONLY
async def test_channel_url_is_validated_and_secrets_masked_everywhere(
    api: Api, make_http_receiver: Callable[..., HttpReceiver], caplog: pytest.LogCaptureFixture
) -> None:
    # Our loggers and Apprise's at DEBUG (the database driver's DEBUG echo of SQL parameters is
    # not covered: run the service at INFO, its default).
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="monitor")
    caplog.set_level(logging.DEBUG, logger="apprise")
    receiver = make_http_receiver(status=500)
    secret = "Hunter2SecretPassword"
    token = "AAHsecretBotToken0123456789"
    bad = await api.client.post("/api/v3/channels/", json={"url": "nope://x"}, headers=api.headers)
    assert bad.status_code == 400 and bad.json()["error"].startswith("url: "), bad.text
    urls = [
        f"json://alice:{secret}@127.0.0.1:{receiver.port}/hook",
        f"tgram://123456789:{token}/4242",
        f"mailtos://bob:{secret}@smtp.example.com?to=oncall@example.com",
    ]
    bodies = []
    for url in urls:
        created = await api.client.post(
            "/api/v3/channels/", json={"name": "x", "url": url}, headers=api.headers
        )
        assert created.status_code == 201, created.text
        bodies.append(created.text)
        channel_id = created.json()["id"]
        bodies.append((await api.client.get(f"/api/v3/channels/{channel_id}", headers=api.headers)).text)
        renamed = await api.client.post(
            f"/api/v3/channels/{channel_id}", json={"name": "y"}, headers=api.headers
        )
        bodies.append(renamed.text)
    bodies.append((await api.client.get("/api/v3/channels/", headers=api.headers)).text)
    first = (await api.client.get("/api/v3/channels/", headers=api.headers)).json()["channels"][0]
    assert first["url"].startswith("json://alice:****@127.0.0.1")
    tested = await api.client.post(f"/api/v3/channels/{first['id']}/test", headers=api.headers)
    assert tested.status_code == 400 and tested.json()["error"].startswith("url: delivery failed: HTTP 500")
    bodies.append(tested.text)
    bodies.append((await api.client.delete(f"/api/v3/channels/{first['id']}", headers=api.headers)).text)
    for body in bodies:
        assert secret not in body and token not in body, body
    assert receiver.requests, "the test-send reached the receiver"
    assert secret not in caplog.text and token not in caplog.text


async def test_test_send_delivers_synchronously(api: Api, http_receiver: HttpReceiver) -> None:
    channel = await add_channel(api, http_receiver.url, name="ops")
    r = await api.client.post(f"/api/v3/channels/{channel}/test", headers=api.headers)
    assert r.status_code == 200 and r.json() == {"ok": True, "error": None}
    [request] = http_receiver.requests  # already there: the answer waited for the delivery
    assert request.json["kind"] == "test" and request.json["title"].startswith("ops: test notification")


# --------------------------------------------------------------------------- private targets


def public_resolver(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
    """A DNS server that answers a public address for every name (the first half of a rebinding)."""
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port or 80))]


@SQLITE_ONLY
async def test_private_target_refused_at_creation_with_the_design_error(
    engine: Any, clock: Any, settings_factory: Callable[..., Any], http_receiver: HttpReceiver
) -> None:
    async with open_api(engine, clock, settings_factory(allow_private_targets=False)) as strict:
        for url, host in [
            (f"json://localhost:{http_receiver.port}/hook", "localhost"),
            ("json://169.254.169.254/latest/meta-data", "169.254.169.254"),
            ("json://100.64.0.1/hook", "100.64.0.1"),
            ("json://[fd00::1]/hook", "[fd00::1]"),
        ]:
            r = await strict.client.post("/api/v3/channels/", json={"url": url}, headers=strict.headers)
            assert r.status_code == 400, r.text
            assert r.json()["error"].startswith(f"url: {host} {PRIVATE} ("), r.text


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("json://127.0.0.1:{port}/hook", id="loopback"),
        pytest.param("json://localhost:{port}/hook", id="name-resolving-to-127.0.0.1"),
        pytest.param("json://10.0.0.1:9/hook", id="private-10"),
        pytest.param("json://172.16.0.1:9/hook", id="private-172-16"),
        pytest.param("json://192.168.1.1:9/hook", id="private-192-168"),
        pytest.param("json://169.254.169.254:80/latest", id="metadata"),
        pytest.param("json://100.64.0.1:9/hook", id="cgnat"),
        pytest.param("json://0.0.0.0:{port}/hook", id="unspecified"),
        pytest.param("json://[::1]:{port}/hook", id="ipv6-loopback"),
        pytest.param("json://[fd00::1]:9/hook", id="ipv6-ula"),
        pytest.param("json://[fe80::1]:9/hook", id="ipv6-link-local"),
    ],
)
async def test_connect_time_guard_refuses_every_private_class_despite_rebinding_dns(
    url: str, http_receiver: HttpReceiver
) -> None:
    """The pre-send check is fooled (its DNS answers a public address); the socket hook is not."""
    from monitor.domain.messages import Message

    message = Message(title="t: missed", body="b", body_markdown="b", json_fields={"kind": "missed"})
    async with AppriseNotifier(allow_private_targets=False, resolve=public_resolver) as strict:
        result = await strict.send(url.format(port=http_receiver.port), message, timeout=3)
    assert result.ok is False and result.permanent is True
    assert result.error is not None and result.error.startswith("url: ") and PRIVATE in result.error
    assert http_receiver.requests == []


@pytest.mark.parametrize(
    ("address", "family"),
    [
        pytest.param("::ffff:127.0.0.1", socket.AF_INET6, id="ipv4-mapped"),
        pytest.param("2002:7f00:1::1", socket.AF_INET6, id="6to4-of-loopback"),
        pytest.param("64:ff9b::a9fe:a9fe", socket.AF_INET6, id="nat64-of-metadata"),
        pytest.param("100.127.255.254", socket.AF_INET, id="cgnat-top"),
        pytest.param("198.18.0.1", socket.AF_INET, id="benchmarking"),
        pytest.param("224.0.0.1", socket.AF_INET, id="multicast"),
    ],
)
def test_pre_send_check_classifies_embedded_and_special_addresses(address: str, family: int) -> None:
    from monitor.domain.errors import ValidationError
    from monitor.notify.egress import check_private_target

    def resolve(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        return [(family, socket.SOCK_STREAM, 6, "", (address, port or 80))]

    with pytest.raises(ValidationError) as caught:
        check_private_target("json://sneaky.example/hook", allow_private=False, resolve=resolve)
    assert str(caught.value) == f"url: sneaky.example {PRIVATE} ({address})"


async def test_connect_time_guard_covers_smtp(smtp_receiver: SmtpReceiver) -> None:
    from monitor.domain.messages import Message

    message = Message(title="t: missed", body="b", body_markdown="b", json_fields={"kind": "missed"})
    url = smtp_receiver.url.replace("127.0.0.1", "localhost")
    async with AppriseNotifier(allow_private_targets=False, resolve=public_resolver) as strict:
        result = await strict.send(url, message, timeout=3)
    assert result.ok is False and result.error == f"url: localhost {PRIVATE} (127.0.0.1)"
    assert smtp_receiver.messages == []


@SQLITE_ONLY
async def test_test_send_answers_400_naming_a_refusal_at_connect_time(
    api: Api, http_receiver: HttpReceiver
) -> None:
    # The channel was saved while its name resolved publicly; now it resolves to 127.0.0.1.
    async with api.engine.begin() as conn:
        channel = await channel_service.create_channel(
            conn,
            api.project["id"],
            {"name": "x", "url": f"json://localhost:{http_receiver.port}/h"},
            api.clock.now(),
        )
    strict = api.settings.replace(allow_private_targets=False)
    app = create_app(
        strict,
        clock=api.clock,
        notifier=AppriseNotifier(allow_private_targets=False, resolve=public_resolver),
        evaluator=False,
        notify=False,
        liveness=False,
    )
    async with AsyncTestClient(app) as client:
        r = await client.post(f"/api/v3/channels/{channel}/test", headers=api.headers)
    assert r.status_code == 400
    assert r.json() == {"ok": False, "error": f"url: localhost {PRIVATE} (127.0.0.1)"}
    assert http_receiver.requests == []


# --------------------------------------------------------------------------- nag, escalation


async def test_nag_reminds_every_interval_while_down_and_stops_on_recovery(
    api: Api, notifier: AppriseNotifier, http_receiver: HttpReceiver
) -> None:
    await add_channel(api, http_receiver.url)
    check = await missed_check(api, nag_interval=3600)  # down since 02:01:11
    assert check["nag_interval"] == 3600
    await deliver_now(api, notifier)
    api.clock.advance(3599)
    assert await raise_now(api) == 0
    api.clock.advance(1)
    assert await raise_now(api) == 1
    assert await raise_now(api) == 0  # once per interval, whoever sweeps
    await deliver_now(api, notifier)
    [_, nag] = await http_receiver.async_wait_for_requests(2)
    assert nag.json["kind"] == "nag" and nag.json["check_uuid"] == check["uuid"]
    assert nag.json["title"] == "nightly: nag — still down after 1 h (missed the 02:01 run, reminder 1)"
    api.clock.advance(3600)
    assert await raise_now(api) == 1
    assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200  # recovers
    api.clock.advance(7200)
    assert await raise_now(api) == 0
    assert [k for k, _ in await notes(api, check["uuid"])] == ["missed", "nag", "nag", "late"]


async def test_escalation_after_down_for_a_while_goes_to_its_channel_once(
    api: Api, notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    team, pager = make_http_receiver(), make_http_receiver()
    await add_channel(api, team.url, name="team")
    pager_id = await add_channel(api, pager.url, name="pager", kinds=["failed"])
    check = await create_check(
        api, name="nightly", timeout=60, grace=10, channels="team", escalate_after=1800, escalate_to="pager"
    )
    assert (check["escalate_after"], check["escalate_to"]) == (1800, pager_id)
    assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200
    api.clock.advance(71)
    await evaluate_due(api.engine, api.clock.now(), settings=api.settings)
    api.clock.advance(1799)
    assert await raise_now(api) == 0
    api.clock.advance(1)
    assert await raise_now(api) == 1
    api.clock.advance(3600)
    assert await raise_now(api) == 0
    await deliver_now(api, notifier)
    [escalation] = await pager.async_wait_for_requests(1)
    assert escalation.json["kind"] == "escalation"
    assert escalation.json["title"].startswith("nightly: escalation — down for 30 min")
    await asyncio.sleep(0.1)
    assert [r.json["kind"] for r in team.requests] == ["missed"]
    # a channel that checks escalate to cannot be deleted (escalation would stop silently)
    refused = await api.client.delete(f"/api/v3/channels/{pager_id}", headers=api.headers)
    assert refused.status_code == 409 and "'nightly'" in refused.json()["error"], refused.text
    assert refused.json()["error"].startswith("id: checks escalate to this channel")
    cleared = await api.client.post(
        f"/api/v3/checks/{check['uuid']}", json={"escalate_to": ""}, headers=api.headers
    )
    assert cleared.status_code == 400 and cleared.json()["error"].startswith("escalate_after: ")
    cleared = await api.client.post(
        f"/api/v3/checks/{check['uuid']}",
        json={"escalate_to": "", "escalate_after": None},
        headers=api.headers,
    )
    assert cleared.status_code == 200, cleared.text
    assert (await api.client.delete(f"/api/v3/channels/{pager_id}", headers=api.headers)).status_code == 200


async def test_check_field_errors_name_the_field(api: Api) -> None:
    for body, field in [
        ({"nag_interval": "1h"}, "nag_interval"),
        ({"nag_interval": -5}, "nag_interval"),
        ({"escalate_after": True}, "escalate_after"),
        ({"escalate_to": "no-such-channel"}, "escalate_to"),
        ({"escalate_after": 600}, "escalate_after"),
    ]:
        r = await api.client.post("/api/v3/checks/", json=body, headers=api.headers)
        assert r.status_code == 400 and r.json()["error"].startswith(f"{field}: "), (body, r.text)


# --------------------------------------------------------------------------- maintenance


async def test_maintenance_window_records_alerts_without_sending_then_summarises(
    api: Api, notifier: AppriseNotifier, http_receiver: HttpReceiver
) -> None:
    await add_channel(api, http_receiver.url)
    check = await create_check(api, name="nightly", timeout=60, grace=10, channels="*")
    r = await api.client.post(
        "/api/v3/maintenance/",
        json={
            "name": "deploy",
            "check": check["uuid"],
            "start": "2026-07-18T02:00:30Z",
            "end": "2026-07-18T02:05:00Z",
        },
        headers=api.headers,
    )
    assert r.status_code == 201, r.text
    window = r.json()
    assert window["active"] is False and window["next"] == {
        "start": "2026-07-18T02:00:30Z",
        "end": "2026-07-18T02:05:00Z",
    }
    assert (await api.client.get(f"/ping/{check['uuid']}")).status_code == 200
    api.clock.advance(71)  # 02:01:11, inside the window
    await evaluate_due(api.engine, api.clock.now(), settings=api.settings)
    assert await deliver_now(api, notifier) == 1
    assert await notes(api, check["uuid"]) == [("missed", "suppressed")]
    listed = (await api.client.get("/api/v3/maintenance/", headers=api.headers)).json()["maintenance"]
    assert [(w["id"], w["active"]) for w in listed] == [(window["id"], True)]
    assert await raise_now(api) == 0
    api.clock.advance(229)  # 02:05:00: the window ends
    assert await raise_now(api) == 1
    assert await raise_now(api) == 0
    await deliver_now(api, notifier)
    [summary] = await http_receiver.async_wait_for_requests(1)
    assert summary.json["kind"] == "maintenance"
    assert summary.json["title"] == "nightly: maintenance — window “deploy” ended, 1 alert held back"
    assert (
        "2026-07-18T02:01:11Z nightly: missed — the run due by 02:01 did not report"
        in summary.json["message"]
    )
    assert await notes(api, check["uuid"]) == [("missed", "suppressed"), ("maintenance", "sent")]


async def test_recurring_project_window_suppresses_every_check(
    api: Api, notifier: AppriseNotifier, http_receiver: HttpReceiver
) -> None:
    await add_channel(api, http_receiver.url)
    r = await api.client.post(
        "/api/v3/maintenance/",
        json={"name": "nightly", "schedule": "0 2 * * *", "tz": "UTC", "duration": 600},
        headers=api.headers,
    )
    assert r.status_code == 201 and r.json()["active"] is True, r.text
    check = await missed_check(api, name="job")  # missed at 02:01:11
    await deliver_now(api, notifier)
    assert await notes(api, check["uuid"]) == [("missed", "suppressed")]
    api.clock.advance(600)
    assert await raise_now(api) == 1
    await deliver_now(api, notifier)
    [summary] = await http_receiver.async_wait_for_requests(1)
    assert summary.json["title"] == "project test: maintenance — window “nightly” ended, 1 alert held back"
    deleted = await api.client.delete(f"/api/v3/maintenance/{r.json()['id']}", headers=api.headers)
    assert deleted.status_code == 200
    gone = await api.client.get(f"/api/v3/maintenance/{r.json()['id']}", headers=api.headers)
    assert gone.status_code == 404 and gone.json()["error"].startswith("id: ")


@SQLITE_ONLY
async def test_maintenance_errors_name_the_field(api: Api) -> None:
    for body, field in [
        ([], "body"),
        ({}, "schedule"),
        ({"start": "2026-07-18T03:00:00Z"}, "end"),
        ({"start": "2026-07-18T03:00:00Z", "end": "2026-07-18T02:00:00Z"}, "end"),
        ({"start": "yesterday", "end": "2026-07-18T02:00:00Z"}, "start"),
        ({"start": "2026-07-18T03:00:00", "end": "2026-07-18T04:00:00Z"}, "start"),
        ({"schedule": "0 2 * * *", "duration": 0}, "duration"),
        ({"schedule": "0 2 * * *", "duration": 60, "tz": "Mars/Base"}, "tz"),
        ({"schedule": "61 2 * * *", "duration": 60}, "schedule"),
        ({"schedule": "0 2 * * *", "duration": 60, "check": "nope"}, "check"),
        ({"schedule": "0 2 * * *", "duration": 60, "start": "2026-07-18T03:00:00Z"}, "schedule"),
    ]:
        r = await api.client.post("/api/v3/maintenance/", json=body, headers=api.headers)
        assert r.status_code == 400 and r.json()["error"].startswith(f"{field}: "), (body, r.text)
    ro = await api.client.post(
        "/api/v3/maintenance/", json={"schedule": "0 2 * * *", "duration": 60}, headers=api.ro_headers
    )
    assert ro.status_code == 403
