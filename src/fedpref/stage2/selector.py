"""The Stage 1 selector as Stage 2's reward: logits(s_A, s_B | z) margins (Algorithm 1 lines 16-18, 22)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fedpref.data.pairs import PreferencePair
from fedpref.models.variational import VariationalSelector, position_flags


class SelectorMargins:
    """logit(first | z_key) - logit(second | z_key) from a frozen Stage 1 selector, for `MarginJudge`.

    `latents` maps a judge key (preference type or client) to its z, e.g. the type's mean client latent.
    The selector orders each encoded pair by its own A/B flag (`position_flags`), so the margin is read back
    in (first, second) order whatever that flag is.
    """

    def __init__(self, selector: VariationalSelector, latents: dict[str, torch.Tensor], chunk: int = 64):
        self.selector, self.latents, self.chunk = selector, latents, chunk

    @torch.inference_mode()
    def __call__(self, prompts: Sequence[str], first: Sequence[str], second: Sequence[str], key: str) -> list[float]:
        model, z = self.selector, self.latents[key]
        model.eval()
        pairs = [PreferencePair(p, a, b, "judge") for p, a, b in zip(prompts, first, second)]
        enc = model.base.encode(pairs)  # "chosen" = first, "rejected" = second
        first_is_a = position_flags(enc)
        margins = []
        for start in range(0, len(pairs), self.chunk):
            index = torch.arange(start, min(start + self.chunk, len(pairs)))
            logits = model.logits(enc, index, z.unsqueeze(0)).float().cpu()  # (B, 2) over (A, B)
            diff = logits[:, 0] - logits[:, 1]
            margins += torch.where(first_is_a[index], diff, -diff).tolist()
        return margins
