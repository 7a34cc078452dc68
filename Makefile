# citegate: two commands for a newcomer — `make demo`, then `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export DAGSTER_HOME := $(CURDIR)/dagster_home

.PHONY: demo test ui bench install clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/citegate demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

ui: $(STAMP)
	umask 077 && $(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

clean:
	rm -rf data/demo data/landing data/warehouse.duckdb* dagster_home/storage dagster_home/history dagster_home/schedules dagster_home/logs

# speed and memory against their targets (BENCHMARKS.md); BENCH_ARGS="--quick" checks the harness in a minute
bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench $(BENCH_ARGS)
