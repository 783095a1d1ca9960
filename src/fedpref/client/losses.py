"""Pure loss and metric functions over reward margins."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def pairwise_loss(margins: torch.Tensor) -> torch.Tensor:
    """Mean Bradley-Terry loss -log sigmoid(r+ - r-) over a batch of margins (FedGD paper, Sec. 2.1)."""
    return -F.logsigmoid(margins).mean()


def accuracy(margins: torch.Tensor) -> float:
    """Percentage of pairs predicted correctly (margin > 0; a tie counts as wrong)."""
    return 100.0 * (margins > 0).float().mean().item()
