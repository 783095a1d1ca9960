"""FedAvgM: FedAvg with server momentum (Hsu et al. 2019); the worked example of docs/extending.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from fedpref.algorithms.fedavg import FedAvg, client_dp
from fedpref.algorithms.registry import MethodSpec, method_options
from fedpref.config import ExperimentConfig
from fedpref.models.adapters import State
from fedpref.protocol import ClientInfo


@dataclass(frozen=True)
class ServerMomentum:
    """FedAvgM's own options: a [algorithm.options.FedAvgM] table, or --set algorithm.options.FedAvgM.KEY=VALUE."""

    momentum: float = field(default=0.9, metadata={"help": "Server momentum beta (Hsu et al.: 0.9 and up to 0.997)."})
    server_lr: float = field(default=1.0, metadata={"help": "Server learning rate eta (Hsu et al.: 1)."})

    def __post_init__(self) -> None:
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum}")
        if self.server_lr <= 0.0:
            raise ValueError(f"server_lr must be > 0, got {self.server_lr}")


def momentum_step(
    current: State, average: State, velocity: State, momentum: float, server_lr: float
) -> tuple[State, State]:
    """(theta', v'): v' = beta v + (theta - average), theta' = theta - eta v'.

    theta - average is the round's pseudo-gradient (FedAvg's step); beta = 0, eta = 1 gives FedAvg.
    """
    new_velocity = {k: momentum * velocity[k] + (current[k] - average[k]) for k in current}
    return {k: current[k] - server_lr * new_velocity[k] for k in current}, new_velocity


class FedAvgM(FedAvg):
    """FedAvg with server momentum: T.-M. H. Hsu, H. Qi and M. Brown, "Measuring the Effects of Non-Identical
    Data Distribution for Federated Visual Classification", arXiv:1909.06335 (2019), Sec. 3.

    Sampling, the clients' local training and the size-weighted average are FedAvg's; the server then
    takes a momentum step along the average's pseudo-gradient (`momentum_step`) instead of adopting it.
    """

    name = "FedAvgM"

    def __init__(self, *fedavg_args: Any, options: ServerMomentum = ServerMomentum(), **fedavg_kwargs: Any):
        """FedAvg's arguments (clients, init_state, num_rounds, clients_per_round, local_steps, seed), then options."""
        super().__init__(*fedavg_args, **fedavg_kwargs)
        # plain attributes, not the options object: a checkpoint holds the algorithm's attributes
        self.momentum, self.server_lr = options.momentum, options.server_lr
        self.velocity = {k: torch.zeros_like(v) for k, v in self.init_state.items()}

    def adopt(self, average: State) -> None:
        """A momentum step along the round's pseudo-gradient instead of FedAvg's average itself."""
        step = momentum_step(self.global_state, average, self.velocity, self.momentum, self.server_lr)
        self.global_state, self.velocity = step


def build_fedavgm(cfg: ExperimentConfig, infos: list[ClientInfo], init: State, model: nn.Module) -> FedAvgM:
    f = cfg.federation
    options = method_options(cfg, FedAvgM.name)
    args = (infos, init, f.rounds, f.clients_per_round, cfg.train.local_steps, cfg.seed)
    privacy, secure = client_dp(cfg, infos, FedAvgM.uniform_sampling), cfg.secure_aggregation.enabled
    return FedAvgM(*args, privacy, secure, options=options)


PAPER = "example (Hsu et al. 2019)"  # not a paper method: docs/extending.md's worked example
SPECS = (
    MethodSpec(
        FedAvgM.name,
        build_fedavgm,
        "FedAvg with server momentum (Hsu et al. 2019)",
        options=ServerMomentum,
        client_dp=True,  # the momentum step is post-processing of the noised mean
        secure_sum=True,  # ... and of the securely summed one
    ),
)
