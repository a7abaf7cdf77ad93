# syntax=docker/dockerfile:1
# monitor: multi-stage image. Stage 1 builds the wheel (migrations ship inside it), stage 2
# installs only that wheel into a slim runtime as a non-root user.
#
#   docker build -t monitor:latest .
#   docker run --rm -p 8000:8000 -e MONITOR_API_KEY=change-me-0123456789 monitor:latest
#
# The default command serves every role (API, evaluator, notifier) on SQLite in the volume
# /var/lib/monitor; for several replicas on PostgreSQL see deploy/compose.yaml.

ARG PYTHON_VERSION=3.12

FROM python:${PYTHON_VERSION}-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY monitor ./monitor
COPY migrations ./migrations
# the client package ships inside the monitor wheel too (issue 7; DESIGN §8)
COPY clients/python/monitor_client ./clients/python/monitor_client
# the wheel of this project only; its dependencies are resolved in the runtime stage
RUN pip wheel --no-deps --wheel-dir /dist .

FROM python:${PYTHON_VERSION}-slim AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN groupadd --system --gid 10001 monitor \
 && useradd --system --uid 10001 --gid monitor --home-dir /var/lib/monitor --create-home \
      --shell /usr/sbin/nologin monitor
COPY --from=build /dist/ /tmp/dist/
RUN pip install /tmp/dist/*.whl && rm -rf /tmp/dist
USER 10001:10001
WORKDIR /var/lib/monitor
VOLUME ["/var/lib/monitor"]
ENV MONITOR_DATABASE_URL=sqlite+aiosqlite:////var/lib/monitor/monitor.db \
    MONITOR_PORT=8000
EXPOSE 8000
# python, not curl (the slim image has none): /health answers 200 while the process serves.
# Worker containers (`monitor evaluate`, `monitor notify`) serve no HTTP: their compose
# services and Kubernetes pods turn this check off.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request; r = urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('MONITOR_PORT', '8000'), timeout=4); sys.exit(0 if r.status == 200 else 1)"]
ENTRYPOINT ["monitor"]
CMD ["serve", "--host", "0.0.0.0"]
