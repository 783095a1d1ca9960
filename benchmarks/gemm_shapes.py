"""What a new row count costs a CPU matrix product: the packed layers' (T, in) x (in, out) with T new every call,
the same T again, and T rounded up by `fedpref.models.frozen_bf16.bucket_rows`, in fp32 and bf16.

oneDNN builds a kernel for each new shape of a bf16 product; a packed batch's token count T is new at almost
every step, which is why `train.precision = "bf16-frozen"` rounds T up to one of 16 sizes per doubling.

    .venv/bin/python benchmarks/gemm_shapes.py [--rows 1200] [--calls 200] [--inner 384] [--outer 1536]
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from fedpref.models.frozen_bf16 import bucket_rows


def ms_per_call(row_counts: list[int], weight: torch.Tensor) -> float:
    inputs = [torch.randn(n, weight.shape[1]).to(weight.dtype) for n in row_counts]
    start = time.perf_counter()
    for x in inputs:
        F.linear(x, weight)
    return (time.perf_counter() - start) / len(inputs) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1200, help="the first row count T (quick config: about 1,300)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--inner", type=int, default=384)
    parser.add_argument("--outer", type=int, default=1536)
    args = parser.parse_args()
    print(f"{torch.get_num_threads()} threads; (T, {args.inner}) x ({args.inner}, {args.outer}), ms per product:")
    for dtype in (torch.float32, torch.bfloat16):
        weight = torch.randn(args.outer, args.inner).to(dtype)
        ms_per_call([args.rows // 2] * 20, weight)  # warm-up: threads, allocator, one kernel of another shape
        first = list(range(args.rows, args.rows + args.calls))
        fresh = list(range(args.rows + args.calls, args.rows + 2 * args.calls))  # kernels not built yet
        new = ms_per_call(first, weight)
        again = ms_per_call(first, weight)
        bucketed = ms_per_call([bucket_rows(n) for n in fresh], weight)
        print(f"  {str(dtype):15s} T new each call {new:6.3f}   the same T again {again:6.3f}", end="")
        print(f"   T bucketed {bucketed:6.3f}")


if __name__ == "__main__":
    main()
