"""Headroom H = −η ⟨∇θ m, g^c(θ0)⟩ of held-out pairs, and the retention/correction statistics (Sec. 2.2)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from fedpref.client.trainer import LocalTrainer, OptimConfig
from fedpref.diagnostics.gradient_quotient import check_eta, full_batch_gradient, trainable_params
from fedpref.errors import DataError
from fedpref.models.adapters import State, load_trainable_state, trainable_state
from fedpref.models.encoded import EncodedPairs

# H of a whole batch of test pairs is one directional derivative of the margins, J v with v = −η g:
# "forward" is one forward-mode JVP (torch.func.jvp over torch.func.functional_call on the trainable
# parameters); "double_backward" is the double-backward trick (p = Jᵀu for a dummy u by a backward
# with create_graph, then J v = ∂⟨p, v⟩/∂u). Both run attention through the math SDPA kernel: the
# fused CPU/CUDA kernels have no forward-mode derivative (nor, on CPU, a double backward). "auto" tries
# forward mode and falls back to the double backward if some op of the backbone lacks a forward AD rule.
MODES = ("auto", "forward", "double_backward")


@dataclass
class ClientHeadroom:
    """Per test pair: margin at θ0, Headroom, and margin after the local personalization steps."""

    m0: torch.Tensor  # (N,)
    h: torch.Tensor  # (N,)
    m_after: torch.Tensor  # (N,)

    def stats(self) -> dict[str, float | int | None]:
        return partition_stats(self.m0, self.h, self.m_after)


class _Margins(nn.Module):
    """`model.margins` as a forward, so that torch.func.functional_call can swap its parameters."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, data: EncodedPairs, index: torch.Tensor) -> torch.Tensor:
        return self.model.margins(data, index)


def _forward_jvp(model: nn.Module, data: EncodedPairs, index: torch.Tensor, tangent: State):
    names = list(trainable_params(model))
    primals = tuple(p.detach() for p in trainable_params(model).values())
    tangents = tuple(tangent[n].to(p) for n, p in zip(names, primals))
    wrapper = _Margins(model)

    def margins(*params: torch.Tensor) -> torch.Tensor:
        swapped = {f"model.{n}": p for n, p in zip(names, params)}
        return torch.func.functional_call(wrapper, swapped, (data, index))

    with torch.no_grad():
        return torch.func.jvp(margins, primals, tangents)


def _double_backward_jvp(model: nn.Module, data: EncodedPairs, index: torch.Tensor, tangent: State):
    params = trainable_params(model)
    with torch.enable_grad():
        m = model.margins(data, index)
        u = torch.zeros_like(m, requires_grad=True)
        jt_u = torch.autograd.grad(m, list(params.values()), grad_outputs=u, create_graph=True, allow_unused=True)
        dot = sum((p * tangent[n]).sum() for n, p in zip(params, jt_u) if p is not None)
        jv = torch.autograd.grad(dot, u)[0]
    return m.detach(), jv.detach()


