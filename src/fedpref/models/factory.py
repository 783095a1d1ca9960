"""Build the reward model an experiment asks for."""

from __future__ import annotations

import torch
from torch import nn

from fedpref.config import ExperimentConfig
from fedpref.errors import ConfigError
from fedpref.models.backbone import load_backbone
from fedpref.models.scalar_reward import ScalarRewardModel
from fedpref.models.selector_reward import SelectorRewardModel
from fedpref.models.token_cache import cache_root


def build_reward_model(cfg: ExperimentConfig) -> nn.Module:
    """Frozen backbone + LoRA + head, initialized deterministically from `cfg.seed`."""
    backbone, tokenizer, causal = load_backbone(cfg.model.backbone)
    if (cfg.model.head == "selector") != causal:
        kind = "a causal LM" if causal else "an encoder"
        raise ConfigError(
            f"model.head = '{cfg.model.head}' does not fit {cfg.model.backbone} ({kind}); "
            "use 'selector' for causal LMs and 'scalar' for encoders"
        )
    torch.manual_seed(cfg.seed)  # peft draws LoRA A from the global generator
    generator = torch.Generator().manual_seed(cfg.seed)
    cls = SelectorRewardModel if causal else ScalarRewardModel
    model = cls(backbone, tokenizer, cfg.lora, cfg.data.max_length, generator, cache_dir=cache_root(cfg.data.cache_dir))
    return model.to(cfg.device)
