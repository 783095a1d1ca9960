"""The DPO loss (Rafailov et al., 2023) and per-sequence log-probabilities, as pure tensor functions."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def sequence_logps(logits: torch.Tensor, input_ids: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """(B,) sum of log p(token_t | tokens_<t) over the response tokens.

    logits (B, T, V) from a forward over input_ids (B, T); response_mask (B, T) is 1 on response tokens.
    Position t's logits predict token t + 1, hence the shift by one.
    """
    logps = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    target = input_ids[:, 1:]
    token_logps = logps.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, T-1)
    return (token_logps * response_mask[:, 1:].to(token_logps.dtype)).sum(-1)


def dpo_loss(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    beta: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DPO (Rafailov et al., 2023, Eq. 7): mean of -log sigmoid(beta * (log-ratio chosen - log-ratio rejected)).

    Inputs are (B,) sequence log-probabilities; returns (loss, chosen reward, rejected reward), the implicit
    rewards beta * (log pi - log pi_ref) per pair, detached (what TRL logs as rewards/chosen, rewards/rejected).
    """
    chosen_ratio = policy_chosen - ref_chosen
    rejected_ratio = policy_rejected - ref_rejected
    loss = -F.logsigmoid(beta * (chosen_ratio - rejected_ratio)).mean()
    return loss, beta * chosen_ratio.detach(), beta * rejected_ratio.detach()
