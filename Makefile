# Two commands for a fresh machine: `make run` (the quick default experiment) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help run test lint docs reference reproduce figures clean-venv

# Create .venv and install the pinned requirements, the embedded models and fedpref (editable).
$(STAMP): requirements.txt requirements-embedded.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -r requirements-embedded.txt
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

# List the targets, each with the first line of the comment above it.
help:
	@awk '/^# / { if (!doc) doc = substr($$0, 3); next } /^$$/ { doc = ""; next } \
		/^[a-zA-Z0-9_.%-]+:/ && $$1 !~ /^\./ { name = $$1; sub(/:.*/, "", name); \
		printf "  %-30s %s\n", name, doc; doc = "" }' $(MAKEFILE_LIST)

# The quick default experiment: configs/quick.toml, every FedGD-paper method, into runs/quick (about 5 minutes).
run: $(STAMP)
	$(BIN)/fedpref run configs/quick.toml --out runs/quick --overwrite

# The tests: the import-layer contract, the docs site (--strict) and pytest (slow checks are behind a marker).
test: $(STAMP)
	PYTHONPATH=src $(BIN)/lint-imports --no-cache
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $(VENV)/site
	$(BIN)/python -m pytest -q

# Regenerate the reference pages (CLI, configs, methods) from the code; a test fails while a committed one is stale.
reference: $(STAMP)
	$(BIN)/python -m fedpref.reference docs/reference

# The documentation site (MkDocs, Material theme) at http://127.0.0.1:8000, rebuilt on every change.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

# ruff and the import-layer contract.
lint: $(STAMP)
	$(BIN)/ruff check src tests
	PYTHONPATH=src $(BIN)/lint-imports --no-cache

# The first rung of docs/notes/reproduction.md's runs (P1, P2, P4): every FedGD-paper method at reduced scale,
# 3 seeds each, imbalanced and balanced, and FedGD with Phase 2 continuing from its Phase-1 model (the
# fresh start is in the first two sweeps). Two streams of one thread each; about 3.5 hours on 2 CPU cores.
# Resumable: run it again after an interruption (finished cells are skipped, an interrupted one continues).
REPRO := runs/reproduce
REPRO_SWEEP := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/fedpref sweep
CONTINUE := --set "algorithm.methods=['FedGD']" --set "algorithm.phase2_start='continue'"
PAIRS := --pair FedGD,FL --pair FL_target,FL --pair FedGD,FedBiscuit --pair FedGD,Soft-FL --pair FL,CL
.PHONY: reproduce-imbalanced reproduce-balanced
reproduce: $(STAMP)
	$(MAKE) -j2 reproduce-imbalanced reproduce-balanced
	$(BIN)/fedpref summarize $(REPRO)/imbalanced $(REPRO)/balanced $(REPRO)/continue $(PAIRS) \
		--out $(REPRO)/summary.md --csv $(REPRO)/summary.csv --plot $(REPRO)/curves.png

reproduce-imbalanced reproduce-balanced: reproduce-%: $(STAMP)
	$(REPRO_SWEEP) configs/reduced_$*.toml --seeds 0,1,2 --out $(REPRO)/$*
	$(REPRO_SWEEP) configs/reduced_$*.toml --seeds 0,1,2 $(CONTINUE) --out $(REPRO)/continue/$*

# The second rung: Phase 1 with the paper's ten reassignment checks (T = 1 over the first 10 of 20 rounds) for
# FedGD and the two methods it is compared with at the same budget; about 1.5 hours on 2 CPU cores. Resumable.
RUNG2 := --set federation.rounds=20 --set algorithm.reassign_every=1 --set "algorithm.methods=['FL','FL_target','FedGD']"
.PHONY: reproduce-rung2 reproduce-rung2-imbalanced reproduce-rung2-balanced
reproduce-rung2: $(STAMP)
	$(MAKE) -j2 reproduce-rung2-imbalanced reproduce-rung2-balanced
	$(BIN)/fedpref summarize $(REPRO)/rung2 --pair FedGD,FL --pair FL_target,FL --pair FedGD,FL_target \
		--out $(REPRO)/rung2/summary.md --csv $(REPRO)/rung2/summary.csv --plot $(REPRO)/rung2/curves.png

reproduce-rung2-imbalanced reproduce-rung2-balanced: reproduce-rung2-%: $(STAMP)
	$(REPRO_SWEEP) configs/reduced_$*.toml --seeds 0,1,2 $(RUNG2) --out $(REPRO)/rung2/$*

