"""Tokenized (or prefix-cached) pairs ready for a reward model, and their padding."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class EncodedPairs:
    """Model inputs of N pairs.

    `seqs` holds 2N sequences for a scalar head (chosen at 2i, rejected at 2i+1)
    or N joint sequences for a selector; each is (L,) token ids or, with the
    frozen-prefix cache, (L, H) hidden states. `chosen_is_a` is the selector's
    (N,) answer-position flag; `tokens` the token ids where a causal model's `seqs`
    hold cached hidden states (it still needs them to find the response spans).
    """

    seqs: list[torch.Tensor]
    num_pairs: int
    chosen_is_a: torch.Tensor | None = None
    tokens: list[torch.Tensor] | None = None

    def __len__(self) -> int:
        return self.num_pairs


def pad(seqs: list[torch.Tensor], value: float = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad to the longest sequence: (N, L[, H]) values and an (N, L) 0/1 mask."""
    longest = max(s.shape[0] for s in seqs)
    out = seqs[0].new_full((len(seqs), longest, *seqs[0].shape[1:]), value)
    mask = torch.zeros(len(seqs), longest, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : s.shape[0]] = s
        mask[i, : s.shape[0]] = 1
    return out, mask
