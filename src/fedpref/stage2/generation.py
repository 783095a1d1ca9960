"""On-policy sampling of the (conditioned) policy with the paper's App. D.1.2 settings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from fedpref.data.hh import hh_messages
from fedpref.stage2.policy import PAD_ID, ConditionalPolicy


@dataclass(frozen=True)
class Sampling:
    """App. D.1.2: top_p 1.0, temperature 0.7, do_sample, 2 return sequences, max new tokens configurable."""

    temperature: float = 0.7
    top_p: float = 1.0
    num_samples: int = 2
    max_new_tokens: int = 48
    eos_token_id: int = 1  # stories260K ends a story with <s> (id 1), not </s>
    max_prompt_tokens: int = 0  # keep the prompt's last this many tokens (0: all), room for the response
    chat_template: bool = False  # render prompts as chat turns with the tokenizer's template (an instruct model)


@dataclass
class Samples:
    """num_samples responses per prompt, in prompt-major order (prompt 0's samples first)."""

    prompt_ids: list[list[int]]  # one per response
    response_ids: list[list[int]]  # up to and including the eos token when one was sampled
    texts: list[str]


def prompt_token_ids(tokenizer, prompts: Sequence[str], max_tokens: int = 0, chat: bool = False) -> list[list[int]]:
    """Each prompt's token ids; with `max_tokens`, only its last `max_tokens` (a conversation's latest turns).

    `chat`: the prompt's turns (`hh_messages`) through the tokenizer's chat template, ending with the assistant's
    generation prompt; too long a conversation loses its earliest turns first, then its first tokens.
    """
    if not chat:
        ids = [tokenizer(p)["input_ids"] for p in prompts]
        return [x[-max_tokens:] for x in ids] if max_tokens else ids
    return [chat_token_ids(tokenizer, hh_messages(p), max_tokens) for p in prompts]


def chat_token_ids(tokenizer, messages: list[dict[str, str]], max_tokens: int = 0) -> list[int]:
    """The chat template's ids of `messages` plus the generation prompt, earliest turns dropped to fit."""

    def render(turns: list[dict[str, str]]) -> list[int]:
        return tokenizer(
            tokenizer.apply_chat_template(turns, add_generation_prompt=True, tokenize=False), add_special_tokens=False
        )["input_ids"]

    ids = render(messages)
    while max_tokens and len(ids) > max_tokens and len(messages) > 1:
        messages = messages[1:]
        while len(messages) > 1 and messages[0]["role"] == "assistant":  # a conversation opens with the user
            messages = messages[1:]
        ids = render(messages)
    return ids[-max_tokens:] if max_tokens else ids


def cut_at_eos(ids: list[int], eos: int) -> list[int]:
    """The response up to and including its first eos (padding after it dropped)."""
    return ids[: ids.index(eos) + 1] if eos in ids else ids


@torch.no_grad()
def sample(
    policy: ConditionalPolicy,
    tokenizer,
    prompts: Sequence[str],
    settings: Sampling,
    seed: int,
    z: torch.Tensor | None = None,
    reference: bool = False,
) -> Samples:
    """Sample `settings.num_samples` responses per prompt from the policy under z (or from the frozen base).

    Seeded: the same seed, prompts and weights give the same samples (the global RNG is forked).
    """
    per_prompt = prompt_token_ids(tokenizer, prompts, settings.max_prompt_tokens, settings.chat_template)
    rows = [ids for ids in per_prompt for _ in range(settings.num_samples)]
    width = max(len(r) for r in rows)
    input_ids = torch.tensor([[PAD_ID] * (width - len(r)) + r for r in rows])  # left-padded
    attention = (torch.arange(width).unsqueeze(0) >= torch.tensor([width - len(r) for r in rows]).unsqueeze(1)).long()
    policy.eval()
    context = policy.reference() if reference else policy.conditioned(z, len(rows))
    device = policy.device
    forked = [device] if device.type == "cuda" else []  # sampling on a GPU draws from its own generator
    with torch.random.fork_rng(devices=forked), context, policy.autocast():
        torch.manual_seed(seed)
        out = policy.lm.generate(
            input_ids=input_ids.to(device),
            attention_mask=attention.to(device),
            do_sample=True,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_new_tokens=settings.max_new_tokens,
            eos_token_id=settings.eos_token_id,
            pad_token_id=PAD_ID,
        )
    responses = [cut_at_eos(r.tolist(), settings.eos_token_id) for r in out[:, width:]]
    texts = tokenizer.batch_decode(responses, skip_special_tokens=True)
    return Samples(rows, responses, [t.strip() for t in texts])
