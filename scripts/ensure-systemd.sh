#!/usr/bin/env bash
# Install Debian's systemd if systemd-analyze is missing: the oncalendar dialect's property tests
# use `systemd-analyze calendar` as their oracle (tests/unit/domain/test_oncalendar.py), and fail
# without it. Idempotent; used by `make test` and .ci/run.
set -euo pipefail
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "ensure-systemd: systemd-analyze is missing; installing Debian's systemd package" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi
systemd-analyze --version | head -n 1
