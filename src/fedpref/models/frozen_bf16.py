"""Products with frozen weights in bf16 (train.precision 'bf16-frozen'): bf16 inputs, fp32 accumulation, row
counts bucketed so that a CPU's bf16 GEMM kernels are built once, not at every step."""

from __future__ import annotations

import torch
import torch.nn.functional as F

BF16 = torch.bfloat16


def bucket_rows(rows: int) -> int:
    """`rows` rounded up to one of 16 sizes per doubling (multiples of 16), at most 1/16 more: oneDNN builds a bf16
    GEMM kernel for each new shape (milliseconds, longer than the product), and a batch's T is new every step."""
    step = max(16, 1 << max(rows.bit_length() - 5, 0))
    return -(-rows // step) * step


def _bf16_rows(x: torch.Tensor) -> torch.Tensor:
    """(bucket_rows(T), K) bf16 copy of a (T, K) x, the rows added zero."""
    rows = x.shape[0]
    out = x.new_empty(bucket_rows(rows), x.shape[1], dtype=BF16)
    out[:rows].copy_(x)
    out[rows:].zero_()
    return out


class _FrozenBf16Matmul(torch.autograd.Function):
    """(T, out) x W^T for a frozen W held in bf16, returned in x's dtype: x (in the backward, the output's
    gradient) rounded to bf16, products accumulated in fp32 and rounded to bf16. Only x gets a gradient."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(weight)
        return F.linear(_bf16_rows(x), weight)[: x.shape[0]].to(x.dtype, copy=True)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (weight,) = ctx.saved_tensors
        return (_bf16_rows(grad) @ weight)[: grad.shape[0]].to(grad.dtype, copy=True), None


def frozen_bf16_matmul(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """(T, out) x W^T in x's dtype for a (T, in) x and a frozen bf16 (out, in) W, as `_FrozenBf16Matmul`."""
    return _FrozenBf16Matmul.apply(x, weight)


class Bf16Bases:
    """bf16 copies of the stacked frozen base weights of the module groups of `fedpref.models.packed.fused_linear`,
    cast on first use: the base never changes, so a step casts activations only."""

    def __init__(self) -> None:
        self._stacks: dict[tuple, tuple[torch.Tensor, torch.Tensor | None]] = {}

    def stacked(self, weights: tuple[torch.Tensor, ...], biases: tuple) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(bf16 (sum of outs, in) weight, fp32 bias or None) of one group."""
        key = tuple((id(w), w.data_ptr()) for w in weights)  # .to(device) keeps the Parameter, moves its storage
        if key not in self._stacks:
            with torch.inference_mode(False), torch.no_grad():  # made in evaluation, saved by training's backward
                self._stacks[key] = torch.cat(weights).to(BF16), None if None in biases else torch.cat(biases)
        return self._stacks[key]
