"""LoRA injection through peft, and the trainable (adapter + head) state that travels."""

from __future__ import annotations

import torch
from peft import LoraConfig as PeftLoraConfig
from peft import get_peft_model
from torch import nn

from fedpref.config import LoraConfig
from fedpref.errors import ConfigError
from fedpref.protocol import State

# Attention and MLP projections, as in the papers (q, k, v, o, gate, up).
DEFAULT_TARGETS = {
    "bert": [
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
        "intermediate.dense",
        "output.dense",
    ],
    "causal": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj"],
}


def num_layers(model: nn.Module) -> int:
    config = model.config
    return getattr(config, "num_hidden_layers", None) or config.n_layer


def adapted_layers(model: nn.Module, cfg: LoraConfig) -> list[int]:
    """Indices of the transformer layers LoRA adapts (all, or the top k)."""
    n = num_layers(model)
    if cfg.top_layers > n:
        raise ConfigError(f"lora.top_layers = {cfg.top_layers} but the backbone has {n} layers")
    first = n - cfg.top_layers if cfg.top_layers else 0
    return list(range(first, n))


def add_lora(model: nn.Module, cfg: LoraConfig, causal: bool) -> nn.Module:
    """Wrap the frozen backbone with LoRA adapters; only the adapters are trainable."""
    targets = cfg.target_modules or DEFAULT_TARGETS["causal" if causal else "bert"]
    layers = adapted_layers(model, cfg)
    peft_cfg = PeftLoraConfig(
        r=cfg.rank,
        lora_alpha=cfg.alpha,
        lora_dropout=cfg.dropout,
        target_modules=targets,
        layers_to_transform=layers if cfg.top_layers else None,
        layers_pattern=("layers" if causal else "layer") if cfg.top_layers else None,
    )
    try:
        wrapped = get_peft_model(model, peft_cfg)
    except ValueError as e:
        raise ConfigError(f"lora.target_modules {targets}: {str(e).splitlines()[0]}") from None
    return wrapped


def trainable_state(module: nn.Module) -> State:
    """A detached copy of every trainable parameter (LoRA and head): what travels."""
    return {n: p.detach().clone() for n, p in module.named_parameters() if p.requires_grad}


def load_trainable_state(module: nn.Module, state: State) -> None:
    """Copy `state` into the module's trainable parameters (names must match exactly)."""
    params = {n: p for n, p in module.named_parameters() if p.requires_grad}
    if params.keys() != state.keys():
        missing, extra = params.keys() - state.keys(), state.keys() - params.keys()
        raise ValueError(f"adapter state mismatch: missing {sorted(missing)[:3]}, unexpected {sorted(extra)[:3]}")
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(state[name])


def lora_layer_index(name: str) -> int | None:
    """The transformer layer a LoRA parameter belongs to (None for head parameters)."""
    parts = name.split(".")
    for i, part in enumerate(parts[:-1]):
        if part in ("layer", "layers") and parts[i + 1].isdigit():
            return int(parts[i + 1])
    return None


def set_lora_training(module: nn.Module, mode: bool) -> None:
    """Train mode for LoRA dropout only; the frozen base always runs as at inference.

    A decoder layer with gradient checkpointing enabled (train.gradient_checkpointing) gets the mode too, not
    its submodules: transformers recomputes a layer only in training mode, and the layer's own forward reads no
    other use of the flag (its attention dropout is a submodule's, and stays off).
    """
    for m in module.modules():
        m.training = False
    for name, m in module.named_modules():
        if name.split(".")[-1] == "lora_dropout" or ".lora_dropout." in name:
            m.train(mode)
        elif getattr(m, "gradient_checkpointing", False) is True and hasattr(m, "_gradient_checkpointing_func"):
            m.training = mode
    module.training = mode
