"""Stage 2 training: on-policy conditional DPO (Algorithm 1 lines 19-23), the step FedDPO's clients run too, and
offline DPO on logged pairs (FedDPO's clients on real data)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from fedpref.data.pairs import PreferencePair
from fedpref.models.adapters import load_trainable_state
from fedpref.stage2.generation import Samples, Sampling, prompt_token_ids, sample
from fedpref.stage2.judges import Judge
from fedpref.stage2.losses import dpo_loss, sequence_logps
from fedpref.stage2.policy import ConditionalPolicy, TokenBatch, pack

Contexts = dict[str, torch.Tensor | None]  # judge key (preference type) -> z the policy is conditioned on
StepCallback = Callable[[int, list[dict]], None]  # (step, that step's history records), e.g. a progress line


@dataclass(frozen=True)
class DPOSettings:
    """Table 4, RL training: reward coefficient (DPO beta) 0.1, lr 1e-5..1e-4, generation batch size 3."""

    beta: float = 0.1
    lr: float = 1e-4
    steps: int = 30
    prompts_per_step: int = 3
    weight_decay: float = 0.0
    grad_accumulation: int = 1  # generation batches whose mean DPO gradient one AdamW step takes (Table 4: 4-32)


@dataclass(frozen=True)
class Pair:
    prompt: list[int]
    chosen: list[int]
    rejected: list[int]


def label_pairs(samples: Samples, prompts: Sequence[str], judge: Judge, key: str, per_prompt: int) -> list[Pair]:
    """Pairs (sample 2j, sample 2j+1) of each prompt, ordered by the judge's verdict; ties are dropped."""
    first = [i for i in range(len(samples.texts)) if i % per_prompt % 2 == 0 and i % per_prompt + 1 < per_prompt]
    texts = samples.texts
    verdicts = judge(
        [prompts[i // per_prompt] for i in first], [texts[i] for i in first], [texts[i + 1] for i in first], key
    )
    pairs = []
    for i, v in zip(first, verdicts):
        if v == 0.5:
            continue
        win, lose = (i, i + 1) if v == 1.0 else (i + 1, i)
        pairs.append(Pair(samples.prompt_ids[i], samples.response_ids[win], samples.response_ids[lose]))
    return pairs


def response_logps(policy: ConditionalPolicy, batch: TokenBatch) -> torch.Tensor:
    """(B,) response log-probabilities in fp32, computed on the policy's device."""
    batch = batch.to(policy.device)
    with policy.autocast():
        logits = policy.lm(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    return sequence_logps(logits, batch.input_ids, batch.response_mask)


def dpo_update(
    policy: ConditionalPolicy, optimizer: torch.optim.Optimizer, pairs: list[Pair], z: torch.Tensor | None, beta: float
) -> dict[str, float]:
    """One DPO step on `pairs`: policy under z vs the frozen base (adapters off, no z) as reference."""
    optimizer.zero_grad(set_to_none=True)
    record = dpo_backward(policy, pairs, z, beta)
    optimizer.step()
    return record


def dpo_backward(
    policy: ConditionalPolicy, pairs: list[Pair], z: torch.Tensor | None, beta: float, weight: float = 1.0
) -> dict[str, float]:
    """Add `weight` x the DPO loss's gradient on `pairs` to the trainable weights' .grad; the loss and the implicit
    rewards (unweighted) for the history."""
    n = len(pairs)
    batch = pack([p.prompt for p in pairs] * 2, [p.chosen for p in pairs] + [p.rejected for p in pairs])
    with torch.no_grad(), policy.reference():
        ref = response_logps(policy, batch)
    policy.train()
    with policy.conditioned(z, 2 * n):
        logps = response_logps(policy, batch)
    loss, r_chosen, r_rejected = dpo_loss(logps[:n], logps[n:], ref[:n], ref[n:], beta)
    (loss * weight).backward()
    policy.eval()
    margin = r_chosen - r_rejected
    return {
        "loss": loss.item(),
        "reward_margin": margin.mean().item(),
        "reward_acc": (margin > 0).float().mean().item(),
    }


def train_dpo(
    policy: ConditionalPolicy,
    tokenizer,
    prompts: Sequence[str],
    contexts: Contexts,
    judge: Judge,
    settings: DPOSettings,
    sampling: Sampling,
    seed: int,
    on_step: StepCallback | None = None,
    saved: dict | None = None,
    save: Callable[[dict], None] | None = None,
) -> list[dict]:
    """On-policy DPO: each generation batch takes the next context (round robin), samples `sampling.num_samples`
    responses per prompt under its z, lets the judge label them for that key and adds their DPO gradient; each
    step averages `settings.grad_accumulation` such batches (equal weights) and updates LoRA + Z-to-embedding.
    One history record per generation batch; `on_step(step, its records)` after each step.

    `save(state)` after each step, with everything the next step needs (weights, optimizer, the prompt order);
    `saved` (such a state) continues from it, to the same end as a run without the break.
    """
    params = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=settings.lr, weight_decay=settings.weight_decay)
    rng = np.random.default_rng(seed)
    order, cursor, keys, history, first = rng.permutation(len(prompts)), 0, list(contexts), [], 0
    if saved:
        load_trainable_state(policy, saved["weights"])
        optimizer.load_state_dict(saved["optimizer"])
        rng, order, cursor, history, first = (saved[k] for k in ("rng", "order", "cursor", "history", "next_step"))
        torch.set_rng_state(saved["torch_rng"])  # LoRA dropout's draws go on as without the break
    k = settings.grad_accumulation
    for step in range(first, settings.steps):
        optimizer.zero_grad(set_to_none=True)
        stepped = False
        for draw in range(step * k, (step + 1) * k):  # generation batches, numbered across steps
            key = keys[draw % len(keys)]
            if cursor + settings.prompts_per_step > len(order):
                order, cursor = rng.permutation(len(prompts)), 0
            batch = [prompts[i] for i in order[cursor : cursor + settings.prompts_per_step]]
            cursor += settings.prompts_per_step
            samples = sample(policy, tokenizer, batch, sampling, seed=seed * 100_003 + draw, z=contexts[key])
            pairs = label_pairs(samples, batch, judge, key, sampling.num_samples)
            record = {"step": step, "key": key, "pairs": len(pairs)}
            if pairs:
                record.update(dpo_backward(policy, pairs, contexts[key], settings.beta, weight=1 / k))
                stepped = True
            history.append(record)
        if stepped:
            optimizer.step()
        if on_step:
            on_step(step, history[-k:])
        if save:
            state = {"weights": policy.adapter_state(), "optimizer": optimizer.state_dict(), "rng": rng}
            state["torch_rng"] = torch.get_rng_state()
            save(state | {"order": order, "cursor": cursor, "history": history, "next_step": step + 1})
    return history


def tokenize_pairs(
    tokenizer, pairs: Sequence[PreferencePair], sampling: Sampling, max_response_tokens: int
) -> list[Pair]:
    """Token ids of logged (prompt, chosen, rejected) pairs as the policy would have produced them: the prompt as
    `sample` feeds it (its last `sampling.max_prompt_tokens`), each response's first `max_response_tokens` and the
    eos token where the response ends within them."""
    prompts = prompt_token_ids(tokenizer, [p.prompt for p in pairs], sampling.max_prompt_tokens, sampling.chat_template)

    def response(text: str) -> list[int]:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        return ids[:max_response_tokens] if len(ids) >= max_response_tokens else ids + [sampling.eos_token_id]

    return [Pair(ids, response(p.chosen), response(p.rejected)) for ids, p in zip(prompts, pairs)]


def train_dpo_offline(policy: ConditionalPolicy, pairs: Sequence[Pair], settings: DPOSettings, seed: int) -> list[dict]:
    """Offline DPO on logged pairs (FedDPO's local step on a client's own preference data, as in OpenFedLLM):
    each step averages `settings.grad_accumulation` batches of `settings.prompts_per_step` pairs, drawn in
    `seed`-shuffled epochs. One history record per batch, as `train_dpo`'s."""
    params = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=settings.lr, weight_decay=settings.weight_decay)
    rng = np.random.default_rng(seed)
    order, cursor, history, k = rng.permutation(len(pairs)), 0, [], settings.grad_accumulation
    size = min(settings.prompts_per_step, len(pairs))
    for step in range(settings.steps):
        optimizer.zero_grad(set_to_none=True)
        for _ in range(k):
            if cursor + size > len(order):
                order, cursor = rng.permutation(len(pairs)), 0
            batch = [pairs[i] for i in order[cursor : cursor + size]]
            cursor += size
            record = dpo_backward(policy, batch, None, settings.beta, weight=1 / k)
            history.append({"step": step, "key": "offline", "pairs": len(batch)} | record)
        optimizer.step()
    return history
