"""The binary A/B selector on a causal LM: both responses in one prompt, the "A"/"B" logits as rewards."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import torch
from torch import nn

from fedpref.data.pairs import PreferencePair
from fedpref.errors import ConfigError
from fedpref.models.adapters import set_lora_training
from fedpref.models.causal_lm import CausalLoraModel
from fedpref.models.encoded import EncodedPairs, pad
from fedpref.models.token_cache import cached_token_ids

# The comparison template of "FedVPA-GP" (Appendix D.1.1), with the task phrased generally.
TEMPLATE_HEAD = (
    "Below is a conversation between a human and an AI assistant, followed by two responses. "
    'Pick the better response. State your choice with a single capital letter, i.e., "A" if '
    'RESPONSE A is better, "B" if RESPONSE B is better.\n### CONVERSATION: '
)
TEMPLATE_TAIL = "\n### RESPONSE A: {a}\n### RESPONSE B: {b}\n### YOUR CHOICE:"
# The template markers that begin right after response A and response B end (Sec. 4.1: the response spans
# are located by answer markers in the input).
END_MARKERS = ("### RESPONSE B:", "### YOUR CHOICE:")
# Names the token layout in the tokenized-data cache; follows the template text automatically.
TOKENS_VERSION = "selector-2:" + hashlib.sha256((TEMPLATE_HEAD + TEMPLATE_TAIL).encode()).hexdigest()[:12]


def chosen_is_a(seed: int, pair: PreferencePair) -> bool:
    """The pair's A/B coin flip: a fixed function of (seed, its texts), so independent of encoding order.

    A cryptographic hash, not crc32: CRC is linear, so pairs that differ in a few characters would get
    correlated flips (all eight of a test's near-identical pairs landed on B).
    """
    key = "\0".join((str(seed), pair.prompt, pair.chosen, pair.rejected))
    return hashlib.blake2b(key.encode(), digest_size=8).digest()[0] & 1 == 0


class SelectorRewardModel(CausalLoraModel):
    """r(x, y) = logit of y's letter at the last position (FedBiscuit's binary selector).

    Only the last position's two letter logits are computed (hidden state times
    two rows of the output embedding), never the whole vocabulary. The chosen
    response is put at A or B by a coin flip per pair (`chosen_is_a`): a hash of
    the generator's seed and the pair's texts, so a pair gets the same flip in
    any batch, order, process, and with or without the token cache (`cache_dir`).
    With LoRA on the top layers only and `lora.cache_frozen_prefix`, `encode` runs the frozen lower
    layers once (`fedpref.models.causal_prefix`): `seqs` then hold hidden states, `tokens` the ids.
    """

    def add_reader(self, backbone: nn.Module, generator: torch.Generator) -> None:
        """The letters' rows of the output embedding read the last position; the generator's seed keys the A/B flips."""
        self.seed = generator.initial_seed()
        self.letters = [self._letter_id(c) for c in ("A", "B")]
        self._markers: list[list[int]] | None = None  # token ids of END_MARKERS, found on first use

    def _letter_id(self, letter: str) -> int:
        ids = self.tokenizer(" " + letter, add_special_tokens=False)["input_ids"]
        return ids[-1]

    def encode(self, pairs: list[PreferencePair]) -> EncodedPairs:
        seqs, flags = self._token_seqs(pairs)
        flags = torch.tensor(flags, dtype=torch.bool)
        hidden = self.prefix.encode(seqs, self.lm.get_base_model().device) if self.prefix else None
        if hidden is not None:
            return EncodedPairs(seqs=hidden, num_pairs=len(pairs), chosen_is_a=flags, tokens=seqs)
        return EncodedPairs(seqs=seqs, num_pairs=len(pairs), chosen_is_a=flags)

    def _token_seqs(self, pairs: list[PreferencePair]) -> tuple[list[torch.Tensor], list[bool]]:
        """Each pair's comparison prompt as token ids (cached), and whether its chosen response is A."""
        flags = [chosen_is_a(self.seed, p) for p in pairs]
        texts = [
            (p.prompt, p.chosen, p.rejected) if a else (p.prompt, p.rejected, p.chosen) for p, a in zip(pairs, flags)
        ]
        token_ids = cached_token_ids(
            self.cache_dir, self.tokenizer, texts, self._tokenize, max_length=self.max_length, version=TOKENS_VERSION
        )
        return [torch.tensor(t) for t in token_ids], flags

    def check_spans(self, pairs: list[PreferencePair]) -> None:
        """Raise the ConfigError of `response_ends` now, from the token ids alone, if any pair's response A is
        lost to truncation: a latent-conditioned selector would otherwise find out when it first reads a split."""
        self.span_positions(self._token_seqs(pairs)[0])

    def _tokenize(self, texts: list[tuple[str, str, str]]) -> list[list[int]]:
        """Token ids of the comparison prompt of each (prompt, response A, response B)."""
        return [self._encode_one(*t) for t in texts]

    def _encode_one(self, prompt: str, a: str, b: str) -> list[int]:
        """The comparison prompt's ids, its end kept: the conversation's end, then both responses. Where that
        loses response A entirely (B alone fills `max_length`), each response is cut to its first tokens instead,
        so that both and their markers stay."""
        seq = self._fit(prompt, a, b)
        if span_ends(seq, self._end_markers(), self._is_space) is None:
            seq = self._fit(prompt, *self._cut_responses(a, b, self.max_length - len(self._head())))
        return seq

    def _head(self) -> list[int]:
        return self.tokenizer(TEMPLATE_HEAD, add_special_tokens=True)["input_ids"]

    def _fit(self, prompt: str, a: str, b: str) -> list[int]:
        tok, head = self.tokenizer, self._head()
        tail = tok(TEMPLATE_TAIL.format(a=a, b=b), add_special_tokens=False)["input_ids"]
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        room = max(self.max_length - len(head) - len(tail), 0)
        ids = head + ids[-room:] if room else head  # keep the prompt's end, nearest the responses
        return (ids + tail)[-self.max_length :]

    def _cut_responses(self, a: str, b: str, room: int) -> tuple[str, str]:
        """Responses a and b cut to their first tokens so that the template tail with them fits `room` tokens:
        the shorter keeps up to half, the longer gets the rest (a few tokens spare for re-tokenization)."""
        tok = self.tokenizer
        overhead = len(tok(TEMPLATE_TAIL.format(a="", b=""), add_special_tokens=False)["input_ids"])
        budget = max(room - overhead - 8, 2)
        ids_a, ids_b = (tok(x, add_special_tokens=False)["input_ids"] for x in (a, b))
        keep_a = min(len(ids_a), max(budget // 2, budget - len(ids_b)))
        keep_b = budget - keep_a
        return tok.decode(ids_a[:keep_a]), tok.decode(ids_b[:keep_b])

    def train(self, mode: bool = True):
        set_lora_training(self, mode)
        return self

    def final_hidden(self, seqs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L, H) final-layer hidden states of the right-padded `seqs` (token ids, or (L, H) cached frozen
        prefixes) and their (B, L) mask."""
        device = self.lm.get_base_model().device
        if seqs[0].dim() == 2:  # cached frozen prefixes
            return self.prefix.final_hidden(seqs, device)
        ids, mask = pad(seqs, self.tokenizer.pad_token_id)
        ids, mask = ids.to(device), mask.to(device)
        decoder = self.lm.get_base_model().get_decoder()
        return decoder(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state, mask

    def letter_logits(self, enc: EncodedPairs, index: torch.Tensor) -> torch.Tensor:
        """(B, 2) logits of the letters "A" and "B" at the last position: the selector's base logits (Sec. 4.4)."""
        hidden, mask = self.final_hidden([enc.seqs[i] for i in index.tolist()])
        last = hidden[torch.arange(len(mask), device=hidden.device), mask.sum(1) - 1]  # (B, H)
        weight = self.lm.get_base_model().get_output_embeddings().weight[self.letters]  # (2, H)
        return last @ weight.T  # (B, 2): rewards of A and B

    def margins(self, enc: EncodedPairs, index: torch.Tensor) -> torch.Tensor:
        logits = self.letter_logits(enc, index)
        chosen_is_a = enc.chosen_is_a[index].to(logits.device)
        diff = logits[:, 0] - logits[:, 1]
        return torch.where(chosen_is_a, diff, -diff)

    def response_ends(self, enc: EncodedPairs) -> torch.Tensor:
        """(N, 2) positions of the last token of responses A and B in each pair's sequence (Sec. 4.1).

        Each response ends just before the marker that follows it (`END_MARKERS`), found as its token ids
        in the template's own tokenization; whitespace tokens before a marker (the template's newline, a
        response's trailing whitespace) are skipped. An empty response ends on its own marker's last token.
        `_encode_one` keeps the end of the sequence, so both markers are there unless response B alone
        fills `max_length`; then response A is gone entirely and this raises a ConfigError.
        """
        return self.span_positions(enc.tokens or enc.seqs)

    def span_positions(self, seqs: list[torch.Tensor]) -> torch.Tensor:
        """`response_ends` of token-id sequences; a ConfigError when one lost response A to truncation."""
        markers = self._end_markers()
        ends = [span_ends(s.tolist(), markers, self._is_space) for s in seqs]
        lost = [i for i, e in enumerate(ends) if e is None]
        if lost:
            raise ConfigError(
                f"{len(lost)} of {len(ends)} selector prompts lost response A to truncation "
                f"(response B alone fills data.max_length = {self.max_length}, e.g. pair {lost[0]}); "
                "raise data.max_length to embed both responses"
            )
        return torch.tensor(ends, dtype=torch.long)

    def _end_markers(self) -> list[list[int]]:
        if self._markers is None:
            self._markers = marker_ids(self.tokenizer)
        return self._markers

    def _is_space(self, token: int) -> bool:
        return not self.tokenizer.decode([token]).strip()


def marker_ids(tokenizer) -> list[list[int]]:
    """Token ids of each of `END_MARKERS` as the template tokenizes it, inside a probe comparison.

    Tokenized alone a marker can differ (a leading-space token, a newline merged into its first token);
    the ids whose character offsets lie within the marker in the tokenized template are the ones to find.
    """
    text = TEMPLATE_TAIL.format(a="First answer.", b="Second answer.")
    try:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    except NotImplementedError:
        raise ConfigError("the causal-LM FedVPA-GP selector needs a fast tokenizer (offsets)") from None
    out = []
    for marker in END_MARKERS:
        start = text.rindex(marker)
        end = start + len(marker)
        inside = zip(enc["input_ids"], enc["offset_mapping"])
        out.append([t for t, (a, b) in inside if a >= start and b <= end and b > a])
    if not all(out):
        raise ConfigError(f"the tokenizer splits the template markers {END_MARKERS} into no whole tokens")
    return out


def span_ends(seq: list[int], markers: list[list[int]], is_space: Callable[[int], bool]) -> list[int] | None:
    """Last-token positions of the spans that end before each marker (searched from the sequence's end).

    None when a marker is missing (truncated away). `is_space(token)` tells whitespace-only tokens.
    """
    ends, stop = [], len(seq)
    for marker in reversed(markers):
        start = last_occurrence(seq, marker, stop)
        if start is None:
            return None
        end = start - 1
        while end > 0 and is_space(seq[end]):
            end -= 1
        if end < 0:  # the marker opens the sequence: the span before it was cut off entirely
            return None
        ends.append(end)
        stop = start
    return ends[::-1]


def last_occurrence(seq: list[int], sub: list[int], stop: int) -> int | None:
    """Start of the last occurrence of `sub` in seq[:stop], or None."""
    for start in range(stop - len(sub), -1, -1):
        if seq[start : start + len(sub)] == sub:
            return start
    return None
