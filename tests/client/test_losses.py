import math

import torch

from fedpref.client.losses import accuracy, pairwise_loss


def test_pairwise_loss_by_hand():
    # -log sigmoid(0) = log 2; -log sigmoid(2) = log(1 + e^-2); -log sigmoid(-1) = log(1 + e)
    margins = torch.tensor([0.0, 2.0, -1.0])
    expected = (math.log(2) + math.log(1 + math.exp(-2)) + math.log(1 + math.e)) / 3
    assert abs(pairwise_loss(margins).item() - expected) < 1e-6


def test_pairwise_loss_is_stable_for_large_margins():
    assert pairwise_loss(torch.tensor([-200.0])).item() == 200.0
    assert pairwise_loss(torch.tensor([200.0])).item() == 0.0


def test_accuracy_counts_ties_as_wrong():
    assert accuracy(torch.tensor([1.0, -1.0, 0.0, 3.0])) == 50.0
