"""The ``monitor_client`` logger and the filter that keeps ping keys out of log lines.

Imported when first needed (:mod:`monitor_client._common` hands out ``logger`` on first use):
``monitor-run`` whose pings succeed never pays for :mod:`logging` (~20 ms of its start-up).
"""

from __future__ import annotations

import logging

from monitor_client._common import LOG_SETUPS, mask_ping_keys

logger = logging.getLogger("monitor_client")


class PingKeyFilter(logging.Filter):
    """A logging filter that masks ping keys in URLs (httpx logs every request URL at INFO)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is the logger's business, not ours
            return True
        masked = mask_ping_keys(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def install_log_filter(name: str = "httpx") -> None:
    """Attach one :class:`PingKeyFilter` to logger ``name`` (idempotent)."""
    target = logging.getLogger(name)
    if not any(isinstance(f, PingKeyFilter) for f in target.filters):
        target.addFilter(PingKeyFilter())


while LOG_SETUPS:  # set-ups registered before the first record (monitor_client._common.on_first_log)
    LOG_SETUPS.pop(0)(logger)
