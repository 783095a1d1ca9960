"""Each encoder speed lever against the path without it, in one run: training step time and evaluation rate.

Variants, timed in alternating repeats (best and median reported): padded (`lora.pack_sequences = false`),
packed with peft's own LoRA forward, and packed with the fused LoRA linears (the default).

    .venv/bin/python benchmarks/levers.py [--clients 3] [--steps 8] [--repeats 6]
"""

from __future__ import annotations

import statistics
import time

import torch
from step_setup import step_parser, trainer_and_clients

import fedpref.models.packed as packed
from fedpref.models.adapters import trainable_state

FUSED = packed.fused_linear


def peft_forward(modules, x: torch.Tensor) -> torch.Tensor:
    return torch.cat([m(x) for m in modules], dim=-1)


VARIANTS = {"padded": (False, FUSED), "packed, peft LoRA": (True, peft_forward), "packed, fused LoRA": (True, FUSED)}


def main() -> None:
    parser = step_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args()
    _, model, trainer, clients = trainer_and_clients(args)
    init = trainable_state(model)
    data = [(model.encode(c.train), model.encode(c.test)) for c in clients]
    trainer.train(init, data[0][0], 2, torch.Generator().manual_seed(0))  # warm-up
    step_s = {name: [] for name in VARIANTS}
    eval_rate = {name: [] for name in VARIANTS}
    for _ in range(args.repeats):
        for name, (pack, linear) in VARIANTS.items():
            model.pack_sequences, packed.fused_linear = pack, linear
            start = time.perf_counter()
            for train, _ in data:
                trainer.train(init, train, args.steps, torch.Generator().manual_seed(1))
            step_s[name].append((time.perf_counter() - start) / (len(data) * args.steps))
            start = time.perf_counter()
            for _, test in data:
                trainer.evaluate(init, test)
            eval_rate[name].append(sum(len(t) for _, t in data) / (time.perf_counter() - start))
    packed.fused_linear = FUSED
    print(f"{torch.get_num_threads()} threads, {args.repeats} alternating repeats")
    for name in VARIANTS:
        s, e = step_s[name], eval_rate[name]
        print(
            f"  {name:20s} step best {min(s):.3f} s, median {statistics.median(s):.3f} s;"
            f"  eval best {max(e):.0f}, median {statistics.median(e):.0f} pairs/s"
        )


if __name__ == "__main__":
    main()
