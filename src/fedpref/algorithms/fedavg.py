"""FedAvg (the papers' FL): uniform client sampling, size-weighted averaging of the returned adapters."""

from __future__ import annotations

from functools import partial

import numpy as np
from torch import nn

from fedpref.algorithms.aggregation import copy_state, weighted_average
from fedpref.algorithms.base import Algorithm
from fedpref.algorithms.privacy import ClientLevelDP
from fedpref.algorithms.registry import MethodSpec
from fedpref.algorithms.sampling import uniform_sample
from fedpref.config import ExperimentConfig
from fedpref.models.adapters import State
from fedpref.protocol import SECURE_WEIGHT, TRAIN, Aggregate, ClientInfo, Reply, Task


class FedAvg(Algorithm):
    """One global model; each round |S_r| sampled clients train tau steps from it (FedGD paper, Sec. 2.1).

    With `privacy` (client-level DP, `ClientLevelDP`), clients clip their updates and the server takes the
    noised equal-weight mean instead of the size-weighted one. With `secure`, the server learns only that mean
    (SecAgg+ on Flower): each task carries its client's weight (N_i, or 1 under DP) and the sum comes back.
    """

    name = "FL"
    uniform_sampling = True  # S_r is a uniform sample without replacement: DP accounting may amplify by it

    def __init__(
        self,
        clients: list[ClientInfo],
        init_state: State,
        num_rounds: int,
        clients_per_round: int,
        local_steps: int,
        seed: int,
        privacy: ClientLevelDP | None = None,
        secure: bool = False,
    ):
        super().__init__(clients, init_state, num_rounds)
        self.global_state = copy_state(init_state)
        self.clients_per_round, self.local_steps = clients_per_round, local_steps
        self.seed, self.rng = seed, np.random.default_rng(seed)
        self._trained_round = -1
        self.privacy, self.secure = privacy, secure

    def sample(self, round_idx: int) -> list[str]:
        return uniform_sample([c.client_id for c in self.clients], self.clients_per_round, self.rng)

    def next_tasks(self, round_idx: int) -> list[Task]:
        if round_idx >= self.num_rounds or self._trained_round == round_idx:
            return []
        self._trained_round = round_idx
        sampled = self.sample(round_idx)
        self.history.append({"round": round_idx, "sampled": sampled})
        return [Task(c, TRAIN, [self.global_state], steps=self.local_steps, payload=self.payload(c)) for c in sampled]

    def payload(self, client_id: str) -> dict:
        payload = {"clip_norm": self.privacy.clip_norm} if self.privacy else {}
        if self.secure:  # the weight FedAvg gives the client's state in the mean
            payload[SECURE_WEIGHT] = 1 if self.privacy else self.by_id[client_id].num_train
        return payload

    def receive(self, round_idx: int, replies: list[Reply]) -> None:
        if not replies:  # a round with no replies keeps the previous model
            return
        states = [r.state for r in replies]
        if self.privacy:
            self.adopt(self.privacy.aggregate(states, round_idx))
        else:
            self.adopt(weighted_average(states, [r.num_examples for r in replies]))

    def receive_aggregate(self, round_idx: int, aggregate: Aggregate) -> None:
        """The same step from the securely summed mean: equal weights (then noise) under DP, else N_i."""
        if aggregate.state is None:  # the sum could not be unmasked: the round keeps the previous model
            return
        if self.privacy:
            self.adopt(self.privacy.noised(aggregate.state, len(aggregate.client_ids), round_idx))
        else:
            self.adopt(aggregate.state)

    def adopt(self, average: State) -> None:
        """The server's model after a round: FedAvg takes the mean itself."""
        self.global_state = average

    def initialization(self, client_id: str) -> State:
        return self.global_state

    def server_models(self) -> list[State]:
        return [self.global_state]

    def privacy_spent(self) -> dict | None:
        return self.privacy.spent() if self.privacy else None


def client_dp(cfg: ExperimentConfig, infos: list[ClientInfo], uniform_sampling: bool) -> ClientLevelDP | None:
    """The run's [privacy] settings for a FedAvg-family method over `infos` (None when off)."""
    cohort = cfg.federation.clients_per_round
    return ClientLevelDP.from_config(cfg.privacy, len(infos), cohort, uniform_sampling, cfg.seed)


def build_fedavg_family(
    algorithm: type[FedAvg], cfg: ExperimentConfig, infos: list[ClientInfo], init: State, model: nn.Module
) -> FedAvg:
    """`algorithm`, FedAvg or a subclass that takes FedAvg's arguments, from the run's federation, [privacy] and
    [secure_aggregation] settings."""
    f = cfg.federation
    privacy = client_dp(cfg, infos, algorithm.uniform_sampling)
    secure = cfg.secure_aggregation.enabled
    return algorithm(infos, init, f.rounds, f.clients_per_round, cfg.train.local_steps, cfg.seed, privacy, secure)


def fedavg_family_spec(algorithm: type[FedAvg], help_: str) -> MethodSpec:
    """The spec of a method `build_fedavg_family` builds: its server step is FedAvg's mean of the clients' updates,
    so client-level DP and secure aggregation apply."""
    return MethodSpec(algorithm.name, partial(build_fedavg_family, algorithm), help_, client_dp=True, secure_sum=True)


PAPER = "FedGD"  # whose method these are (`fedpref list methods`)
SPECS = (fedavg_family_spec(FedAvg, "FedAvg: one global model, size-weighted mean of the sampled clients"),)
