# Two commands for a fresh machine: `make run` (the quick default experiment) and `make test`; `make help` lists
# every target with what it reproduces and how long it took on 2 CPU cores.
#
# Help lines: `#: TARGET | what it runs or reproduces | its measured time on 2 CPU cores` (TARGET may end in a
# pattern: `-s*`). `make help` prints them and the aliases below; tests/test_makefile.py checks that every target
# has one and that every config a target names is shipped.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
REPRO := runs/reproduce
REPRO_SWEEP := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/fedpref sweep
ONE_THREAD := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# Local copies of the real data sets (the shipped configs read the hub ids): a folder of {subset}.{split}.jsonl.gz
# for HH-RLHF, of TL;DR comparisons JSON lines for TL;DR.
HH_DATA ?= ../shared/data/hh-rlhf
TLDR_DATA ?= ../shared/data/tldr-comparisons
STORIES_POLICY ?= ../shared/models/stories260K/hf

.PHONY: help run test lint docs reference figures clean-venv

# Create .venv and install the pinned requirements, the embedded models and fedpref (editable).
$(STAMP): requirements.txt requirements-embedded.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -r requirements-embedded.txt
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

#: help | this list: every target, what it reproduces, its time on 2 CPU cores | instant
help:
	@awk -F' [|] ' -v aliases='$(ALIASES)' ' \
		/^#: / { name = substr($$1, 4); what[name] = $$2; took[name] = $$3; order[++n] = name } \
		END { printf "%-44s %-96s %s\n", "target", "what it runs or reproduces", "time on 2 CPU cores"; \
			for (i = 1; i <= n; i++) printf "%-44s %-96s %s\n", order[i], what[order[i]], took[order[i]]; \
			print "\nOld names, kept as aliases:"; \
			count = split(aliases, pairs, " "); \
			for (i = 1; i <= count; i++) { split(pairs[i], p, "="); t = took[p[2]]; \
				if (t == "") for (k in took) if (index(k, "*") && p[2] ~ ("^" substr(k, 1, index(k, "*") - 1))) t = took[k]; \
				printf "%-44s alias of %-87s %s\n", p[1], p[2], t } }' $(MAKEFILE_LIST)

#: run | the quick default experiment (FL, CL, Multi-CL on the balanced synthetic setting) into runs/quick | 4 min 47 s
run: $(STAMP)
	$(BIN)/fedpref run quick --out runs/quick --overwrite

#: test | the import-layer contract, the docs site (--strict) and pytest (slow checks behind a marker) | 7 min 40 s from a fresh clone, set-up included (pytest 5 min 31 s)
test: $(STAMP)
	PYTHONPATH=src $(BIN)/lint-imports --no-cache
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $(VENV)/site
	$(BIN)/python -m pytest -q

#: reference | regenerate docs/reference/ (CLI, configs, methods, results) from the code | about 25 s
reference: $(STAMP)
	$(BIN)/python -m fedpref.reference docs/reference

#: docs | the documentation site at http://127.0.0.1:8000, rebuilt on every change | runs until stopped
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

#: lint | ruff and the import-layer contract | under 1 s
lint: $(STAMP)
	$(BIN)/ruff check src tests scripts benchmarks
	PYTHONPATH=src $(BIN)/lint-imports --no-cache

# ---- The FedGD paper -------------------------------------------------------------------------------------------
# Every reproduction target is resumable: run it again after an interruption (a sweep skips finished cells and
# continues an interrupted one), and each declares the runs it reads, so any of them can run first.

# Table 3 (synthetic): every method at reduced scale, seeds 0-2, imbalanced and balanced, and FedGD with Phase 2
# continuing from its Phase-1 model (the fresh start is in the first two sweeps); two streams of one thread each.
CONTINUE := --set "algorithm.methods=['FedGD']" --set "algorithm.phase2_start='continue'"
PAIRS := --pair FedGD,FL --pair FL_target,FL --pair FedGD,FedBiscuit --pair FedGD,Soft-FL --pair FL,CL
.PHONY: reproduce-fedgd-table3 reproduce-fedgd-table3-imbalanced reproduce-fedgd-table3-balanced
#: reproduce-fedgd-table3 | FedGD Table 3 (synthetic, both settings): every method, seeds 0-2, reduced scale | about 3.5 h
reproduce-fedgd-table3: $(STAMP)
	$(MAKE) -j2 reproduce-fedgd-table3-imbalanced reproduce-fedgd-table3-balanced
	$(BIN)/fedpref summarize $(REPRO)/imbalanced $(REPRO)/balanced $(REPRO)/continue $(PAIRS) \
		--out $(REPRO)/summary.md --csv $(REPRO)/summary.csv --plot $(REPRO)/curves.png

#: reproduce-fedgd-table3-imbalanced | one stream of reproduce-fedgd-table3 (its imbalanced setting) | about 3.5 h (beside the other)
#: reproduce-fedgd-table3-balanced | one stream of reproduce-fedgd-table3 (its balanced setting) | about 3.5 h (beside the other)
reproduce-fedgd-table3-imbalanced reproduce-fedgd-table3-balanced: reproduce-fedgd-table3-%: $(STAMP)
	$(REPRO_SWEEP) reduced_$* --seeds 0,1,2 --out $(REPRO)/$*
	$(REPRO_SWEEP) reduced_$* --seeds 0,1,2 $(CONTINUE) --out $(REPRO)/continue/$*

# Table 3 with Phase 1 at the paper's ten reassignment checks (T = 1 over the first 10 of 20 rounds) for FedGD and
# the two methods it is compared with at the same budget.
.PHONY: reproduce-fedgd-table3-t1 reproduce-fedgd-table3-t1-imbalanced reproduce-fedgd-table3-t1-balanced
#: reproduce-fedgd-table3-t1 | FedGD Table 3 (synthetic) at ten reassignment checks, T = 1: FL, FL_target, FedGD | about 1.5 h
reproduce-fedgd-table3-t1: $(STAMP)
	$(MAKE) -j2 reproduce-fedgd-table3-t1-imbalanced reproduce-fedgd-table3-t1-balanced
	$(BIN)/fedpref summarize $(REPRO)/rung2 --pair FedGD,FL --pair FL_target,FL --pair FedGD,FL_target \
		--out $(REPRO)/rung2/summary.md --csv $(REPRO)/rung2/summary.csv --plot $(REPRO)/rung2/curves.png

