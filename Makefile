# citegate: two commands for a newcomer — `make demo`, then `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export DAGSTER_HOME := $(CURDIR)/dagster_home

.PHONY: demo test test-system lint ui bench install clean fixtures adapter-fixtures guard-examples train-judge docs

$(STAMP): pyproject.toml citegate_assets/lib/ingest/_canonical.c citegate_assets/lib/ingest/_literals.c \
		citegate_assets/lib/ingest/_locate.c
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/citegate demo

# format, lint (line length 120) and types; `make test` runs it first
LINT_PATHS := citegate_assets tests benchmarks scripts
lint: $(STAMP)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/mypy

# lint, Dagster's own check of the definitions (`dg check defs`: the [tool.dg] project of pyproject.toml), then the
# tests but the system tests (tests/test_asset_graph.py compares the asset graph with its snapshot)
# a test file per worker, the slowest first (tests/conftest.py); 3 workers keep 2 cores busy through subprocess and
# server waits
PYTEST := $(BIN)/python -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder
test: lint
	VIRTUAL_ENV=$(CURDIR)/$(VENV) $(BIN)/dg check defs
	$(PYTEST) -m "not system"

# the system tests (tests/conftest.py SYSTEM_TESTS: services, browsers, killed and side-by-side processes, judge
# faults in live runs); CI runs them after `make test`
test-system: $(STAMP)
	$(PYTEST) -m system

# the Dagster UI on http://127.0.0.1:$(PORT)/ (`make ui PORT=3001` for another port), in the project's Dagster home,
# where `citegate run` from this folder records its runs too
PORT ?= 3000
ui: $(STAMP)
	umask 077 && $(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p $(PORT)

# the documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link or a page left out of the nav fails
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

clean:
	rm -rf data/demo data/landing data/warehouse.duckdb* dagster_home/storage dagster_home/history dagster_home/schedules dagster_home/logs

# speed and memory against their targets (BENCHMARKS.md); BENCH_ARGS="--quick" checks the harness in a minute
bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench $(BENCH_ARGS)

# re-render tests/fixtures/frameworks/ with the real frameworks (tests/fixtures/frameworks/README.md).
# Own venv; installs the pins of the `fixtures` extra alone (they conflict with citegate's openai pin).
FX_VENV := .venv-fixtures
fixtures:
	@test -x $(FX_VENV)/bin/python || $(PYTHON) -m venv $(FX_VENV)
	$(FX_VENV)/bin/python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["fixtures"]))' > $(FX_VENV)/requirements.txt
	$(FX_VENV)/bin/python -m pip install --quiet -r $(FX_VENV)/requirements.txt
	$(FX_VENV)/bin/python scripts/render_fixtures.py

# retrain the offline judge citegate-screen-v1 into citegate_assets/lib/support/judge/screen_weights.json (the splits from
# scripts/convert_labels.py); `scripts/train_screen.py --check` verifies the shipped weights
train-judge: $(STAMP)
	$(BIN)/python scripts/train_screen.py

# re-record tests/fixtures/adapters/ with the real tracing libraries (OpenTelemetry, OpenInference,
# Langfuse, the anthropic SDK), all against servers on 127.0.0.1. Own venv; the pins of the `adapter-fixtures` extra.
AD_VENV := .venv-adapters
adapter-fixtures:
	@test -x $(AD_VENV)/bin/python || $(PYTHON) -m venv $(AD_VENV)
	$(AD_VENV)/bin/python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["adapter-fixtures"]))' > $(AD_VENV)/requirements.txt
	$(AD_VENV)/bin/python -m pip install --quiet -r $(AD_VENV)/requirements.txt
	for f in otlp openinference langfuse anthropic; do $(AD_VENV)/bin/python scripts/record_$${f}_fixtures.py || exit 1; done

# run every example of docs/guard.md against the real frameworks of the `fixtures` extra, offline.
guard-examples:
	@test -x $(FX_VENV)/bin/python || { echo "no $(FX_VENV): run make fixtures first"; exit 1; }
	$(FX_VENV)/bin/python scripts/check_guard_examples.py

# the review web page on http://127.0.0.1:8080/ (the queue, entries, decisions, metrics); SERVE_ARGS for more
.PHONY: review
review: $(STAMP)
	$(BIN)/citegate serve $(SERVE_ARGS)
