"""Email pings: real mail sent with smtplib to a real ``monitor serve --smtp-port`` process.

Against SQLite and PostgreSQL. Addresses ``<uuid>@<domain>`` and ``<ping_key>+<slug>@<domain>``
(``MONITOR_PING_EMAIL_DOMAIN``), keyword rules on subject and body, the ping's Healthchecks
fields (scheme ``email``, method ``""``, ``Email from …``), unknown recipients refused at RCPT,
oversized messages refused, bodies cut to ``MONITOR_PING_BODY_LIMIT``, and ``250`` only once the
ping is committed (the pings API shows it the moment ``sendmail`` returns).
"""

from __future__ import annotations

import json
import smtplib
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from tests.support.process import MonitorProcess, checkout_env, curl_api, throwaway_postgres
from tests.support.receivers import free_port

pytestmark = pytest.mark.e2e

API_KEY = "email-api-key-0123456789abcdef"
DOMAIN = "pings.example.test"
BODY_LIMIT = 2000
MESSAGE_LIMIT = 20_000


@contextmanager
def _database(backend: str, directory: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{directory / 'monitor.db'}"
    else:
        with throwaway_postgres() as url:
            yield url


class Mailer:
    """The server under test: its HTTP API through curl and its SMTP port through smtplib."""

    def __init__(self, process: MonitorProcess, smtp_port: int, ping_key: str) -> None:
        self.process = process
        self.smtp_port = smtp_port
        self.ping_key = ping_key

    def call(self, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        status, data = curl_api(self.process.base, method, path, API_KEY, body)
        assert status == expect, f"{method} {path} -> {status}: {data}"
        return data

    def create_check(self, **fields: Any) -> dict[str, Any]:
        check: dict[str, Any] = self.call("POST", "/api/v3/checks/", fields, expect=201)
        return check

    def pings(self, uuid: str) -> list[dict[str, Any]]:
        pings: list[dict[str, Any]] = self.call("GET", f"/api/v3/checks/{uuid}/pings/")["pings"]
        return pings

    def status(self, uuid: str) -> str:
        return str(self.call("GET", f"/api/v3/checks/{uuid}")["status"])

    def send(
        self, to: list[str], subject: str = "cron report", body: str = "done", html: str | None = None
    ) -> Any:
        message = EmailMessage()
        message["From"] = "cron@host.example"
        message["To"] = ", ".join(to)
        message["Subject"] = subject
        message.set_content(body)
        if html is not None:
            message.add_alternative(html, subtype="html")
        with smtplib.SMTP("127.0.0.1", self.smtp_port, timeout=10) as smtp:
            return smtp.send_message(message, from_addr="cron@host.example", to_addrs=to)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def mailer(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mailer]:
    workdir = tmp_path_factory.mktemp(f"smtp-{request.param}")
    with _database(request.param, workdir) as url:
        port, smtp_port = free_port(), free_port()
        while smtp_port == port:  # the kernel may hand the same free port out twice in a row
            smtp_port = free_port()
        env = checkout_env(
            MONITOR_DATABASE_URL=url,
            MONITOR_API_KEY=API_KEY,
            MONITOR_BASE_URL=f"http://127.0.0.1:{port}",
            MONITOR_PING_EMAIL_DOMAIN=DOMAIN,
            MONITOR_PING_BODY_LIMIT=str(BODY_LIMIT),
            MONITOR_SMTP_MESSAGE_LIMIT=str(MESSAGE_LIMIT),
        )
        process = MonitorProcess.serve(port, env=env, cwd=workdir, logs=workdir, name="serve")
        process.argv += ["--smtp-port", str(smtp_port)]
        try:
            process.start()
            process.wait_healthy()
            created = next(line for line in process.stdout.splitlines() if line.startswith("{"))
            assert f"email pings on smtp://127.0.0.1:{smtp_port}" in process.stdout
            yield Mailer(process, smtp_port, json.loads(created)["ping_key"])
        finally:
            process.close()


def test_mail_to_a_uuid_address_is_a_success_ping_with_healthchecks_fields(mailer: Mailer) -> None:
    check = mailer.create_check(name="mail-uuid")
    refused = mailer.send([f"{check['uuid']}@{DOMAIN}"])
    assert refused == {}
    # 250 came only after the commit: the ping is there at once
    pings = mailer.pings(check["uuid"])
    assert len(pings) == 1
    ping = pings[0]
    assert (ping["type"], ping["scheme"], ping["method"]) == ("success", "email", "")
    assert ping["ua"] == "Email from cron@host.example"
    assert ping["remote_addr"] == "127.0.0.1"
    assert mailer.status(check["uuid"]) == "up"


def test_uuid_address_is_case_insensitive_and_so_is_the_domain(mailer: Mailer) -> None:
    check = mailer.create_check(name="mail-case")
    assert mailer.send([f"{check['uuid'].upper()}@{DOMAIN.upper()}"]) == {}
    assert [p["type"] for p in mailer.pings(check["uuid"])] == ["success"]


def test_mail_to_a_ping_key_and_slug_address(mailer: Mailer) -> None:
    check = mailer.create_check(name="nightly", slug="nightly-mail")
    assert mailer.send([f"{mailer.ping_key}+nightly-mail@{DOMAIN}"]) == {}
    assert [p["scheme"] for p in mailer.pings(check["uuid"])] == ["email"]


def test_subject_keywords_decide_the_kind(mailer: Mailer) -> None:
    check = mailer.create_check(
        name="mail-subject", filter_subject=True, success_kw="SUCCESS", failure_kw="FAIL"
    )
    to = [f"{check['uuid']}@{DOMAIN}"]
    mailer.send(to, subject="Backup SUCCESS")
    assert mailer.status(check["uuid"]) == "up"
    mailer.send(to, subject="Backup FAIL", body="SUCCESS is in the body, but only the subject is read")
    mailer.send(to, subject="Backup weekly summary")
    assert [p["type"] for p in mailer.pings(check["uuid"])] == ["ign", "fail", "success"]
    assert mailer.status(check["uuid"]) == "down"


def test_body_keywords_read_the_html_part_too(mailer: Mailer) -> None:
    check = mailer.create_check(name="mail-body", filter_body=True, failure_kw="ERROR", start_kw="started")
    to = [f"{check['uuid']}@{DOMAIN}"]
    mailer.send(to, subject="ERROR in the subject is not read", body="job started")
    mailer.send(to, body="see the html part", html="<p>exit: <b>ERROR</b></p><style>.x{}</style>")
    assert [p["type"] for p in mailer.pings(check["uuid"])] == ["fail", "start"]


def test_methods_post_does_not_ignore_email_pings(mailer: Mailer) -> None:
    check = mailer.create_check(name="mail-post", methods="POST")
    mailer.send([f"{check['uuid']}@{DOMAIN}"])
    assert [p["type"] for p in mailer.pings(check["uuid"])] == ["success"]


def test_unknown_recipients_are_refused_at_rcpt_with_550(mailer: Mailer) -> None:
    check = mailer.create_check(name="mail-mixed")
    unknown = [
        f"6f1c5a4e-0000-4000-8000-000000000000@{DOMAIN}",  # no such check
        f"{check['uuid']}@other.example",  # another domain
        f"{mailer.ping_key}+no-such-slug@{DOMAIN}",
        f"wrong-key+mail-mixed@{DOMAIN}",
        f"not-an-address@{DOMAIN}",
    ]
    for address in unknown:
        with pytest.raises(smtplib.SMTPRecipientsRefused) as refused:
            mailer.send([address])
        assert refused.value.recipients[address][0] == 550
    # with one good recipient the message goes through, the bad one listed as refused
    got = mailer.send([f"{check['uuid']}@{DOMAIN}", unknown[0]])
    assert set(got) == {unknown[0]} and got[unknown[0]][0] == 550
    assert len(mailer.pings(check["uuid"])) == 1


def test_one_message_to_two_checks_pings_both(mailer: Mailer) -> None:
    first, second = mailer.create_check(name="mail-a"), mailer.create_check(name="mail-b")
    assert mailer.send([f"{first['uuid']}@{DOMAIN}", f"{second['uuid']}@{DOMAIN}"]) == {}
    assert len(mailer.pings(first["uuid"])) == len(mailer.pings(second["uuid"])) == 1


def test_a_large_body_keeps_its_first_bytes(mailer: Mailer) -> None:
    check = mailer.create_check(name="mail-large")
    mailer.send([f"{check['uuid']}@{DOMAIN}"], body="x" * 10_000)
    [ping] = mailer.pings(check["uuid"])
    status, body = curl_api(
        mailer.process.base, "GET", f"/api/v3/checks/{check['uuid']}/pings/1/body", API_KEY
    )
    assert status == 200
    text = body if isinstance(body, str) else json.dumps(body)
    assert len(text.encode()) == BODY_LIMIT
    assert text.startswith(
        ("Content-Type", "From", "To", "Subject", "MIME")
    )  # the raw message, from its start
    assert ping["body_size"] > 10_000


def test_an_oversized_message_is_refused_and_nothing_is_stored(mailer: Mailer) -> None:
    check = mailer.create_check(name="mail-huge")
    with pytest.raises((smtplib.SMTPSenderRefused, smtplib.SMTPDataError)) as error:
        mailer.send([f"{check['uuid']}@{DOMAIN}"], body="y" * (MESSAGE_LIMIT + 1000))
    assert error.value.smtp_code == 552
    assert mailer.pings(check["uuid"]) == []
    # without smtplib's SIZE declaration the DATA phase refuses it too
    with smtplib.SMTP("127.0.0.1", mailer.smtp_port, timeout=10) as smtp:
        smtp.helo("old-client")  # plain SMTP: no SIZE parameter
        smtp.mail("cron@host.example")
        smtp.rcpt(f"{check['uuid']}@{DOMAIN}")
        code, _ = smtp.data(b"Subject: big\r\n\r\n" + (b"z" * 78 + b"\r\n") * (MESSAGE_LIMIT // 80 + 10))
    assert code == 552
    assert mailer.pings(check["uuid"]) == []
