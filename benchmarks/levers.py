"""Each encoder speed lever against the path without it, in one run: training step time and evaluation rate.

Variants, timed in alternating repeats (best and median reported): padded (`lora.pack_sequences = false`),
packed with peft's own LoRA forward, packed with the fused LoRA linears (the default), and the latter with
the frozen base products in bf16 (`train.precision = "bf16-frozen"`), with and without its bucketed row
counts. `--compile` adds the default with each packed layer under `torch.compile(dynamic=True)`, and prints
its compilation time. Every repeat replays the same batches unless `--fresh-batches` draws new ones for
each repeat and variant, as a real run does (new token counts T, which a bf16 product on a CPU pays for).

    .venv/bin/python benchmarks/levers.py [--clients 3] [--steps 8] [--repeats 6] [--compile] [--fresh-batches]
"""

from __future__ import annotations

import statistics
import time

import torch
from step_setup import step_parser, trainer_and_clients

import fedpref.models.frozen_bf16 as frozen_bf16
import fedpref.models.packed as packed
import fedpref.models.scalar_reward as scalar_reward
from fedpref.models.adapters import trainable_state

FUSED = packed.fused_linear
LAYER = packed.packed_bert_layer
BUCKET = frozen_bf16.bucket_rows
BASES = frozen_bf16.Bf16Bases()


def peft_forward(modules, x: torch.Tensor, bf16_bases=None) -> torch.Tensor:
    return torch.cat([m(x) for m in modules], dim=-1)


def exact_rows(rows: int) -> int:
    return rows


VARIANTS = {  # (packed, LoRA linears, layer function, bf16 frozen products: row bucketing or None)
    "padded": (False, FUSED, LAYER, None),
    "packed, peft LoRA": (True, peft_forward, LAYER, None),
    "packed, fused LoRA": (True, FUSED, LAYER, None),
    "fused, bf16 frozen": (True, FUSED, LAYER, BUCKET),
    "... T not bucketed": (True, FUSED, LAYER, exact_rows),
}


def use(model, variant: tuple) -> None:
    """Switch the model's code paths to one variant (module attributes the reward model looks up per call)."""
    model.pack_sequences, packed.fused_linear, scalar_reward.packed_bert_layer, rows = variant
    model.bf16_bases = BASES if rows else None
    frozen_bf16.bucket_rows = rows or BUCKET


def main() -> None:
    parser = step_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--compile", action="store_true", help="add the default with torch.compile'd packed layers")
    parser.add_argument("--fresh-batches", action="store_true", help="new batches for every repeat and variant")
    args = parser.parse_args()
    if args.compile:
        VARIANTS["packed, fused, compiled"] = (True, FUSED, torch.compile(LAYER, dynamic=True), None)
    _, model, trainer, clients = trainer_and_clients(args)
    init = trainable_state(model)
    data = [(model.encode(c.train), model.encode(c.test)) for c in clients]
    for name, variant in VARIANTS.items():  # warm-up; compiles the compiled variant's graphs
        use(model, variant)
        start = time.perf_counter()
        trainer.train(init, data[0][0], 3, torch.Generator().manual_seed(0))
        trainer.evaluate(init, data[0][1])
        print(f"  warm-up {name}: {time.perf_counter() - start:.1f} s")
    step_s = {name: [] for name in VARIANTS}
    eval_rate = {name: [] for name in VARIANTS}
    for repeat in range(args.repeats):
        for index, (name, variant) in enumerate(VARIANTS.items()):
            use(model, variant)
            seed = 100 + repeat * len(VARIANTS) + index if args.fresh_batches else 1
            start = time.perf_counter()
            for train, _ in data:
                trainer.train(init, train, args.steps, torch.Generator().manual_seed(seed))
            step_s[name].append((time.perf_counter() - start) / (len(data) * args.steps))
            start = time.perf_counter()
            for _, test in data:
                trainer.evaluate(init, test)
            eval_rate[name].append(sum(len(t) for _, t in data) / (time.perf_counter() - start))
    use(model, VARIANTS["packed, fused LoRA"])
    batches = "fresh batches in every repeat" if args.fresh_batches else "the same batches in every repeat"
    print(f"{torch.get_num_threads()} threads, {args.repeats} alternating repeats, {batches}")
    for name in VARIANTS:
        s, e = step_s[name], eval_rate[name]
        print(
            f"  {name:20s} step best {min(s):.3f} s, median {statistics.median(s):.3f} s;"
            f"  eval best {max(e):.0f}, median {statistics.median(e):.0f} pairs/s"
        )


if __name__ == "__main__":
    main()
