"""BERT layers on packed tokens: dense layers see only real tokens; attention regroups them per sequence."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


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
        grid = x.new_zeros(n * longest, x.shape[-1]).index_copy(0, self.grid_index, x)
        return grid.view(n, longest, -1)

    def from_grid(self, grid: torch.Tensor) -> torch.Tensor:
        """(N, L, H) padded -> (T, H) packed."""
        return grid.reshape(-1, grid.shape[-1]).index_select(0, self.grid_index)

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        """(N, H) mean over each sequence's tokens of packed (T, H)."""
        sums = x.new_zeros(len(self.lengths), x.shape[-1]).index_add(0, self.seq_index, x)
        return sums / self.lengths.unsqueeze(1).to(x.dtype)


def packed_self_attention(attention: nn.Module, x: torch.Tensor, packing: Packing) -> torch.Tensor:
    """(T, H) context of a `BertSelfAttention` on packed tokens; q, k, v are projected without padding."""
    n, longest = packing.shape
    heads, size = attention.num_attention_heads, attention.attention_head_size

    def grid(proj: nn.Module) -> torch.Tensor:  # (N, heads, L, size)
        return packing.to_grid(proj(x)).view(n, longest, heads, size).transpose(1, 2)

    dropout = attention.dropout.p if attention.training else 0.0
    context = F.scaled_dot_product_attention(
        grid(attention.query),
        grid(attention.key),
        grid(attention.value),
        attn_mask=packing.key_mask,
        dropout_p=dropout,
        scale=attention.scaling,
    )
    return packing.from_grid(context.transpose(1, 2).reshape(n, longest, heads * size))


def packed_bert_layer(layer: nn.Module, x: torch.Tensor, packing: Packing) -> torch.Tensor:
    """A `BertLayer` (self-attention, output, feed-forward; the same submodules) on (T, H) packed tokens."""
    attention = layer.attention
    hidden = attention.output(packed_self_attention(attention.self, x, packing), x)
    return layer.output(layer.intermediate(hidden), hidden)
