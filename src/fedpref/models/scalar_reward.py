"""Scalar reward head on a mean-pooled encoder with LoRA, with an exact frozen-prefix cache."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from fedpref.config import LoraConfig
from fedpref.data.pairs import PreferencePair
from fedpref.models.adapters import adapted_layers, add_lora
from fedpref.models.encoded import EncodedPairs, pad
from fedpref.models.frozen_bf16 import Bf16Bases
from fedpref.models.packed import Packing, packed_bert_layer
from fedpref.models.prefix_cache import PrefixCache, modules_fingerprint
from fedpref.models.scalar_head import ScalarHeadRewardModel, scalar_head
from fedpref.models.token_cache import cached_token_ids

TOKENS_VERSION = "scalar-1"  # (prompt, response) pairs, truncation='longest_first'; bump if that changes


class ScalarRewardModel(ScalarHeadRewardModel):
    """r(x, y) = w^T meanpool(encoder(x, y)) + b; the margin is r(x, y+) - r(x, y-).

    With LoRA on the top layers only and `cache_prefix`, `encode` stores the
    hidden states entering the first adapted layer, and `margins` runs only the
    adapted layers: the frozen lower layers are deterministic (eval mode), so
    this equals the full forward up to float rounding. With `pack_sequences`, the
    layers run on the batch's real tokens only (`fedpref.models.packed`), also equal
    up to rounding. With `cache_dir`, token ids come from a disk cache
    (`fedpref.models.token_cache`) when the texts were seen, and with `prefix_cache_mb` > 0 also the
    frozen prefix's hidden states (`fedpref.models.prefix_cache`), for encode calls up to that size. With
    `bf16_frozen_matmuls` (train.precision 'bf16-frozen', packed only), the adapted layers multiply by their
    frozen base weights in bf16 (`fedpref.models.frozen_bf16`); everything else stays fp32.
    """

    def __init__(
        self,
        backbone: nn.Module,
        tokenizer,
        lora: LoraConfig,
        max_length: int,
        generator: torch.Generator,
        cache_dir: str | Path | None = None,
        prefix_cache_mb: int = 0,
        bf16_frozen_matmuls: bool = False,
    ):
        super().__init__()
        self.cache_dir = cache_dir
        self.first_adapted = adapted_layers(backbone, lora)[0]
        self.cache_prefix = lora.cache_frozen_prefix and self.first_adapted > 0
        self.prefix_cache = None
        if self.cache_prefix and cache_dir and prefix_cache_mb > 0:
            self.prefix_cache = PrefixCache(Path(cache_dir), self._prefix_fingerprint, prefix_cache_mb * 2**20)
        self.pack_sequences = lora.pack_sequences
        if bf16_frozen_matmuls and (not self.pack_sequences or lora.dropout > 0):
            raise ValueError("bf16 frozen matmuls run in the fused LoRA path: packed sequences, no LoRA dropout")
        self.bf16_bases = Bf16Bases() if bf16_frozen_matmuls else None
        self.compiled_layer = None  # packed_bert_layer under torch.compile, set by compile_layers
        self.encoder = add_lora(backbone, lora, causal=False)
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.head = scalar_head(backbone.config.hidden_size, generator)
        self.train(False)  # new LoRA dropout modules start in train mode

    @property
    def bert(self) -> nn.Module:
        return self.encoder.base_model.model

    def encode(self, pairs: list[PreferencePair]) -> EncodedPairs:
        """Tokenize prompt/response pairs; with the cache, run the frozen layers once."""
        texts = [(p.prompt, r) for p in pairs for r in (p.chosen, p.rejected)]
        token_ids = cached_token_ids(
            self.cache_dir, self.tokenizer, texts, self._tokenize, max_length=self.max_length, version=TOKENS_VERSION
        )
        ids = [torch.tensor(t) for t in token_ids]
        if self.prefix_cache is not None:
            ids = self.prefix_cache.hidden_states(ids, self._frozen_prefix)
        elif self.cache_prefix:
            ids = self._frozen_prefix(ids)
        return EncodedPairs(seqs=ids, num_pairs=len(pairs))

    def _prefix_fingerprint(self) -> str:
        """What decides `_frozen_prefix`: the embeddings' and frozen layers' weights, the layout, dtype and device."""
        frozen = [self.bert.embeddings, *self.bert.encoder.layer[: self.first_adapted]]
        weight = self.head.weight
        settings = (self.first_adapted, self.pack_sequences, str(weight.dtype), weight.device.type)
        return modules_fingerprint(frozen, type(self.bert).__qualname__, self.tokenizer.sep_token_id, *settings)

    def _tokenize(self, texts: list[tuple[str, str]]) -> list[list[int]]:
        tok = self.tokenizer
        return [tok(a, b, truncation="longest_first", max_length=self.max_length)["input_ids"] for a, b in texts]

    @torch.inference_mode()
    def _frozen_prefix(self, ids: list[torch.Tensor], chunk: int = 64) -> list[torch.Tensor]:
        out = []
        for start in range(0, len(ids), chunk):
            if self.pack_sequences:
                part = ids[start : start + chunk]
                hidden, _ = self._packed_layers(part, range(self.first_adapted))
                out += [h.clone() for h in hidden.split([len(s) for s in part])]
                continue
            batch, mask = pad(ids[start : start + chunk], self.tokenizer.pad_token_id)
            hidden = self._embed_and_run(batch, mask, upto=self.first_adapted)
            out += [h[: int(m.sum())].clone() for h, m in zip(hidden, mask)]
        return out

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        """(N, L, H) BERT embeddings of padded token ids, segment ids from the first [SEP]."""
        return self.bert.embeddings(input_ids=ids, token_type_ids=_token_types(ids, self.tokenizer.sep_token_id))

    def _embed_and_run(self, ids: torch.Tensor, mask: torch.Tensor, upto: int) -> torch.Tensor:
        return self._run_layers(self._embed(ids), mask, range(upto))

    def _run_layers(self, hidden: torch.Tensor, mask: torch.Tensor, layers) -> torch.Tensor:
        bert = self.bert
        attn = bert._create_attention_masks(mask, None, hidden, None, None)[0]
        for i in layers:
            hidden = bert.encoder.layer[i](hidden, attn)
        return hidden

    def pooled(self, seqs: list[torch.Tensor]) -> torch.Tensor:
        """(N, H) mean-pooled final hidden states of N sequences: what the head reads."""
        first = self.first_adapted if self.cache_prefix else 0
        layers = range(first, len(self.bert.encoder.layer))
        if self.pack_sequences:
            hidden, packing = self._packed_layers(seqs, layers)
            return packing.mean(hidden)
        device = self.head.weight.device
        if self.cache_prefix:
            hidden, mask = pad(seqs)
            hidden, mask = hidden.to(device), mask.to(device)
            hidden = self._run_layers(hidden, mask, layers)
        else:
            ids, mask = pad(seqs, self.tokenizer.pad_token_id)
            ids, mask = ids.to(device), mask.to(device)
            hidden = self._embed_and_run(ids, mask, upto=len(layers))
        weights = mask.unsqueeze(-1).to(hidden.dtype)  # (N, L, 1)
        return (hidden * weights).sum(1) / weights.sum(1)

    def _packed_layers(self, seqs: list[torch.Tensor], layers: range) -> tuple[torch.Tensor, Packing]:
        """(T, H) packed hidden states after `layers`; `seqs` are token ids (embedded first) or hidden states."""
        device = self.head.weight.device
        packing = Packing.of([s.shape[0] for s in seqs], device)
        if seqs[0].dim() == 2:
            hidden = torch.cat(seqs).to(device)  # (T, H)
        else:
            ids, _ = pad(seqs, self.tokenizer.pad_token_id)
            hidden = packing.from_grid(self._embed(ids.to(device)))
        layer_fn = self.compiled_layer or packed_bert_layer
        for i in layers:
            hidden = layer_fn(self.bert.encoder.layer[i], hidden, packing, self.bf16_bases)
        return hidden, packing

    def compile_layers(self) -> None:
        """torch.compile the adapted layers (dynamic shapes): the packed layer function, or each BertLayer when
        sequences are padded. The frozen prefix is left alone: it runs once per sequence when cached."""
        self.compiled_layer = torch.compile(packed_bert_layer, dynamic=True)
        for layer in self.bert.encoder.layer[self.first_adapted :]:
            layer.compile(dynamic=True)


def _token_types(ids: torch.Tensor, sep_id: int) -> torch.Tensor:
    """BERT segment ids: 0 up to and including the first [SEP], 1 after it."""
    after_first_sep = (ids == sep_id).long().cumsum(1) - (ids == sep_id).long()
    return (after_first_sep > 0).long()
