"""Layer-wise Gradient Quotient GQ(c, l): how much one full-batch step changes a client's gradient (Sec. 2.2)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from fedpref.errors import ConfigError, DataError
from fedpref.models.adapters import State, load_trainable_state, lora_layer_index, trainable_state
from fedpref.models.encoded import EncodedPairs

# GQ(c, l) = 1/#θ^l · ‖ g^{c,l}(θ0 − η g^c(θ0)) / g^{c,l}(θ0) − 1 ‖_1, with g^c the gradient of client c's
# mean pairwise loss −log σ(m) over ALL its training pairs (accumulated chunk by chunk, in eval mode, so
# LoRA dropout is off and the gradient is deterministic). Choices where the paper is silent:
#
# * The step is plain gradient descent θ1 = θ0 − η g over every trainable parameter (LoRA and, for the
#   scalar model, the head), as in the formula; η is the caller's (`diagnose` defaults it to the
#   personalization learning rate, itself the training lr unless set).
# * Head parameters belong to no transformer layer (`lora_layer_index` is None), so no GQ(c, l) covers them.
# * Entries with |g_l(θ0)| <= `zero_tol` (default 1e-12, absolute) would divide by zero: they are left out
#   of the mean (the mean runs over the remaining entries) and counted in `ClientGQ.excluded`. The main
#   case is a fresh LoRA init (B = 0), where every lora_A gradient is exactly zero. A layer whose entries
#   are all excluded gets GQ = NaN, skipped when averaging over clients and layers.

ZERO_TOL = 1e-12
BODY_FRACTION = 2 / 3  # the paper's front 16 of 24 layers


@dataclass
class ClientGQ:
    """GQ(c, l) of one client for each LoRA-adapted layer l."""

    per_layer: dict[int, float]  # NaN where every entry was excluded
    excluded: dict[int, int]  # entries with |g_l(θ0)| <= zero_tol, left out of the mean
    sizes: dict[int, int]  # #θ^l: LoRA entries of the layer


@dataclass
class GQSummary:
    """GQ(l) averaged over clients, and its mean ± std over layers with Body/Head averages."""

    per_layer: dict[int, float]
    mean: float
    std: float  # population std (ddof = 0) over layers
    body: float  # GQ_B: mean over the front layers
    head: float  # GQ_H: mean over the back layers
    body_layers: list[int]
    head_layers: list[int]


def check_eta(eta: float) -> None:
    if not (isinstance(eta, int | float) and math.isfinite(eta) and eta > 0):
        raise ConfigError(f"diagnostics: the step size eta must be a finite number > 0, got {eta!r}")


def trainable_params(model: nn.Module) -> dict[str, nn.Parameter]:
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def layer_groups(model: nn.Module) -> dict[int, list[str]]:
    """Names of the trainable LoRA parameters of each adapted layer (head parameters are left out)."""
    groups: dict[int, list[str]] = {}
    for name in trainable_params(model):
        layer = lora_layer_index(name)
        if layer is not None and "lora_" in name:
            groups.setdefault(layer, []).append(name)
    if not groups:
        raise ConfigError("diagnostics: the model has no LoRA-adapted layers (no trainable lora_ parameter)")
    return dict(sorted(groups.items()))


def full_batch_gradient(model: nn.Module, data: EncodedPairs, chunk: int = 64) -> State:
    """∇θ (1/N) Σ_i −log σ(m_i) over all N pairs of `data`, for every trainable parameter."""
    n = len(data)
    if n == 0:
        raise DataError("diagnostics: cannot take a full-batch gradient over an empty training split")
    params = trainable_params(model)
    grads = {name: torch.zeros_like(p) for name, p in params.items()}
    was_training = model.training
    model.eval()
    try:
        for start in range(0, n, chunk):
            margins = model.margins(data, torch.arange(start, min(start + chunk, n)))
            loss = -F.logsigmoid(margins).sum() / n
            parts = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
            for name, g in zip(params, parts):
                if g is not None:
                    grads[name] += g
    finally:
        model.train(was_training)
    return grads


@torch.no_grad()
def gradient_step(model: nn.Module, grad: State, eta: float) -> None:
    """θ ← θ − η g in place, on every trainable parameter."""
    for name, p in trainable_params(model).items():
        p.sub_(eta * grad[name])


def client_gq(
    model: nn.Module,
    data: EncodedPairs,
    eta: float,
    g0: State | None = None,
    chunk: int = 64,
    zero_tol: float = ZERO_TOL,
) -> ClientGQ:
    """GQ(c, l) at the model's loaded state θ0 on one client's training pairs; the state is restored after.

    `g0`: the full-batch gradient at θ0 if already computed (it is recomputed otherwise).
    """
    check_eta(eta)
    groups = layer_groups(model)
    saved = trainable_state(model)
    try:
        g0 = full_batch_gradient(model, data, chunk) if g0 is None else g0
        gradient_step(model, g0, eta)
        g1 = full_batch_gradient(model, data, chunk)
    finally:
        load_trainable_state(model, saved)
    return quotient(g0, g1, groups, zero_tol)


def quotient(g0: State, g1: State, groups: dict[int, list[str]], zero_tol: float = ZERO_TOL) -> ClientGQ:
    """Mean over each layer's entries of |g1/g0 − 1|, leaving out entries with |g0| <= zero_tol."""
    per_layer, excluded, sizes = {}, {}, {}
    for layer, names in groups.items():
        a = torch.cat([g0[n].detach().flatten() for n in names]).double()
        b = torch.cat([g1[n].detach().flatten() for n in names]).double()
        keep = a.abs() > zero_tol
        ratios = (b[keep] / a[keep] - 1).abs()
        per_layer[layer] = ratios.mean().item() if keep.any() else math.nan
        excluded[layer], sizes[layer] = int((~keep).sum()), a.numel()
    return ClientGQ(per_layer=per_layer, excluded=excluded, sizes=sizes)


def average_over_clients(results: list[ClientGQ]) -> dict[int, float]:
    """GQ(l) = (1/C) Σ_c GQ(c, l), over the clients where the layer's GQ is defined (not NaN)."""
    layers = sorted({layer for r in results for layer in r.per_layer})
    return {layer: _nanmean([r.per_layer.get(layer, math.nan) for r in results]) for layer in layers}


def summarize_gq(per_layer: dict[int, float], body_fraction: float = BODY_FRACTION) -> GQSummary:
    """Mean ± std over layers; Body = the front round(body_fraction · L) layers, Head = the rest."""
    if not 0 <= body_fraction <= 1:
        raise ConfigError(f"diagnostics: body_fraction must lie in [0, 1], got {body_fraction}")
    layers = sorted(per_layer)
    split = round(body_fraction * len(layers))
    values = [per_layer[layer] for layer in layers]
    finite = [v for v in values if math.isfinite(v)]
    mean = _nanmean(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in finite) / len(finite)) if finite else math.nan
    return GQSummary(
        per_layer=dict(per_layer),
        mean=mean,
        std=std,
        body=_nanmean(values[:split]),
        head=_nanmean(values[split:]),
        body_layers=layers[:split],
        head_layers=layers[split:],
    )


def _nanmean(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan
