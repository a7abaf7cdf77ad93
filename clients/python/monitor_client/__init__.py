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

from monitor_client._client import AsyncClient, AsyncRun, Client, Run, __version__
from monitor_client._common import PingResult

__all__ = ["AsyncClient", "AsyncRun", "Client", "PingResult", "Run", "__version__"]