def margin_jvp(
    model: nn.Module, data: EncodedPairs, index: torch.Tensor, tangent: State, mode: str = "auto"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Margins m_i and their directional derivatives ⟨∇θ m_i, v⟩ for the pairs at `index`, in one pass."""
    if mode not in MODES:
        raise ValueError(f"diagnostics: mode must be one of {MODES}, got {mode!r}")
    with sdpa_kernel(SDPBackend.MATH):
        if mode == "double_backward":
            return _double_backward_jvp(model, data, index, tangent)
        try:
            return _forward_jvp(model, data, index, tangent)
        except (NotImplementedError, RuntimeError):
            if mode == "forward":
                raise
            return _double_backward_jvp(model, data, index, tangent)


def headroom(
    model: nn.Module, data: EncodedPairs, g0: State, eta: float, chunk: int = 64, mode: str = "auto"
) -> tuple[torch.Tensor, torch.Tensor]:
    """(m0, H) on CPU for every pair of `data`: H = −η ⟨∇θ m, g0⟩, batched `chunk` pairs per pass."""
    check_eta(eta)
    tangent = {n: -eta * g for n, g in g0.items()}
    was_training = model.training
    model.eval()
    try:
        parts = [
            margin_jvp(model, data, torch.arange(s, min(s + chunk, len(data))), tangent, mode)
            for s in range(0, len(data), chunk)
        ]
    finally:
        model.train(was_training)
    return torch.cat([m for m, _ in parts]).float().cpu(), torch.cat([h for _, h in parts]).float().cpu()


def headroom_naive(model: nn.Module, data: EncodedPairs, g0: State, eta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference (m0, H): one backward per pair, H_i = −η Σ_params ⟨∂m_i/∂θ, g0⟩."""
    check_eta(eta)
    params = trainable_params(model)
    was_training = model.training
    model.eval()
    margins, heads = [], []
    try:
        for i in range(len(data)):
            m = model.margins(data, torch.tensor([i]))[0]
            grads = torch.autograd.grad(m, list(params.values()), allow_unused=True)
            dot = sum((g * g0[n]).sum() for n, g in zip(params, grads) if g is not None)
            margins.append(m.detach())
            heads.append(-eta * dot.detach())
    finally:
        model.train(was_training)
    return torch.stack(margins).float().cpu(), torch.stack(heads).float().cpu()


def personalized_margins(
    model: nn.Module,
    init: State,
    train: EncodedPairs,
    test: EncodedPairs,
    optim: OptimConfig,
    steps: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """Test margins after `steps` local AdamW steps from `init` (the personalization phase's machinery)."""
    trainer = LocalTrainer(model, optim)
    state = trainer.train(init, train, steps, generator)[0] if steps > 0 else init
    return trainer.evaluate(state, test).margins


def client_headroom(
    model: nn.Module,
    init: State,
    train: EncodedPairs,
    test: EncodedPairs,
    eta: float,
    optim: OptimConfig,
    steps: int = 10,
    generator: torch.Generator | None = None,
    g0: State | None = None,
    chunk: int = 64,
    mode: str = "auto",
) -> ClientHeadroom:
    """Headroom of every test pair at θ0 = `init` and the test margins after `steps` local steps.

    `g0`: the full-batch training gradient at `init` if already computed. The model's trainable state
    is restored afterwards.
    """
    check_eta(eta)
    if len(test) == 0:
        raise DataError("diagnostics: Headroom needs held-out test pairs, but the test split is empty")
    saved = trainable_state(model)
    try:
        load_trainable_state(model, init)
        g0 = full_batch_gradient(model, train, chunk) if g0 is None else g0
        m0, h = headroom(model, test, g0, eta, chunk, mode)
        generator = generator if generator is not None else torch.Generator().manual_seed(0)
        m_after = personalized_margins(model, init, train, test, optim, steps, generator)
    finally:
        load_trainable_state(model, saved)
    return ClientHeadroom(m0=m0, h=h, m_after=m_after)


def partition_stats(m0: torch.Tensor, h: torch.Tensor, m_after: torch.Tensor) -> dict[str, float | int | None]:
    """R = {m0 > 0}, W = {m0 <= 0}: mean m0 and H, % with H > 0, % correct after the steps (None if empty)."""
    out: dict[str, float | int | None] = {
        "acc0": 100.0 * (m0 > 0).float().mean().item(),
        "acc10": 100.0 * (m_after > 0).float().mean().item(),
    }
    for name, mask in (("R", m0 > 0), ("W", m0 <= 0)):
        n = int(mask.sum())
        out[f"n_{name}"] = n
        out[f"m0_{name}"] = m0[mask].mean().item() if n else None
        out[f"H0_{name}"] = h[mask].mean().item() if n else None
        out[f"H+_{name}"] = 100.0 * (h[mask] > 0).float().mean().item() if n else None
        out[f"P10_{name}"] = 100.0 * (m_after[mask] > 0).float().mean().item() if n else None
    return out
