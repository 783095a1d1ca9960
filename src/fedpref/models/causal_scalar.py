"""Scalar value head on a causal LM with LoRA: the last token's final hidden state, like
AutoModelForSequenceClassification."""

from __future__ import annotations

import torch
from torch import nn

from fedpref.data.pairs import PreferencePair
from fedpref.models.causal_lm import CausalLoraModel
from fedpref.models.encoded import EncodedPairs, pad
from fedpref.models.scalar_head import ScalarHeadRewardModel, scalar_head
from fedpref.models.token_cache import cached_token_ids

TOKENS_VERSION = "causal-scalar-1"  # the last max_length tokens of tokenizer(prompt + response); bump if it changes


class CausalScalarRewardModel(ScalarHeadRewardModel, CausalLoraModel):
    """r(x, y) = w^T h_last(x y) + b, h_last the final hidden state at the last real token (right padding);
    the margin is r(x, y+) - r(x, y-). The sequence keeps its end when too long: the response's last token is
    the one the head reads. With LoRA on the top layers only and `lora.cache_frozen_prefix`, the frozen lower
    layers run once, in `encode` (`fedpref.models.causal_prefix`)."""

    def add_reader(self, backbone: nn.Module, generator: torch.Generator) -> None:
        """The scalar head reads the final hidden state at the last token."""
        self.head = scalar_head(backbone.config.hidden_size, generator)

    def encode(self, pairs: list[PreferencePair]) -> EncodedPairs:
        texts = [(p.prompt, r) for p in pairs for r in (p.chosen, p.rejected)]
        token_ids = cached_token_ids(
            self.cache_dir, self.tokenizer, texts, self._tokenize, max_length=self.max_length, version=TOKENS_VERSION
        )
        seqs = [torch.tensor(t) for t in token_ids]
        hidden = self.prefix.encode(seqs, self.head.weight.device) if self.prefix else None
        if hidden is not None:
            return EncodedPairs(seqs=hidden, num_pairs=len(pairs), tokens=seqs)
        return EncodedPairs(seqs=seqs, num_pairs=len(pairs))

    def _tokenize(self, texts: list[tuple[str, str]]) -> list[list[int]]:
        return [self.tokenizer(a + b)["input_ids"][-self.max_length :] for a, b in texts]

    def pooled(self, seqs: list[torch.Tensor]) -> torch.Tensor:
        """(N, H) final hidden states at each sequence's last token: what the head reads."""
        device = self.head.weight.device
        if seqs[0].dim() == 2:  # cached frozen prefixes
            hidden, mask = self.prefix.final_hidden(seqs, device)
        else:
            ids, mask = pad(seqs, self.tokenizer.pad_token_id)
            ids, mask = ids.to(device), mask.to(device)
            decoder = self.lm.get_base_model().get_decoder()
            hidden = decoder(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
        return hidden[torch.arange(len(mask), device=device), mask.sum(1) - 1]
