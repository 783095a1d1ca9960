"""BERT layers on packed tokens: dense layers see only real tokens; attention regroups them per sequence."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from peft.tuners.lora import Linear as LoraLinear
from torch import nn

from fedpref.models.frozen_bf16 import Bf16Bases, frozen_bf16_matmul


@dataclass(frozen=True)
class Packing:
    """Where each of T packed tokens of N sequences sits in the (N, L) padded grid, L the longest length."""

    grid_index: torch.Tensor  # (T,) flat position n * L + t of each token
    seq_index: torch.Tensor  # (T,) sequence n of each token
    lengths: torch.Tensor  # (N,)
    key_mask: torch.Tensor  # (N, 1, 1, L) True at real tokens

    @classmethod
    def of(cls, lengths: list[int], device: torch.device | str = "cpu") -> Packing:
        n, longest = len(lengths), max(lengths)
        lens = torch.tensor(lengths, device=device)
        seq_index = torch.repeat_interleave(torch.arange(n, device=device), lens)
        offsets = torch.arange(len(seq_index), device=device) - torch.repeat_interleave(lens.cumsum(0) - lens, lens)
        key_mask = torch.arange(longest, device=device) < lens.unsqueeze(1)  # (N, L)
        return cls(seq_index * longest + offsets, seq_index, lens, key_mask[:, None, None, :])

    @property
    def shape(self) -> tuple[int, int]:
        return self.key_mask.shape[0], self.key_mask.shape[-1]

    def to_grid(self, x: torch.Tensor) -> torch.Tensor:
        """(T, H) packed -> (N, L, H) padded with zeros."""
        n, longest = self.shape
        grid = x.new_zeros(n * longest, x.shape[-1])
        return grid.index_copy_(0, self.grid_index, x).view(n, longest, -1)

    def from_grid(self, grid: torch.Tensor) -> torch.Tensor:
        """(N, L, H) padded -> (T, H) packed."""
        return grid.reshape(-1, grid.shape[-1]).index_select(0, self.grid_index)

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        """(N, H) mean over each sequence's tokens of packed (T, H)."""
        sums = x.new_zeros(len(self.lengths), x.shape[-1]).index_add(0, self.seq_index, x)
        return sums / self.lengths.unsqueeze(1).to(x.dtype)


def _plain_lora(module: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor] | None:
    """(W, b, s A, B) of a peft LoRA Linear with one active, unmerged adapter and no dropout; else None."""
    if not isinstance(module, LoraLinear) or module.merged or module.disable_adapters:
        return None
    names = module.active_adapters
    if len(names) != 1 or names[0] not in module.lora_A:
        return None
    name = names[0]
    if not isinstance(module.lora_dropout[name], nn.Identity) or module.use_dora.get(name, False):
        return None
    if module.lora_A[name].weight.dtype != module.base_layer.weight.dtype:
        return None  # model.dtype bf16/fp16: peft keeps LoRA in fp32 and casts in its own forward
    base = module.base_layer
    return base.weight, base.bias, module.lora_A[name].weight * module.scaling[name], module.lora_B[name].weight


def fused_linear(modules: list[nn.Module], x: torch.Tensor, bf16_bases: Bf16Bases | None = None) -> torch.Tensor:
    """(T, sum of outs): the modules applied to one (T, in) input, `cat([m(x) for m in modules], -1)` up to rounding.

    For LoRA Linears (as `_plain_lora` allows) this is two GEMMs and a skinny one: the base weights stacked,
    u = x [s_1 A_1; ...; s_k A_k]^T of shape (T, k r), and u times block-diagonal B accumulated into the base
    output by addmm, so the LoRA scaling acts on (T, k r), not (T, out), with no separate add pass. Anything
    else (dropout, a disabled or merged adapter, plain Linears) takes the modules' own forward. With
    `bf16_bases`, the frozen base product runs in bf16 (`frozen_bf16_matmul`); LoRA and the sum stay in x's dtype.
    """
    parts = [_plain_lora(m) for m in modules]
    if any(p is None for p in parts):
        return torch.cat([m(x) for m in modules], dim=-1)
    weights, biases, downs, ups = zip(*parts)
    if bf16_bases is None:
        base = F.linear(x, torch.cat(weights), None if None in biases else torch.cat(biases))
    else:
        weight, bias = bf16_bases.stacked(weights, biases)
        base = frozen_bf16_matmul(x, weight)
        if bias is not None:
            base.add_(bias)
    low_rank = (x @ torch.cat(downs).T).to(base.dtype)  # (T, k r); autocast skips in-place ops: cast by hand
    return base.addmm_(low_rank, torch.block_diag(*ups).T.to(base.dtype))  # in place: no copy of base


def packed_self_attention(
    attention: nn.Module, x: torch.Tensor, packing: Packing, bf16_bases: Bf16Bases | None = None
) -> torch.Tensor:
    """(T, H) context of a `BertSelfAttention` on packed tokens; q, k, v are projected without padding."""
    n, longest = packing.shape
    heads, size = attention.num_attention_heads, attention.attention_head_size
    qkv = fused_linear([attention.query, attention.key, attention.value], x, bf16_bases)  # (T, 3 H)
    q, k, v = packing.to_grid(qkv).view(n, longest, 3, heads, size).permute(2, 0, 3, 1, 4)  # (N, heads, L, size)
    dropout = attention.dropout.p if attention.training else 0.0
    context = F.scaled_dot_product_attention(
        q, k, v, attn_mask=packing.key_mask, dropout_p=dropout, scale=attention.scaling
    )
    return packing.from_grid(context.transpose(1, 2).reshape(n, longest, heads * size))


def _dense_residual_norm(
    block: nn.Module, h: torch.Tensor, residual: torch.Tensor, bf16_bases: Bf16Bases | None
) -> torch.Tensor:
    """`BertSelfOutput` / `BertOutput`: LayerNorm(dropout(dense(h)) + residual)."""
    return block.LayerNorm(block.dropout(fused_linear([block.dense], h, bf16_bases)) + residual)


def packed_bert_layer(
    layer: nn.Module, x: torch.Tensor, packing: Packing, bf16_bases: Bf16Bases | None = None
) -> torch.Tensor:
    """A `BertLayer` (self-attention, output, feed-forward; the same submodules) on (T, H) packed tokens;
    `bf16_bases` as in `fused_linear`."""
    attention = layer.attention
    context = packed_self_attention(attention.self, x, packing, bf16_bases)
    hidden = _dense_residual_norm(attention.output, context, x, bf16_bases)
    inner = layer.intermediate.intermediate_act_fn(fused_linear([layer.intermediate.dense], hidden, bf16_bases))
    return _dense_residual_norm(layer.output, inner, hidden, bf16_bases)
