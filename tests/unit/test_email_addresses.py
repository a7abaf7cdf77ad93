"""Email ping addresses and message text (monitor.http.smtp), and their settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from monitor.http.smtp import Recipient, message_text, parse_recipient
from monitor.settings import Settings, SettingsError
from tests.support.process import checkout_env

UUID = "5f1c0a4e-1234-4abc-8def-0123456789ab"


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        pytest.param(f"{UUID}@ping.example", Recipient(uuid=UUID), id="uuid"),
        pytest.param(f"{UUID.upper()}@PING.example", Recipient(uuid=UUID), id="uuid-any-case"),
        pytest.param(
            "key_-1+nightly-backup@ping.example",
            Recipient(ping_key="key_-1", slug="nightly-backup"),
            id="slug",
        ),
        pytest.param("a+b+job@ping.example", Recipient(ping_key="a+b", slug="job"), id="last-plus-splits"),
        pytest.param(f"{UUID}@other.example", None, id="other-domain"),
        pytest.param("key+Upper@ping.example", None, id="slug-upper-case"),
        pytest.param("+job@ping.example", None, id="no-key"),
        pytest.param("key+@ping.example", None, id="no-slug"),
        pytest.param("plain@ping.example", None, id="neither"),
        pytest.param("ping.example", None, id="no-at"),
        pytest.param(f"{UUID[:-1]}@ping.example", None, id="short-uuid"),
    ],
)
def test_ping_addresses_name_a_uuid_or_a_ping_key_and_slug(address: str, expected: Recipient | None) -> None:
    assert parse_recipient(address, "ping.example") == expected


def test_message_text_decodes_the_subject_and_joins_plain_and_html() -> None:
    raw = (
        b"Subject: =?utf-8?q?Sauvegarde_r=C3=A9ussie?=\r\n"
        b"MIME-Version: 1.0\r\n"
        b'Content-Type: multipart/alternative; boundary="b"\r\n\r\n'
        b"--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nplain OK\r\n"
        b"--b\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>html <b>FAIL</b></p><script>x</script>\r\n"
        b"--b--\r\n"
    )
    subject, text = message_text(raw)
    assert subject == "Sauvegarde réussie"
    assert "plain OK" in text
    assert text.split("html FAIL", 1)[1].strip() == ""  # the script's text is dropped


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"no headers at all", id="no-headers"),
        pytest.param(
            b"Content-Type: text/plain; charset=x-unknown\r\n\r\n\xff\xfe body", id="unknown-charset"
        ),
        pytest.param(b"Subject: \xff\xfe\r\n\r\nbody", id="raw-8bit-subject"),
    ],
)
def test_malformed_messages_never_raise(raw: bytes) -> None:
    subject, text = message_text(raw)
    assert isinstance(subject, str) and isinstance(text, str)


def test_email_domain_defaults_to_the_base_url_host() -> None:
    assert (
        Settings.from_env({"MONITOR_BASE_URL": "https://hc.example.com:8443/x"}).email_domain
        == "hc.example.com"
    )
    settings = Settings.from_env({"MONITOR_PING_EMAIL_DOMAIN": "Pings.Example", "MONITOR_SMTP_PORT": "2525"})
    assert (settings.email_domain, settings.smtp_port) == ("pings.example", 2525)


@pytest.mark.parametrize("value", ["abc", "0", "70000"])
def test_a_bad_smtp_port_is_refused_naming_the_variable(value: str) -> None:
    with pytest.raises(SettingsError, match="MONITOR_SMTP_PORT"):
        Settings.from_env({"MONITOR_SMTP_PORT": value})


@pytest.mark.parametrize("value", ["0", "65536", "x"])
def test_serve_refuses_a_bad_smtp_port_before_starting(value: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "monitor", "serve", "--smtp-port", value],
        capture_output=True,
        env=checkout_env(MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'm.db'}"),
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert (
        f"--smtp-port (MONITOR_SMTP_PORT): must be a whole number 1-65535, got {value!r}"
        in proc.stderr.decode()
    )
