"""Turn a config into data, clients, a reward model and its initial adapter state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from torch import nn

from fedpref.client.worker import EncodedClient
from fedpref.config import MULTI_MODEL_METHODS, ExperimentConfig
from fedpref.data.hh import load_hh_rlhf
from fedpref.data.hh_partition import partition_hh
from fedpref.data.pairs import PreferencePair, read_jsonl
from fedpref.data.pairwise import load_pairwise_jsonl
from fedpref.data.splits import ClientSplits, split_clients
from fedpref.data.synthetic import generate_synthetic_with_axes
from fedpref.data.tldr import load_tldr
from fedpref.errors import ConfigError
from fedpref.experiments.client_store import OnDemandClients
from fedpref.models.adapters import State, trainable_state
from fedpref.models.factory import build_reward_model
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


def load_pairs(cfg: ExperimentConfig) -> list[PreferencePair]:
    """The pairs of `cfg.data.source`, one client per distinct `client`."""
    return _LOADERS[cfg.data.source](cfg)


def _synthetic(cfg: ExperimentConfig) -> list[PreferencePair]:
    pairs = generate_synthetic_with_axes(
        cfg.data.group_sizes, cfg.data.pairs_per_axis, cfg.seed, label_noise=cfg.data.label_noise
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


_LOADERS = {
    "synthetic": _synthetic,
    "jsonl": lambda cfg: read_jsonl(cfg.data.path),
    "tldr": _tldr,
    "hh": _hh,
    "pairwise_jsonl": _pairwise,
}


def check_client_count(cfg: ExperimentConfig, clients: int) -> None:
    """Per-round sampling and multi-model methods need enough clients; known only once the data is loaded."""
    where, per_round = cfg.data.path or cfg.data.source, cfg.federation.clients_per_round
    if per_round > clients:
        raise ConfigError(f"{where}: {clients} client(s), fewer than federation.clients_per_round = {per_round}")
    multi = [m for m in cfg.algorithm.methods if m in MULTI_MODEL_METHODS]
    if multi and cfg.algorithm.num_models > clients:
        raise ConfigError(
            f"{where}: {clients} client(s), fewer than algorithm.num_models = {cfg.algorithm.num_models} "
            f"for {', '.join(multi)}"
        )


def pick_unseen(splits: list[ClientSplits], count: int, seed: int) -> list[str]:
    """`count` client ids spread evenly over the true groups (round robin over shuffled groups), seeded."""
    if count >= len(splits):
        raise ConfigError(f"data.unseen_clients = {count} leaves no client for training ({len(splits)} clients)")
    rng = np.random.default_rng(seed)
    by_group: dict[str | None, list[str]] = {}
    for s in splits:
        by_group.setdefault(s.group, []).append(s.client_id)
    queues = [list(rng.permutation(ids)) for _, ids in sorted(by_group.items(), key=lambda kv: str(kv[0]))]
    picked: list[str] = []
    while len(picked) < count:
        for queue in queues:
            if queue and len(picked) < count:
                picked.append(str(queue.pop()))
    return sorted(picked)


def build_setup(cfg: ExperimentConfig) -> Setup:
    """Everything a method needs; the encoded data (and prefix cache) is made once and shared by all methods."""
    splits = split_clients(load_pairs(cfg), cfg.data.val_pairs, cfg.data.test_pairs, cfg.seed)
    unseen = pick_unseen(splits, cfg.data.unseen_clients, cfg.seed) if cfg.data.unseen_clients else []
    check_client_count(cfg, len(splits) - len(unseen))
    model = build_reward_model(cfg)

    def encode(s: ClientSplits) -> EncodedClient:
        return EncodedClient(s.client_id, s.group, model.encode(s.train), model.encode(s.val), model.encode(s.test))

    if cfg.data.resident_clients:
        clients = OnDemandClients(splits, encode, cfg.data.resident_clients)
    else:
        clients = {s.client_id: encode(s) for s in splits}
    infos = [ClientInfo(s.client_id, len(s.train), s.group) for s in splits if s.client_id not in unseen]
    return Setup(splits, clients, infos, model, trainable_state(model), unseen)
