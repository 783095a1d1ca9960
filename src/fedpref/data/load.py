"""The preference pairs a config names, from whichever source it names (one client per distinct `client`)."""

from __future__ import annotations

from typing import Any

from fedpref.config import ExperimentConfig
from fedpref.data.formats import Messages, chat_renderer, load_preferences
from fedpref.data.hh import load_hh_rlhf
from fedpref.data.hh_partition import partition_hh
from fedpref.data.pairs import PreferencePair, read_jsonl
from fedpref.data.pairwise import load_pairwise_jsonl
from fedpref.data.synthetic import generate_synthetic_with_axes
from fedpref.data.tldr import load_tldr


def load_pairs(cfg: ExperimentConfig) -> list[PreferencePair]:
    """The pairs of `cfg.data.source`, one client per distinct `client`."""
    return _LOADERS[cfg.data.source](cfg)


def _synthetic(cfg: ExperimentConfig) -> list[PreferencePair]:
    pairs = generate_synthetic_with_axes(
        cfg.data.group_sizes,
        cfg.data.pairs_per_axis,
        cfg.seed,
        label_noise=cfg.data.label_noise,
        style_mix=cfg.data.style_mix,
        cues=cfg.data.cues,
    )
    return [pair for pair, axis in pairs if axis in cfg.data.synthetic_axes]


def _tldr(cfg: ExperimentConfig) -> list[PreferencePair]:
    t = cfg.data.tldr
    return load_tldr(
        cfg.data.path,
        splits=t.splits or None,
        required_splits=t.required_splits,
        min_per_split=t.min_per_split,
        min_total=t.min_total,
    )


def _hh(cfg: ExperimentConfig) -> list[PreferencePair]:
    h = cfg.data.hh
    return partition_hh(
        load_hh_rlhf(cfg.data.path, subsets=h.subsets or None),
        num_clients=h.num_clients,
        scheme=h.scheme,
        helpful_fraction=h.helpful_fraction,
        alpha=h.alpha,
        pairs_per_client=h.pairs_per_client or None,
        seed=cfg.seed,
    )


def _pairwise(cfg: ExperimentConfig) -> list[PreferencePair]:
    k = cfg.data.pairwise
    return load_pairwise_jsonl(
        cfg.data.path,
        prompt_key=k.prompt_key,
        chosen_key=k.chosen_key,
        rejected_key=k.rejected_key,
        user_key=k.user_key,
        group_key=k.group_key or None,
    )


def _preferences(cfg: ExperimentConfig) -> list[PreferencePair]:
    k = cfg.data.pairwise
    keys = {"prompt": k.prompt_key, "chosen": k.chosen_key, "rejected": k.rejected_key, "client": k.user_key}
    tokenizer: list[Any] = []  # loaded on the first chat row only: plain-text data never needs it

    def render(prompt: Messages, completion: Messages) -> tuple[str, str]:
        if not tokenizer:
            tokenizer.append(chat_renderer(_chat_tokenizer(cfg.model.tokenizer or cfg.model.backbone)))
        return tokenizer[0](prompt, completion)

    return load_preferences(cfg.data.path, keys=keys, group_key=k.group_key or None, split=k.split, render=render)


def _chat_tokenizer(name: str) -> Any | None:
    """The run's tokenizer (model.tokenizer, else the backbone's), for its chat template; MiniLM's has none."""
    if name == "minilm":
        return None
    from transformers import AutoTokenizer

    from fedpref.embedded import resolve_backbone

    try:
        return AutoTokenizer.from_pretrained(resolve_backbone(name))
    except (OSError, ValueError):
        return None  # building the model reports an unloadable backbone, with its own message


_LOADERS = {
    "synthetic": _synthetic,
    "jsonl": lambda cfg: read_jsonl(cfg.data.path),
    "tldr": _tldr,
    "hh": _hh,
    "pairwise_jsonl": _pairwise,
    "pairwise": _preferences,
}
