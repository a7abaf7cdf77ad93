#!/usr/bin/env bash
# Install the tests' npm packages (axe-core for the dashboard's accessibility checks, @sentry/node
# for the Sentry SDK test) from their committed lock files when they are missing. Idempotent; used
# by `make test` and .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v npm >/dev/null 2>&1; then
  echo "ensure-node-packages: npm is missing; installing Debian's nodejs and npm" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
fi
for dir in tests/web tests/sentry/js; do
  if [ -f "$dir/package-lock.json" ] && [ ! -d "$dir/node_modules" ]; then
    (cd "$dir" && npm ci --no-audit --no-fund >/dev/null)
  fi
done