#: reproduce-fedgd-table3-t1-imbalanced | one stream of reproduce-fedgd-table3-t1 (imbalanced) | about 1.5 h (beside the other)
#: reproduce-fedgd-table3-t1-balanced | one stream of reproduce-fedgd-table3-t1 (balanced) | about 1.5 h (beside the other)
reproduce-fedgd-table3-t1-imbalanced reproduce-fedgd-table3-t1-balanced: reproduce-fedgd-table3-t1-%: $(STAMP)
	$(REPRO_SWEEP) reduced_$*_20r_t1 --seeds 0,1,2 --out $(REPRO)/rung2/$*

# Table 3 (imbalanced) with the ten checks two rounds apart (T = 2 over the first 20 of 40 rounds), seeds 0-2:
# FedGD with both Phase 2 starts, and FL and FL_target at the same 40 rounds.
RUNG2B := reduced_imbalanced_40r_t2 --seeds 0,1,2
.PHONY: reproduce-fedgd-table3-40r reproduce-fedgd-table3-40r-fedgd reproduce-fedgd-table3-40r-baselines
#: reproduce-fedgd-table3-40r | FedGD Table 3 (imbalanced) at 40 rounds, T = 2: FedGD (both Phase 2 starts), FL, FL_target | about 2 h
reproduce-fedgd-table3-40r: $(STAMP)
	$(MAKE) -j2 reproduce-fedgd-table3-40r-fedgd reproduce-fedgd-table3-40r-baselines
	$(BIN)/fedpref summarize $(REPRO)/rung2b $(REPRO)/rung2b_fl $(REPRO)/rung2b_fl_target --pair FedGD,FL \
		--pair FedGD,FL_target --out $(REPRO)/rung2b/summary.md

#: reproduce-fedgd-table3-40r-fedgd | one stream of reproduce-fedgd-table3-40r (FedGD, fresh and continue) | about 2 h (beside the other)
reproduce-fedgd-table3-40r-fedgd: $(STAMP)
	$(REPRO_SWEEP) $(RUNG2B) --set "algorithm.methods=['FedGD']" --grid algorithm.phase2_start=fresh,continue \
		--out $(REPRO)/rung2b/imbalanced

#: reproduce-fedgd-table3-40r-baselines | one stream of reproduce-fedgd-table3-40r (FL, FL_target) | about 2 h (beside the other)
reproduce-fedgd-table3-40r-baselines: $(STAMP)
	$(REPRO_SWEEP) $(RUNG2B) --set "algorithm.methods=['FL']" --out $(REPRO)/rung2b_fl/imbalanced
	$(REPRO_SWEEP) $(RUNG2B) --set "algorithm.methods=['FL_target']" --out $(REPRO)/rung2b_fl_target/imbalanced

# FedBiscuit and Soft-FL at the same 40 rounds, summarized with reproduce-fedgd-table3-40r's FedGD (the methods
# pair up by seed).
.PHONY: reproduce-fedgd-table3-40r-clustered
#: reproduce-fedgd-table3-40r-clustered | FedGD Table 3 (imbalanced) at 40 rounds: FedBiscuit and Soft-FL against FedGD | about 35 min a seed at one thread
reproduce-fedgd-table3-40r-clustered: reproduce-fedgd-table3-40r
	$(REPRO_SWEEP) $(RUNG2B) --set "algorithm.methods=['FedBiscuit','Soft-FL']" --out $(REPRO)/rung2b_f8/imbalanced
	$(BIN)/fedpref summarize $(REPRO)/rung2b $(REPRO)/rung2b_fl $(REPRO)/rung2b_fl_target $(REPRO)/rung2b_f8 \
		--pair FedGD,FL --pair FedGD,FL_target --pair FedGD,FedBiscuit --pair FedGD,Soft-FL --out $(REPRO)/rung2b/summary.md

# Tables 5-6 (K in {2, 3, 4}) at 40 rounds, T = 2 (imbalanced): FedGD at each K on seeds 0-2, each run diagnosed
# (Table 5: margins, GQ, correction), and FedBiscuit and Soft-FL at K = 2 and 3 on seed 0 (Table 6). The sweeps
# resume; the diagnoses are recomputed.
KSWEEP := $(REPRO_SWEEP) reduced_imbalanced_40r_t2
.PHONY: reproduce-fedgd-table5-6 reproduce-fedgd-table5-6-k23 reproduce-fedgd-table5-6-k4
#: reproduce-fedgd-table5-6 | FedGD Tables 5-6 (K = 2, 3, 4): FedGD diagnosed at each K, FedBiscuit and Soft-FL at K = 2, 3 | two streams of about 2 h and 1.5 h
reproduce-fedgd-table5-6: $(STAMP)
	$(MAKE) -j2 reproduce-fedgd-table5-6-k23 reproduce-fedgd-table5-6-k4
	$(BIN)/fedpref summarize $(REPRO)/rung2b_k $(REPRO)/rung2b_k4 $(REPRO)/rung2b_k_softfl $(REPRO)/rung2b_k_fedbiscuit \
		--across algorithm.num_models=4 --pair FedGD,FedBiscuit --pair FedGD,Soft-FL --out $(REPRO)/rung2b_k/summary.md

#: reproduce-fedgd-table5-6-k23 | one stream of reproduce-fedgd-table5-6 (FedGD at K = 2, 3; Soft-FL) | about 2 h (beside the other)
reproduce-fedgd-table5-6-k23: $(STAMP)
	$(KSWEEP) --seeds 0,1,2 --set "algorithm.methods=['FedGD']" --grid algorithm.num_models=2,3 --out $(REPRO)/rung2b_k/imbalanced
	for k in 2 3; do for s in 0 1 2; do $(ONE_THREAD) \
		$(BIN)/fedpref diagnose $(REPRO)/rung2b_k/imbalanced/algorithm.num_models=$$k/seed=$$s; done; done
	$(KSWEEP) --seeds 0 --set "algorithm.methods=['Soft-FL']" --grid algorithm.num_models=2,3 --out $(REPRO)/rung2b_k_softfl/imbalanced

