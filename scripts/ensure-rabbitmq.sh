#!/usr/bin/env bash
# Start RabbitMQ (127.0.0.1:5672) when it is down, installing Debian's package if needed: the
# Celery and Sentry Celery Beat tests run a real worker and beat on it. Used by `make test`.
set -euo pipefail
if (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
command -v rabbitmq-server >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq rabbitmq-server >/dev/null; }
service rabbitmq-server start >/dev/null 2>&1 || rabbitmq-server -detached
for _ in $(seq 60); do (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null && exit 0; sleep 1; done
echo "ensure-rabbitmq: RabbitMQ did not come up on 127.0.0.1:5672" >&2
exit 1