# Rung 2b: the same ten checks two rounds apart (T = 2 over the first 20 of 40 rounds), imbalanced, seeds 0-2:
# FedGD with both Phase 2 starts, and FL and FL_target at the same 40 rounds; about 2 hours on 2 CPU cores.
RUNG2B_SETTINGS := configs/reduced_imbalanced.toml --set federation.rounds=40 --set algorithm.reassign_every=2
RUNG2B := $(RUNG2B_SETTINGS) --seeds 0,1,2
.PHONY: reproduce-rung2b reproduce-rung2b-fedgd reproduce-rung2b-baselines
reproduce-rung2b: $(STAMP)
	$(MAKE) -j2 reproduce-rung2b-fedgd reproduce-rung2b-baselines
	$(BIN)/fedpref summarize $(REPRO)/rung2b $(REPRO)/rung2b_fl $(REPRO)/rung2b_fl_target --pair FedGD,FL --pair FedGD,FL_target \
		--out $(REPRO)/rung2b/summary.md

reproduce-rung2b-fedgd: $(STAMP)
	$(REPRO_SWEEP) $(RUNG2B) --set "algorithm.methods=['FedGD']" --grid algorithm.phase2_start=fresh,continue \
		--out $(REPRO)/rung2b/imbalanced

reproduce-rung2b-baselines: $(STAMP)
	$(REPRO_SWEEP) $(RUNG2B) --set "algorithm.methods=['FL']" --out $(REPRO)/rung2b_fl/imbalanced
	$(REPRO_SWEEP) $(RUNG2B) --set "algorithm.methods=['FL_target']" --out $(REPRO)/rung2b_fl_target/imbalanced

# F8 at rung 2b: FedBiscuit and Soft-FL at the same 40 rounds (imbalanced, rung 2b's seeds), summarized with rung 2b's
# FedGD (the methods pair up by seed); about 35 minutes per seed at one thread. Resumable.
.PHONY: reproduce-rung2b-f8
reproduce-rung2b-f8: $(STAMP)
	$(REPRO_SWEEP) $(RUNG2B) --set "algorithm.methods=['FedBiscuit','Soft-FL']" --out $(REPRO)/rung2b_f8/imbalanced
	$(BIN)/fedpref summarize $(REPRO)/rung2b $(REPRO)/rung2b_fl $(REPRO)/rung2b_fl_target $(REPRO)/rung2b_f8 \
		--pair FedGD,FL --pair FedGD,FL_target --pair FedGD,FedBiscuit --pair FedGD,Soft-FL --out $(REPRO)/rung2b/summary.md

# FedGD paper Tables 5-6 (K in {2, 3, 4}) at rung 2b (imbalanced, 40 rounds, T = 2): FedGD at each K on seeds 0-2,
# each run diagnosed (Table 5: margins, GQ, correction), and FedBiscuit and Soft-FL at K = 2 and 3 on seed 0
# (Table 6); two streams of about 2 and 1.5 hours at one thread. The sweeps resume; the diagnoses are recomputed.
KSWEEP := $(REPRO_SWEEP) $(RUNG2B_SETTINGS)
.PHONY: reproduce-k reproduce-k-two-three reproduce-k-four
reproduce-k: $(STAMP)
	$(MAKE) -j2 reproduce-k-two-three reproduce-k-four
	$(BIN)/fedpref summarize $(REPRO)/rung2b_k $(REPRO)/rung2b_k4 $(REPRO)/rung2b_k_softfl $(REPRO)/rung2b_k_fedbiscuit \
		--across algorithm.num_models=4 --pair FedGD,FedBiscuit --pair FedGD,Soft-FL --out $(REPRO)/rung2b_k/summary.md

reproduce-k-two-three: $(STAMP)
	$(KSWEEP) --seeds 0,1,2 --set "algorithm.methods=['FedGD']" --grid algorithm.num_models=2,3 --out $(REPRO)/rung2b_k/imbalanced
	for k in 2 3; do for s in 0 1 2; do OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
		$(BIN)/fedpref diagnose $(REPRO)/rung2b_k/imbalanced/algorithm.num_models=$$k/seed=$$s; done; done
	$(KSWEEP) --seeds 0 --set "algorithm.methods=['Soft-FL']" --grid algorithm.num_models=2,3 --out $(REPRO)/rung2b_k_softfl/imbalanced

