"""Typed configuration of a Stage 2 run (`fedpref stage2 CONFIG`): TOML sections with help text and checks."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from fedpref.config import AUTOCAST_PRECISIONS, _help, build_config, option_help, read_toml
from fedpref.errors import ConfigError
from fedpref.models.factory import check_device

TASKS = ("story", "hh")
REWARDS = ("selector", "oracle")
JUDGES = ("oracle", "selector", "chat", "reward_model", "lm")
HELD_OUT_JUDGES = ("reward_model", "lm")  # judged and measured on pairs no client or training step sees (hh)
CHAT_FOCUS = ("per_type", "paper")


@dataclass
class TaskConfig:
    """What the clients prefer and where the prompts come from: the story task or HH-RLHF (docs/stage2.md)."""

    name: str = _help(
        "'story': G1 prefers more size words, G2 fewer, an exact oracle (fedpref.stage2.task); 'hh': HH-RLHF "
        "helpful vs harmless clients holding their own pairs (paper Sec. 5.1; judges: selector, chat).",
        "story",
    )
    clients_per_type: int = _help("Clients of each preference type (story: G1, G2; hh: helpful, harmless).", 5)
    prompts_per_client: int = _help(
        "Stage 1 data per client: story: prompts, 2 base samples each, ties dropped; hh: the pairs dealt to it.", 120
    )
    eval_prompts: int = _help("Held-out prompts for the win rates (App. C.3.1: up to 30 samples).", 30)
    words: list[str] = _help(
        "story: the word set the oracle counts.", factory=lambda: ["big", "huge", "large", "giant"]
    )
    unseen_per_type: int = _help(
        "Clients of each type held out of Stage 1 and of FedDPO (Table 2: 5 of 10); their z is inferred from their "
        "own pairs without an update, and the win rates are reported under it too ('<type> (unseen)').",
        0,
    )
    data_path: str = _help(
        "hh: a folder of {subset}.{split}.jsonl.gz (helpful-base, harmless-base) or the hub id Anthropic/hh-rlhf.",
        "Anthropic/hh-rlhf",
    )


@dataclass
class Stage1Config:
    """Stage 1 (FedVPA-GP via fedpref.experiments) on the generated pairs; MiniLM selector."""

    method: str = _help("Stage 1 method: FedVPA-GP, FedVPL, FedVPL+Ortho or FedVPL+GB.", "FedVPA-GP")
    rounds: int = _help("Federated rounds (Table 4: 50).", 50)
    clients_per_round: int = _help("Clients per round (App. C.1: 5 for K = 10).", 5)
    local_steps: int = _help("Local steps per round (Table 4: 30).", 30)
    batch_size: int = _help("Pairs per step (Table 4: 4-8).", 8)
    lr: float = _help("Learning rate (Table 4: 1e-5 to 1e-4).", 1e-4)
    val_pairs: int = _help("Validation pairs per client.", 5)
    test_pairs: int = _help("Test pairs per client (selector accuracy).", 15)
    overrides: list[str] = _help(
        "Further `fedpref run --set` items for the Stage 1 ExperimentConfig, e.g. 'lora.top_layers=2'.", factory=list
    )


@dataclass
class PolicyLoraConfig:
    rank: int = _help("LoRA rank of the policy (Table 4: 8).", 8)
    alpha: int = _help("LoRA alpha (Table 4: 16).", 16)
    dropout: float = _help("LoRA dropout (Table 4: 0.05).", 0.05)


@dataclass
class GenerationConfig:
    """App. D.1.2 defaults."""

    temperature: float = _help("Sampling temperature (App. D.1.2: 0.7).", 0.7)
    top_p: float = _help("Nucleus top-p (App. D.1.2: 1.0).", 1.0)
    num_samples: int = _help("Samples per prompt; consecutive samples form a DPO pair (App. D.1.2: 2).", 2)
    max_new_tokens: int = _help("Max new tokens (App. D.1.2: 512, configurable).", 512)
    max_prompt_tokens: int = _help(
        "Keep only the last this many prompt tokens (0: the whole prompt); a long HH conversation must leave "
        "room for max_new_tokens in the policy's context (stories260K: 512 positions).",
        0,
    )
    eos_token_id: int = _help("Token that ends a response (stories260K: 1, its <s>; SmolLM2: 2, <|im_end|>).", 1)
    chat_template: bool = _help(
        "Render each prompt as chat turns with the policy tokenizer's chat template (an instruct model such as "
        "SmolLM2; HH transcripts become user/assistant turns, too long a conversation loses its earliest turns).",
        False,
    )


@dataclass
class DPOConfig:
    reward: str = _help(
        "Who labels the on-policy pairs: 'selector' (Stage 1, paper) or 'oracle' (an upper bound).", "selector"
    )
    beta: float = _help("DPO beta (Table 4 'reward coefficient': 0.1).", 0.1)
    lr: float = _help("AdamW learning rate (Table 4: 1e-5 to 1e-4).", 1e-4)
    steps: int = _help("DPO steps on the server; each takes the next type's z in turn.", 1500)
    prompts_per_step: int = _help("Prompts generated per step (Table 4 generation batch size: 3).", 3)
    grad_accumulation: int = _help(
        "Generation batches whose mean DPO gradient one AdamW step takes (Table 4: batch 1 with 4-32 accumulation "
        "steps, so 4-32 pairs a step; at 3 prompts a batch, 2-10 here). FedDPO's local steps too.",
        1,
    )


@dataclass
class FedDPOConfig:
    enabled: bool = _help("Also train the FedDPO baseline (one global policy, FedAvg over client LoRA).", True)
    rounds: int = _help("Rounds (Table 4, RL training: 50).", 50)
    clients_per_round: int = _help("Clients per round.", 5)
    local_steps: int = _help("Local DPO steps per client per round (Table 4: 30).", 30)


@dataclass
class EvalConfig:
    judges: list[str] = _help(
        f"Judges of the win rates, any of {', '.join(JUDGES)}.", factory=lambda: ["oracle", "selector"]
    )
    chat_url: str = _help("chat judge: base URL of an OpenAI-compatible API, e.g. https://api.openai.com/v1.", "")
    chat_focus: str = _help(
        "chat judge on hh: 'per_type' asks which response is more helpful (helpful type) or more harmless "
        "(harmless type), the paper's two win rates (App. C.3.1); 'paper' asks App. D.2's 'more helpful and "
        "harmless' for both.",
        "per_type",
    )
    chat_model: str = _help("chat judge: model name (App. D.2: gpt-4o-mini).", "gpt-4o-mini")
    chat_key_env: str = _help("chat judge: environment variable holding the API key ('' for none).", "OPENAI_API_KEY")
    judge_train_pairs: int = _help(
        "reward_model judge (hh): held-out pairs per type it trains on: helpfulness from helpful-online and "
        "helpful-rejection-sampled, harmlessness from harmless-base pairs no client was dealt (App. C.3.2).",
        400,
    )
    judge_test_pairs: int = _help(
        "reward_model and lm judges (hh): further held-out pairs per type on which their agreement with the human "
        "labels is measured and reported.",
        100,
    )
    reward_model_backbone: str = _help(
        "reward_model judge: its backbone (any model.backbone: 'minilm', 'smollm2', a folder or hub id).", "minilm"
    )
    reward_model_head: str = _help("reward_model judge: its model.head ('scalar', 'selector', ...).", "scalar")
    reward_model_max_length: int = _help("reward_model judge: its data.max_length.", 256)
    reward_model_steps: int = _help(
        "reward_model judge: training steps per type (batch 8, LoRA on the top 2 layers, the default lr).", 200
    )
    lm_model: str = _help(
        "lm judge: the causal LM asked App. D.2's question ('smollm2': the embedded SmolLM2-135M-Instruct; a "
        "folder, .gguf file or hub id); it reads the next-token logits of 'A' and 'B'.",
        "smollm2",
    )
    lm_orders: int = _help(
        "lm judge: 1 reads each pair once, the policy's response as RESPONSE A (the paper's order); 2 also reads "
        "it swapped and adds the margins, which cancels the judge's preference for a position.",
        2,
    )
    lm_max_tokens: int = _help("lm judge: the conversation and each response cut to their last this many tokens.", 256)


@dataclass
class Stage2Config:
    name: str = _help("Run name (default output folder runs/<name>).", "stage2")
    seed: int = _help("Seed of prompts, data, sampling and initialization.", 0)
    policy_path: str = _help(
        "The policy: 'smollm2' (the embedded SmolLM2-135M-Instruct), a .gguf file (or, online, a hub one: "
        "'owner/repo/path.gguf'), a local Hugging Face causal LM folder or, online, a hub id (default: stories260K).",
        "ggml-org/models/tinyllamas/stories260K.gguf",
    )
    device: str = _help(
        "Torch device of the whole pipeline: 'cpu', 'cuda', 'cuda:1', 'mps' or 'auto' (a GPU where there is one); "
        "Stage 1 gets it too unless stage1.overrides names its own `device=`.",
        "cpu",
    )
    precision: str = _help(
        "The policy's forward passes and sampling: 'auto' (bf16 autocast on a CUDA GPU, fp32 elsewhere), 'fp32' "
        "or 'bf16'; LoRA weights and AdamW stay fp32, log-probabilities are summed in fp32.",
        "auto",
    )
    task: TaskConfig = field(default_factory=TaskConfig)
    stage1: Stage1Config = field(default_factory=Stage1Config)
    lora: PolicyLoraConfig = field(default_factory=PolicyLoraConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    dpo: DPOConfig = field(default_factory=DPOConfig)
    feddpo: FedDPOConfig = field(default_factory=FedDPOConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def digest(self) -> str:
        """A short hash of the resolved config (a sweep tells two cells' configs apart by it)."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:12]


# Top-level keys that only a Stage 2 config has: `fedpref sweep` and `fedpref run` tell the two kinds apart by them
STAGE2_KEYS = frozenset({"policy_path", "task", "stage1", "generation", "dpo", "feddpo", "eval"})


def is_stage2_config(path: str | Path) -> bool:
    """Whether the TOML file at `path` is a Stage 2 config (one of STAGE2_KEYS at its top level)."""
    _, raw = read_toml(path, None)
    return bool(STAGE2_KEYS & set(raw))


def load_stage2_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Stage2Config:
    """Load a TOML file (or the defaults), apply `a.b=c` overrides, validate; errors name the key and file."""
    source, raw = read_toml(path, overrides)
    cfg = build_config(Stage2Config, raw, source)
    validate_stage2(cfg, source)
    return cfg


def validate_stage2(c: Stage2Config, source: str) -> None:
    def need(ok: bool, key: str, problem: str) -> None:
        if not ok:
            raise ConfigError(f"{source}: '{key}' {problem}")

    need(c.precision in AUTOCAST_PRECISIONS, "precision", f"must be one of {', '.join(AUTOCAST_PRECISIONS)}")
    try:
        check_device(c.device)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    need(c.task.name in TASKS, "task.name", f"must be one of {', '.join(TASKS)}")
    story = c.task.name == "story"
    need(story or "oracle" not in c.eval.judges, "eval.judges", "cannot use 'oracle' on task 'hh' (no exact oracle)")
    need(story or c.dpo.reward != "oracle", "dpo.reward", "must be 'selector' on task 'hh' (no exact oracle)")
    need(c.eval.chat_focus in CHAT_FOCUS, "eval.chat_focus", f"must be one of {', '.join(CHAT_FOCUS)}")
    need(c.generation.max_prompt_tokens >= 0, "generation.max_prompt_tokens", "must be >= 0")
    need(c.task.clients_per_type >= 1, "task.clients_per_type", "must be >= 1")
    need(c.task.prompts_per_client >= 4, "task.prompts_per_client", "must be >= 4")
    need(c.task.eval_prompts >= 1, "task.eval_prompts", "must be >= 1")
    need(not story or bool(c.task.words), "task.words", "must name at least one word")
    need(
        c.generation.num_samples >= 2 and c.generation.num_samples % 2 == 0,
        "generation.num_samples",
        "must be even, >= 2",
    )
    need(c.generation.temperature > 0, "generation.temperature", "must be > 0")
    need(0 < c.generation.top_p <= 1, "generation.top_p", "must be in (0, 1]")
    need(c.generation.max_new_tokens >= 1, "generation.max_new_tokens", "must be >= 1")
    need(c.dpo.reward in REWARDS, "dpo.reward", f"must be one of {', '.join(REWARDS)}")
    need(c.dpo.beta > 0 and c.dpo.lr > 0, "dpo.beta/lr", "must be > 0")
    need(c.dpo.steps >= 0 and c.dpo.prompts_per_step >= 1, "dpo.steps/prompts_per_step", "must be >= 0 / >= 1")
    need(c.dpo.grad_accumulation >= 1, "dpo.grad_accumulation", "must be >= 1")
    need(
        0 <= c.task.unseen_per_type < c.task.clients_per_type,
        "task.unseen_per_type",
        f"must be in [0, {c.task.clients_per_type - 1}] (task.clients_per_type - 1)",
    )
    clients = 2 * (c.task.clients_per_type - c.task.unseen_per_type)  # the seen clients
    need(1 <= c.feddpo.clients_per_round <= clients, "feddpo.clients_per_round", f"must be in [1, {clients}]")
    need(1 <= c.stage1.clients_per_round <= clients, "stage1.clients_per_round", f"must be in [1, {clients}]")
    need(c.feddpo.rounds >= 1 and c.feddpo.local_steps >= 1, "feddpo.rounds/local_steps", "must be >= 1")
    need(c.lora.rank >= 1 and 0 <= c.lora.dropout < 1, "lora.rank/dropout", "must be >= 1 / in [0, 1)")
    bad = [j for j in c.eval.judges if j not in JUDGES]
    need(not bad, "eval.judges", f"has unknown judge(s) {bad}; choose from {', '.join(JUDGES)}")
    need("chat" not in c.eval.judges or bool(c.eval.chat_url), "eval.chat_url", "is required for the chat judge")
    held_out = [j for j in c.eval.judges if j in HELD_OUT_JUDGES]
    need(not held_out or not story, "eval.judges", f"{held_out} need held-out labelled pairs: task 'hh' only")
    need(c.eval.judge_train_pairs >= 1 and c.eval.judge_test_pairs >= 1, "eval.judge_*_pairs", "must be >= 1")
    need(c.eval.lm_orders in (1, 2), "eval.lm_orders", "must be 1 or 2")
    need(
        c.eval.reward_model_steps >= 1 and c.eval.lm_max_tokens >= 16,
        "eval.reward_model_steps/lm_max_tokens",
        "must be >= 1 / >= 16",
    )


def option_rows() -> list[tuple[str, str, str]]:
    """(key, default, help) of every Stage 2 option, nested sections flattened to `section.key`."""
    return option_help(Stage2Config)
