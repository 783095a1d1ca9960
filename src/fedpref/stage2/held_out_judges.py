"""Judges that share nothing with Stage 1: reward models trained on held-out pairs (the FedVPA-GP paper's App. C.3.2
"reward model scores") and a causal LM asked the App. D.2 question, each with its agreement with held-out labels."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from fedpref.client.trainer import LocalTrainer, optim_configs
from fedpref.config import ExperimentConfig, load_config, validate
from fedpref.data.pairs import PreferencePair
from fedpref.models.adapters import State, load_trainable_state, trainable_state
from fedpref.models.factory import build_reward_model
from fedpref.stage2.generation import chat_token_ids
from fedpref.stage2.judges import Judge, verdict
from fedpref.stage2.policy import PAD_ID, load_lm
from fedpref.stage2.stage1 import type_of
from fedpref.stage2.winrate import summarize_verdicts

HeldOut = dict[str, tuple[list[PreferencePair], list[PreferencePair]]]  # type -> (train, test) pairs


def agreement(judge: Judge, test: dict[str, list[PreferencePair]]) -> dict[str, dict]:
    """Per type, how often the judge prefers the human-chosen response of held-out pairs (chosen shown first),
    as a win-rate summary: 'win_rate' is the agreement (%), ties count half, with its Wilson interval."""
    return {
        group: summarize_verdicts(
            judge([p.prompt for p in pairs], [p.chosen for p in pairs], [p.rejected for p in pairs], group)
        )
        for group, pairs in test.items()
    }


class RewardModelMargins:
    """score(first) - score(second) under the reward model of the key's type (one model, its states swapped)."""

    def __init__(self, model: torch.nn.Module, states: dict[str, State], chunk: int = 32):
        self.model, self.states, self.chunk = model, states, chunk

    @torch.inference_mode()
    def __call__(self, prompts: Sequence[str], first: Sequence[str], second: Sequence[str], key: str) -> list[float]:
        load_trainable_state(self.model, self.states[type_of(key)])
        self.model.eval()
        enc = self.model.encode([PreferencePair(p, a, b, "judge") for p, a, b in zip(prompts, first, second)])
        n = len(prompts)
        parts = [self.model.margins(enc, torch.arange(s, min(s + self.chunk, n))) for s in range(0, n, self.chunk)]
        return torch.cat(parts).float().cpu().tolist()


class RewardModelJudge:
    """(a) One fedpref reward model per preference type, trained centrally on that type's held-out pairs."""

    def __init__(self, margins: RewardModelMargins):
        self.margins = margins

    def __call__(self, prompts, first, second, group) -> list[float]:
        return [verdict(m) for m in self.margins(prompts, first, second, group)]


def judge_model_config(backbone: str, head: str, max_length: int, steps: int, device: str, seed: int):
    """The ExperimentConfig of a held-out reward model: the shipped defaults with these fields set, LoRA on the top
    2 layers as the CPU configs have (the frozen ones run once per pair: on all six of MiniLM's, a step at 256 tokens
    took about 50 s on one core)."""
    base = load_config(None)
    cfg = dataclasses.replace(
        base,
        seed=seed,
        device=device,
        model=dataclasses.replace(base.model, backbone=backbone, head=head),
        data=dataclasses.replace(base.data, max_length=max_length, cache_dir=""),
        lora=dataclasses.replace(base.lora, top_layers=2, dropout=0.0),
        train=dataclasses.replace(base.train, local_steps=steps, batch_size=8),
    )
    validate(cfg, "<held-out judge>")
    return cfg


