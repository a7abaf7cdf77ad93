"""``monitor serve`` stops promptly on SIGTERM even while a delivery hangs.

A real server process, a real SMTP channel pointing at a socket that accepts connections into
its backlog but never answers (the SMTP banner never comes, as with an unreachable mail host),
and a real missed alert on a 1 s simple check. The hung send is abandoned at shutdown; its
claim expires and another notifier retries it (DESIGN §6).
"""

from __future__ import annotations

import json
import select
import socket
import time
from pathlib import Path

import pytest

from tests.support.process import MonitorProcess, checkout_env, curl_api, curl_ping
from tests.support.receivers import free_port

API_KEY = "shutdown-test-key-0123456789"


@pytest.mark.slow
def test_sigterm_abandons_a_hung_smtp_delivery(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # never accept(): connects complete in the kernel, reads hang
        smtp_port = silent.getsockname()[1]
        port = free_port()
        env = checkout_env(
            MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'monitor.db'}",
            MONITOR_BASE_URL=f"http://127.0.0.1:{port}",
            MONITOR_API_KEY=API_KEY,
            MONITOR_NOTIFY_TIMEOUT="10",
        )
        server = MonitorProcess.serve(port, env=env, cwd=tmp_path, logs=tmp_path, name="serve")
        try:
            server.start()
            server.wait_healthy()
            status, channel = curl_api(
                server.base,
                "POST",
                "/api/v3/channels/",
                API_KEY,
                {
                    "name": "mail",
                    "url": f"mailto://127.0.0.1:{smtp_port}/?mode=insecure&from=monitor@example.com&to=oncall@example.com",
                },
            )
            assert status == 201, channel
            body = {"name": "t", "timeout": 1, "grace": 1, "channels": "*"}
            status, check = curl_api(server.base, "POST", "/api/v3/checks/", API_KEY, body)
            assert status == 201, check
            assert curl_ping(check["ping_url"]) == "OK"
            # the missed alert's delivery connects, then waits for a banner that never comes
            readable, _, _ = select.select([silent], [], [], 15)
            assert readable, f"the notifier never connected\n{server.describe()}"
            time.sleep(0.3)
            started = time.monotonic()
            assert server.terminate(timeout=15) == 0, server.describe()
            stopped_in = time.monotonic() - started
            assert stopped_in < 5, f"took {stopped_in:.1f}s\n{server.describe()}"
            assert "Traceback" not in server.stderr, server.describe()
        finally:
            server.close()
    assert json.dumps(channel)  # the channel answer was JSON
