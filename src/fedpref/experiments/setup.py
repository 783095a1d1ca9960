"""Turn a config into data, clients, a reward model and its initial adapter state."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from fedpref.algorithms.base import ClientInfo
from fedpref.client.worker import EncodedClient
from fedpref.config import ExperimentConfig
from fedpref.data.pairs import PreferencePair, read_jsonl
from fedpref.data.splits import ClientSplits, split_clients
from fedpref.data.synthetic import generate_synthetic
from fedpref.models.adapters import State, trainable_state
from fedpref.models.factory import build_reward_model


@dataclass
class Setup:
    splits: list[ClientSplits]
    clients: dict[str, EncodedClient]
    infos: list[ClientInfo]
    model: nn.Module
    init_state: State


def load_pairs(cfg: ExperimentConfig) -> list[PreferencePair]:
    if cfg.data.source == "synthetic":
        return generate_synthetic(cfg.data.group_sizes, cfg.data.pairs_per_axis, cfg.seed)
    return read_jsonl(cfg.data.path)


def build_setup(cfg: ExperimentConfig) -> Setup:
    """Everything a method needs; the encoded data (and prefix cache) is made once and shared by all methods."""
    splits = split_clients(load_pairs(cfg), cfg.data.val_pairs, cfg.data.test_pairs, cfg.seed)
    model = build_reward_model(cfg)
    clients = {
        s.client_id: EncodedClient(
            s.client_id, s.group, model.encode(s.train), model.encode(s.val), model.encode(s.test)
        )
        for s in splits
    }
    infos = [ClientInfo(s.client_id, len(s.train), s.group) for s in splits]
    return Setup(splits, clients, infos, model, trainable_state(model))
