"""FedGD (FedGD paper, Alg. 1): discover preference groups with K experts, then train one model debiased over them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from torch import nn

from fedpref.algorithms.aggregation import copy_state, hierarchical_average, mix, uniform_average, weighted_average
from fedpref.algorithms.records import log_round
from fedpref.algorithms.registry import MethodSpec
from fedpref.algorithms.sampling import group_debiased_sample
from fedpref.algorithms.stages import (
    StagedAlgorithm,
    check_models_and_sampling,
    evaluate_models,
    multi_model_arguments,
)
from fedpref.config import PHASE2_STARTS, ExperimentConfig
from fedpref.models.adapters import State
from fedpref.protocol import TRAIN, ClientInfo, Reply, Task


def lowest_loss_assignment(replies: Sequence[Reply]) -> dict[str, int]:
    """pi(c) = argmin_k ValLoss(theta_k, D_val^c) for every client that replied (ties: lowest k)."""
    return {r.client_id: int(np.argmin(r.metrics["val_loss"])) for r in replies}


def compact_labels(assignment: dict[str, int]) -> dict[str, int]:
    """Discard empty clusters and reindex the rest 0..K'-1, keeping their order (Alg. 1, line 20)."""
    used = sorted(set(assignment.values()))
    new_index = {k: i for i, k in enumerate(used)}
    return {c: new_index[k] for c, k in assignment.items()}


def cumulative_average(s: State | None, n: int, returned: Sequence[State]) -> tuple[State, int]:
    """s_k = W_k / n_k after adding this round's models (Alg. 1, lines 14-15: W_k += |G_rk| mean = their sum)."""
    states = list(returned) + ([s] if s is not None and n > 0 else [])
    weights = [1.0] * len(returned) + ([float(n)] if s is not None and n > 0 else [])
    return weighted_average(states, weights), n + len(returned)


