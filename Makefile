# Both targets do the whole set-up on a fresh machine: a virtual environment at .venv,
# the project installed into it (editable), then the job.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test test-all lint bench

$(BIN)/noria-py: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,spark,bench,ray]'
	touch $(BIN)/noria-py

setup: $(BIN)/noria-py

demo: setup
	$(BIN)/noria-py demo

# the default suite on every core (pytest-xdist; `-n 0` runs it in one process)
test: setup
	$(BIN)/python -m pytest -q -n auto --durations=25

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

test-all: setup
	$(BIN)/python -m pytest -q -n auto -m ''

bench: setup
	$(BIN)/python -m pytest bench -q --benchmark-only
