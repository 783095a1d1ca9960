"""Run both diagnostics over clients for one method, and lay results out as the paper's Tables 1/2."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from fedpref.client.trainer import OptimConfig
from fedpref.client.worker import EncodedClient, task_generator
from fedpref.diagnostics.gradient_quotient import (
    BODY_FRACTION,
    ZERO_TOL,
    ClientGQ,
    average_over_clients,
    check_eta,
    client_gq,
    full_batch_gradient,
    layer_groups,
    summarize_gq,
)
from fedpref.diagnostics.headroom import MODES, client_headroom
from fedpref.errors import ConfigError, DataError, FedprefError
from fedpref.models.adapters import State, load_trainable_state, trainable_state

# Per-client quantities averaged over clients; a client whose R (or W) set is empty is skipped in the
# average of that set's quantities (the paper is silent), and a quantity no client has is None.
CLIENT_KEYS = ("m0_R", "m0_W", "H0_R", "H0_W", "H+_R", "H+_W", "P10_R", "P10_W", "acc0", "acc10")
COUNT_KEYS = ("n_R", "n_W")


def diagnose(
    model: nn.Module,
    clients: dict[str, EncodedClient],
    inits: dict[str, State],
    eta: float | None,
    pers_optim: OptimConfig,
    steps: int = 10,
    generator_fn: Callable[[str], torch.Generator] | None = None,
    body_fraction: float = BODY_FRACTION,
    chunk: int = 64,
    zero_tol: float = ZERO_TOL,
    mode: str = "auto",
    on_client: Callable[[int, int], None] | None = None,
) -> dict:
    """GQ and Headroom diagnostics of each client's initialization `inits[cid]`, averaged over clients.

    `eta`: the step size η of GQ and H (None: `pers_optim.lr`, the personalization learning rate).
    `steps`: local AdamW steps (with `pers_optim` and `generator_fn(cid)`) behind P10 and acc10.
    `on_client(done, total)` is called after each client (progress).
    Returns a JSON-able dict; the model's trainable state is restored afterwards.
    """
    eta = pers_optim.lr if eta is None else eta
    _validate(model, clients, inits, eta, steps, mode)
    generator_fn = generator_fn or (lambda cid: task_generator(0, "diagnostics", cid))
    saved = trainable_state(model)
    per_client = {}
    try:
        for cid, c in clients.items():
            per_client[cid] = _diagnose_client(
                model, c, inits[cid], eta, pers_optim, steps, generator_fn(cid), chunk, zero_tol, mode
            )
            if on_client:
                on_client(len(per_client), len(clients))
    finally:
        load_trainable_state(model, saved)
    return _aggregate(per_client, eta, steps, body_fraction)


def _validate(model: nn.Module, clients: dict, inits: dict, eta: float, steps: int, mode: str) -> None:
    check_eta(eta)
    if mode not in MODES:
        raise ValueError(f"diagnostics: mode must be one of {MODES}, got {mode!r}")
    layer_groups(model)  # raises when there are no LoRA layers
    if not isinstance(steps, int) or steps < 0:
        raise ConfigError(f"diagnostics: steps must be an integer >= 0, got {steps!r}")
    if not clients:
        raise DataError("diagnostics: no clients to diagnose")
    for cid, client in clients.items():
        if len(client.test) == 0:
            raise DataError(f"diagnostics: client {cid} has an empty test split; Headroom needs held-out pairs")
        if len(client.train) == 0:
            raise DataError(f"diagnostics: client {cid} has an empty training split; GQ and H need its gradient")
    missing = sorted(set(clients) - set(inits))
    if missing:
        raise FedprefError(f"diagnostics: no initialization given for clients {missing[:5]}")


def _diagnose_client(model, client, init, eta, optim, steps, generator, chunk, zero_tol, mode) -> dict:
    load_trainable_state(model, init)
    g0 = full_batch_gradient(model, client.train, chunk)
    gq = client_gq(model, client.train, eta, g0=g0, chunk=chunk, zero_tol=zero_tol)
    hr = client_headroom(model, init, client.train, client.test, eta, optim, steps, generator, g0, chunk, mode)
    return {"gq": gq, **hr.stats()}


def _aggregate(per_client: dict[str, dict], eta: float, steps: int, body_fraction: float) -> dict:
    gq = summarize_gq(average_over_clients([d["gq"] for d in per_client.values()]), body_fraction)
    out = {
        "eta": eta,
        "steps": steps,
        "num_clients": len(per_client),
        "GQ_layers": {str(k): _json(v) for k, v in gq.per_layer.items()},
        "GQ_mean": _json(gq.mean),
        "GQ_std": _json(gq.std),
        "GQ_B": _json(gq.body),
        "GQ_H": _json(gq.head),
        "body_layers": gq.body_layers,
        "head_layers": gq.head_layers,
    }
    for key in CLIENT_KEYS:
        values = [d[key] for d in per_client.values() if d[key] is not None]
        out[key] = sum(values) / len(values) if values else None
    out["clients"] = {cid: _client_json(d) for cid, d in per_client.items()}
    return out


def _client_json(d: dict) -> dict:
    gq: ClientGQ = d["gq"]
    out = {k: _json(v) for k, v in d.items() if k != "gq"}
    out["GQ_layers"] = {str(k): _json(v) for k, v in gq.per_layer.items()}
    out["GQ_excluded"] = {str(k): v for k, v in gq.excluded.items()}
    out["GQ_sizes"] = {str(k): v for k, v in gq.sizes.items()}
    return out


def _json(v: float | int | None) -> float | int | None:
    return None if isinstance(v, float) and not math.isfinite(v) else v


HEADER = ["method", "GQ(l)", "GQ_B", "GQ_H", "m0_R", "m0_W", "H+_R", "P10_R", "H+_W", "P10_W", "acc10 (acc0)"]


def table_rows(diags_by_method: dict[str, dict]) -> tuple[list[str], list[list[str]]]:
    """Table 1/2 layout: one row per method of `diagnose` outputs (missing values as "–")."""
    rows = []
    for method, d in diags_by_method.items():
        rows.append(
            [
                method,
                f"{format_value(d['GQ_mean'])} ± {format_value(d['GQ_std'])}",
                format_value(d["GQ_B"]),
                format_value(d["GQ_H"]),
                format_value(d["m0_R"], signed=True),
                format_value(d["m0_W"], signed=True),
                *(format_value(d[k]) for k in ("H+_R", "P10_R", "H+_W", "P10_W")),
                f"{format_value(d['acc10'])} ({format_value(d['acc0'])})",
            ]
        )
    return list(HEADER), rows


def format_value(v: float | None, signed: bool = False) -> str:
    """Two decimals; scientific for tiny non-zero values (GQ scales with η)."""
    if v is None or not math.isfinite(v):
        return "–"
    sign = "+" if signed else ""
    return f"{v:{sign}.2e}" if 0 < abs(v) < 5e-3 else f"{v:{sign}.2f}"
