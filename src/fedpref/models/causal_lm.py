"""What the causal-LM reward models share: the LM with LoRA, its tokenizer and the frozen-prefix cache."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from fedpref.config import LoraConfig
from fedpref.models.adapters import adapted_layers, add_lora
from fedpref.models.causal_prefix import CausalPrefix


class CausalLoraModel(nn.Module):
    """A reward model on a causal LM: `lm` (the backbone with LoRA), its `tokenizer`, `max_length` and the token
    cache folder `cache_dir`. With LoRA on the top layers only and `lora.cache_frozen_prefix`, `prefix` runs the
    frozen lower layers once (`fedpref.models.causal_prefix`; kept in `cache_dir` for each encode call up to
    `prefix_cache_mb`), else it is None. A subclass adds what reads the
    LM's final hidden states in `add_reader`."""

    def __init__(
        self,
        backbone: nn.Module,
        tokenizer,
        lora: LoraConfig,
        max_length: int,
        generator: torch.Generator,
        cache_dir: str | Path | None = None,
        prefix_cache_mb: int = 0,
    ):
        super().__init__()
        first = adapted_layers(backbone, lora)[0]
        self.lm = add_lora(backbone, lora, causal=True)
        self.tokenizer = tokenizer
        decoder = self.lm.get_base_model().get_decoder()
        cache = lora.cache_frozen_prefix and first > 0
        store = Path(cache_dir) if cache_dir else None
        self.prefix = CausalPrefix(decoder, first, tokenizer.pad_token_id, store, prefix_cache_mb) if cache else None
        self.max_length = max_length
        self.cache_dir = cache_dir
        self.add_reader(backbone, generator)
        self.train(False)  # new LoRA dropout modules start in train mode

    def add_reader(self, backbone: nn.Module, generator: torch.Generator) -> None:
        """Add what turns the LM's final hidden states into rewards (any random draw from `generator`)."""
        raise NotImplementedError
