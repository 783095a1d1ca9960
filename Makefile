# Two commands for a fresh machine: `make run` (the quick default experiment) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint clean-venv

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/fedpref run configs/quick.toml --out runs/quick --overwrite

test: $(STAMP)
	PYTHONPATH=src $(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests
	PYTHONPATH=src $(BIN)/lint-imports --no-cache

clean-venv:
	rm -rf $(VENV)
