# Developer targets; everything runs from the project's venv (scripts/bootstrap.sh creates it).
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: check lint format typecheck test-fast test

check: lint typecheck  ## ruff, ruff format --check, mypy (what CI checks before the tests)

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format:  ## rewrite files in place: ruff's fixes and formatting
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

typecheck:  ## strict on schemas/ and detectors/, basic on streams/ (pyproject.toml [tool.mypy])
	$(PY) -m mypy

test-fast:  ## the inner loop: no broker, no slow tests
	$(PY) -m pytest -q -m "not kafka and not slow" $(ARGS)

test:  ## everything, starting a real Kafka broker when none is up (scripts/test.sh)
	bash scripts/test.sh $(ARGS)
