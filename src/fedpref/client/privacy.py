"""What a client does for client-level differential privacy: bound its update's L2 norm before it leaves."""

from __future__ import annotations

import torch

from fedpref.models.adapters import State


def update_norm(received: State, trained: State) -> float:
    """||trained - received||_2 over every adapter tensor together."""
    squares = sum(float((trained[k].double() - received[k].double()).pow(2).sum()) for k in received)
    return squares**0.5


def clip_update(received: State, trained: State, clip_norm: float) -> State:
    """received + (trained - received) * min(1, C / ||trained - received||_2): the update scaled into the C-ball,
    as Flower's `fixedclipping_mod` does to a client's parameters before they are sent."""
    if clip_norm <= 0:
        raise ValueError(f"clip_norm must be > 0, got {clip_norm}")
    norm = update_norm(received, trained)
    scale = min(1.0, clip_norm / norm) if norm > 0 else 1.0
    return {
        k: (received[k].double() + scale * (trained[k].double() - received[k].double())).to(trained[k].dtype)
        for k in received
    }


def gaussian_noise_like(state: State, std: float, generator: torch.Generator) -> State:
    """Independent N(0, std^2) per coordinate, shaped like `state` (drawn in float64, key order)."""
    return {
        k: (torch.randn(v.shape, generator=generator, dtype=torch.float64) * std).to(v.dtype) for k, v in state.items()
    }
