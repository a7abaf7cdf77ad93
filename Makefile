# The two commands of the README: `make run` (the service on SQLite) and `make test` (the suite).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test test-slow install lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

## Run the service on the embedded SQLite file ./monitor.db (private Apprise targets allowed).
run: install
	$(BIN)/monitor serve --dev

## Run the test suite (SQLite and PostgreSQL; starts PostgreSQL if it is down, installs Chromium if missing).
test: install
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-systemd.sh
	bash scripts/ensure-chromium.sh
	bash scripts/ensure-node-packages.sh
	bash scripts/ensure-rabbitmq.sh
	$(BIN)/python -m pytest -m "not slow" -q -n 3 --dist loadscope

## The long loops (repetitions, failover); .ci/run runs them after `make test`.
test-slow: install
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-node-packages.sh
	bash scripts/ensure-rabbitmq.sh
	$(BIN)/python -m pytest -m slow -q; status=$$?; [ $$status -eq 0 ] || [ $$status -eq 5 ]

lint: install
	$(BIN)/ruff check monitor tests
	$(BIN)/mypy --strict monitor
	$(BIN)/ruff check clients
	$(BIN)/mypy --strict clients/python/monitor_client
	$(BIN)/shellcheck -s sh clients/shell/monitor-run.sh

bench: install
	$(BIN)/python benchmarks/ping_throughput.py

clean:
	rm -rf $(VENV) monitor.db monitor.db-wal monitor.db-shm
