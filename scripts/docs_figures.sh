#!/usr/bin/env bash
# Redraw the figures in docs/img/ from the commands the docs name: ./scripts/docs_figures.sh [NAME ...]
#
# Each NAME is a figure's file name without `.png` (no NAME: every figure, many hours on 2 cores).
# Runs go to runs/docs_figures/NAME (kept, so a figure can be redrawn from its results.json) and
# the run's figure is copied to docs/img/NAME.png. The FedVPA figures named `fedvpa_*`/`fedvpl_*`
# without `fix` record the runs before the fix of docs/fedvpa.md, so they set the literal steps back.
set -euo pipefail
cd "$(dirname "$0")/.."
FEDPREF=${FEDPREF:-.venv/bin/fedpref}
OUT=${OUT:-runs/docs_figures}

BEFORE_FIX=(--set variational.base_lr_scale=1.0 --set variational.center_latents=false
  --set variational.scale_latents=false --set "variational.selector_reads='sample'")
LONG=(--set federation.rounds=50 --set train.local_steps=30)
CAUSAL=(--set "model.backbone='../shared/models/stories260K/hf'" --set "model.head='selector'"
  --set data.max_length=512)
VPA_GP=(--set 'algorithm.methods=["FedVPA-GP"]')
VPL=(--set 'algorithm.methods=["FedVPL"]')
BOTH=(--set 'algorithm.methods=["FedVPL","FedVPA-GP"]')

# name -> its config, the figure in the run folder and the overrides (set as the globals CONFIG, FIGURE,
# ARGS; RUN names a run folder that several figures share)
figure_args() {
  RUN=$1
  case "$1" in
    fedgd_imb_s0_personalization) RUN=fedgd_imb_s0 CONFIG=reduced_imbalanced FIGURE=personalization.png; ARGS=() ;;
    fedgd_imb_s0_assignments) RUN=fedgd_imb_s0 CONFIG=reduced_imbalanced FIGURE=assignments.png; ARGS=() ;;
    fedvpa_fix_syn_s0_latents) CONFIG=vpa_synthetic FIGURE=latents.png; ARGS=() ;;
    fedvpa_fix_hh_s0_latents) CONFIG=vpa_hh FIGURE=latents.png; ARGS=() ;;
    fedvpa_syn_s0_latents) CONFIG=vpa_synthetic FIGURE=latents.png; ARGS=("${BEFORE_FIX[@]}" "${BOTH[@]}") ;;
    fedvpa_syn_causal_s0_latents)
      CONFIG=vpa_synthetic FIGURE=latents.png; ARGS=("${BEFORE_FIX[@]}" "${BOTH[@]}" "${CAUSAL[@]}") ;;
    fedvpa_hh_s0_latents) CONFIG=vpa_hh FIGURE=latents.png; ARGS=("${BEFORE_FIX[@]}" "${BOTH[@]}") ;;
    fedvpa_hh_r80_latents)
      CONFIG=vpa_hh FIGURE=latents.png; ARGS=("${BEFORE_FIX[@]}" "${BOTH[@]}" --set data.hh.helpful_fraction=0.8) ;;
    fedvpa_hh_long_s0_latents) CONFIG=vpa_hh FIGURE=latents.png; ARGS=("${BEFORE_FIX[@]}" "${VPA_GP[@]}" "${LONG[@]}") ;;
    fedvpa_syn_long_s0_latents)
      CONFIG=vpa_synthetic FIGURE=latents.png; ARGS=("${BEFORE_FIX[@]}" "${VPA_GP[@]}" "${LONG[@]}") ;;
    fedvpa_syn_long_s2_latents)
      CONFIG=vpa_synthetic FIGURE=latents.png; ARGS=("${BEFORE_FIX[@]}" "${VPA_GP[@]}" "${LONG[@]}" --set seed=2) ;;
    fedvpl_syn_long_s0_latents)
      CONFIG=vpa_synthetic FIGURE=latents.png; ARGS=("${BEFORE_FIX[@]}" "${VPL[@]}" "${LONG[@]}") ;;
    fedvpl_syn_long_s1_latents)
      CONFIG=vpa_synthetic FIGURE=latents.png; ARGS=("${BEFORE_FIX[@]}" "${VPL[@]}" "${LONG[@]}" --set seed=1) ;;
    *) echo "unknown figure: $1 (see docs/img/)" >&2; return 1 ;;
  esac
  # the HH config reads the hub id; these figures were drawn from the local test splits (HH_DATA to change it)
  [[ $CONFIG == vpa_hh ]] && ARGS+=(--set "data.path='${HH_DATA:-../shared/data/hh-rlhf}'")
  return 0
}

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  names=()
  for f in docs/img/*.png; do
    n=$(basename "$f" .png)
    [ "$n" = fedgd_true_partition_vs_fl_target ] || names+=("$n")
  done
  echo "fedgd_true_partition_vs_fl_target: see its commands in docs/fedgd.md (three seeds, then summarize --plot)"
fi

for name in "${names[@]}"; do
  figure_args "$name"
  run_dir="$OUT/$RUN"
  if [ ! -f "$run_dir/results.json" ]; then
    echo "$(date +%T) $name: $FEDPREF run $CONFIG ${ARGS[*]}"
    "$FEDPREF" run "$CONFIG" "${ARGS[@]}" --out "$run_dir" --overwrite
  fi
  cp "$run_dir/$FIGURE" "docs/img/$name.png"
  echo "$(date +%T) $name: docs/img/$name.png"
done
