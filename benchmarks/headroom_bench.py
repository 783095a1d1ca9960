"""Batched (one JVP per chunk) vs naive (one backward per pair) Headroom on the embedded MiniLM."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from fedpref.config import ExperimentConfig
from fedpref.data.pairs import PreferencePair
from fedpref.diagnostics.gradient_quotient import full_batch_gradient
from fedpref.diagnostics.headroom import headroom, headroom_naive
from fedpref.models.adapters import load_trainable_state, trainable_state
from fedpref.models.factory import build_reward_model

TOPICS = ["the sky", "rain", "volcanoes", "tides", "bread", "magnets", "rainbows", "glaciers"]


def synthetic_pairs(n: int, stem: str) -> list[PreferencePair]:
    """Plain vs. jokey answers to simple science questions."""
    return [
        PreferencePair(
            f"{stem} {i}: can you explain {TOPICS[i % len(TOPICS)]} to me simply?",
            f"Sure. {TOPICS[i % len(TOPICS)].capitalize()} follows a simple physical process, step {i}.",
            f"Ha! {TOPICS[i % len(TOPICS)]} is basically magic, trust me, number {i}.",
            "c0",
        )
        for i in range(n)
    ]


def build(seed: int) -> torch.nn.Module:
    """Defaults with the top 2 layers adapted; LoRA B set small and non-zero, as after some training."""
    cfg = ExperimentConfig()
    cfg.lora.top_layers = 2
    model = build_reward_model(cfg)
    gen = torch.Generator().manual_seed(seed)
    state = {
        k: v + 0.02 * torch.randn(v.shape, generator=gen) if "lora_B" in k else v
        for k, v in trainable_state(model).items()
    }
    load_trainable_state(model, state)
    return model


def timed(repeats: int, fn, *args, **kwargs) -> tuple[tuple[torch.Tensor, torch.Tensor], float]:
    """The result and the best wall time of `repeats` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        times.append(time.perf_counter() - start)
    return out, min(times)


def run(train_pairs: int, test_pairs: int, eta: float, chunk: int, seed: int, repeats: int) -> dict:
    model = build(seed)
    train, test = model.encode(synthetic_pairs(train_pairs, "Train")), model.encode(synthetic_pairs(test_pairs, "Q"))
    g = full_batch_gradient(model, train)
    warm = model.encode(synthetic_pairs(2, "Warm-up"))
    (_, _), warm_s = timed(1, headroom, model, warm, g, eta)  # the first torch.func call: one-time setup
    headroom(model, warm, g, eta, mode="double_backward")
    headroom_naive(model, warm, g, eta)
    (m_b, h_b), batched_s = timed(repeats, headroom, model, test, g, eta, chunk=chunk)
    (_, h_d), double_s = timed(repeats, headroom, model, test, g, eta, chunk=chunk, mode="double_backward")
    (m_n, h_n), naive_s = timed(repeats, headroom_naive, model, test, g, eta)
    scale = h_n.abs().max().item()
    ok = torch.allclose(h_b, h_n, rtol=1e-4, atol=1e-5 * scale) and torch.allclose(m_b, m_n, rtol=1e-4, atol=1e-5)
    return {
        "backbone": "minilm",
        "top_layers": 2,
        "train_pairs": train_pairs,
        "test_pairs": test_pairs,
        "eta": eta,
        "chunk": chunk,
        "threads": torch.get_num_threads(),
        "repeats": repeats,
        "torch": torch.__version__,
        "first_call_s": warm_s,
        "batched_forward_s": batched_s,
        "batched_double_backward_s": double_s,
        "naive_s": naive_s,
        "speedup_forward": naive_s / batched_s,
        "speedup_double_backward": naive_s / double_s,
        "max_abs_diff_H": (h_b - h_n).abs().max().item(),
        "max_abs_diff_H_double_backward": (h_d - h_n).abs().max().item(),
        "max_abs_H": scale,
        "identical_within_tolerance": bool(ok),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/headroom.json"))
    parser.add_argument("--train-pairs", type=int, default=32)
    parser.add_argument("--test-pairs", type=int, default=64)
    parser.add_argument("--eta", type=float, default=1e-5)
    parser.add_argument("--chunk", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="timings are the best of this many calls")
    args = parser.parse_args()
    result = run(args.train_pairs, args.test_pairs, args.eta, args.chunk, args.seed, args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"batched (forward JVP) {result['batched_forward_s']:.2f}s, double-backward "
        f"{result['batched_double_backward_s']:.2f}s, naive {result['naive_s']:.2f}s: "
        f"speedup x{result['speedup_forward']:.1f} / x{result['speedup_double_backward']:.1f}; "
        f"max |ΔH| {result['max_abs_diff_H']:.2e} (max |H| {result['max_abs_H']:.2e}), "
        f"identical: {result['identical_within_tolerance']} -> {args.out}"
    )
    if not result["identical_within_tolerance"]:
        raise SystemExit("batched and naive Headroom differ beyond tolerance")


if __name__ == "__main__":
    main()
