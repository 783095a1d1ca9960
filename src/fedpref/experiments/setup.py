"""Turn a config into data, clients, a reward model and its initial adapter state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from torch import nn

from fedpref.algorithms.registry import check_method_rules, method_spec
from fedpref.client.worker import EncodedClient
from fedpref.config import ExperimentConfig
from fedpref.data.load import load_pairs
from fedpref.data.splits import ClientSplits, pick_unseen, split_clients
from fedpref.errors import ConfigError
from fedpref.experiments.client_store import OnDemandClients
from fedpref.models.adapters import State, trainable_state
from fedpref.models.factory import build_reward_model
from fedpref.models.selector_reward import SelectorRewardModel
from fedpref.protocol import ClientInfo


@dataclass
class Setup:
    splits: list[ClientSplits]
    clients: Mapping[str, EncodedClient]
    infos: list[ClientInfo]
    model: nn.Module
    init_state: State
    unseen: list[str] = field(default_factory=list)  # clients held out of the global phase (data.unseen_clients)

    def seen_clients(self) -> dict[str, EncodedClient]:
        unseen = set(self.unseen)
        return {cid: self.clients[cid] for cid in self.clients if cid not in unseen}

    def unseen_clients(self) -> dict[str, EncodedClient]:
        return {cid: self.clients[cid] for cid in self.unseen}


def check_client_count(cfg: ExperimentConfig, clients: int) -> None:
    """Per-round sampling and the methods' rules (multi-model ones) need enough clients, known once the data loads."""
    where, per_round = cfg.data.path or cfg.data.source, cfg.federation.clients_per_round
    if per_round > clients:
        raise ConfigError(f"{where}: {clients} client(s), fewer than federation.clients_per_round = {per_round}")
    check_method_rules(cfg, clients, where)  # the methods' own rules, now with the actual client count


def build_setup(cfg: ExperimentConfig) -> Setup:
    """Everything a method needs; the encoded data (and prefix cache) is made once and shared by all methods."""
    splits = split_clients(load_pairs(cfg), cfg.data.val_pairs, cfg.data.test_pairs, cfg.seed)
    unseen = pick_unseen(splits, cfg.data.unseen_clients, cfg.seed) if cfg.data.unseen_clients else []
    check_client_count(cfg, len(splits) - len(unseen))
    model = build_reward_model(cfg)
    if isinstance(model, SelectorRewardModel) and any(method_spec(m).variational for m in cfg.algorithm.methods):
        model.check_spans([p for s in splits for p in (*s.train, *s.val, *s.test)])  # before any forward pass

    def encode(s: ClientSplits) -> EncodedClient:
        return EncodedClient(s.client_id, s.group, model.encode(s.train), model.encode(s.val), model.encode(s.test))

    if cfg.data.resident_clients:
        clients = OnDemandClients(splits, encode, cfg.data.resident_clients)
    else:
        clients = {s.client_id: encode(s) for s in splits}
    infos = [ClientInfo(s.client_id, len(s.train), s.group) for s in splits if s.client_id not in unseen]
    return Setup(splits, clients, infos, model, trainable_state(model), unseen)
