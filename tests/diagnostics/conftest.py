"""A two-layer toy reward model whose margins and gradients can be written out by hand."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedpref.models.encoded import EncodedPairs


def _lora(value: float) -> nn.ModuleDict:
    lin = nn.Linear(1, 1, bias=False, dtype=torch.float64)
    with torch.no_grad():
        lin.weight.fill_(value)
    return nn.ModuleDict({"default": lin})


class TinyLoRA(nn.Module):
    """m_i = x_i (a b + c) + w z_i; layer 0 holds LoRA A = a and B = b, layer 1 holds A = c, the head w."""

    def __init__(self, a: float, b: float, c: float, w: float, lora: bool = True):
        super().__init__()
        if lora:
            layer0, layer1 = nn.Module(), nn.Module()
            layer0.lora_A, layer0.lora_B, layer1.lora_A = _lora(a), _lora(b), _lora(c)
            self.encoder = nn.Module()
            self.encoder.layer = nn.ModuleList([layer0, layer1])
        self.head = nn.Linear(1, 1, bias=False, dtype=torch.float64)
        with torch.no_grad():
            self.head.weight.fill_(w)

    def params(self) -> tuple[torch.Tensor, ...]:
        layer = self.encoder.layer
        a, b = layer[0].lora_A["default"].weight, layer[0].lora_B["default"].weight
        return a, b, layer[1].lora_A["default"].weight, self.head.weight

    def margins(self, enc: EncodedPairs, index: torch.Tensor) -> torch.Tensor:
        feats = torch.stack([enc.seqs[i] for i in index.tolist()])  # (B, 2): x, z
        w = self.head.weight[0, 0]
        if not hasattr(self, "encoder"):
            return w * feats[:, 1]
        a, b, c, _ = (p[0, 0] for p in self.params())
        return feats[:, 0] * (a * b + c) + w * feats[:, 1]


def pairs(xz: list[tuple[float, float]]) -> EncodedPairs:
    return EncodedPairs(seqs=[torch.tensor(v, dtype=torch.float64) for v in xz], num_pairs=len(xz))


@pytest.fixture
def tiny():
    return TinyLoRA


@pytest.fixture
def tiny_pairs():
    return pairs
