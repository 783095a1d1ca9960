"""Load a frozen backbone and its tokenizer: an embedded model (MiniLM, SmolLM2), a local folder or a hub id."""

from __future__ import annotations

import warnings
from pathlib import Path

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from fedpref.embedded import EMBEDDED, resolve_backbone
from fedpref.errors import FedprefError

__all__ = ["EMBEDDED", "is_causal_lm", "load_backbone", "resolve_backbone", "set_activation_checkpointing"]
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # model.dtype -> from_pretrained


def is_causal_lm(config) -> bool:
    return any(a.endswith("ForCausalLM") for a in (config.architectures or [])) or config.is_decoder


def load_backbone(name: str, dtype: str = "fp32", tokenizer_name: str = ""):
    """Return (model, tokenizer, is_causal) with every backbone weight frozen, in eval mode, loaded as `dtype`
    (a model.dtype name); the tokenizer is `tokenizer_name`'s where given, else the backbone's own.

    Dropout of the frozen base stays off (eval mode): only LoRA dropout is active
    in training, so the frozen layers are a deterministic function of the input.
    """
    path = resolve_backbone(name)
    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    try:
        config = AutoConfig.from_pretrained(path)
        tokenizer = AutoTokenizer.from_pretrained(resolve_backbone(tokenizer_name) if tokenizer_name else path)
        causal = is_causal_lm(config)
        loader = AutoModelForCausalLM if causal else AutoModel
        model = loader.from_pretrained(path, config=config, dtype=TORCH_DTYPES[dtype])
    except (OSError, ValueError) as e:
        where = (
            "a local folder"
            if Path(path).exists()
            else "not a local folder, and the hub is unreachable or has no such model"
        )
        raise FedprefError(f"model.backbone '{name}': cannot load ({where}): {str(e).splitlines()[0]}") from None
    if len(tokenizer) <= 1:  # transformers builds an empty tokenizer for a model folder without tokenizer files
        where = f"model.tokenizer '{tokenizer_name}'" if tokenizer_name else f"model.backbone '{name}'"
        raise FedprefError(f"{where}: the tokenizer is empty (no tokenizer files?); name one with model.tokenizer")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.unk_token or tokenizer.eos_token
    model.requires_grad_(False)
    model.eval()
    return model, tokenizer, causal


def set_activation_checkpointing(model, on: bool) -> None:
    """Turn transformers' per-layer activation checkpointing on (non-reentrant: the frozen embeddings' output needs
    no grad) or off; its newer name where this transformers has it, the deprecated one otherwise."""
    if on:
        enable = getattr(model, "activation_checkpointing_enable", None)
        kwargs = {"use_reentrant": False}
        if enable is not None:
            enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    else:
        getattr(model, "activation_checkpointing_disable", model.gradient_checkpointing_disable)()