reproduce-k-four: $(STAMP)
	$(KSWEEP) --seeds 0,1,2 --set "algorithm.methods=['FedGD']" --grid algorithm.num_models=4 --out $(REPRO)/rung2b_k4/imbalanced
	for s in 0 1 2; do OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
		$(BIN)/fedpref diagnose $(REPRO)/rung2b_k4/imbalanced/algorithm.num_models=4/seed=$$s; done
	$(KSWEEP) --seeds 0 --set "algorithm.methods=['FedBiscuit']" --grid algorithm.num_models=2,3 --out $(REPRO)/rung2b_k_fedbiscuit/imbalanced

# The FedGD paper's diagnostics (Tables 1-2: Gradient Quotient, margins, Headroom) on 3 seeds: FL, CL and Multi-CL on
# the balanced config (first-rung budget, diagnostics computed in the run) and `fedpref diagnose` on the second rung's
# imbalanced runs (FL, FL_target, FedGD) and balanced FL (the same budget, for F5c); about 1 hour per stream at one
# thread. The sweep resumes; the diagnoses are recomputed each time (about 10 minutes per imbalanced run).
.PHONY: reproduce-diagnostics
reproduce-diagnostics: reproduce-rung2-imbalanced reproduce-rung2-balanced
	$(REPRO_SWEEP) configs/reduced_balanced.toml --seeds 0,1,2 --set "algorithm.methods=['FL','CL','Multi-CL']" \
		--set diagnostics.enabled=true --out $(REPRO)/diagnostics/balanced
	for s in 0 1 2; do OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/fedpref diagnose $(REPRO)/rung2/imbalanced/seed=$$s; done
	for s in 0 1 2; do OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/fedpref diagnose $(REPRO)/rung2/balanced/seed=$$s --method FL; done
	$(BIN)/fedpref summarize $(REPRO)/diagnostics $(REPRO)/rung2 --out $(REPRO)/diagnostics/summary.md

# FedVPA-GP paper Fig. 4 (ablation): FedVPL, +Ortho, +GB prior and the full method on the synthetic conflict at the
# shipped schedule, 3 seeds; about 55 minutes at one thread. Resumable.
.PHONY: reproduce-ablation
reproduce-ablation: $(STAMP)
	$(REPRO_SWEEP) configs/vpa_synthetic.toml --seeds 0,1,2 \
		--set 'algorithm.methods=["FedVPA-GP","FedVPL","FedVPL+Ortho","FedVPL+GB"]' --out $(REPRO)/ablation/synthetic
	$(BIN)/fedpref summarize $(REPRO)/ablation --pair FedVPA-GP,FedVPL --pair FedVPL+Ortho,FedVPL --pair FedVPL+GB,FedVPL \
		--out $(REPRO)/ablation/summary.md

# FedGD paper Fig. 5: FL and CL on the balanced config at tau in {1, 5, 15, 30} local steps and two learning rates
# (the default and 10x smaller); seed 0, about 1.5 hours at one thread. Resumable.
.PHONY: reproduce-fig5
reproduce-fig5: $(STAMP)
	$(REPRO_SWEEP) configs/reduced_balanced.toml --seeds 0 --set "algorithm.methods=['FL','CL']" \
		--grid train.lr=1e-3,1e-4 --grid train.local_steps=1,5,15,30 --out $(REPRO)/fig5/balanced
	$(BIN)/fedpref summarize $(REPRO)/fig5 --pair FL,CL --out $(REPRO)/fig5/summary.md --csv $(REPRO)/fig5/summary.csv

