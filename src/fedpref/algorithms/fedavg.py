"""FedAvg (the papers' FL): uniform client sampling, size-weighted averaging of the returned adapters."""

from __future__ import annotations

import numpy as np
from torch import nn

from fedpref.algorithms.aggregation import copy_state, weighted_average
from fedpref.algorithms.base import Algorithm
from fedpref.algorithms.registry import MethodSpec
from fedpref.algorithms.sampling import uniform_sample
from fedpref.config import ExperimentConfig
from fedpref.models.adapters import State
from fedpref.protocol import TRAIN, ClientInfo, Reply, Task


class FedAvg(Algorithm):
    """One global model; each round |S_r| sampled clients train tau steps from it (FedGD paper, Sec. 2.1)."""

    name = "FL"

    def __init__(
        self,
        clients: list[ClientInfo],
        init_state: State,
        num_rounds: int,
        clients_per_round: int,
        local_steps: int,
        seed: int,
    ):
        super().__init__(clients, init_state, num_rounds)
        self.global_state = copy_state(init_state)
        self.clients_per_round, self.local_steps = clients_per_round, local_steps
        self.seed, self.rng = seed, np.random.default_rng(seed)
        self._trained_round = -1

    def sample(self, round_idx: int) -> list[str]:
        return uniform_sample([c.client_id for c in self.clients], self.clients_per_round, self.rng)

    def next_tasks(self, round_idx: int) -> list[Task]:
        if round_idx >= self.num_rounds or self._trained_round == round_idx:
            return []
        self._trained_round = round_idx
        sampled = self.sample(round_idx)
        self.history.append({"round": round_idx, "sampled": sampled})
        return [Task(c, TRAIN, [self.global_state], steps=self.local_steps) for c in sampled]

    def receive(self, round_idx: int, replies: list[Reply]) -> None:
        if replies:  # a round with no replies keeps the previous model
            self.global_state = weighted_average([r.state for r in replies], [r.num_examples for r in replies])

    def initialization(self, client_id: str) -> State:
        return self.global_state

    def server_models(self) -> list[State]:
        return [self.global_state]


def build_fedavg(cfg: ExperimentConfig, infos: list[ClientInfo], init: State, model: nn.Module) -> FedAvg:
    f = cfg.federation
    return FedAvg(infos, init, f.rounds, f.clients_per_round, cfg.train.local_steps, cfg.seed)


SPECS = (MethodSpec(FedAvg.name, build_fedavg, "FedAvg: one global model, size-weighted mean of the sampled clients"),)
