"""The DPO loss and sequence log-probabilities against numbers worked out by hand."""

import math

import pytest
import torch

from fedpref.stage2.losses import dpo_loss, sequence_logps


def test_dpo_loss_hand_computed():
    # pair 1: ratios +0.5 / -0.5 -> beta * 1.0 = 0.1  -> -log sigmoid(0.1)  = log(1 + e^-0.1) = 0.6443967
    # pair 2: ratios -1.0 / +1.0 -> beta * -2.0 = -0.2 -> -log sigmoid(-0.2) = log(1 + e^0.2)  = 0.7981389
    loss, r_chosen, r_rejected = dpo_loss(
        torch.tensor([-1.0, -3.0]),
        torch.tensor([-2.0, -1.0]),
        torch.tensor([-1.5, -2.0]),
        torch.tensor([-1.5, -2.0]),
        beta=0.1,
    )
    assert loss.item() == pytest.approx((0.6443967 + 0.7981389) / 2, abs=1e-6)
    assert r_chosen.tolist() == pytest.approx([0.05, -0.1])
    assert r_rejected.tolist() == pytest.approx([-0.05, 0.1])


def test_dpo_loss_is_log2_when_policy_equals_reference():
    logps = torch.tensor([-4.0, -7.0])
    loss, _, _ = dpo_loss(logps, logps + 1, logps, logps + 1, beta=0.5)
    assert loss.item() == pytest.approx(math.log(2))


def test_dpo_loss_gradient_raises_chosen_lowers_rejected():
    chosen, rejected = torch.tensor([-2.0], requires_grad=True), torch.tensor([-2.0], requires_grad=True)
    loss, _, _ = dpo_loss(chosen, rejected, torch.tensor([-2.0]), torch.tensor([-2.0]), beta=0.1)
    loss.backward()
    # d/dx -log sigmoid(beta x) at x = 0 is -beta / 2
    assert chosen.grad.item() == pytest.approx(-0.05)
    assert rejected.grad.item() == pytest.approx(0.05)


def test_sequence_logps_counts_only_response_tokens():
    # vocab 2; position 0 predicts token 1 with p = 3/4, position 1 predicts token 0 with p = 3/4
    ln3 = math.log(3.0)
    logits = torch.tensor([[[0.0, ln3], [ln3, 0.0], [0.0, 0.0]]])
    ids = torch.tensor([[0, 1, 0]])
    both = sequence_logps(logits, ids, torch.tensor([[0, 1, 1]]))
    last = sequence_logps(logits, ids, torch.tensor([[0, 0, 1]]))
    assert both.item() == pytest.approx(2 * math.log(0.75))
    assert last.item() == pytest.approx(math.log(0.75))