# $(call personalize_again,RUNS,FROM,TO,STEPS): `fedpref personalize` each finished run of RUNS again at STEPS into
# TO/<the run's path below FROM>; a run whose output has a table.md is skipped, so an interrupted loop resumes.
personalize_again = for run in $(1); do out=$(3)/$${run\#$(2)/}; test -f $$out/table.md || OMP_NUM_THREADS=1 \
	MKL_NUM_THREADS=1 $(BIN)/fedpref personalize $$run --steps $(4) --out $$out --overwrite || exit 1; done

# FedGD paper Tables 5-6 at the paper's acc^80: reproduce-k's runs (and rung 2b's seed-2 FedBiscuit and Soft-FL)
# personalized again for 80 steps from their saved initializations (`fedpref personalize`; steps 0, 5 and 10 give
# the runs' own numbers again), into $(REPRO)/rung2b_k80/<the run's path>. 8-10 minutes per method and run at
# one thread beside other jobs (466-736 s measured); a finished run is skipped, so it resumes.
K80_STEPS := 0,5,10,40,80
K80_RUNS = $(wildcard $(REPRO)/rung2b_k/imbalanced/*/seed=* $(REPRO)/rung2b_k4/imbalanced/*/seed=* \
	$(REPRO)/rung2b_k_fedbiscuit/imbalanced/*/seed=* $(REPRO)/rung2b_k_softfl/imbalanced/*/seed=* $(REPRO)/rung2b_f8/imbalanced/seed=2)
.PHONY: reproduce-k80
reproduce-k80: $(STAMP)
	$(call personalize_again,$(K80_RUNS),$(REPRO),$(REPRO)/rung2b_k80,$(K80_STEPS))
	$(BIN)/fedpref summarize $(REPRO)/rung2b_k80 --across algorithm.num_models=4 --pair FedGD,FedBiscuit --pair FedGD,Soft-FL \
		--out $(REPRO)/rung2b_k80/summary.md

# FedGD paper Sec. 5.1's second half (F9d): imbalanced FL at rung 2b's budget personalized for 80 steps, paired
# with FedGD's acc^80 from reproduce-k80 (its K = 4 runs). 13-15 minutes per seed at one thread. Resumable.
.PHONY: reproduce-f9d
reproduce-f9d: $(STAMP)
	$(REPRO_SWEEP) $(RUNG2B) --set "algorithm.methods=['FL']" --set "personalization.steps=[0,5,10,40,80]" \
		--out $(REPRO)/rung2b_fl80/imbalanced
	$(BIN)/fedpref summarize $(REPRO)/rung2b_fl80 $(REPRO)/rung2b_k80/rung2b_k4 --pair FedGD,FL \
		--out $(REPRO)/rung2b_fl80/summary.md

# FedGD paper Table 3's real-world column (F8c, F9a, F9b, F9i) on the local TL;DR subset: six annotators, every
# method, 3 seeds, in two streams (the four single-model methods; FedBiscuit and Soft-FL) that pair up by seed;
# about 45 minutes per stream at one thread. Resumable.
TLDR_DATA ?= ../shared/data/tldr-comparisons
TLDR_SWEEP := $(REPRO_SWEEP) configs/tldr_local.toml --seeds 0,1,2 --set "data.path='$(TLDR_DATA)'"
TLDR_PAIRS := --pair FedGD,FL --pair FL,CL --pair FedGD,FedBiscuit --pair FedGD,Soft-FL
.PHONY: reproduce-tldr reproduce-tldr-core reproduce-tldr-clustered
reproduce-tldr: $(STAMP)
	$(MAKE) -j2 reproduce-tldr-core reproduce-tldr-clustered
	$(BIN)/fedpref summarize $(REPRO)/tldr $(TLDR_PAIRS) --out $(REPRO)/tldr/summary.md

reproduce-tldr-core: $(STAMP)
	$(TLDR_SWEEP) --set "algorithm.methods=['Local','CL','FL','FedGD']" --out $(REPRO)/tldr/core

reproduce-tldr-clustered: $(STAMP)
	$(TLDR_SWEEP) --set "algorithm.methods=['FedBiscuit','Soft-FL']" --out $(REPRO)/tldr/clustered

# The paper's real-world acc^240 (F8c, F9a, F9b, F9i): reproduce-tldr's runs personalized again for 240 steps from
# their saved initializations, in two streams (the four single-model methods; FedBiscuit and Soft-FL) into
# $(REPRO)/tldr240/<stream>/seed=S; about 12 minutes per method and seed at one thread. A finished run is skipped.
TLDR240 = $(call personalize_again,$(wildcard $(REPRO)/tldr/$(1)/seed=*),$(REPRO)/tldr,$(REPRO)/tldr240,$(TLDR240_STEPS))
TLDR240_STEPS := 0,10,30,80,240
.PHONY: reproduce-tldr240 reproduce-tldr240-core reproduce-tldr240-clustered
reproduce-tldr240: $(STAMP)
	$(MAKE) -j2 reproduce-tldr240-core reproduce-tldr240-clustered
	$(BIN)/fedpref summarize $(REPRO)/tldr240 $(TLDR_PAIRS) --pair FedGD,Local --pair CL,FedBiscuit --pair CL,Soft-FL \
		--out $(REPRO)/tldr240/summary.md

reproduce-tldr240-core: $(STAMP)
	$(call TLDR240,core)

reproduce-tldr240-clustered: $(STAMP)
	$(call TLDR240,clustered)

# FedVPA-GP paper Table 1 at K = 50 and K = 100 clients (F15) on the local HH-RLHF test splits: the most pairs a
# client they allow at 50/50 (90 at K = 50, 45 at K = 100), 10 clients a round, the shipped 20 x 10 schedule; FL,
# FedVPL and FedVPA-GP, one stream per seed into $(REPRO)/hh_kK/sS. K = 50: about 51 minutes per seed at one
# thread beside another job (3,073 s, 3,026 s and 2,969 s for seeds 0-2); K = 100: 71-99 minutes per seed
# (5,955 s, 5,653 s and 4,266 s for seeds 0-2; `fedpref estimate` predicts 72 alone). Resumable.
HH_K50 := --set data.hh.num_clients=50 --set data.hh.pairs_per_client=90 --set federation.clients_per_round=10
HH_K100 := --set data.hh.num_clients=100 --set data.hh.pairs_per_client=45 --set federation.clients_per_round=10
HH_K_SEEDS := $(foreach k,50 100,$(foreach s,0 1 2,reproduce-hh-k$(k)-s$(s)))
.PHONY: reproduce-hh-k50 reproduce-hh-k100 $(HH_K_SEEDS)
reproduce-hh-k50 reproduce-hh-k100: reproduce-hh-k%: $(STAMP)
	$(MAKE) -j2 reproduce-hh-k$*-s0 reproduce-hh-k$*-s1 reproduce-hh-k$*-s2
	$(BIN)/fedpref summarize $(REPRO)/hh_k$* --pair FedVPA-GP,FedVPL --pair FedVPA-GP,FL --out $(REPRO)/hh_k$*/summary.md

# One seed of one K: the stem is K-sS, so K picks the settings and S the seed.
$(HH_K_SEEDS): reproduce-hh-k%: $(STAMP)
	$(REPRO_SWEEP) configs/vpa_hh.toml --set "data.path='$(HH_DATA)'" --seeds $(lastword $(subst -s, ,$*)) $(HH_K$(firstword $(subst -s, ,$*))) \
	  --out $(REPRO)/hh_k$(subst -s,/s,$*)

# F21 (FedVPA-GP paper Table 3): FedVPA-GP against FedBiscuit (U = 3 selectors, reassignment every 2 of the 20
# rounds: 10 checks and 1.2x the others' client updates, near the FedGD paper's 1.15x) at the four population
# ratios, K = 10, seeds 0-2, into $(REPRO)/hh_ratios/hRR (RR = helpful percentage). About 23 minutes per seed and
# ratio at one thread beside the other stream (FedVPA-GP 10, FedBiscuit 13). Resumable.
HH_RATIOS := --set 'algorithm.methods=["FedVPA-GP","FedBiscuit"]' --set algorithm.num_models=3 --set algorithm.reassign_every=2
.PHONY: reproduce-hh-ratios reproduce-hh-ratio-70 reproduce-hh-ratio-30 reproduce-hh-ratio-80 reproduce-hh-ratio-20
reproduce-hh-ratios: $(STAMP)
	$(MAKE) -j2 reproduce-hh-ratio-70 reproduce-hh-ratio-30 reproduce-hh-ratio-80 reproduce-hh-ratio-20
	$(BIN)/fedpref summarize $(REPRO)/hh_ratios --across data.hh.helpful_fraction --pair FedVPA-GP,FedBiscuit \
	  --out $(REPRO)/hh_ratios/summary.md

reproduce-hh-ratio-70 reproduce-hh-ratio-30 reproduce-hh-ratio-80 reproduce-hh-ratio-20: reproduce-hh-ratio-%: $(STAMP)
	$(REPRO_SWEEP) configs/vpa_hh.toml --set "data.path='$(HH_DATA)'" --seeds 0,1,2 --set data.hh.helpful_fraction=0.$* $(HH_RATIOS) \
	  --out $(REPRO)/hh_ratios/h$*

# The FedGD paper's Table 3 (balanced) shape on configs/boundary_balanced.toml (docs/calibration.md, lever 8):
# Local, CL, Multi-CL and FL, seeds 0-2, one stream per seed into $(REPRO)/boundary/sS, then FL - CL paired per
# client. 70 minutes for all three at once on 2 cores, one thread each (4,199-4,212 s a seed).
BOUNDARY_SEEDS := reproduce-boundary-s0 reproduce-boundary-s1 reproduce-boundary-s2
.PHONY: reproduce-boundary $(BOUNDARY_SEEDS)
reproduce-boundary: $(STAMP)
	$(MAKE) -j3 $(BOUNDARY_SEEDS)
	$(BIN)/fedpref summarize $(REPRO)/boundary --pair FL,CL --pair FL,Local --out $(REPRO)/boundary/summary.md \
		--csv $(REPRO)/boundary/summary.csv --plot $(REPRO)/boundary/curves.png

$(BOUNDARY_SEEDS): reproduce-boundary-s%: $(STAMP)
	$(REPRO_SWEEP) configs/boundary_balanced.toml --seeds $* --out $(REPRO)/boundary/s$*

# The same runs' Local and FL personalized again to 80 steps (the paper's acc^80: Local <= 62), all three seeds at
# once (about 30 minutes on 2 cores; a finished seed is skipped, an unfinished one started again), then FL - Local paired.
BOUNDARY80_SEEDS := reproduce-boundary80-s0 reproduce-boundary80-s1 reproduce-boundary80-s2
.PHONY: reproduce-boundary80 $(BOUNDARY80_SEEDS)
reproduce-boundary80: $(STAMP)
	$(MAKE) -j3 $(BOUNDARY80_SEEDS)
	$(BIN)/fedpref summarize $(REPRO)/boundary80 --pair FL,Local --out $(REPRO)/boundary80/summary.md

$(BOUNDARY80_SEEDS): reproduce-boundary80-s%: $(STAMP)
	test -f $(REPRO)/boundary80/s$*/results.json || OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/fedpref personalize \
		$(REPRO)/boundary/s$*/seed=$* --steps 0,10,80 --method Local --method FL --out $(REPRO)/boundary80/s$* --overwrite

# The FedGD paper's Table 3 (balanced) shape with composed cues and 15 local steps a round
# (configs/composed_tau15_balanced.toml, docs/calibration.md, lever 10): Local, CL, Multi-CL and FL, seeds 0-2, one
# stream per seed into $(REPRO)/$(COMPOSED15_DIR)/sS, then FL - CL and FL - Local paired per client.
# reproduce-composed15-noise2 (-noise1) is the same with 2% (1%) label noise, into $(REPRO)/composed15_noise2 (_noise1).
# More seeds or fewer methods: make reproduce-composed15-noise1 COMPOSED15_SEED_LIST="3 4 5 6" \
#   COMPOSED15_METHODS="['FL','CL']" COMPOSED15_PAIRS="--pair FL,CL"
COMPOSED15_DIR ?= composed15
COMPOSED15_SET ?=
COMPOSED15_SEED_LIST ?= 0 1 2
COMPOSED15_METHODS ?=
COMPOSED15_PAIRS ?= --pair FL,CL --pair FL,Local
COMPOSED15_SEEDS := $(foreach s,$(COMPOSED15_SEED_LIST),reproduce-composed15-s$(s))
.PHONY: reproduce-composed15 reproduce-composed15-noise2 reproduce-composed15-noise1 $(COMPOSED15_SEEDS)
reproduce-composed15: $(STAMP)
	$(MAKE) -j3 $(COMPOSED15_SEEDS)
	$(BIN)/fedpref summarize $(REPRO)/$(COMPOSED15_DIR) $(COMPOSED15_PAIRS) \
		--out $(REPRO)/$(COMPOSED15_DIR)/summary.md --csv $(REPRO)/$(COMPOSED15_DIR)/summary.csv \
		--plot $(REPRO)/$(COMPOSED15_DIR)/curves.png

$(COMPOSED15_SEEDS): reproduce-composed15-s%: $(STAMP)
	$(REPRO_SWEEP) configs/composed_tau15_balanced.toml --seeds $* $(COMPOSED15_SET) \
		$(if $(COMPOSED15_METHODS),--set "algorithm.methods=$(COMPOSED15_METHODS)") --out $(REPRO)/$(COMPOSED15_DIR)/s$*

reproduce-composed15-noise2: $(STAMP)
	$(MAKE) reproduce-composed15 COMPOSED15_DIR=composed15_noise2 COMPOSED15_SET="--set data.label_noise=0.02"

reproduce-composed15-noise1: $(STAMP)
	$(MAKE) reproduce-composed15 COMPOSED15_DIR=composed15_noise1 COMPOSED15_SET="--set data.label_noise=0.01"

# FedVPA-GP against FedVPL after Stage 2 on the story task, with Stage 1 at the paper's budget (Table 4: 50 rounds x
# 30 local steps; configs/stage2/stories.toml has 20 x 10), seeds 0-2, one process per Stage 1 method, then the win
# rates over seeds and the paired difference (docs/stage2.md, C44; about 20 minutes a seed and method on one core).
# A finished seed is skipped. Other seeds or settings: make reproduce-stage2 STAGE2_SEEDS=3,4 STAGE2_SET="..."
STAGE2_SEEDS ?= 0,1,2
STAGE2_SET ?= --set stage1.rounds=50 --set stage1.local_steps=30
STAGE2_METHODS := reproduce-stage2-FedVPA-GP reproduce-stage2-FedVPL
.PHONY: reproduce-stage2 $(STAGE2_METHODS)
reproduce-stage2: $(STAMP)
	$(MAKE) -j2 $(STAGE2_METHODS)
	$(BIN)/fedpref stage2-summary $(REPRO)/stage2 --pair FedVPA-GP,FedVPL --out $(REPRO)/stage2/summary.md

$(STAGE2_METHODS): reproduce-stage2-%: $(STAMP)
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/fedpref stage2 configs/stage2/stories.toml --set "stage1.method='$*'" \
		$(STAGE2_SET) --seeds $(STAGE2_SEEDS) --out $(REPRO)/stage2/$*

# The real pretrained LLM: the embedded SmolLM2-135M-Instruct (a 4-bit quantized 135M model, not the papers'
# 0.5B-2B) as the A/B selector of FedVPA-GP's Stage 1 on HH-RLHF, and as the Stage 2 policy with the held-out
# judges. Seeds 0-2, one thread each; about an hour a seed on 2 cores (fedpref estimate). HH_DATA (every HH target):
# a local folder of {subset}.{split}.jsonl.gz, default the shared test splits, or the hub id Anthropic/hh-rlhf.
HH_DATA ?= ../shared/data/hh-rlhf
SMOLLM2_SEEDS ?= 0,1,2
SMOLLM2_HH_METHODS ?= ['FL','FedVPA-GP']
.PHONY: reproduce-smollm2-hh reproduce-smollm2-stage2 reproduce-smollm2-tldr
# The FedGD paper's real-annotator table (Table 3, TL;DR) with its A/B-selector formulation on SmolLM2: every
# method, seeds 0-2 in one stream of one thread, 77-88 minutes a seed on 2 cores (docs/tldr.md).
reproduce-smollm2-tldr: $(STAMP)
	$(REPRO_SWEEP) configs/tldr_smollm2.toml --seeds $(SMOLLM2_SEEDS) --set "data.path='$(TLDR_DATA)'" \
		--out $(REPRO)/smollm2_tldr
	$(BIN)/fedpref summarize $(REPRO)/smollm2_tldr --pair FedGD,FL --pair FL,CL --pair FedGD,FedBiscuit \
		--pair FedGD,Soft-FL --pair FL,Local

reproduce-smollm2-hh: $(STAMP)
	$(REPRO_SWEEP) configs/vpa_hh_smollm2.toml --seeds $(SMOLLM2_SEEDS) --set "data.path='$(HH_DATA)'" \
		--set "algorithm.methods=$(SMOLLM2_HH_METHODS)" --out $(REPRO)/smollm2_hh
	$(BIN)/fedpref summarize $(REPRO)/smollm2_hh --pair FedVPA-GP,FL

reproduce-smollm2-stage2: $(STAMP)
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/fedpref stage2 configs/stage2/hh.toml \
		--set "task.data_path='$(HH_DATA)'" --seeds $(SMOLLM2_SEEDS) --out $(REPRO)/smollm2_stage2

# Redraw every figure in docs/img/ from the command the docs name (hours on 2 CPU cores; the runs are kept in
# runs/docs_figures, so an interrupted redraw skips what is done). One figure: scripts/docs_figures.sh NAME.
figures: $(STAMP)
	FEDPREF=$(BIN)/fedpref scripts/docs_figures.sh

# Remove the virtual environment (the next make rebuilds it).
clean-venv:
	rm -rf $(VENV)