#: reproduce-fedgd-table5-6-k4 | one stream of reproduce-fedgd-table5-6 (FedGD at K = 4; FedBiscuit) | about 1.5 h (beside the other)
reproduce-fedgd-table5-6-k4: $(STAMP)
	$(KSWEEP) --seeds 0,1,2 --set "algorithm.methods=['FedGD']" --grid algorithm.num_models=4 --out $(REPRO)/rung2b_k4/imbalanced
	for s in 0 1 2; do $(ONE_THREAD) \
		$(BIN)/fedpref diagnose $(REPRO)/rung2b_k4/imbalanced/algorithm.num_models=4/seed=$$s; done
	$(KSWEEP) --seeds 0 --set "algorithm.methods=['FedBiscuit']" --grid algorithm.num_models=2,3 --out $(REPRO)/rung2b_k_fedbiscuit/imbalanced

# $(call personalize_again,RUNS,FROM,TO,STEPS): `fedpref personalize` each finished run of RUNS (shell globs, read
# when the recipe runs, after its prerequisites made them) again at STEPS into TO/<the run's path below FROM>; a
# run whose output has a table.md is skipped, so an interrupted loop resumes.
personalize_again = for run in $(1); do test -d $$run || continue; out=$(3)/$${run\#$(2)/}; \
	test -f $$out/table.md || $(ONE_THREAD) $(BIN)/fedpref personalize $$run --steps $(4) --out $$out --overwrite \
	|| exit 1; done

# Tables 5-6 at the paper's acc^80: reproduce-fedgd-table5-6's runs (and the seed-2 FedBiscuit and Soft-FL of
# reproduce-fedgd-table3-40r-clustered) personalized again for 80 steps from their saved initializations (steps
# 0, 5 and 10 give the runs' own numbers again), into $(REPRO)/rung2b_k80/<the run's path>.
K80_STEPS := 0,5,10,40,80
K80_RUNS := $(REPRO)/rung2b_k/imbalanced/*/seed=* $(REPRO)/rung2b_k4/imbalanced/*/seed=* \
	$(REPRO)/rung2b_k_fedbiscuit/imbalanced/*/seed=* $(REPRO)/rung2b_k_softfl/imbalanced/*/seed=* $(REPRO)/rung2b_f8/imbalanced/seed=2
.PHONY: reproduce-fedgd-table5-6-acc80
#: reproduce-fedgd-table5-6-acc80 | FedGD Tables 5-6 at acc^80: the K runs personalized again for 80 steps | 8-10 min a method and run at one thread (466-736 s)
reproduce-fedgd-table5-6-acc80: reproduce-fedgd-table5-6 reproduce-fedgd-table3-40r-clustered
	$(call personalize_again,$(K80_RUNS),$(REPRO),$(REPRO)/rung2b_k80,$(K80_STEPS))
	$(BIN)/fedpref summarize $(REPRO)/rung2b_k80 --across algorithm.num_models=4 --pair FedGD,FedBiscuit --pair FedGD,Soft-FL \
		--out $(REPRO)/rung2b_k80/summary.md

# Sec. 5.1's second half: imbalanced FL at 40 rounds personalized for 80 steps, paired with FedGD's acc^80 from
# reproduce-fedgd-table5-6-acc80 (its K = 4 runs).
.PHONY: reproduce-fedgd-sec5.1-acc80
#: reproduce-fedgd-sec5.1-acc80 | FedGD Sec. 5.1 (imbalanced): FL against FedGD at acc^80 | 13-15 min a seed at one thread
reproduce-fedgd-sec5.1-acc80: reproduce-fedgd-table5-6-acc80
	$(REPRO_SWEEP) $(RUNG2B) --set "algorithm.methods=['FL']" --set "personalization.steps=[0,5,10,40,80]" \
		--out $(REPRO)/rung2b_fl80/imbalanced
	$(BIN)/fedpref summarize $(REPRO)/rung2b_fl80 $(REPRO)/rung2b_k80/rung2b_k4 --pair FedGD,FL \
		--out $(REPRO)/rung2b_fl80/summary.md

# Tables 1-2 (Gradient Quotient, margins, Headroom) on 3 seeds: FL, CL and Multi-CL on the balanced config
# (diagnostics computed in the run) and `fedpref diagnose` on reproduce-fedgd-table3-t1's imbalanced runs (FL,
# FL_target, FedGD) and balanced FL (the same budget). The diagnoses are recomputed each time.
.PHONY: reproduce-fedgd-table1-2
#: reproduce-fedgd-table1-2 | FedGD Tables 1-2 (Gradient Quotient, margins, Headroom), seeds 0-2 | about 1 h a stream at one thread (10 min a diagnosis)
reproduce-fedgd-table1-2: reproduce-fedgd-table3-t1-imbalanced reproduce-fedgd-table3-t1-balanced
	$(REPRO_SWEEP) reduced_balanced_diagnostics --seeds 0,1,2 --out $(REPRO)/diagnostics/balanced
	for s in 0 1 2; do $(ONE_THREAD) $(BIN)/fedpref diagnose $(REPRO)/rung2/imbalanced/seed=$$s; done
	for s in 0 1 2; do $(ONE_THREAD) $(BIN)/fedpref diagnose $(REPRO)/rung2/balanced/seed=$$s --method FL; done
	$(BIN)/fedpref summarize $(REPRO)/diagnostics $(REPRO)/rung2 --out $(REPRO)/diagnostics/summary.md

# Fig. 5: FL and CL on the balanced config at tau in {1, 5, 15, 30} local steps and two learning rates (the default
# and 10x smaller); seed 0.
.PHONY: reproduce-fedgd-fig5
#: reproduce-fedgd-fig5 | FedGD Fig. 5: FL and CL over local steps tau and two learning rates, seed 0 | about 1.5 h at one thread
reproduce-fedgd-fig5: $(STAMP)
	$(REPRO_SWEEP) reduced_balanced --seeds 0 --set "algorithm.methods=['FL','CL']" \
		--grid train.lr=1e-3,1e-4 --grid train.local_steps=1,5,15,30 --out $(REPRO)/fig5/balanced
	$(BIN)/fedpref summarize $(REPRO)/fig5 --pair FL,CL --out $(REPRO)/fig5/summary.md --csv $(REPRO)/fig5/summary.csv

# Table 3's real-world column on the local TL;DR subset (TLDR_DATA): six annotators, every method, 3 seeds, in two
# streams (the four single-model methods; FedBiscuit and Soft-FL) that pair up by seed.
TLDR_SWEEP := $(REPRO_SWEEP) tldr_local --seeds 0,1,2 --set "data.path='$(TLDR_DATA)'"
TLDR_PAIRS := --pair FedGD,FL --pair FL,CL --pair FedGD,FedBiscuit --pair FedGD,Soft-FL
.PHONY: reproduce-fedgd-table3-tldr reproduce-fedgd-table3-tldr-core reproduce-fedgd-table3-tldr-clustered
#: reproduce-fedgd-table3-tldr | FedGD Table 3 (real-world, TL;DR annotators): every method, seeds 0-2 | about 45 min a stream at one thread
reproduce-fedgd-table3-tldr: $(STAMP)
	$(MAKE) -j2 reproduce-fedgd-table3-tldr-core reproduce-fedgd-table3-tldr-clustered
	$(BIN)/fedpref summarize $(REPRO)/tldr $(TLDR_PAIRS) --out $(REPRO)/tldr/summary.md

#: reproduce-fedgd-table3-tldr-core | one stream of reproduce-fedgd-table3-tldr (Local, CL, FL, FedGD) | about 45 min at one thread
reproduce-fedgd-table3-tldr-core: $(STAMP)
	$(TLDR_SWEEP) --set "algorithm.methods=['Local','CL','FL','FedGD']" --out $(REPRO)/tldr/core

#: reproduce-fedgd-table3-tldr-clustered | one stream of reproduce-fedgd-table3-tldr (FedBiscuit, Soft-FL) | about 45 min at one thread
reproduce-fedgd-table3-tldr-clustered: $(STAMP)
	$(TLDR_SWEEP) --set "algorithm.methods=['FedBiscuit','Soft-FL']" --out $(REPRO)/tldr/clustered

# The real-world acc^240: reproduce-fedgd-table3-tldr's runs personalized again for 240 steps from their saved
# initializations, in two streams into $(REPRO)/tldr240/<stream>/seed=S. A finished run is skipped.
TLDR240 = $(call personalize_again,$(REPRO)/tldr/$(1)/seed=*,$(REPRO)/tldr,$(REPRO)/tldr240,$(TLDR240_STEPS))
TLDR240_STEPS := 0,10,30,80,240
.PHONY: reproduce-fedgd-table3-tldr-acc240 reproduce-fedgd-table3-tldr-acc240-core reproduce-fedgd-table3-tldr-acc240-clustered
#: reproduce-fedgd-table3-tldr-acc240 | FedGD Table 3 (real-world) at acc^240: the TL;DR runs personalized again | about 12 min a method and seed at one thread
reproduce-fedgd-table3-tldr-acc240: $(STAMP)
	$(MAKE) -j2 reproduce-fedgd-table3-tldr-acc240-core reproduce-fedgd-table3-tldr-acc240-clustered
	$(BIN)/fedpref summarize $(REPRO)/tldr240 $(TLDR_PAIRS) --pair FedGD,Local --pair CL,FedBiscuit --pair CL,Soft-FL \
		--out $(REPRO)/tldr240/summary.md

#: reproduce-fedgd-table3-tldr-acc240-core | one stream of reproduce-fedgd-table3-tldr-acc240 (Local, CL, FL, FedGD) | about 12 min a method and seed at one thread
reproduce-fedgd-table3-tldr-acc240-core: reproduce-fedgd-table3-tldr-core
	$(call TLDR240,core)

#: reproduce-fedgd-table3-tldr-acc240-clustered | one stream of reproduce-fedgd-table3-tldr-acc240 (FedBiscuit, Soft-FL) | about 12 min a method and seed at one thread
reproduce-fedgd-table3-tldr-acc240-clustered: reproduce-fedgd-table3-tldr-clustered
	$(call TLDR240,clustered)

# Table 3's real-world column with the FedGD paper's reward-model formulation: the A/B selector on the embedded
# SmolLM2-135M-Instruct (tldr_smollm2), seeds 0-2.
SMOLLM2_SEEDS ?= 0,1,2
.PHONY: reproduce-fedgd-table3-tldr-smollm2
#: reproduce-fedgd-table3-tldr-smollm2 | FedGD Table 3 (real-world) with the SmolLM2 A/B selector, seeds 0-2 | 77-88 min a seed at one thread (4,596 and 5,266 s)
reproduce-fedgd-table3-tldr-smollm2: $(STAMP)
	$(REPRO_SWEEP) tldr_smollm2 --seeds $(SMOLLM2_SEEDS) --set "data.path='$(TLDR_DATA)'" --out $(REPRO)/smollm2_tldr
	$(BIN)/fedpref summarize $(REPRO)/smollm2_tldr --pair FedGD,FL --pair FL,CL --pair FedGD,FedBiscuit \
		--pair FedGD,Soft-FL --pair FL,Local

# Table 3's synthetic shape with the same selector (reduced_balanced_smollm2, reduced_imbalanced_smollm2): first a
# budget ladder, Multi-CL alone at 12 rounds x 5, 10 and 20 local steps (seed 0), to see where it stops rising; then
# the table's methods at the chosen rung's local steps (SMOLLM2_STEPS), seeds 0-2. The frozen layers' states are
# kept on disk (data.prefix_cache_mb), so only the first run on the 16 clients computes them.
SMOLLM2_STEPS ?= 5
.PHONY: reproduce-fedgd-table3-synthetic-smollm2-ladder reproduce-fedgd-table3-synthetic-smollm2
#: reproduce-fedgd-table3-synthetic-smollm2-ladder | the budget ladder of Multi-CL on the synthetic balanced setting with the SmolLM2 A/B selector, seed 0 | 76 min at one thread (1,836 + 884 + 1,869 s; the first cell's 20 min of frozen layers once)
reproduce-fedgd-table3-synthetic-smollm2-ladder: $(STAMP)
	$(REPRO_SWEEP) reduced_balanced_smollm2 --method Multi-CL --grid train.local_steps=5,10,20 \
		--out $(REPRO)/smollm2_ladder
	$(BIN)/fedpref summarize $(REPRO)/smollm2_ladder --across train.local_steps=5

#: reproduce-fedgd-table3-synthetic-smollm2 | FedGD Table 3 (synthetic, balanced and imbalanced) with the SmolLM2 A/B selector at SMOLLM2_STEPS local steps, seeds 0-2 | balanced: 68-113 min a seed at one thread at SMOLLM2_STEPS=20 (4,073-6,799 s); imbalanced: 96 min (seed 0, 5,734 s)
reproduce-fedgd-table3-synthetic-smollm2: $(STAMP)
	$(REPRO_SWEEP) reduced_balanced_smollm2 --seeds $(SMOLLM2_SEEDS) --set train.local_steps=$(SMOLLM2_STEPS) \
		--out $(REPRO)/smollm2_synthetic/balanced
	$(REPRO_SWEEP) reduced_imbalanced_smollm2 --seeds $(SMOLLM2_SEEDS) --set train.local_steps=$(SMOLLM2_STEPS) \
		--out $(REPRO)/smollm2_synthetic/imbalanced
	$(BIN)/fedpref summarize $(REPRO)/smollm2_synthetic --pair FL,CL --pair FL,Multi-CL --pair FedGD,FL \
		--pair FL_target,FL

# Table 3's (balanced) shape on boundary_balanced (docs/notes/calibration.md): Local, CL, Multi-CL and FL, seeds 0-2, one
# stream per seed into $(REPRO)/boundary/sS, then FL - CL paired per client.
BOUNDARY_SEEDS := reproduce-fedgd-table3-boundary-s0 reproduce-fedgd-table3-boundary-s1 reproduce-fedgd-table3-boundary-s2
.PHONY: reproduce-fedgd-table3-boundary $(BOUNDARY_SEEDS)
#: reproduce-fedgd-table3-boundary | FedGD Table 3 (balanced) shape on boundary_balanced: Local, CL, Multi-CL, FL, seeds 0-2 | 70 min, three seeds at once (4,199-4,212 s a seed)
reproduce-fedgd-table3-boundary: $(STAMP)
	$(MAKE) -j3 $(BOUNDARY_SEEDS)
	$(BIN)/fedpref summarize $(REPRO)/boundary --pair FL,CL --pair FL,Local --out $(REPRO)/boundary/summary.md \
		--csv $(REPRO)/boundary/summary.csv --plot $(REPRO)/boundary/curves.png

#: reproduce-fedgd-table3-boundary-s* | one seed of reproduce-fedgd-table3-boundary | 70 min (three at once)
$(BOUNDARY_SEEDS): reproduce-fedgd-table3-boundary-s%: $(STAMP)
	$(REPRO_SWEEP) boundary_balanced --seeds $* --out $(REPRO)/boundary/s$*

# The same runs' Local and FL personalized again to 80 steps (the paper's acc^80: Local <= 62), all three seeds at
# once (a finished seed is skipped, an unfinished one started again), then FL - Local paired.
BOUNDARY80_SEEDS := reproduce-fedgd-table3-boundary-acc80-s0 reproduce-fedgd-table3-boundary-acc80-s1 \
	reproduce-fedgd-table3-boundary-acc80-s2
.PHONY: reproduce-fedgd-table3-boundary-acc80 $(BOUNDARY80_SEEDS)
#: reproduce-fedgd-table3-boundary-acc80 | FedGD Table 3 (balanced) at acc^80 on boundary_balanced: Local and FL again | about 30 min, three seeds at once
reproduce-fedgd-table3-boundary-acc80: $(STAMP)
	$(MAKE) -j3 $(BOUNDARY80_SEEDS)
	$(BIN)/fedpref summarize $(REPRO)/boundary80 --pair FL,Local --out $(REPRO)/boundary80/summary.md

#: reproduce-fedgd-table3-boundary-acc80-s* | one seed of reproduce-fedgd-table3-boundary-acc80 | about 30 min (three at once)
$(BOUNDARY80_SEEDS): reproduce-fedgd-table3-boundary-acc80-s%: reproduce-fedgd-table3-boundary-s%
	test -f $(REPRO)/boundary80/s$*/results.json || $(ONE_THREAD) $(BIN)/fedpref personalize \
		$(REPRO)/boundary/s$*/seed=$* --steps 0,10,80 --method Local --method FL --out $(REPRO)/boundary80/s$* --overwrite

# Table 3's (balanced) shape with composed cues and 15 local steps a round (composed_tau15_balanced): Local, CL,
# Multi-CL and FL, seeds 0-2, one stream per seed into $(REPRO)/$(COMPOSED15_DIR)/sS, then FL - CL and FL - Local
# paired per client. The -noise2 (-noise1) targets are the same with 2% (1%) label noise. More seeds or fewer
# methods: make reproduce-fedgd-table3-composed15-noise1 COMPOSED15_SEED_LIST="3 4 5 6" \
#   COMPOSED15_METHODS="['FL','CL']" COMPOSED15_PAIRS="--pair FL,CL"
COMPOSED15_DIR ?= composed15
COMPOSED15_SET ?=
COMPOSED15_SEED_LIST ?= 0 1 2
COMPOSED15_METHODS ?=
COMPOSED15_PAIRS ?= --pair FL,CL --pair FL,Local
COMPOSED15_SEEDS := $(foreach s,$(COMPOSED15_SEED_LIST),reproduce-fedgd-table3-composed15-s$(s))
.PHONY: reproduce-fedgd-table3-composed15 reproduce-fedgd-table3-composed15-noise2 \
	reproduce-fedgd-table3-composed15-noise1 $(COMPOSED15_SEEDS)
#: reproduce-fedgd-table3-composed15 | FedGD Table 3 (balanced) shape with composed cues, tau 15: Local, CL, Multi-CL, FL, seeds 0-2 | not timed whole (FL alone: about 24 min a seed at one thread, 1,419 s)
reproduce-fedgd-table3-composed15: $(STAMP)
	$(MAKE) -j3 $(COMPOSED15_SEEDS)
	$(BIN)/fedpref summarize $(REPRO)/$(COMPOSED15_DIR) $(COMPOSED15_PAIRS) \
		--out $(REPRO)/$(COMPOSED15_DIR)/summary.md --csv $(REPRO)/$(COMPOSED15_DIR)/summary.csv \
		--plot $(REPRO)/$(COMPOSED15_DIR)/curves.png

#: reproduce-fedgd-table3-composed15-s* | one seed of reproduce-fedgd-table3-composed15 | not timed whole (its FL: 1,419 s at one thread)
$(COMPOSED15_SEEDS): reproduce-fedgd-table3-composed15-s%: $(STAMP)
	$(REPRO_SWEEP) composed_tau15_balanced --seeds $* $(COMPOSED15_SET) \
		$(if $(COMPOSED15_METHODS),--set "algorithm.methods=$(COMPOSED15_METHODS)") --out $(REPRO)/$(COMPOSED15_DIR)/s$*

#: reproduce-fedgd-table3-composed15-noise2 | reproduce-fedgd-table3-composed15 with 2% label noise | as reproduce-fedgd-table3-composed15
reproduce-fedgd-table3-composed15-noise2: $(STAMP)
	$(MAKE) reproduce-fedgd-table3-composed15 COMPOSED15_DIR=composed15_noise2 COMPOSED15_SET="--set data.label_noise=0.02"

#: reproduce-fedgd-table3-composed15-noise1 | reproduce-fedgd-table3-composed15 with 1% label noise | as reproduce-fedgd-table3-composed15
reproduce-fedgd-table3-composed15-noise1: $(STAMP)
	$(MAKE) reproduce-fedgd-table3-composed15 COMPOSED15_DIR=composed15_noise1 COMPOSED15_SET="--set data.label_noise=0.01"

# ---- The FedVPA-GP paper ---------------------------------------------------------------------------------------

# Fig. 4 (ablation): FedVPL, +Ortho, +GB prior and the full method on the synthetic conflict at the shipped
# schedule, 3 seeds.
.PHONY: reproduce-fedvpa-fig4
#: reproduce-fedvpa-fig4 | FedVPA-GP Fig. 4 (ablation): FedVPL, +Ortho, +GB, FedVPA-GP on the synthetic conflict, seeds 0-2 | about 55 min at one thread
reproduce-fedvpa-fig4: $(STAMP)
	$(REPRO_SWEEP) vpa_synthetic_ablation --seeds 0,1,2 --out $(REPRO)/ablation/synthetic
	$(BIN)/fedpref summarize $(REPRO)/ablation --pair FedVPA-GP,FedVPL --pair FedVPL+Ortho,FedVPL --pair FedVPL+GB,FedVPL \
		--out $(REPRO)/ablation/summary.md

# Table 1 at K = 50 and K = 100 clients on the local HH-RLHF test splits (HH_DATA): the most pairs a client they
# allow at 50/50, 10 clients a round, the shipped 20 x 10 schedule; FL, FedVPL and FedVPA-GP, one stream per seed
# into $(REPRO)/hh_kK/sS.
HH_K_SEEDS := $(foreach k,50 100,$(foreach s,0 1 2,reproduce-fedvpa-table1-k$(k)-s$(s)))
.PHONY: reproduce-fedvpa-table1-k50 reproduce-fedvpa-table1-k100 $(HH_K_SEEDS)
#: reproduce-fedvpa-table1-k50 | FedVPA-GP Table 1 at K = 50 clients (HH-RLHF): FL, FedVPL, FedVPA-GP, seeds 0-2 | about 51 min a seed beside another job (2,969-3,073 s)
#: reproduce-fedvpa-table1-k100 | FedVPA-GP Table 1 at K = 100 clients (HH-RLHF): FL, FedVPL, FedVPA-GP, seeds 0-2 | 71-99 min a seed (4,266-5,955 s)
reproduce-fedvpa-table1-k50 reproduce-fedvpa-table1-k100: reproduce-fedvpa-table1-k%: $(STAMP)
	$(MAKE) -j2 reproduce-fedvpa-table1-k$*-s0 reproduce-fedvpa-table1-k$*-s1 reproduce-fedvpa-table1-k$*-s2
	$(BIN)/fedpref summarize $(REPRO)/hh_k$* --pair FedVPA-GP,FedVPL --pair FedVPA-GP,FL --out $(REPRO)/hh_k$*/summary.md

# One seed of one K: the stem is K-sS, so K picks the config and S the seed.
#: reproduce-fedvpa-table1-k50-s* | one seed of reproduce-fedvpa-table1-k50 | about 51 min beside another job
#: reproduce-fedvpa-table1-k100-s* | one seed of reproduce-fedvpa-table1-k100 | 71-99 min
$(HH_K_SEEDS): reproduce-fedvpa-table1-k%: $(STAMP)
	$(REPRO_SWEEP) vpa_hh_k$(firstword $(subst -s, ,$*)) --set "data.path='$(HH_DATA)'" \
		--seeds $(lastword $(subst -s, ,$*)) --out $(REPRO)/hh_k$(subst -s,/s,$*)

# Table 3: FedVPA-GP against FedBiscuit (U = 3 selectors, reassignment every 2 of the 20 rounds: 10 checks and 1.2x
# the others' client updates) at the four population ratios, K = 10, seeds 0-2, into $(REPRO)/hh_ratios/hRR
# (RR = helpful percentage).
HH_RATIOS := reproduce-fedvpa-table3-h70 reproduce-fedvpa-table3-h30 reproduce-fedvpa-table3-h80 reproduce-fedvpa-table3-h20
.PHONY: reproduce-fedvpa-table3 $(HH_RATIOS)
#: reproduce-fedvpa-table3 | FedVPA-GP Table 3: FedVPA-GP against FedBiscuit at four helpful/harmless ratios (HH-RLHF), seeds 0-2 | about 23 min a seed and ratio at one thread
reproduce-fedvpa-table3: $(STAMP)
	$(MAKE) -j2 $(HH_RATIOS)
	$(BIN)/fedpref summarize $(REPRO)/hh_ratios --across data.hh.helpful_fraction --pair FedVPA-GP,FedBiscuit \
		--out $(REPRO)/hh_ratios/summary.md

#: reproduce-fedvpa-table3-h* | one ratio of reproduce-fedvpa-table3 (h70: 70% helpful clients) | about 23 min a seed at one thread
$(HH_RATIOS): reproduce-fedvpa-table3-h%: $(STAMP)
	$(REPRO_SWEEP) vpa_hh_vs_fedbiscuit --set "data.path='$(HH_DATA)'" --seeds 0,1,2 --set data.hh.helpful_fraction=0.$* \
		--out $(REPRO)/hh_ratios/h$*

# Stage 2 on the story task: FedVPA-GP against FedVPL after conditional DPO, with Stage 1 at the paper's budget
# (Table 4: 50 rounds x 30 local steps), seeds 0-2, one process per Stage 1 method, then the win rates over seeds
# and the paired difference (docs/stage2.md). A finished seed is skipped. Other seeds or settings:
# make reproduce-fedvpa-stage2 STAGE2_SEEDS=3,4 STAGE2_SET="--set dpo.steps=600"
STAGE2_SEEDS ?= 0,1,2
STAGE2_SET ?=
STAGE2_METHODS := reproduce-fedvpa-stage2-FedVPA-GP reproduce-fedvpa-stage2-FedVPL
.PHONY: reproduce-fedvpa-stage2 $(STAGE2_METHODS)
#: reproduce-fedvpa-stage2 | FedVPA-GP Table 1's Stage 2 win rates on the story task (stories260K, oracle judge): FedVPA-GP vs FedVPL | about 20 min a seed and method on one core
reproduce-fedvpa-stage2: $(STAMP)
	$(MAKE) -j2 $(STAGE2_METHODS)
	$(BIN)/fedpref summarize $(REPRO)/stage2 --pair FedVPA-GP,FedVPL --out $(REPRO)/stage2/summary.md

#: reproduce-fedvpa-stage2-* | one Stage 1 method of reproduce-fedvpa-stage2 | about 20 min a seed on one core
$(STAGE2_METHODS): reproduce-fedvpa-stage2-%: $(STAMP)
	$(ONE_THREAD) $(BIN)/fedpref stage2 stage2/stories_stage1_paper --set "policy_path='$(STORIES_POLICY)'" \
		--set "stage1.method='$*'" $(STAGE2_SET) --seeds $(STAGE2_SEEDS) --out $(REPRO)/stage2/$*

# The real pretrained LLM: the embedded SmolLM2-135M-Instruct (a 4-bit quantized 135M model, not the papers'
# 0.5B-2B) as the A/B selector of FedVPA-GP's Stage 1 on HH-RLHF, and as the Stage 2 policy with the held-out
# judges. Seeds 0-2, one thread each.
SMOLLM2_HH_METHODS ?= ['FL','FedBiscuit','FedVPL','FedVPA-GP']
.PHONY: reproduce-fedvpa-table1-smollm2 reproduce-fedvpa-stage2-smollm2
#: reproduce-fedvpa-table1-smollm2 | FedVPA-GP Table 1 (HH-RLHF) with the SmolLM2 A/B selector: FL, FedBiscuit, FedVPL, FedVPA-GP | about 95 min a seed at one thread (measured in two parts: FL + FedVPA-GP 2,731-3,487 s, FedBiscuit + FedVPL 4,310-4,337 s, each with 33-35 min of frozen layers, needed once)
reproduce-fedvpa-table1-smollm2: $(STAMP)
	$(REPRO_SWEEP) vpa_hh_smollm2 --seeds $(SMOLLM2_SEEDS) --set "data.path='$(HH_DATA)'" \
		--set "algorithm.methods=$(SMOLLM2_HH_METHODS)" --out $(REPRO)/smollm2_hh
	$(BIN)/fedpref summarize $(REPRO)/smollm2_hh --pair FedVPA-GP,FL --pair FedVPA-GP,FedVPL --pair FedVPA-GP,FedBiscuit

# The same four methods on the skewed population (FedVPA-GP paper, Table 3's ratios): SMOLLM2_SKEW of the clients
# helpful, the rest harmless.
SMOLLM2_SKEW ?= 0.7
.PHONY: reproduce-fedvpa-hh-skewed-smollm2
#: reproduce-fedvpa-hh-skewed-smollm2 | FedVPA-GP Table 1's methods on a skewed HH population (SMOLLM2_SKEW helpful, default 70/30) with the SmolLM2 A/B selector | 55 min a seed at one thread (seed 0: 3,276 s, 20 min of it the frozen layers)
reproduce-fedvpa-hh-skewed-smollm2: $(STAMP)
	$(REPRO_SWEEP) vpa_hh_smollm2 --seeds $(SMOLLM2_SEEDS) --set "data.path='$(HH_DATA)'" \
		--set "algorithm.methods=$(SMOLLM2_HH_METHODS)" --set data.hh.helpful_fraction=$(SMOLLM2_SKEW) \
		--out $(REPRO)/smollm2_hh_skewed
	$(BIN)/fedpref summarize $(REPRO)/smollm2_hh_skewed --pair FedVPA-GP,FL --pair FedVPA-GP,FedVPL \
		--pair FedVPA-GP,FedBiscuit

# SMOLLM2_STAGE1=FedVPL runs the same with FedVPL as Stage 1 (Table 1's FedVPA-GP - FedVPL after Stage 2).
SMOLLM2_STAGE1 ?= FedVPA-GP
#: reproduce-fedvpa-stage2-smollm2 | FedVPA-GP Stage 2 on HH-RLHF with the SmolLM2 policy and held-out judges | about 2.8 h a seed at one thread (10,040 s: Stage 1 640 s, judges 1,474 s, conditional DPO 2,671 s, FedDPO 4,647 s); an interrupted seed continues from its checkpoint
reproduce-fedvpa-stage2-smollm2: $(STAMP)
	$(ONE_THREAD) $(BIN)/fedpref stage2 stage2/hh --set "task.data_path='$(HH_DATA)'" \
		--set "stage1.method='$(SMOLLM2_STAGE1)'" --seeds $(SMOLLM2_SEEDS) --out $(REPRO)/smollm2_stage2/$(SMOLLM2_STAGE1)
	$(BIN)/fedpref summarize $(REPRO)/smollm2_stage2 --judge reward_model
	$(BIN)/fedpref summarize $(REPRO)/smollm2_stage2 --judge lm

# The FedVPA-GP paper's Sec. 5.5 cost claims (F22, F22b, F22c in docs/notes/reproduction.md): the variational
# modules' parameters on each backbone and on a random-weight Qwen2-0.5B, the statistics bytes of one tiny round,
# and FedVPA-GP's round time against FedDPO's (and FL's) on SmolLM2 at matched clients, steps and batch.
.PHONY: reproduce-fedvpa-sec5.5
#: reproduce-fedvpa-sec5.5 | FedVPA-GP Sec. 5.5 (cost): variational parameters, statistics bytes, round time against FedDPO | 7-14 min at one thread
reproduce-fedvpa-sec5.5: $(STAMP)
	$(ONE_THREAD) $(BIN)/python benchmarks/fedvpa_cost.py --json $(REPRO)/fedvpa_cost.json

# ---- Everything else -------------------------------------------------------------------------------------------

#: figures | redraw every figure in docs/img/ from the command the docs name (runs kept in runs/docs_figures) | time not measured (hours)
figures: $(STAMP)
	FEDPREF=$(BIN)/fedpref scripts/docs_figures.sh

#: clean-venv | remove the virtual environment (the next make rebuilds it) | instant (rebuilding it: about 3 min)
clean-venv:
	rm -rf $(VENV)

# The old names, kept so that the research notes' commands still run: OLD=NEW.
ALIASES := reproduce=reproduce-fedgd-table3 \
	reproduce-imbalanced=reproduce-fedgd-table3-imbalanced reproduce-balanced=reproduce-fedgd-table3-balanced \
	reproduce-rung2=reproduce-fedgd-table3-t1 reproduce-rung2-imbalanced=reproduce-fedgd-table3-t1-imbalanced \
	reproduce-rung2-balanced=reproduce-fedgd-table3-t1-balanced \
	reproduce-rung2b=reproduce-fedgd-table3-40r reproduce-rung2b-fedgd=reproduce-fedgd-table3-40r-fedgd \
	reproduce-rung2b-baselines=reproduce-fedgd-table3-40r-baselines \
	reproduce-rung2b-f8=reproduce-fedgd-table3-40r-clustered \
	reproduce-k=reproduce-fedgd-table5-6 reproduce-k-two-three=reproduce-fedgd-table5-6-k23 \
	reproduce-k-four=reproduce-fedgd-table5-6-k4 reproduce-k80=reproduce-fedgd-table5-6-acc80 \
	reproduce-f9d=reproduce-fedgd-sec5.1-acc80 reproduce-diagnostics=reproduce-fedgd-table1-2 \
	reproduce-fig5=reproduce-fedgd-fig5 reproduce-ablation=reproduce-fedvpa-fig4 \
	reproduce-tldr=reproduce-fedgd-table3-tldr reproduce-tldr-core=reproduce-fedgd-table3-tldr-core \
	reproduce-tldr-clustered=reproduce-fedgd-table3-tldr-clustered \
	reproduce-tldr240=reproduce-fedgd-table3-tldr-acc240 reproduce-tldr240-core=reproduce-fedgd-table3-tldr-acc240-core \
	reproduce-tldr240-clustered=reproduce-fedgd-table3-tldr-acc240-clustered \
	reproduce-smollm2-tldr=reproduce-fedgd-table3-tldr-smollm2 \
	reproduce-boundary=reproduce-fedgd-table3-boundary reproduce-boundary80=reproduce-fedgd-table3-boundary-acc80 \
	$(foreach s,0 1 2,reproduce-boundary-s$(s)=reproduce-fedgd-table3-boundary-s$(s) \
		reproduce-boundary80-s$(s)=reproduce-fedgd-table3-boundary-acc80-s$(s)) \
	reproduce-composed15=reproduce-fedgd-table3-composed15 \
	reproduce-composed15-noise2=reproduce-fedgd-table3-composed15-noise2 \
	reproduce-composed15-noise1=reproduce-fedgd-table3-composed15-noise1 \
	reproduce-hh-k50=reproduce-fedvpa-table1-k50 reproduce-hh-k100=reproduce-fedvpa-table1-k100 \
	$(foreach k,50 100,$(foreach s,0 1 2,reproduce-hh-k$(k)-s$(s)=reproduce-fedvpa-table1-k$(k)-s$(s))) \
	reproduce-hh-ratios=reproduce-fedvpa-table3 \
	$(foreach r,70 30 80 20,reproduce-hh-ratio-$(r)=reproduce-fedvpa-table3-h$(r)) \
	reproduce-stage2=reproduce-fedvpa-stage2 \
	$(foreach m,FedVPA-GP FedVPL,reproduce-stage2-$(m)=reproduce-fedvpa-stage2-$(m)) \
	reproduce-smollm2-hh=reproduce-fedvpa-table1-smollm2 reproduce-smollm2-stage2=reproduce-fedvpa-stage2-smollm2
define alias_rule
.PHONY: $(1)
$(1): $(2)
endef
$(foreach a,$(ALIASES),$(eval $(call alias_rule,$(word 1,$(subst =, ,$(a))),$(word 2,$(subst =, ,$(a))))))