class FedGD(StagedAlgorithm):
    """Federated Learning with Group Debiasing: Algorithm 1 (App. B.1) of the FedGD paper.

    Phase 1 (rounds 0..P-1, P = floor(R/2); for odd R Phase 2 gets the extra round):
      line 1      experts theta_k and reference theta_g all start from `init_state` (LoRA default init);
                  pi(c) ~ Uniform{0..K-1}, drawn independently per client from a seeded numpy Generator.
      lines 4-6   at r > 0 with r mod T == 0, a first EVALUATE stage: every client evaluates all K experts
                  theta_k^(r-1); pi(c) <- argmin val loss; W_k, n_k <- 0; every theta_k <- theta_g.
      lines 8-10  a TRAIN stage: |G| clients drawn with `group_debiased_sample` over the current groups
                  (floor(|G|/K) from each non-empty group, the rest uniformly; with |G| < K the groups take
                  turns), so a round's group composition is uniform whatever the groups' sizes (Sec. 3.2);
                  each sampled client trains its own group's expert.
      lines 12-17 for each expert reached: s_k = cumulative average of the models returned for it since the
                  last reassignment; theta_k <- (1 - w) theta_k + w s_k (w multiplies s_k, as in the paper).
      line 18     theta_g <- uniform average of the round's returned models (not size-weighted).
    End of Phase 1, at round P before training (lines 19-20): every client evaluates the experts
      theta_k^(P-1) once more, pi(c) <- argmin; the groups are frozen; empty clusters are discarded.
    Phase 2 (rounds P..R-1, lines 22-33): phi starts from `init_state` ('fresh', the paper's choice: the
      same LoRA default init draw the experts started from, i.e. an untrained model, not a new random draw)
      or from theta_g ('continue', App. C.3); group-debiased sampling over the frozen groups; hierarchical
      aggregation (N_c-weighted within a group, uniform across the groups reached).
    `true_groups` (an oracle ablation, not the paper's method): no Phase 1; Phase 2 runs all R rounds over
      the given groups from `init_state`, the setting in which App. B.1 says FedGD reduces to FL_target.
    Personalization (lines 35-37): every client starts from phi^(R).

    A round without replies keeps the previous models; a client that does not answer an evaluation keeps
    its previous assignment (the experts are still reset, as the reassignment step prescribes).
    """

    name = "FedGD"

    def __init__(
        self,
        clients: list[ClientInfo],
        init_state: State,
        num_rounds: int,
        num_models: int,
        clients_per_round: int,
        local_steps: int,
        reassign_every: int,
        mixing: float,
        phase2_start: str = "fresh",
        seed: int = 0,
        true_groups: dict[str, int] | None = None,
    ):
        super().__init__(clients, init_state, num_rounds)
        _check_arguments(len(clients), num_rounds, num_models, clients_per_round, reassign_every, phase2_start)
        self.num_models, self.clients_per_round, self.local_steps = num_models, clients_per_round, local_steps
        self.reassign_every, self.mixing, self.phase2_start = reassign_every, mixing, phase2_start
        self.phase1_rounds = num_rounds // 2 if true_groups is None else 0
        self.phase_end_rounds = [self.phase1_rounds]  # checkpoint when Phase 1 is complete
        self.rng = np.random.default_rng(seed)
        self.experts = [copy_state(init_state) for _ in range(num_models)]
        self.reference = copy_state(init_state)
        self.assignment = {c.client_id: int(self.rng.integers(num_models)) for c in clients}
        self.turn_order = self.rng.permutation(num_models).tolist()  # groups take turns when |G| < K
        self.frozen: dict[str, int] | None = None if true_groups is None else compact_labels(true_groups)
        self.phi: State | None = None if true_groups is None else copy_state(init_state)
        self._reset_sums()
        if self.frozen is not None:
            log_round(
                self.history, 0, assignment=dict(self.frozen), num_groups=len(set(self.frozen.values())), frozen=True
            )

    # -- the engine's hooks, through StagedAlgorithm -----------------------------------------------

    def stage_tasks(self, round_idx: int, stage: str) -> list[Task]:
        if stage in ("reassign", "freeze"):
            return evaluate_models([c.client_id for c in self.clients], self.experts, stage)
        return self._train_tasks(round_idx, stage)

    def stage_replies(self, round_idx: int, stage: str, replies: list[Reply]) -> None:
        if stage == "reassign":
            self._reassign(round_idx, replies)
        elif stage == "freeze":
            self._freeze(round_idx, replies)
        elif stage == "train1":
            self._update_experts(replies)
        elif stage == "train2" and replies:
            groups = [self.frozen[r.client_id] for r in replies]
            sizes = [self.by_id[r.client_id].num_train for r in replies]
            self.phi = hierarchical_average([r.state for r in replies], sizes, groups)

    def initialization(self, client_id: str) -> State:
        return self.phi if self.phi is not None else self.init_state

    def server_models(self) -> list[State]:
        """Phase 1: the K experts; Phase 2: phi."""
        return [self.phi] if self.phi is not None else list(self.experts)

    # -- stages ------------------------------------------------------------------------------------

    def stages(self, r: int) -> list[str]:
        if r >= self.num_rounds:
            return []
        if r < self.phase1_rounds:
            return (["reassign"] if r > 0 and r % self.reassign_every == 0 else []) + ["train1"]
        if r == self.phase1_rounds and self.frozen is None:
            return ["freeze", "train2"]
        return ["train2"]

    def _train_tasks(self, r: int, stage: str) -> list[Task]:
        groups = self.assignment if stage == "train1" else self.frozen
        ids = [c.client_id for c in self.clients]
        labels = [groups[c] for c in ids]
        sampled = group_debiased_sample(ids, labels, self.clients_per_round, self.rng, r, self.turn_order)
        log_round(self.history, r, sampled=sampled)
        if stage == "train1":
            return [Task(c, TRAIN, [self.experts[groups[c]]], self.local_steps, tag=groups[c]) for c in sampled]
        return [Task(c, TRAIN, [self.phi], self.local_steps, tag=groups[c]) for c in sampled]

    def _reassign(self, r: int, replies: list[Reply]) -> None:
        """Alg. 1 lines 5-6: pi(c) <- argmin_k ValLoss(theta_k^(r-1)); reset W_k, n_k and theta_k <- theta_g."""
        self.assignment.update(lowest_loss_assignment(replies))
        self.experts = [copy_state(self.reference) for _ in range(self.num_models)]
        self._reset_sums()
        log_round(self.history, r, assignment=dict(self.assignment))

    def _freeze(self, r: int, replies: list[Reply]) -> None:
        """Alg. 1 lines 19-22: last reassignment, freeze, drop empty clusters; phi from fresh init or theta_g."""
        self.assignment.update(lowest_loss_assignment(replies))
        self.frozen = compact_labels(self.assignment)
        self.phi = copy_state(self.init_state if self.phase2_start == "fresh" else self.reference)
        log_round(self.history, r, assignment=dict(self.frozen), num_groups=len(set(self.frozen.values())), frozen=True)

    def _update_experts(self, replies: list[Reply]) -> None:
        """Alg. 1 lines 12-18: cumulative average s_k, moving average of the experts, uniform theta_g."""
        if not replies:
            return
        for k in range(self.num_models):
            returned = [r.state for r in replies if r.tag == k]
            if not returned:
                continue
            self.sums[k], self.counts[k] = cumulative_average(self.sums[k], self.counts[k], returned)
            self.experts[k] = mix(self.sums[k], self.experts[k], self.mixing)  # w * s_k + (1 - w) * theta_k
        self.reference = uniform_average([r.state for r in replies])

    def _reset_sums(self) -> None:
        self.sums: list[State | None] = [None] * self.num_models
        self.counts = [0] * self.num_models


def _check_arguments(
    num_clients: int, num_rounds: int, num_models: int, clients_per_round: int, reassign_every: int, start: str
) -> None:
    if num_rounds < 2:
        raise ValueError(f"FedGD needs at least 2 rounds (one per phase), got federation.rounds = {num_rounds}")
    check_models_and_sampling("FedGD", num_clients, num_models, clients_per_round, reassign_every, models="experts")
    if start not in PHASE2_STARTS:
        raise ValueError(f"FedGD: phase2_start must be one of {PHASE2_STARTS}, got {start!r}")


def build_fedgd(cfg: ExperimentConfig, infos: list[ClientInfo], init: State, model: nn.Module) -> FedGD:
    a = cfg.algorithm
    return FedGD(
        infos,
        init,
        **multi_model_arguments(cfg),
        reassign_every=a.reassign_every,
        mixing=a.mixing,
        phase2_start=a.phase2_start,
        true_groups=true_groups(infos) if a.fedgd_partition == "true" else None,
    )


def true_groups(infos: list[ClientInfo]) -> dict[str, int]:
    """Client id -> index of its ground-truth group (algorithm.fedgd_partition = 'true', an oracle ablation)."""
    missing = [c.client_id for c in infos if c.true_group is None]
    if missing:
        raise ValueError(f"algorithm.fedgd_partition = 'true' needs every client's true group; none for {missing[:5]}")
    labels = sorted({c.true_group for c in infos})
    return {c.client_id: labels.index(c.true_group) for c in infos}


PAPER = "FedGD"  # whose method these are (`fedpref list methods`)
SPECS = (
    MethodSpec(
        FedGD.name,
        build_fedgd,
        "group debiasing: K experts discover the preference groups, then one model debiased over them",
        multi_model=True,
    ),
)
