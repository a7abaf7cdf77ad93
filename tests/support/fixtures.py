"""Pytest fixtures for the loopback receivers.

Import the ones a test module needs (pytest finds fixtures imported into the module)::

    from tests.support.fixtures import http_receiver, make_http_receiver, smtp_receiver

``http_receiver`` answers 200 to everything; set its ``fail_first``, ``status`` or
``hang_s`` attributes inside a test, or use ``make_http_receiver(fail_first=2)`` for a
fresh one. Every receiver is stopped at teardown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.receivers import HttpReceiver, SmtpReceiver

__all__ = ["http_receiver", "make_http_receiver", "smtp_receiver"]


@pytest.fixture
def make_http_receiver() -> Iterator[Callable[..., HttpReceiver]]:
    """A factory starting :class:`HttpReceiver` instances (keyword arguments as its constructor)."""
    started: list[HttpReceiver] = []

    def make(**kwargs: Any) -> HttpReceiver:
        receiver = HttpReceiver(**kwargs).start()
        started.append(receiver)
        return receiver

    yield make
    for receiver in started:
        receiver.stop()


@pytest.fixture
def http_receiver() -> Iterator[HttpReceiver]:
    """A running :class:`HttpReceiver` on 127.0.0.1; ``.url`` is ``json://127.0.0.1:PORT/hook``."""
    with HttpReceiver() as receiver:
        yield receiver


@pytest.fixture
def smtp_receiver() -> Iterator[SmtpReceiver]:
    """A running :class:`SmtpReceiver` on 127.0.0.1; ``.url`` is a plain-SMTP ``mailto://`` URL."""
    with SmtpReceiver() as receiver:
        yield receiver
