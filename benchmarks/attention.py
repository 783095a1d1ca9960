"""The packed layer's attention three ways, forward plus backward, at the quick config's shapes.

SDPA with the key mask (the default; flash on CPU), SDPA forced to its math backend, an explicit masked
softmax, and the default on bf16 copies of q, k, v (what bf16 autocast runs). The (N, heads, L, head size)
grid comes from one batch of the first client's sequence lengths.

    .venv/bin/python benchmarks/attention.py [--repeats 7] [--calls 20]
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F
from step_setup import step_parser, trainer_and_clients
from torch.nn.attention import SDPBackend, sdpa_kernel

from fedpref.models.packed import Packing


def explicit(q, k, v, mask):
    scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-1, -2)  # (N, heads, L, L)
    return scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v


def sdpa_math(q, k, v, mask):
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def sdpa_bf16(q, k, v, mask):
    q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).float()


VARIANTS = {
    "SDPA (default)": lambda q, k, v, mask: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
    "SDPA math backend": sdpa_math,
    "explicit softmax": explicit,
    "SDPA in bf16": sdpa_bf16,
}


def main() -> None:
    parser = step_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20, help="forward + backward calls per timed repeat")
    args = parser.parse_args()
    cfg, model, _, clients = trainer_and_clients(args)
    seqs = model.encode(clients[0].train).seqs[: 2 * cfg.train.batch_size]  # one batch: chosen and rejected
    packing = Packing.of([s.shape[0] for s in seqs])
    n, longest = packing.shape
    attention = model.bert.encoder.layer[-1].attention.self
    shape = (n, attention.num_attention_heads, longest, attention.attention_head_size)
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(shape, generator=generator, requires_grad=True) for _ in range(3))
    grad = torch.randn(shape, generator=generator)
    reference = VARIANTS["SDPA (default)"](q, k, v, packing.key_mask)
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for _ in range(args.repeats):
        for name, attend in VARIANTS.items():
            start = time.perf_counter()
            for _ in range(args.calls):
                attend(q, k, v, packing.key_mask).backward(grad)
            times[name].append((time.perf_counter() - start) / args.calls * 1e3)
    print(f"grid {tuple(shape)}, {torch.get_num_threads()} threads, {args.repeats} alternating repeats")
    for name, attend in VARIANTS.items():
        diff = (attend(q, k, v, packing.key_mask) - reference).abs().max().item()
        print(
            f"  {name:18s} best {min(times[name]):.1f} ms, median {statistics.median(times[name]):.1f} ms"
            f"  (max |difference| {diff:.1e})"
        )


if __name__ == "__main__":
    main()
