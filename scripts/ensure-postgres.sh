#!/usr/bin/env bash
# Start the machine's PostgreSQL if it is not running, and make sure 127.0.0.1 trusts user postgres
# (DESIGN §11). Idempotent; used by `make test` and .ci/run.
set -euo pipefail
if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "ensure-postgres: PostgreSQL is not installed; installing it" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
fi
version=$(ls /etc/postgresql | sort -V | tail -n 1)
if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
fi
if ! PGCONNECT_TIMEOUT=5 psql -w -h 127.0.0.1 -U postgres -Atc 'select 1' >/dev/null 2>&1; then
  hba="/etc/postgresql/$version/main/pg_hba.conf"
  sed -i '1i host all postgres 127.0.0.1/32 trust' "$hba"
  pg_ctlcluster --skip-systemctl-redirect "$version" main reload
  sleep 1
fi
psql -w -h 127.0.0.1 -U postgres -Atc 'select 1' >/dev/null
