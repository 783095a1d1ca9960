"""Build the reward model an experiment asks for."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from transformers import AutoConfig

from fedpref.config import ExperimentConfig
from fedpref.errors import ConfigError
from fedpref.models.backbone import is_causal_lm, load_backbone, resolve_backbone, set_activation_checkpointing
from fedpref.models.causal_scalar import CausalScalarRewardModel
from fedpref.models.scalar_reward import ScalarRewardModel
from fedpref.models.selector_reward import SelectorRewardModel
from fedpref.models.token_cache import cache_root


def resolve_device(device: str) -> str:
    """`device`, with 'auto' made concrete: the first CUDA GPU, else Apple's MPS, else the CPU."""
    if device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    return "mps" if torch.backends.mps.is_available() else "cpu"


def check_device(device: str) -> None:
    """One ConfigError line for a device this machine cannot use, before any weight is loaded (torch would
    otherwise fail deep inside `.to()`, after the data and the backbone are loaded)."""
    device = resolve_device(device)
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise ConfigError(f"device = '{device}': not a torch device (e.g. 'cpu', 'cuda', 'cuda:1', 'mps')") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            build = f"torch {torch.__version__} " + ("with" if torch.version.cuda else "without") + " CUDA"
            raise ConfigError(f"device = '{device}': CUDA is not available here ({build}); use device = 'cpu'")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(f"device = '{device}': this machine has {torch.cuda.device_count()} CUDA device(s)")
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"device = '{device}': MPS (Apple GPU) is not available here; use device = 'cpu'")


def check_head(cfg: ExperimentConfig) -> None:
    """model.head against the backbone's kind, read from its config.json alone (no weights). Only a local folder
    is read here: a hub id may need the network, and load_backbone reports what it finds there."""
    path = resolve_backbone(cfg.model.backbone)
    if not Path(path, "config.json").is_file():
        return
    try:
        causal = is_causal_lm(AutoConfig.from_pretrained(path))
    except (OSError, ValueError):
        return  # load_backbone gives the full message
    _check_head_fits(cfg, causal)


def check_model_config(cfg: ExperimentConfig) -> None:
    """Every model check that needs no weights: the device, then the head against the backbone."""
    check_device(cfg.device)
    check_head(cfg)


def _check_head_fits(cfg: ExperimentConfig, causal: bool) -> None:
    # 'scalar' fits both kinds (mean-pooled encoder, last-token causal LM); the A/B selector needs an LM
    if cfg.train.gradient_checkpointing and not causal:
        raise ConfigError(
            f"train.gradient_checkpointing needs a causal-LM backbone; {cfg.model.backbone} is an encoder, whose "
            "adapted top layers keep few activations (lora.top_layers, lora.cache_frozen_prefix)"
        )
    if cfg.train.precision == "bf16-frozen" and causal:
        raise ConfigError(
            f"train.precision = 'bf16-frozen' is for encoders (packed layers); {cfg.model.backbone} is a causal LM: "
            "use 'bf16' (autocast) or model.dtype = 'bf16'"
        )
    if cfg.model.head == "selector" and not causal:
        raise ConfigError(
            f"model.head = 'selector' does not fit {cfg.model.backbone} (an encoder); "
            "use 'scalar' for encoders, 'selector' or 'scalar' for causal LMs"
        )


def build_reward_model(cfg: ExperimentConfig) -> nn.Module:
    """Frozen backbone + LoRA + head, initialized deterministically from `cfg.seed`."""
    check_model_config(cfg)
    backbone, tokenizer, causal = load_backbone(cfg.model.backbone, cfg.model.dtype, cfg.model.tokenizer)
    _check_head_fits(cfg, causal)  # a hub id is known only now
    if cfg.train.gradient_checkpointing:  # active in training mode only (set_lora_training)
        set_activation_checkpointing(backbone, True)
    if cfg.train.compile and causal:
        for layer in backbone.get_decoder().layers:
            layer.compile(dynamic=True)  # one graph per layer call; shapes vary with each batch's longest pair
    torch.manual_seed(cfg.seed)  # peft draws LoRA A from the global generator
    generator = torch.Generator().manual_seed(cfg.seed)
    cls = ScalarRewardModel
    if causal:
        cls = SelectorRewardModel if cfg.model.head == "selector" else CausalScalarRewardModel
    settings = {"cache_dir": cache_root(cfg.data.cache_dir), "prefix_cache_mb": cfg.data.prefix_cache_mb}
    if cls is ScalarRewardModel:
        settings["bf16_frozen_matmuls"] = cfg.train.precision == "bf16-frozen"
    model = cls(backbone, tokenizer, cfg.lora, cfg.data.max_length, generator, **settings)
    if cfg.train.compile and cls is ScalarRewardModel:
        model.compile_layers()
    if cfg.model.head_init_scale != 1.0:  # the untrained model's own opinions (a calibration lever)
        with torch.no_grad():
            model.head.weight.mul_(cfg.model.head_init_scale)
    return model.to(resolve_device(cfg.device))
