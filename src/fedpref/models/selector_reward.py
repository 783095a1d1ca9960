"""The binary A/B selector on a causal LM: both responses in one prompt, the "A"/"B" logits as rewards."""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from torch import nn

from fedpref.config import LoraConfig
from fedpref.data.pairs import PreferencePair
from fedpref.models.adapters import add_lora, set_lora_training
from fedpref.models.encoded import EncodedPairs, pad
from fedpref.models.token_cache import cached_token_ids

# The comparison template of "FedVPA-GP" (Appendix D.1.1), with the task phrased generally.
TEMPLATE_HEAD = (
    "Below is a conversation between a human and an AI assistant, followed by two responses. "
    'Pick the better response. State your choice with a single capital letter, i.e., "A" if '
    'RESPONSE A is better, "B" if RESPONSE B is better.\n### CONVERSATION: '
)
TEMPLATE_TAIL = "\n### RESPONSE A: {a}\n### RESPONSE B: {b}\n### YOUR CHOICE:"
# Names the token layout in the tokenized-data cache; follows the template text automatically.
TOKENS_VERSION = "selector-1:" + hashlib.sha256((TEMPLATE_HEAD + TEMPLATE_TAIL).encode()).hexdigest()[:12]


def chosen_is_a(seed: int, pair: PreferencePair) -> bool:
    """The pair's A/B coin flip: a fixed function of (seed, its texts), so independent of encoding order.

    A cryptographic hash, not crc32: CRC is linear, so pairs that differ in a few characters would get
    correlated flips (all eight of a test's near-identical pairs landed on B).
    """
    key = "\0".join((str(seed), pair.prompt, pair.chosen, pair.rejected))
    return hashlib.blake2b(key.encode(), digest_size=8).digest()[0] & 1 == 0


class SelectorRewardModel(nn.Module):
    """r(x, y) = logit of y's letter at the last position (FedBiscuit's binary selector).

    Only the last position's two letter logits are computed (hidden state times
    two rows of the output embedding), never the whole vocabulary. The chosen
    response is put at A or B by a coin flip per pair (`chosen_is_a`): a hash of
    the generator's seed and the pair's texts, so a pair gets the same flip in
    any batch, order, process, and with or without the token cache (`cache_dir`).
    """

    def __init__(
        self,
        backbone: nn.Module,
        tokenizer,
        lora: LoraConfig,
        max_length: int,
        generator: torch.Generator,
        cache_dir: str | Path | None = None,
    ):
        super().__init__()
        self.lm = add_lora(backbone, lora, causal=True)
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.seed = generator.initial_seed()
        self.cache_dir = cache_dir
        self.letters = [self._letter_id(c) for c in ("A", "B")]
        self.train(False)  # new LoRA dropout modules start in train mode

    def _letter_id(self, letter: str) -> int:
        ids = self.tokenizer(" " + letter, add_special_tokens=False)["input_ids"]
        return ids[-1]

    def encode(self, pairs: list[PreferencePair]) -> EncodedPairs:
        flags = [chosen_is_a(self.seed, p) for p in pairs]
        texts = [
            (p.prompt, p.chosen, p.rejected) if a else (p.prompt, p.rejected, p.chosen) for p, a in zip(pairs, flags)
        ]
        token_ids = cached_token_ids(
            self.cache_dir, self.tokenizer, texts, self._tokenize, max_length=self.max_length, version=TOKENS_VERSION
        )
        seqs = [torch.tensor(t) for t in token_ids]
        return EncodedPairs(seqs=seqs, num_pairs=len(pairs), chosen_is_a=torch.tensor(flags, dtype=torch.bool))

    def _tokenize(self, texts: list[tuple[str, str, str]]) -> list[list[int]]:
        """Token ids of the comparison prompt of each (prompt, response A, response B)."""
        return [self._encode_one(*t) for t in texts]

    def _encode_one(self, prompt: str, a: str, b: str) -> list[int]:
        tok = self.tokenizer
        head = tok(TEMPLATE_HEAD, add_special_tokens=True)["input_ids"]
        tail = tok(TEMPLATE_TAIL.format(a=a, b=b), add_special_tokens=False)["input_ids"]
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        room = max(self.max_length - len(head) - len(tail), 0)
        ids = head + ids[-room:] if room else head  # keep the prompt's end, nearest the responses
        return (ids + tail)[-self.max_length :]

    def train(self, mode: bool = True):
        set_lora_training(self, mode)
        return self

    def margins(self, enc: EncodedPairs, index: torch.Tensor) -> torch.Tensor:
        device = self.lm.get_base_model().device
        ids, mask = pad([enc.seqs[i] for i in index.tolist()], self.tokenizer.pad_token_id)
        ids, mask = ids.to(device), mask.to(device)
        decoder = self.lm.get_base_model().get_decoder()
        hidden = decoder(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, L, H)
        last = hidden[torch.arange(len(ids), device=device), mask.sum(1) - 1]  # (B, H)
        weight = self.lm.get_base_model().get_output_embeddings().weight[self.letters]  # (2, H)
        logits = last @ weight.T  # (B, 2): rewards of A and B
        chosen_is_a = enc.chosen_is_a[index].to(device)
        diff = logits[:, 0] - logits[:, 1]
        return torch.where(chosen_is_a, diff, -diff)
