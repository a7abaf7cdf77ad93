"""``python -m monitor.cli``, as ``python -m monitor``."""

from __future__ import annotations

from monitor.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