def train_reward_judges(cfg: ExperimentConfig, held_out: HeldOut) -> tuple[RewardModelJudge, dict[str, dict]]:
    """Train one reward model per type for `cfg.train.local_steps` steps from the same initial state; the judge
    and its agreement with each type's held-out test labels."""
    model = build_reward_model(cfg)
    init, (optim, _) = trainable_state(model), optim_configs(cfg)
    trainer, states = LocalTrainer(model, optim), {}
    for i, (group, (train, _)) in enumerate(held_out.items()):
        generator = torch.Generator().manual_seed(cfg.seed * 1000 + i)
        states[group], _ = trainer.train(init, model.encode(train), cfg.train.local_steps, generator)
    judge = RewardModelJudge(RewardModelMargins(model, states))
    return judge, agreement(judge, {group: test for group, (_, test) in held_out.items()})


def reward_judge(cfg: ExperimentConfig, states: dict[str, State]) -> RewardModelJudge:
    """The judge of `train_reward_judges` again from its trained states (`judge.margins.states`), untrained."""
    return RewardModelJudge(RewardModelMargins(build_reward_model(cfg), states))


class LMJudge:
    """(b) A causal LM asked the App. D.2 question in its chat template; its verdict compares the next-token
    logits of "A" and "B" (no sampling, no unparsable replies).

    `orders = 1` is the paper's single reading (first response as RESPONSE A); `orders = 2` also reads the pair
    swapped and adds the two margins, which cancels a judge's preference for a position (a small model's
    strongest bias). Each response and the conversation are cut to their last `max_tokens` tokens.
    """

    def __init__(
        self,
        lm: torch.nn.Module,
        tokenizer,
        templates: dict[str, str],
        orders: int = 2,
        max_tokens: int = 256,
        batch: int = 4,
    ):
        self.lm, self.tokenizer, self.templates = lm.eval(), tokenizer, templates
        self.orders, self.max_tokens, self.batch = orders, max_tokens, batch
        self.letters = [tokenizer.convert_tokens_to_ids(x) for x in ("A", "B")]

    def __call__(self, prompts, first, second, group) -> list[float]:
        margins = self.margins(prompts, first, second, group)
        if self.orders == 2:
            swapped = self.margins(prompts, second, first, group)
            margins = [m - s for m, s in zip(margins, swapped)]
        return [verdict(m) for m in margins]

    def _cut(self, text: str) -> str:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return self.tokenizer.decode(ids[-self.max_tokens :]) if len(ids) > self.max_tokens else text

    @torch.inference_mode()
    def margins(self, prompts, first, second, group) -> list[float]:
        """logit("A") - logit("B") at the answer position, the first response shown as RESPONSE A."""
        template = self.templates[type_of(group)]
        texts = [
            template.format(prompt=self._cut(p), response_a=a, response_b=b)
            for p, a, b in zip(prompts, map(self._cut, first), map(self._cut, second))
        ]
        if getattr(self.tokenizer, "chat_template", None):  # an instruct model: the question as a user turn
            rows = [chat_token_ids(self.tokenizer, [{"role": "user", "content": t}]) for t in texts]
        else:
            rows = [self.tokenizer(t)["input_ids"] for t in texts]
        device, out = self.lm.get_input_embeddings().weight.device, []
        for start in range(0, len(rows), self.batch):
            chunk = rows[start : start + self.batch]
            width = max(map(len, chunk))
            ids = torch.tensor([[PAD_ID] * (width - len(r)) + r for r in chunk], device=device)  # left-padded
            starts = torch.tensor([width - len(r) for r in chunk], device=device)
            mask = (torch.arange(width, device=device).unsqueeze(0) >= starts.unsqueeze(1)).long()
            answer = self.lm(input_ids=ids, attention_mask=mask, logits_to_keep=1)  # the answer position only
            logits = answer.logits[:, -1, self.letters].float()  # (B, 2)
            out += (logits[:, 0] - logits[:, 1]).tolist()
        return out


def lm_judge(name: str, templates: dict[str, str], orders: int, max_tokens: int, device: str) -> LMJudge:
    """The LM judge on `name` (e.g. 'smollm2': the embedded SmolLM2-135M-Instruct), frozen."""
    lm, tokenizer = load_lm(name, device)
    return LMJudge(lm, tokenizer, templates, orders, max_tokens)
