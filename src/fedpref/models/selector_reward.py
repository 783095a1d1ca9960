"""The binary A/B selector on a causal LM: both responses in one prompt, the "A"/"B" logits as rewards."""

from __future__ import annotations

import torch
from torch import nn

from fedpref.config import LoraConfig
from fedpref.data.pairs import PreferencePair
from fedpref.models.adapters import add_lora, set_lora_training
from fedpref.models.encoded import EncodedPairs, pad

# The comparison template of "FedVPA-GP" (Appendix D.1.1), with the task phrased generally.
TEMPLATE_HEAD = (
    "Below is a conversation between a human and an AI assistant, followed by two responses. "
    'Pick the better response. State your choice with a single capital letter, i.e., "A" if '
    'RESPONSE A is better, "B" if RESPONSE B is better.\n### CONVERSATION: '
)
TEMPLATE_TAIL = "\n### RESPONSE A: {a}\n### RESPONSE B: {b}\n### YOUR CHOICE:"


class SelectorRewardModel(nn.Module):
    """r(x, y) = logit of y's letter at the last position (FedBiscuit's binary selector).

    Only the last position's two letter logits are computed (hidden state times
    two rows of the output embedding), never the whole vocabulary. The chosen
    response is put at A or B by a coin flip per pair, drawn once at encoding.
    """

    def __init__(self, backbone: nn.Module, tokenizer, lora: LoraConfig, max_length: int, generator: torch.Generator):
        super().__init__()
        self.lm = add_lora(backbone, lora, causal=True)
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.generator = generator
        self.letters = [self._letter_id(c) for c in ("A", "B")]
        self.train(False)  # new LoRA dropout modules start in train mode

    def _letter_id(self, letter: str) -> int:
        ids = self.tokenizer(" " + letter, add_special_tokens=False)["input_ids"]
        return ids[-1]

    def encode(self, pairs: list[PreferencePair]) -> EncodedPairs:
        chosen_is_a = torch.rand(len(pairs), generator=self.generator) < 0.5
        seqs = [self._encode_one(p, bool(a)) for p, a in zip(pairs, chosen_is_a)]
        return EncodedPairs(seqs=seqs, num_pairs=len(pairs), chosen_is_a=chosen_is_a)

    def _encode_one(self, pair: PreferencePair, chosen_is_a: bool) -> torch.Tensor:
        a, b = (pair.chosen, pair.rejected) if chosen_is_a else (pair.rejected, pair.chosen)
        tok = self.tokenizer
        head = tok(TEMPLATE_HEAD, add_special_tokens=True)["input_ids"]
        tail = tok(TEMPLATE_TAIL.format(a=a, b=b), add_special_tokens=False)["input_ids"]
        prompt = tok(pair.prompt, add_special_tokens=False)["input_ids"]
        room = max(self.max_length - len(head) - len(tail), 0)
        ids = head + prompt[-room:] if room else head  # keep the prompt's end, nearest the responses
        return torch.tensor((ids + tail)[-self.max_length :])

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
