"""FedBiscuit (FedGD paper, Alg. 2): K hard-clustered global models with size-balanced reassignment."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from torch import nn

from fedpref.algorithms.aggregation import copy_state, uniform_average, weighted_average
from fedpref.algorithms.records import log_round
from fedpref.algorithms.registry import MethodSpec
from fedpref.algorithms.sampling import uniform_sample
from fedpref.algorithms.stages import (
    StagedAlgorithm,
    check_models_and_sampling,
    evaluate_models,
    multi_model_arguments,
)
from fedpref.config import ExperimentConfig
from fedpref.models.adapters import State
from fedpref.protocol import TRAIN, ClientInfo, Reply, Task

Move = tuple[int, int, int]  # (client index, from cluster, to cluster)


def balancing_moves(losses: np.ndarray, assignment: Sequence[int]) -> list[Move]:
    """Alg. 2 lines 23-26: least-cost moves from the largest to the smallest cluster until sizes differ <= 1.

    `losses[c, k]` is client c's validation loss on model k; moving c from k+ to k- costs
    losses[c, k-] - losses[c, k+]. Ties go to the lowest cluster index and then the lowest client index.
    """
    losses = np.asarray(losses, dtype=float)
    current = list(assignment)
    num_models, moves = losses.shape[1], []
    while True:
        sizes = np.bincount(current, minlength=num_models)
        if sizes.max() - sizes.min() <= 1:
            return moves
        big, small = int(np.argmax(sizes)), int(np.argmin(sizes))
        members = [c for c, k in enumerate(current) if k == big]
        costs = np.nan_to_num(losses[members, small] - losses[members, big], nan=np.inf)
        client = members[int(np.argmin(costs))]
        current[client] = small
        moves.append((client, big, small))


def balance_clusters(losses: np.ndarray, assignment: Sequence[int]) -> list[int]:
    """The assignment after all balancing moves."""
    balanced = list(assignment)
    for client, _, to in balancing_moves(losses, assignment):
        balanced[client] = to
    return balanced


def residual_average(old: State, states: Sequence[State], p: Sequence[float]) -> State:
    """Eq. (1): (1 - sum_c p_c) theta_k^(r-1) + sum_c p_c theta_{k,c}^(r)."""
    return weighted_average([old, *states], [1.0 - float(sum(p)), *p])


class FedBiscuit(StagedAlgorithm):
    """FedBiscuit as reinterpreted in the FedGD paper: Algorithm 2 (App. B.2).

    line 2      p_c = N_c / sum_j N_j over all clients (N_c = ClientInfo.num_train).
    lines 4-13  warm-up: engine rounds 0..T-1 (the paper's t = 1..T). In each, every model k runs one
                independent FedAvg round: its own uniform sample S_{t,k} of |S| clients trains theta_k and
                theta_k <- uniform average of their models. The warm-up counts as T rounds of the R-round
                budget, as in Alg. 2 whose Phase 2 runs r = T+1..R (it does use K x |S| client updates per
                round). With R <= T only the warm-up runs.
    lines 16-27 Phase 2: engine rounds T..R-1 (the paper's r = T+1..R). When r-1 = 0 mod T (engine round
                i with i mod T == 0, so right after the warm-up and every T rounds), a first EVALUATE
                stage: every client evaluates all K models, pi(c) <- argmin loss, then the size-balancing
                loop (`balancing_moves`).
    lines 28-36 a TRAIN stage: |S| clients sampled uniformly from all; each trains its cluster's model;
                theta_k <- (1 - sum p_c) theta_k + sum p_c theta_{k,c} over the clients of cluster k (Eq. 1).
    lines 40-45 final stage at round R: every client evaluates all K models and starts personalization
                from the one with the lowest validation loss; held-out clients (`held_out`) take part
                in this stage only, so an unseen client picks its model without any update.

    Rounds without replies keep the previous models; a client missing from an evaluation keeps its
    previous assignment (and, at the end, starts from its cluster's model, else model 0).
    """

    name = "FedBiscuit"

    def __init__(
        self,
        clients: list[ClientInfo],
        init_state: State,
        num_rounds: int,
        num_models: int,
        clients_per_round: int,
        local_steps: int,
        reassign_every: int,
        seed: int = 0,
    ):
        super().__init__(clients, init_state, num_rounds)
        check_models_and_sampling("FedBiscuit", len(clients), num_models, clients_per_round, reassign_every)
        self.num_models, self.clients_per_round, self.local_steps = num_models, clients_per_round, local_steps
        self.reassign_every = reassign_every
        self.phase_end_rounds = [min(reassign_every, num_rounds)]  # checkpoint when the warm-up is complete
        self.rng = np.random.default_rng(seed)
        self.models = [copy_state(init_state) for _ in range(num_models)]
        total = sum(c.num_train for c in clients)
        self.p = {c.client_id: c.num_train / total for c in clients}
        self.assignment: dict[str, int] = {}
        self.best: dict[str, int] = {}

    def stage_tasks(self, round_idx: int, stage: str) -> list[Task]:
        if stage == "reassign":
            return evaluate_models([c.client_id for c in self.clients], self.models, stage)
        if stage == "select":
            return evaluate_models(self.final_stage_clients(), self.models, stage)
        if stage == "warmup":
            return self._warmup_tasks(round_idx)
        return self._train_tasks(round_idx)

    def stage_replies(self, round_idx: int, stage: str, replies: list[Reply]) -> None:
        if stage in ("warmup", "train"):
            for k in range(self.num_models):
                mine = [r for r in replies if r.tag == k]
                if mine:
                    self.models[k] = self._aggregate(k, mine, residual=stage == "train")
        elif stage == "reassign":
            self._reassign(round_idx, replies)
        elif stage == "select":
            self.best = {r.client_id: int(np.argmin(r.metrics["val_loss"])) for r in replies}
            log_round(self.history, round_idx, assignment=dict(self.best), final_selection=True)

    def initialization(self, client_id: str) -> State:
        k = self.best.get(client_id, self.assignment.get(client_id, 0))
        return self.models[k]

    def server_models(self) -> list[State]:
        return list(self.models)

    def _aggregate(self, k: int, replies: list[Reply], residual: bool) -> State:
        """Warm-up: plain FedAvg mean (Alg. 2, line 12); Phase 2: Eq. (1) with the residual term."""
        states = [r.state for r in replies]
        if not residual:
            return uniform_average(states)
        return residual_average(self.models[k], states, [self.p[r.client_id] for r in replies])

    def stages(self, r: int) -> list[str]:
        if r == self.num_rounds:
            return ["select"]
        if r > self.num_rounds:
            return []
        if r < self.reassign_every:
            return ["warmup"]
        return (["reassign"] if r % self.reassign_every == 0 else []) + ["train"]

    def _warmup_tasks(self, r: int) -> list[Task]:
        ids = [c.client_id for c in self.clients]
        per_model = [uniform_sample(ids, self.clients_per_round, self.rng) for _ in range(self.num_models)]
        log_round(self.history, r, sampled=per_model)
        return [Task(c, TRAIN, [self.models[k]], self.local_steps, tag=k) for k, cs in enumerate(per_model) for c in cs]

    def _train_tasks(self, r: int) -> list[Task]:
        sampled = uniform_sample([c.client_id for c in self.clients], self.clients_per_round, self.rng)
        log_round(self.history, r, sampled=sampled)
        return [
            Task(c, TRAIN, [self.models[self.assignment[c]]], self.local_steps, tag=self.assignment[c]) for c in sampled
        ]

    def _reassign(self, r: int, replies: list[Reply]) -> None:
        """Alg. 2 lines 18-26: argmin validation loss, then size balancing on the same losses."""
        losses = {x.client_id: x.metrics["val_loss"] for x in replies}
        for c in self.clients:
            if c.client_id not in losses:  # no answer: stays where it was (cost 0 there, +inf elsewhere)
                row = np.full(self.num_models, np.inf)
                row[self.assignment.get(c.client_id, 0)] = 0.0
                losses[c.client_id] = row
        ids = [c.client_id for c in self.clients]
        matrix = np.array([losses[c] for c in ids], dtype=float)
        balanced = balance_clusters(matrix, [int(np.argmin(row)) for row in matrix])
        self.assignment = dict(zip(ids, balanced))
        log_round(self.history, r, assignment=dict(self.assignment))


def build_fedbiscuit(cfg: ExperimentConfig, infos: list[ClientInfo], init: State, model: nn.Module) -> FedBiscuit:
    return FedBiscuit(infos, init, **multi_model_arguments(cfg), reassign_every=cfg.algorithm.reassign_every)


PAPER = "FedGD (baseline)"  # whose method these are (`fedpref list methods`)
SPECS = (
    MethodSpec(
        FedBiscuit.name,
        build_fedbiscuit,
        "K hard-clustered global models, clients reassigned by validation loss with size balancing",
        multi_model=True,
    ),
)
