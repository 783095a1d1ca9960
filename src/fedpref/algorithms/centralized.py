"""Centralized references: CL (one model on pooled data) and Multi-CL (one model per true group).

Both run through the same round loop as the federated methods, with one
"pooled client" per model that holds the pooled training data (a reference
point only: pooling is exactly what federated learning avoids).

Budget ("the same number of updates", FedGD paper, Sec. 3): FL spends
|S_r| x tau local steps per round, so CL takes |S_r| x tau steps per round,
and Multi-CL splits them over its G group models (ceil(|S_r| x tau / G)
each), which is what FL spends per round on one group's clients on average.
"""

from __future__ import annotations

from torch import nn

from fedpref.algorithms.aggregation import copy_state
from fedpref.algorithms.base import Algorithm
from fedpref.algorithms.registry import MethodSpec
from fedpref.config import ExperimentConfig
from fedpref.models.adapters import State
from fedpref.protocol import TRAIN, ClientInfo, Reply, Task

POOL_PREFIX = "pool:"


def pool_id(group: str | None) -> str:
    return POOL_PREFIX + (group or "all")


class Centralized(Algorithm):
    """One model per pool; client c starts personalization from its pool's model."""

    def __init__(
        self, clients: list[ClientInfo], init_state: State, num_rounds: int, steps_per_round: int, per_group: bool
    ):
        super().__init__(clients, init_state, num_rounds)
        self.per_group = per_group
        if per_group and any(c.true_group is None for c in clients):
            raise ValueError("Multi-CL needs the ground-truth group of every client")
        self.pools = sorted({self.pool_of(c.client_id) for c in clients})
        self.models = {p: copy_state(init_state) for p in self.pools}
        self.steps_per_round = steps_per_round
        self._trained_round = -1

    def pool_of(self, client_id: str) -> str:
        return pool_id(self.by_id[client_id].true_group if self.per_group else None)

    def next_tasks(self, round_idx: int) -> list[Task]:
        if round_idx >= self.num_rounds or self._trained_round == round_idx:
            return []
        self._trained_round = round_idx
        return [Task(p, TRAIN, [self.models[p]], steps=self.steps_per_round) for p in self.pools]

    def receive(self, round_idx: int, replies: list[Reply]) -> None:
        for r in replies:
            self.models[r.client_id] = r.state

    def initialization(self, client_id: str) -> State:
        return self.models[self.pool_of(client_id)]

    def server_models(self) -> list[State]:
        return [self.models[p] for p in self.pools]


class CL(Centralized):
    name = "CL"

    def __init__(self, clients, init_state, num_rounds, steps_per_round):
        super().__init__(clients, init_state, num_rounds, steps_per_round, per_group=False)


class MultiCL(Centralized):
    name = "Multi-CL"

    def __init__(self, clients, init_state, num_rounds, steps_per_round):
        super().__init__(clients, init_state, num_rounds, steps_per_round, per_group=True)


def centralized_steps(cfg: ExperimentConfig, models: int = 1) -> int:
    """Steps per round of each centralized model: FL's |S_r| x tau, split over `models` models."""
    return -(-cfg.federation.clients_per_round * cfg.train.local_steps // models)


def build_cl(cfg: ExperimentConfig, infos: list[ClientInfo], init: State, model: nn.Module) -> CL:
    return CL(infos, init, cfg.federation.rounds, centralized_steps(cfg))


def build_multi_cl(cfg: ExperimentConfig, infos: list[ClientInfo], init: State, model: nn.Module) -> MultiCL:
    groups = {c.true_group for c in infos}
    return MultiCL(infos, init, cfg.federation.rounds, centralized_steps(cfg, len(groups)))


def no_unseen_clients(cfg: ExperimentConfig, clients: int | None) -> str | None:
    """Multi-CL's rule: it starts each client from its true group's pooled model, which an unseen client lacks."""
    if cfg.data.unseen_clients:
        return (
            "'data.unseen_clients' cannot go with Multi-CL: it starts each client from its true group's pooled model, "
            "and an unseen client's pairs were never pooled (drop Multi-CL from algorithm.methods, or set "
            "unseen_clients = 0)"
        )
    return None


PAPER = "FedGD"  # whose method these are (`fedpref list methods`)
SPECS = (
    MethodSpec(CL.name, build_cl, "one model on the pooled data of all clients (a reference)", centralized=True),
    MethodSpec(
        MultiCL.name,
        build_multi_cl,
        "one model per true group, on its pooled data",
        centralized=True,
        checks=(no_unseen_clients,),
    ),
)
