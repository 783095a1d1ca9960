"""Where a training step's time goes: `torch.profiler` over the quick config's client steps, by kind of op.

.venv/bin/python benchmarks/profile_step.py [--clients 3] [--steps 8]
"""

from __future__ import annotations

from collections import defaultdict

import torch
from step_setup import step_parser, trainer_and_clients
from torch.profiler import profile

from fedpref.models.adapters import trainable_state

KINDS = {
    "attention": ("scaled_dot_product",),
    "GELU": ("gelu",),
    "layer norm": ("layer_norm",),
    "copies, concatenation, fills": ("aten::copy_", "aten::cat", "aten::fill_", "aten::zero_"),
    "packing scatter/gather": ("index_copy", "index_select", "index_add"),
}


def kind_of(name: str, shapes: list, rank: int) -> str:
    """A coarse kind of op: GEMMs split by whether an operand has the LoRA rank (r, or 3r for q/k/v) as a dim."""
    if name in ("aten::mm", "aten::addmm", "aten::addmm_"):
        dims = {d for s in shapes if s for d in s}
        return "LoRA low-rank GEMMs" if dims & {rank, 3 * rank} else "dense GEMMs"
    return next((k for k, keys in KINDS.items() if any(key in name for key in keys)), "rest")


def main() -> None:
    parser = step_parser(__doc__)
    args = parser.parse_args()
    cfg, model, trainer, clients = trainer_and_clients(args)
    init, encoded = trainable_state(model), [model.encode(c.train) for c in clients]
    trainer.train(init, encoded[0], 2, torch.Generator().manual_seed(0))  # warm-up
    with profile(record_shapes=True) as prof:
        for data in encoded:
            trainer.train(init, data, args.steps, torch.Generator().manual_seed(1))
    totals: dict[str, float] = defaultdict(float)
    for event in prof.key_averages(group_by_input_shape=True):
        totals[kind_of(event.key, event.input_shapes, cfg.lora.rank)] += event.self_cpu_time_total / 1e3
    whole = sum(totals.values())
    print(f"{len(encoded) * args.steps} steps, {torch.get_num_threads()} threads, self CPU time by kind:")
    for kind, ms in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:30s} {ms:8.0f} ms  {100 * ms / whole:5.1f}%")


if __name__ == "__main__":
    main()
