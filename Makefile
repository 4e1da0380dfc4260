# Two entry points matter: `make demo` and `make test`. Both create .venv and
# install the project into it first, so they work on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install demo test lint format bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,postgres]'
	touch $@

install: $(STAMP)

demo: install
	$(BIN)/sextant demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: install
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
