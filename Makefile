# Two commands for a fresh machine: `make run` (the quick default experiment) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint reproduce figures clean-venv

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

# The first rung of docs/reproduction.md's runs (P1, P2, P4): every FedGD-paper method at reduced scale,
# 3 seeds each, imbalanced and balanced, and FedGD's Phase-2 start. Hours on 2 CPU cores; resumable
# (run it again after an interruption: finished cells are skipped, an interrupted one continues).
REPRO := runs/reproduce
reproduce: $(STAMP)
	$(BIN)/fedpref sweep configs/reduced_imbalanced.toml --seeds 0,1,2 --out $(REPRO)/imbalanced
	$(BIN)/fedpref sweep configs/reduced_balanced.toml --seeds 0,1,2 --out $(REPRO)/balanced
	$(BIN)/fedpref sweep configs/reduced_imbalanced.toml --seeds 0,1,2 --set "algorithm.methods=['FedGD']" \
		--grid "algorithm.phase2_start='fresh','continue'" --out $(REPRO)/phase2
	$(BIN)/fedpref summarize $(REPRO) --pair FedGD,FL --out $(REPRO)/summary.md --csv $(REPRO)/summary.csv \
		--plot $(REPRO)/curves.png

# Redraw every figure in docs/img/ from the command the docs name (hours on 2 CPU cores; the runs are kept in
# runs/docs_figures, so an interrupted redraw skips what is done). One figure: scripts/docs_figures.sh NAME.
figures: $(STAMP)
	FEDPREF=$(BIN)/fedpref scripts/docs_figures.sh

clean-venv:
	rm -rf $(VENV)
