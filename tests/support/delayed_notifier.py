"""``python -m tests.support.delayed_notifier SECONDS``: ``monitor notify`` with a pre-send delay.

The same role as ``monitor notify`` (same settings, migrations, egress guard, Apprise adapter and
loop), except that every delivery waits ``SECONDS`` between claiming its notification and
re-checking the claim, so a test can SIGSTOP the process inside that gap. The delay is a test
hook injected through :func:`monitor.workers.notifier.run_notifier`, not a production setting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys

from monitor.domain.clock import SystemClock
from monitor.notify.apprise import AppriseNotifier
from monitor.notify.egress import install_egress_guard
from monitor.settings import Settings
from monitor.storage.engine import make_engine, migrate
from monitor.workers.notifier import run_notifier


async def _run(pre_send_delay: float) -> None:
    settings = Settings.from_env()
    main_task = asyncio.current_task()
    if main_task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    engine = make_engine(settings.database_url)
    try:
        await migrate(engine)
        install_egress_guard()
        async with AppriseNotifier(allow_private_targets=settings.allow_private_targets) as notifier:
            await run_notifier(engine, notifier, settings, SystemClock(), pre_send_delay=pre_send_delay)
    finally:
        await engine.dispose()


def main() -> int:
    logging.basicConfig(
        level="INFO", stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    with contextlib.suppress(asyncio.CancelledError):
        asyncio.run(_run(float(sys.argv[1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
