"""The frozen-prefix cache of a causal LM with LoRA on its top layers: the lower layers run once per sequence.

With right padding and causal attention a real token never attends to a pad, so the hidden states entering
the first adapted layer are a function of the sequence alone: they are computed once (`frozen_prefix`) and
each training step runs only the adapted layers on them (`run_top`). The decoder's own forward does the
work (rotary embeddings, masks) with its layer list cut to a range; an architecture whose forward does more
to its input embeddings than pass them on (Gemma scales them) fails the exactness check of `check_exact`.
With a `store` (`fedpref.models.prefix_cache`, `data.prefix_cache_mb`) the states of an encode call are kept on
disk, keyed by the frozen layers' weights and the token ids, so a later run on the same data skips the lower layers.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import torch
from torch import nn

from fedpref.models.encoded import pad
from fedpref.models.prefix_cache import PrefixCache, modules_fingerprint

log = logging.getLogger(__name__)


class CausalPrefix:
    """Runs a decoder's layers [0, first) once per sequence and [first, n) per step; `first` > 0."""

    def __init__(self, decoder: nn.Module, first: int, pad_id: int, store_dir: Path | None = None, store_mb: int = 0):
        self.decoder, self.first, self.pad_id = decoder, first, pad_id
        self.checked, self.exact = False, False
        self.store = PrefixCache(store_dir, self.fingerprint, store_mb * 2**20) if store_dir and store_mb > 0 else None

    def fingerprint(self) -> str:
        """What decides `frozen_prefix`: the embeddings', rotary buffers' and frozen layers' weights, the model's
        config (norm epsilon, attention kind), the cut, the pad id, dtype and device kind."""
        d = self.decoder
        modules = [d.embed_tokens, *d.layers[: self.first], *([d.rotary_emb] if hasattr(d, "rotary_emb") else [])]
        weight = d.embed_tokens.weight
        config = d.config.to_json_string(use_diff=False), getattr(d.config, "_attn_implementation", None)
        settings = (self.first, self.pad_id, str(weight.dtype), weight.device.type)
        return modules_fingerprint(modules, type(d).__qualname__, *config, *settings)

    @contextlib.contextmanager
    def _only(self, layers: range, final_norm: bool):
        """The decoder with only `layers` (and the final norm or not), for the duration of one forward."""
        d = self.decoder
        full, norm = d.layers, d.norm
        d.layers = nn.ModuleList([full[i] for i in layers])
        if not final_norm:
            d.norm = nn.Identity()
        try:
            yield d
        finally:
            d.layers, d.norm = full, norm

    @torch.inference_mode()
    def frozen_prefix(self, ids: list[torch.Tensor], device, chunk: int = 16) -> list[torch.Tensor]:
        """Per sequence, the (L, H) hidden states entering the first adapted layer (on the CPU)."""
        out = []
        with self._only(range(self.first), final_norm=False) as d:
            for start in range(0, len(ids), chunk):
                batch, mask = pad(ids[start : start + chunk], self.pad_id)
                hidden = d(input_ids=batch.to(device), attention_mask=mask.to(device), use_cache=False)
                out += [h[: int(m.sum())].cpu().clone() for h, m in zip(hidden.last_hidden_state, mask)]
        return out

    def encode(self, seqs: list[torch.Tensor], device) -> list[torch.Tensor] | None:
        """The cached prefixes of `seqs`, or None (and this cache off for good) when the split forward does not
        reproduce the full one on the first sequence (checked once)."""
        if not seqs:
            return None
        if not self.checked:
            self.exact, self.checked = self.check_exact(seqs[0], device), True
        if not self.exact:
            return None
        if self.store is None:
            return self.frozen_prefix(seqs, device)
        return self.store.hidden_states(seqs, lambda ids: self.frozen_prefix(ids, device))

    def final_hidden(self, prefixes: list[torch.Tensor], device) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L, H) final hidden states and the (B, L) mask of right-padded cached prefixes."""
        hidden, mask = pad(prefixes)
        mask = mask.to(device)
        return self.run_top(hidden.to(device), mask), mask

    def run_top(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, L, H) final hidden states (after the final norm) from right-padded (B, L, H) cached prefixes."""
        layers = range(self.first, len(self.decoder.layers))
        with self._only(layers, final_norm=True) as d:
            return d(inputs_embeds=hidden, attention_mask=mask, use_cache=False).last_hidden_state

    @torch.inference_mode()
    def check_exact(self, ids: torch.Tensor, device) -> bool:
        """Whether prefix-then-top equals the full forward on one sequence (to float rounding)."""
        full = self.decoder(input_ids=ids[None].to(device), use_cache=False).last_hidden_state[0]
        prefix = self.frozen_prefix([ids], device)[0].to(device)
        mask = torch.ones(1, len(ids), dtype=torch.long, device=device)
        split = self.run_top(prefix[None], mask)[0]
        scale = float(full.abs().max()) or 1.0
        exact = bool(torch.allclose(split, full, atol=1e-4 * scale, rtol=0))
        if not exact:
            log.warning(
                "%s: running the adapted layers on the cached frozen prefix differs from the full forward "
                "(max difference %.2e); the frozen-prefix cache is off for it",
                type(self.decoder).__name__,
                float((split - full).abs().max()),
            )
        return exact
