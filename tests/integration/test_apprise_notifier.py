"""AppriseNotifier against real local receivers (HTTP and SMTP on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from monitor.domain.errors import ValidationError
from monitor.domain.messages import AlertFacts, Message
from monitor.notify.apprise import AppriseNotifier
from monitor.notify.base import DeliveryResult, Notifier
from monitor.notify.egress import check_private_target
from monitor.notify.masking import mask_url
from monitor.notify.templates import render
from monitor.notify.urls import validate_apprise_url, with_json_fields
from tests.support.fixtures import http_receiver, make_http_receiver, smtp_receiver
from tests.support.receivers import HttpReceiver, SmtpReceiver, free_port

__all__ = ["http_receiver", "make_http_receiver", "smtp_receiver"]  # fixtures, imported for pytest


def make_message(**overrides: Any) -> Message:
    values: dict[str, Any] = {
        "kind": "failed",
        "check_name": "nightly-billing",
        "check_uuid": "5f1c1f2e-0000-4000-8000-000000000001",
        "slug": "nightly-billing",
        "tz": "Europe/Berlin",
        "status": "down",
        "scheduled": datetime(2026, 7, 19, 3, 0, tzinfo=UTC),
        "exit_status": 2,
        "log_tail": "charging customers\nERROR: card declined",
        "check_url": "https://monitor.example/checks/5f1c1f2e-0000-4000-8000-000000000001",
    }
    values.update(overrides)
    return render(AlertFacts(**values))


@pytest.fixture
async def notifier() -> AsyncIterator[AppriseNotifier]:
    # Tests deliver to 127.0.0.1, so private targets are allowed (as `serve --dev` does).
    async with AppriseNotifier(allow_private_targets=True) as notifier:
        yield notifier


def test_apprise_notifier_is_a_notifier() -> None:
    notifier: Notifier = AppriseNotifier()
    assert callable(notifier.send)


# --------------------------------------------------------------------------- JSON


async def test_json_post_arrives_with_extra_top_level_fields(
    notifier: AppriseNotifier, http_receiver: HttpReceiver
) -> None:
    message = make_message()

    result = await notifier.send(http_receiver.url, message, timeout=5)

    assert result == DeliveryResult(ok=True, error=None)
    [request] = await http_receiver.async_wait_for_requests(1)
    assert request.method == "POST"
    assert request.path == "/hook"
    assert request.headers["content-type"].startswith("application/json")
    payload = request.json
    assert payload["title"] == message.title
    assert payload["message"].strip() == message.body.strip()  # plain text, not Markdown
    assert "**" not in payload["message"]
    assert payload["type"] == "failure"
    assert {k: payload[k] for k in ("kind", "check_uuid", "slug", "scheduled", "status")} == {
        "kind": "failed",
        "check_uuid": "5f1c1f2e-0000-4000-8000-000000000001",
        "slug": "nightly-billing",
        "scheduled": "2026-07-19T03:00:00Z",
        "status": "down",
    }


async def test_json_fields_survive_any_characters_and_empty_values(
    notifier: AppriseNotifier, http_receiver: HttpReceiver
) -> None:
    message = make_message(slug=None, status="a+b & c=d/é?#")

    assert (await notifier.send(http_receiver.url + "?method=POST", message, timeout=5)).ok

    [request] = await http_receiver.async_wait_for_requests(1)
    assert request.json["slug"] == ""
    assert request.json["status"] == "a+b & c=d/é?#"


def test_with_json_fields_leaves_other_schemes_alone() -> None:
    assert with_json_fields("mailto://example.com", {"kind": "missed"}) == "mailto://example.com"
    assert with_json_fields("json://h/x?a=1", {"kind": "missed"}) == "json://h/x?a=1&:kind=missed"


async def test_503_target_gives_error_naming_503(
    notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    receiver = make_http_receiver(fail_first=1)

    first = await notifier.send(receiver.url, make_message(), timeout=5)
    second = await notifier.send(receiver.url, make_message(), timeout=5)

    assert first.ok is False
    assert first.error is not None
    assert first.error.startswith(f"HTTP 503 Service Unavailable from 127.0.0.1:{receiver.port}")
    assert first.permanent is False  # a 5xx is worth retrying
    assert second.ok is True
    assert [r.status for r in receiver.requests] == [503, 200]


async def test_4xx_target_is_a_permanent_failure(
    notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    receiver = make_http_receiver(status=404)

    result = await notifier.send(receiver.url, make_message(), timeout=5)

    assert result.ok is False
    assert result.error is not None and "HTTP 404 Not Found" in result.error
    assert result.permanent is True


async def test_hung_target_times_out_within_the_budget(
    notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    receiver = make_http_receiver(hang_s=30)
    started = time.monotonic()

    result = await notifier.send(receiver.url, make_message(), timeout=1)

    elapsed = time.monotonic() - started
    assert result == DeliveryResult(ok=False, error="timed out after 1s")
    assert elapsed < 1 + 1
    assert len(receiver.requests) == 1  # it did reach the target, which never answered


async def test_a_target_slower_than_apprises_own_defaults_is_delivered_within_the_budget(
    notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    # Apprise's plugins default to 4 s socket timeouts; the attempt's budget is ours
    receiver = make_http_receiver(hang_s=4.6)

    result = await notifier.send(receiver.url, make_message(), timeout=8)

    assert result == DeliveryResult.delivered()
    assert len(receiver.requests) == 1


async def test_a_channel_urls_own_shorter_read_timeout_still_wins(
    notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    receiver = make_http_receiver(hang_s=30)
    started = time.monotonic()

    result = await notifier.send(f"{receiver.url}?rto=1", make_message(), timeout=8)

    assert result == DeliveryResult(ok=False, error="timed out after 1s")
    assert time.monotonic() - started < 4


async def test_hung_target_does_not_block_other_sends(
    notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    hung = make_http_receiver(hang_s=30)
    healthy = make_http_receiver()

    slow, fast = await asyncio.gather(
        notifier.send(hung.url, make_message(), timeout=1.5),
        notifier.send(healthy.url, make_message(), timeout=1.5),
    )

    assert slow.ok is False and slow.error == "timed out after 1.5s"
    assert fast.ok is True


async def test_refused_connection_gives_a_clear_error(notifier: AppriseNotifier) -> None:
    port = free_port()  # nothing listens there any more

    result = await notifier.send(f"json://127.0.0.1:{port}/hook", make_message(), timeout=5)

    assert result.ok is False
    assert result.error is not None
    assert result.error == f"cannot connect to 127.0.0.1:{port}: connection refused"
    assert result.permanent is False


async def test_concurrent_sends_each_get_their_own_error(
    notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    failing = [make_http_receiver(status=503) for _ in range(3)]
    refused_port = free_port()
    urls = [r.url for r in failing] + [f"json://127.0.0.1:{refused_port}/hook"]

    results = await asyncio.gather(*(notifier.send(url, make_message(), timeout=5) for url in urls))

    for receiver, result in zip(failing, results[:3], strict=True):
        assert result.error is not None
        assert result.error.startswith(f"HTTP 503 Service Unavailable from 127.0.0.1:{receiver.port}:")
        assert result.error.count("error=503") == 1  # nobody else's log lines
    assert results[3].error is not None
    assert results[3].error.startswith(f"cannot connect to 127.0.0.1:{refused_port}")
    # none of the other sends' 503s (the refused port's own digits may contain "503")
    assert "HTTP 503" not in results[3].error and "error=503" not in results[3].error


# --------------------------------------------------------------------------- email


async def test_email_arrives_with_title_as_subject(
    notifier: AppriseNotifier, smtp_receiver: SmtpReceiver
) -> None:
    message = make_message()

    result = await notifier.send(smtp_receiver.url, message, timeout=5)

    assert result == DeliveryResult(ok=True, error=None)
    [mail] = await smtp_receiver.async_wait_for_messages(1)
    assert mail.subject == message.title
    assert mail.rcpt_tos == ["oncall@example.com"]
    assert "monitor@example.com" in mail.mail_from
    assert "2026-07-19T03:00:00Z" in mail.text
    assert "ERROR: card declined" in mail.text
    assert "**" not in mail.text  # the plain-text rendering, not Markdown


async def test_email_with_smtp_login_arrives_and_its_url_masks_the_password(
    notifier: AppriseNotifier,
) -> None:
    with SmtpReceiver(username="monitor", password="s3cret-smtp-pw") as receiver:
        url = receiver.url
        assert url.startswith(f"mailto://monitor:s3cret-smtp-pw@127.0.0.1:{receiver.port}/?mode=insecure&")

        result = await notifier.send(url, make_message(), timeout=5)

        assert result.ok is True, result.error
        await receiver.async_wait_for_messages(1)
        assert receiver.logins == [("monitor", True)]
    assert "s3cret-smtp-pw" not in mask_url(url)


async def test_email_with_wrong_password_fails(notifier: AppriseNotifier) -> None:
    with SmtpReceiver(username="monitor", password="right") as receiver:
        url = receiver.url.replace(":right@", ":wrong@")

        result = await notifier.send(url, make_message(), timeout=5)

        assert result.ok is False
        assert result.error is not None
        assert result.error.startswith(f"email via 127.0.0.1:{receiver.port} failed: ")
        assert "535" in result.error and "Authentication credentials invalid" in result.error
        assert result.permanent is True
        assert receiver.messages == []


async def test_email_to_a_closed_port_fails_clearly(notifier: AppriseNotifier) -> None:
    port = free_port()
    url = f"mailto://127.0.0.1:{port}/?mode=insecure&from=monitor@example.com&to=oncall@example.com"

    result = await notifier.send(url, make_message(), timeout=5)

    assert result.ok is False
    assert result.error == f"cannot connect to 127.0.0.1:{port}: connection refused"


# --------------------------------------------------------------------------- private targets


async def test_send_refuses_private_target_when_not_allowed(http_receiver: HttpReceiver) -> None:
    async with AppriseNotifier(allow_private_targets=False) as strict:
        result = await strict.send(http_receiver.url, make_message(), timeout=5)

    assert result.ok is False
    assert result.error == "url: 127.0.0.1 resolves to a private/loopback/link-local address (127.0.0.1)"
    assert result.permanent is True
    assert http_receiver.requests == []


@pytest.mark.parametrize(
    ("url", "ip"),
    [
        pytest.param("json://127.0.0.1:8080/hook", "127.0.0.1", id="loopback"),
        pytest.param("json://10.1.2.3/hook", "10.1.2.3", id="private-10"),
        pytest.param("json://192.168.0.10/hook", "192.168.0.10", id="private-192-168"),
        pytest.param("json://169.254.169.254/latest", "169.254.169.254", id="link-local-metadata"),
        pytest.param("json://[::1]:8080/hook", "::1", id="ipv6-loopback"),
        pytest.param("jsons://localhost/hook", "127.0.0.1", id="localhost-name"),
        pytest.param("mailtos://u:p@example.com?smtp=10.0.0.5", "10.0.0.5", id="email-smtp-host"),
    ],
)
def test_check_private_target_refuses_non_public_addresses(url: str, ip: str) -> None:
    # Literal IPs are classified from the URL alone: no packet is sent anywhere.
    with pytest.raises(ValidationError) as caught:
        check_private_target(url, allow_private=False)

    assert caught.value.field == "url"
    assert caught.value.problem.endswith(f"resolves to a private/loopback/link-local address ({ip})")


@pytest.mark.parametrize("url", ["json://127.0.0.1:8080/hook", "json://10.1.2.3/hook"])
def test_check_private_target_passes_when_allowed(url: str) -> None:
    check_private_target(url, allow_private=True)


def test_check_private_target_passes_public_literal_and_fixed_endpoint_services() -> None:
    check_private_target("json://93.184.215.14/hook", allow_private=False)
    # Slack's URL "host" is a token; Apprise connects to hooks.slack.com.
    check_private_target("slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ/#general", allow_private=False)


def test_check_private_target_unresolvable_host() -> None:
    with pytest.raises(ValidationError, match=r"^url: cannot resolve host nonexistent\.invalid$"):
        check_private_target("json://nonexistent.invalid/hook", allow_private=False)


# --------------------------------------------------------------------------- URLs


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("", id="empty"),
        pytest.param("not a url", id="no-scheme"),
        pytest.param("nosuchservice://host/path", id="unknown-scheme"),
        pytest.param("json://", id="json-without-host"),
        pytest.param("mailto://", id="mailto-without-anything"),
        pytest.param("json://example.com:99999/hook", id="port-out-of-range"),
    ],
)
def test_validate_apprise_url_rejects_unparseable_urls(url: str) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_apprise_url(url)

    assert caught.value.field == "url"
    assert str(caught.value).startswith("url: ")


@pytest.mark.parametrize(
    "url",
    [
        "json://hooks.example.com/alerts",
        "mailtos://user:pass@example.com?to=oncall@example.com",
        "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ/#general",
    ],
)
def test_validate_apprise_url_accepts_good_urls(url: str) -> None:
    validate_apprise_url(url)


def test_validate_accepts_the_smtp_receiver_url(smtp_receiver: SmtpReceiver) -> None:
    validate_apprise_url(smtp_receiver.url)


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        pytest.param("json://alice:s3cretpassw0rd@hooks.example.com/alerts", "s3cretpassw0rd", id="password"),
        pytest.param(
            "mailtos://me:hunter2hunter2@example.com?to=a@example.com", "hunter2hunter2", id="email"
        ),
        pytest.param(
            "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ/#general",
            "TIiajkdnlazkcOXrIdevi7FQ",
            id="token",
        ),
        pytest.param("nosuchservice://user:topsecret@host", "topsecret", id="unparseable"),
    ],
)
def test_mask_url_hides_secrets(url: str, secret: str) -> None:
    masked = mask_url(url)

    assert secret not in masked
    assert masked.split("://", 1)[0] == url.split("://", 1)[0]


@pytest.mark.parametrize("how", ["root at ERROR", "apprise logger disabled"])
async def test_a_failed_send_keeps_apprises_reason_whatever_the_log_configuration(
    notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver], how: str
) -> None:
    # the reason comes from Apprise's WARNING records: a root level above WARNING, or a
    # fileConfig/dictConfig that disabled existing loggers, must not turn it into "no reason"
    receiver = make_http_receiver(status=503)
    root, apprise_logger = logging.getLogger(), logging.getLogger("apprise")
    saved = (root.level, apprise_logger.level, apprise_logger.disabled)
    try:
        if how == "root at ERROR":
            root.setLevel(logging.ERROR)
        else:
            apprise_logger.disabled = True
        result = await notifier.send(receiver.url, make_message(), timeout=5)
    finally:
        root.setLevel(saved[0])
        apprise_logger.setLevel(saved[1])
        apprise_logger.disabled = saved[2]
    assert result.error is not None
    assert result.error.startswith(f"HTTP 503 Service Unavailable from 127.0.0.1:{receiver.port}:")
