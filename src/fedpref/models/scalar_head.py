"""What the scalar-head reward models share: the head r = w^T pooled + b, its rewards and the pair margins."""

from __future__ import annotations

import torch
from torch import nn

from fedpref.models.adapters import set_lora_training
from fedpref.models.encoded import EncodedPairs


def scalar_head(hidden: int, generator: torch.Generator) -> nn.Linear:
    """A (hidden -> 1) head, w ~ N(0, 1/hidden) from `generator`, b = 0 (the same draw for every backbone)."""
    head = nn.Linear(hidden, 1)
    with torch.no_grad():
        head.weight.copy_(torch.randn(1, hidden, generator=generator) * hidden**-0.5)
        head.bias.zero_()
    return head


class ScalarHeadRewardModel(nn.Module):
    """A reward model whose subclass gives `pooled(seqs)`, the (N, H) states its `head` reads; the margin of a
    pair is r(x, y+) - r(x, y-)."""

    head: nn.Linear

    def pooled(self, seqs: list[torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def rewards(self, seqs: list[torch.Tensor]) -> torch.Tensor:
        """(N,) rewards of N sequences (token ids, or cached hidden states)."""
        return self.head(self.pooled(seqs).to(self.head.weight.dtype)).squeeze(-1)  # a cast only off fp32

    def train(self, mode: bool = True):
        set_lora_training(self, mode)
        return self

    def margins(self, enc: EncodedPairs, index: torch.Tensor) -> torch.Tensor:
        """(B,) reward margins r(x, y+) - r(x, y-) of the pairs at `index`."""
        seqs = [enc.seqs[2 * i + k] for i in index.tolist() for k in (0, 1)]
        r = self.rewards(seqs).view(-1, 2)  # (B, 2)
        return r[:, 0] - r[:, 1]
