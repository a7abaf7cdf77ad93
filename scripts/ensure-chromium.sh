#!/usr/bin/env bash
# Install Debian's Chromium when /usr/bin/chromium is missing: the dashboard's browser tests
# (tests/web/test_browser.py) drive it through Playwright, whose own browser download cannot work
# without network access beyond the package registries. Idempotent; used by `make test` and .ci/run.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
echo "ensure-chromium: /usr/bin/chromium is missing; installing Debian's chromium package" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq && apt-get install -y -qq chromium >/dev/null
