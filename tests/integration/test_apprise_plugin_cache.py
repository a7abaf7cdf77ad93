"""The remembered Apprise parse of a channel URL (``monitor.notify.urls.plugin_for``), against real
local HTTP receivers: a plugin of its own per send, deliveries identical on a cache hit and a
miss, payload fields decoded once, and no secret in Apprise's log lines."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import apprise
import pytest

from monitor.domain.errors import ValidationError
from monitor.domain.messages import Message
from monitor.notify.apprise import AppriseNotifier
from monitor.notify.masking import mask_url
from monitor.notify.urls import ASSET, _parsed_url, plugin_for, validate_apprise_url, with_json_fields
from tests.integration.test_apprise_notifier import make_message
from tests.support.fixtures import http_receiver, make_http_receiver
from tests.support.receivers import HttpReceiver, ReceivedRequest

__all__ = ["http_receiver", "make_http_receiver"]  # fixtures, imported for pytest


@pytest.fixture
async def notifier() -> AsyncIterator[AppriseNotifier]:
    async with AppriseNotifier(allow_private_targets=True) as notifier:
        yield notifier


def _delivery(request: ReceivedRequest) -> tuple[str, str, dict[str, str], Any]:
    """What a receiver got, for comparing two deliveries."""
    return request.method, request.path, request.headers, request.json


class _TamperingNotifier(AppriseNotifier):
    """Changes the plugin of its first send (headers, payload, path) before sending it."""

    def __init__(self) -> None:
        super().__init__(allow_private_targets=True)
        self.plugins: list[Any] = []

    def _notify(self, plugin: Any, message: Message, plain: bool, secrets: list[str]) -> Any:
        if not self.plugins:
            plugin.headers["X-Tampered"] = "yes"
            plugin.payload_extras["tampered"] = "yes"
            plugin.fullpath = "/tampered"
        self.plugins.append(plugin)
        return super()._notify(plugin, message, plain, secrets)


# --------------------------------------------------------------------------- one plugin per send


async def test_the_same_url_sent_twice_gets_two_independent_plugins(http_receiver: HttpReceiver) -> None:
    url = f"{http_receiver.url}?+X-Team=ops&:source=monitor"
    async with _TamperingNotifier() as notifier:
        assert (await notifier.send(url, make_message(), timeout=5)).ok
        assert (await notifier.send(url, make_message(), timeout=5)).ok

    first, second = await http_receiver.async_wait_for_requests(2)
    assert notifier.plugins[0] is not notifier.plugins[1]
    assert (first.path, first.headers["x-tampered"], first.json["tampered"]) == ("/tampered", "yes", "yes")
    assert second.path == "/hook"
    assert "x-tampered" not in second.headers
    assert "tampered" not in second.json
    assert (second.headers["x-team"], second.json["source"]) == ("ops", "monitor")
    # the remembered parse itself is untouched
    _, parse = _parsed_url(url) or (None, {})
    assert parse["headers"] == {"X-Team": "ops"}
    assert parse["payload"] == {"source": "monitor"}


def test_plugin_for_builds_what_apprise_instantiate_builds() -> None:
    urls = [
        "json://hooks.example.com:8443/alerts?+Authorization=Bearer%20abc123&-q=1&method=PUT",
        "jsons://user:pa55word@hooks.example.com/x",
        "form://hooks.example.com/f?:field=v",
        "xml://hooks.example.com/x",
        "mailtos://user:pass@example.com?to=oncall@example.com",
        "tgram://123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/987654321",
        "https://discord.com/api/webhooks/4174216298/JHMHI8qBe7bk2ZwO5U711o3dV_js",
    ]
    for url in urls:
        ours = plugin_for(url)
        theirs = apprise.Apprise.instantiate(url, asset=ASSET, suppress_exceptions=True)
        assert ours is not None and theirs is not None, url
        assert type(ours) is type(theirs), url
        assert ours.url() == theirs.url(), url
        assert ours.tags == theirs.tags == set(), url
        assert ours.asset is theirs.asset is ASSET, url
        assert plugin_for(url) is not ours  # a fresh instance each call


# --------------------------------------------------------------------------- cache hit == miss


async def test_a_cache_hit_delivers_exactly_what_a_miss_delivers(
    notifier: AppriseNotifier, http_receiver: HttpReceiver
) -> None:
    url = f"{http_receiver.url}?+X-Api-Key=k3y-value&:region=eu%20west&-tenant=t1"
    message = make_message()
    _parsed_url.cache_clear()

    assert (await notifier.send(url, message, timeout=5)).ok
    misses = _parsed_url.cache_info().misses
    assert (await notifier.send(url, message, timeout=5)).ok

    miss, hit = await http_receiver.async_wait_for_requests(2)
    assert _parsed_url.cache_info().misses == misses  # the second send parsed nothing
    assert _delivery(miss) == _delivery(hit)
    assert hit.path == "/hook?tenant=t1"
    assert hit.headers["x-api-key"] == "k3y-value"
    assert hit.json["region"] == "eu west"
    assert hit.json["name"] == message.json_fields["name"]


async def test_different_urls_do_not_collide(
    notifier: AppriseNotifier, make_http_receiver: Callable[..., HttpReceiver]
) -> None:
    one, two = make_http_receiver(path="/one"), make_http_receiver(path="/two")
    urls = {
        "a": f"{one.url}?+X-Who=a&:who=a",
        "b": f"{one.url}?+X-Who=b&:who=b",
        "c": f"{two.url}?+X-Who=c&:who=c",
    }
    for _ in range(2):
        for url in urls.values():
            assert (await notifier.send(url, make_message(), timeout=5)).ok

    got = [*await one.async_wait_for_requests(4), *await two.async_wait_for_requests(2)]
    assert [(r.path, r.headers["x-who"], r.json["who"]) for r in got] == [
        ("/one", "a", "a"),
        ("/one", "b", "b"),
        ("/one", "a", "a"),
        ("/one", "b", "b"),
        ("/two", "c", "c"),
        ("/two", "c", "c"),
    ]


async def test_a_url_apprise_cannot_parse_fails_as_before(notifier: AppriseNotifier) -> None:
    for url in ("nosuchservice://host/x", "json://", "mailto://"):
        assert apprise.Apprise.instantiate(url, suppress_exceptions=True) is None, url
        assert plugin_for(url) is None, url
        result = await notifier.send(url, make_message(), timeout=5)
        assert (result.ok, result.permanent) == (False, True), url
        assert result.error == f"url: Apprise cannot parse this {url.split(':')[0]}:// URL", url
        with pytest.raises(ValidationError, match="Apprise cannot parse this"):
            validate_apprise_url(url)
    with pytest.raises(ValidationError, match="port 99999 is out of range"):
        validate_apprise_url("json://127.0.0.1:99999/x")


async def test_fifty_concurrent_sends_through_one_url_all_arrive_intact(
    notifier: AppriseNotifier, http_receiver: HttpReceiver
) -> None:
    url = f"{http_receiver.url}?+X-Team=ops&:source=monitor"
    names = [f"job-{n:02d}" for n in range(50)]

    results = await asyncio.gather(
        *(notifier.send(url, make_message(check_name=name), timeout=10) for name in names)
    )

    assert all(result.ok for result in results), [r.error for r in results if not r.ok]
    requests = await http_receiver.async_wait_for_requests(50)
    assert len(requests) == 50
    assert sorted(r.json["name"] for r in requests) == names
    for request in requests:
        assert request.path == "/hook"
        assert (request.headers["x-team"], request.json["source"]) == ("ops", "monitor")
        assert request.json["title"].startswith(request.json["name"] + ":")


# --------------------------------------------------------------------------- decoded once


async def test_payload_fields_are_percent_decoded_once(
    notifier: AppriseNotifier, http_receiver: HttpReceiver
) -> None:
    url = f"{http_receiver.url}?:written=a%2541&:encoded=a%41&:plain=100%25"

    result = await notifier.send(url, make_message(check_name="a%41 50%25"), timeout=5)

    assert result.ok
    [request] = await http_receiver.async_wait_for_requests(1)
    assert request.json["written"] == "a%41"
    assert request.json["encoded"] == "aA"
    assert request.json["plain"] == "100%"
    assert request.json["name"] == "a%41 50%25"  # a message's field arrives exactly as given


def test_with_json_fields_round_trips_through_plugin_for() -> None:
    fields = {"name": "a%41", "odd key": "x&y=z#w+v"}
    plugin = plugin_for(with_json_fields("json://hooks.example.com/x", fields))
    assert plugin is not None
    assert plugin.payload_extras == fields


# --------------------------------------------------------------------------- no secret logged


async def test_no_apprise_log_line_carries_a_header_secret(
    notifier: AppriseNotifier, http_receiver: HttpReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "s3cr3t-b34r3r-t0k3n"
    url = f"{http_receiver.url}?+Authorization=Bearer%20{secret}&:source=monitor"
    _parsed_url.cache_clear()  # the parse runs (and could log) within the test
    caplog.set_level(1)  # everything, Apprise's TRACE included
    caplog.set_level(1, logger="apprise")

    validate_apprise_url(url)
    masked = mask_url(url)
    result = await notifier.send(url, make_message(), timeout=5)

    assert result.ok
    [request] = await http_receiver.async_wait_for_requests(1)
    assert request.headers["authorization"] == f"Bearer {secret}"
    assert secret not in masked
    apprise_records = [r for r in caplog.records if r.name.startswith("apprise")]
    assert any("JSON" in r.getMessage() for r in apprise_records)  # the capture did see Apprise
    for record in caplog.records:
        assert secret not in record.getMessage(), record.getMessage()
    assert secret not in caplog.text


def test_the_loaded_url_line_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="apprise")
    _parsed_url.cache_clear()

    assert plugin_for("json://hooks.example.com/x?+Authorization=Bearer%20abc123xyz") is not None

    assert not [r for r in caplog.records if "Loaded" in r.getMessage() and "URL" in r.getMessage()]
