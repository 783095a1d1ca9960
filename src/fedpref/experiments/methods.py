"""Build the server algorithm of a method named in the config (names as in the papers' tables)."""

from __future__ import annotations

from collections.abc import Callable

from fedpref.algorithms.base import Algorithm, ClientInfo
from fedpref.algorithms.centralized import CL, MultiCL
from fedpref.algorithms.fedavg import FedAvg
from fedpref.algorithms.local import Local
from fedpref.config import ExperimentConfig
from fedpref.models.adapters import State

Builder = Callable[[ExperimentConfig, list[ClientInfo], State], Algorithm]


def _fl(cfg, infos, init):
    return FedAvg(infos, init, cfg.federation.rounds, cfg.federation.clients_per_round, cfg.train.local_steps,
                  cfg.seed)


def _centralized_steps(cfg: ExperimentConfig, models: int = 1) -> int:
    """Steps per round of each centralized model: FL's |S_r| x tau, split over `models` models."""
    return -(-cfg.federation.clients_per_round * cfg.train.local_steps // models)


def _multi_cl(cfg, infos, init):
    groups = {c.true_group for c in infos}
    return MultiCL(infos, init, cfg.federation.rounds, _centralized_steps(cfg, len(groups)))


BUILDERS: dict[str, Builder] = {
    "Local": lambda cfg, infos, init: Local(infos, init, 0),
    "CL": lambda cfg, infos, init: CL(infos, init, cfg.federation.rounds, _centralized_steps(cfg)),
    "Multi-CL": _multi_cl,
    "FL": _fl,
}


def build_algorithm(name: str, cfg: ExperimentConfig, infos: list[ClientInfo], init: State) -> Algorithm:
    if name not in BUILDERS:
        raise NotImplementedError(f"method '{name}' is not implemented yet (available: {', '.join(BUILDERS)})")
    return BUILDERS[name](cfg, infos, init)
