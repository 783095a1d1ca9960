"""Build the server algorithm of a method named in the config (names as in the papers' tables)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import torch
from torch import nn

from fedpref.algorithms.base import Algorithm
from fedpref.algorithms.centralized import CL, MultiCL
from fedpref.algorithms.fedavg import FedAvg
from fedpref.algorithms.fedbiscuit import FedBiscuit
from fedpref.algorithms.fedgd import FedGD
from fedpref.algorithms.fedvpa import VARIANTS, build_fedvpa
from fedpref.algorithms.fl_target import FLTarget
from fedpref.algorithms.local import Local
from fedpref.algorithms.soft_fl import SoftFL, orthogonal_adapter_inits
from fedpref.config import ExperimentConfig
from fedpref.errors import ConfigError
from fedpref.models.adapters import State
from fedpref.protocol import ClientInfo

# (config, client infos, initial adapter state, the reward model) -> algorithm; the model is for
# methods whose initialization depends on the backbone (Soft-FL's orthogonal adapters).
Builder = Callable[[ExperimentConfig, list[ClientInfo], State, nn.Module], Algorithm]


def _fl(cfg, infos, init, model):
    return FedAvg(infos, init, cfg.federation.rounds, cfg.federation.clients_per_round, cfg.train.local_steps, cfg.seed)


def _centralized_steps(cfg: ExperimentConfig, models: int = 1) -> int:
    """Steps per round of each centralized model: FL's |S_r| x tau, split over `models` models."""
    return -(-cfg.federation.clients_per_round * cfg.train.local_steps // models)


def _multi_cl(cfg, infos, init, model):
    groups = {c.true_group for c in infos}
    return MultiCL(infos, init, cfg.federation.rounds, _centralized_steps(cfg, len(groups)))


def _fl_target(cfg, infos, init, model):
    f = cfg.federation
    return FLTarget(infos, init, f.rounds, f.clients_per_round, cfg.train.local_steps, cfg.seed)


def _fedgd(cfg, infos, init, model):
    a, f = cfg.algorithm, cfg.federation
    return FedGD(
        infos,
        init,
        f.rounds,
        num_models=a.num_models,
        clients_per_round=f.clients_per_round,
        local_steps=cfg.train.local_steps,
        reassign_every=a.reassign_every,
        mixing=a.mixing,
        phase2_start=a.phase2_start,
        seed=cfg.seed,
        true_groups=_true_groups(infos) if a.fedgd_partition == "true" else None,
    )


def _true_groups(infos: list[ClientInfo]) -> dict[str, int]:
    missing = [c.client_id for c in infos if c.true_group is None]
    if missing:
        raise ValueError(f"algorithm.fedgd_partition = 'true' needs every client's true group; none for {missing[:5]}")
    labels = sorted({c.true_group for c in infos})
    return {c.client_id: labels.index(c.true_group) for c in infos}


def _fedbiscuit(cfg, infos, init, model):
    a, f = cfg.algorithm, cfg.federation
    return FedBiscuit(
        infos,
        init,
        f.rounds,
        num_models=a.num_models,
        clients_per_round=f.clients_per_round,
        local_steps=cfg.train.local_steps,
        reassign_every=a.reassign_every,
        seed=cfg.seed,
    )


def _soft_fl(cfg, infos, init, model):
    a, f = cfg.algorithm, cfg.federation
    inits = orthogonal_adapter_inits(model, init, a.num_models, generator=torch.Generator().manual_seed(cfg.seed))
    return SoftFL(
        infos,
        init,
        f.rounds,
        num_models=a.num_models,
        clients_per_round=f.clients_per_round,
        local_steps=cfg.train.local_steps,
        refresh_every=a.reassign_every,
        seed=cfg.seed,
        initial_models=inits,
    )


BUILDERS: dict[str, Builder] = {
    "Local": lambda cfg, infos, init, model: Local(infos, init, 0),
    "CL": lambda cfg, infos, init, model: CL(infos, init, cfg.federation.rounds, _centralized_steps(cfg)),
    "Multi-CL": _multi_cl,
    "FL": _fl,
    "FL_target": _fl_target,
    "FedGD": _fedgd,
    "FedBiscuit": _fedbiscuit,
    "Soft-FL": _soft_fl,
    **{name: partial(build_fedvpa, name) for name in VARIANTS},  # FedVPL, FedVPL+Ortho, FedVPL+GB, FedVPA-GP
}


def build_algorithm(
    name: str,
    cfg: ExperimentConfig,
    infos: list[ClientInfo],
    init: State,
    model: nn.Module,
    held_out: Sequence[str] = (),
) -> Algorithm:
    """The method's server algorithm for the trained clients `infos`, with `held_out` (unseen) client ids
    that only take part in a final selection stage; an impossible setting is a one-line ConfigError."""
    if name not in BUILDERS:
        raise ConfigError(f"method '{name}' is not implemented yet (available: {', '.join(BUILDERS)})")
    try:
        algorithm = BUILDERS[name](cfg, infos, init, model)
    except ValueError as e:  # the algorithms check their arguments against the actual clients
        raise ConfigError(f"{name}: {e}") from None
    algorithm.held_out = list(held_out)
    return algorithm
