"""The SSRF egress guard is installed by the processes that send, never by importing a module."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_importing_the_modules_leaves_socket_connect_untouched() -> None:
    out = run_python(
        """
        import socket
        original = (socket.socket.connect, socket.socket.connect_ex)
        import monitor.services.channels, monitor.notify.apprise, monitor.app, monitor.cli  # noqa
        import monitor.services.dispatch, monitor.workers.notifier  # noqa
        from monitor.notify.egress import egress_guard_installed
        print((socket.socket.connect, socket.socket.connect_ex) == original, egress_guard_installed())
        """
    )
    assert out == "True False"


def test_install_egress_guard_hooks_connect_once() -> None:
    out = run_python(
        """
        import socket
        from monitor.notify.egress import egress_guard_installed, install_egress_guard
        original = socket.socket.connect
        install_egress_guard()
        hooked = socket.socket.connect
        install_egress_guard()
        print(hooked is not original, socket.socket.connect is hooked, egress_guard_installed())
        """
    )
    assert out == "True True True"


def test_a_notifier_refusing_private_targets_installs_the_guard() -> None:
    out = run_python(
        """
        from monitor.notify.apprise import AppriseNotifier
        from monitor.notify.egress import egress_guard_installed
        AppriseNotifier(allow_private_targets=True)
        before = egress_guard_installed()
        AppriseNotifier(allow_private_targets=False)
        print(before, egress_guard_installed())
        """
    )
    assert out == "False True"
