"""Python client of the ``monitor`` dead-man's-switch service.

Report a job's runs with one line: a ping, a ``with client.run(...)`` block or a decorator.
Configuration comes from ``MONITOR_BASE_URL``, ``MONITOR_API_KEY`` / ``MONITOR_PING_KEY`` and
``MONITOR_SCHEDULED_TIME`` (arguments override). The client never raises into the job and never
holds it up for longer than its ``timeout`` per call when the monitor is down.

Example::

    from monitor_client import Client

    client = Client()

    @client.monitored("nightly-billing")
    def bill() -> None: ...
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: importing typing costs monitor-run's start-up ~10 ms

if TYPE_CHECKING:
    from typing import Any

    from monitor_client._client import AsyncClient, AsyncRun, Client, Run
    from monitor_client._common import PingResult

__version__ = "0.1.0"
__all__ = ["AsyncClient", "AsyncRun", "Client", "PingResult", "Run", "__version__"]


def __getattr__(name: str) -> Any:
    # imported when first used: ``monitor-run`` (which needs neither httpx nor the clients)
    # must not pay for httpx at start-up
    if name in ("AsyncClient", "AsyncRun", "Client", "Run"):
        from monitor_client import _client

        return getattr(_client, name)
    if name == "PingResult":
        from monitor_client._common import PingResult

        return PingResult
    raise AttributeError(f"module 'monitor_client' has no attribute {name!r}")
