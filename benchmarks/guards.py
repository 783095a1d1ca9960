"""The server's NaN/inf guard on a Qwen2-0.5B-size LoRA state: an element-wise check per tensor against a sum per
tensor and one check of the sums (fedpref.engines.guards.all_finite).

Every reply's state is checked before aggregation. The state of LoRA r 8 on every projection of Qwen2-0.5B is
336 matrices (4.4M values); the element-wise check writes a mask of every value and, on a GPU, syncs once per
tensor. Both ways run in the same process, alternating, and the ratio is printed.

    .venv/bin/python benchmarks/guards.py [--device cuda] [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from fedpref.engines.guards import all_finite

CONFIG = Path(__file__).resolve().parent / "model_configs" / "qwen2-0.5b.json"


def lora_state(rank: int = 8, device: str = "cpu") -> dict[str, torch.Tensor]:
    """A, B of every attention and MLP projection of every layer, at the published shapes."""
    c = json.loads(CONFIG.read_text())
    hidden, inter, kv = c["hidden_size"], c["intermediate_size"], c["hidden_size"] // c["num_attention_heads"]
    kv *= c["num_key_value_heads"]
    shapes = {"q": (hidden, hidden), "k": (hidden, kv), "v": (hidden, kv), "o": (hidden, hidden)}
    shapes |= {"gate": (hidden, inter), "up": (hidden, inter), "down": (inter, hidden)}
    state = {}
    for layer in range(c["num_hidden_layers"]):
        for name, (fan_in, fan_out) in shapes.items():
            state[f"{layer}.{name}.lora_A"] = torch.randn(rank, fan_in, device=device)
            state[f"{layer}.{name}.lora_B"] = torch.randn(fan_out, rank, device=device)
    return state


def one_by_one(tensors) -> bool:
    """The guard before: a check and a Python bool (on a GPU, a sync) per tensor."""
    return all(bool(torch.isfinite(t).all()) for t in tensors)


def _timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    state = lora_state(device=args.device)
    values = list(state.values())
    assert one_by_one(values) and all_finite(values)
    times = {"one by one": [], "sums": []}
    for _ in range(args.repeats):  # alternating, so a drift in the machine's speed hits both
        times["one by one"].append(_timed(one_by_one, values))
        times["sums"].append(_timed(all_finite, values))
    size = sum(t.numel() for t in values)
    print(f"{len(values)} tensors, {size / 1e6:.1f}M values, device {args.device}, {torch.get_num_threads()} threads")
    for name, ts in times.items():
        print(f"{name:12s} median {1e3 * statistics.median(ts):8.2f} ms per state check")
    ratio = statistics.median(times["one by one"]) / statistics.median(times["sums"])
    print(f"ratio {ratio:.2f}x")


if __name__ == "__main__":
    main()
