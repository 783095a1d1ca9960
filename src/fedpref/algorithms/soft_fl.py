"""Soft-FL (FedGD paper, Alg. 3): K global models, each client trained from and counted by soft weights."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from fedpref.algorithms.aggregation import copy_state, weighted_average
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

# LoRA down-projection keys (linear and embedding modules) -> (module name, up-projection key)
_LORA_A = re.compile(r"^(?P<module>.+)\.lora_(?P<kind>embedding_)?A\.(?P<adapter>[^.]+)(?P<suffix>\.weight)?$")


def soft_weights(accuracies: Sequence[float]) -> np.ndarray:
    """w_{k,c} = a_{k,c} / sum_j a_{j,c} (Alg. 3, line 32); uniform when every accuracy is 0."""
    a = np.clip(np.nan_to_num(np.asarray(accuracies, dtype=float)), 0.0, None)
    return a / a.sum() if a.sum() > 0 else np.full(len(a), 1.0 / len(a))


def fuse(models: Sequence[State], weights: Sequence[float]) -> State:
    """theta_c^fuse = sum_k w_{k,c} theta_k (Alg. 3, lines 7 and 22; the weights sum to 1)."""
    return weighted_average(models, weights)


def orthonormal_blocks(
    d_out: int, d_in: int, rank: int, num_models: int, generator: torch.Generator
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """U_big (d_out x Kr) and V_big (d_in x Kr) from QR of Gaussian matrices, split into K column blocks."""
    width = num_models * rank
    if width > min(d_out, d_in):
        raise ValueError(
            f"Soft-FL orthogonal init needs K * r = {num_models} * {rank} <= min(d_out, d_in) = {min(d_out, d_in)}"
        )
    u_big = torch.linalg.qr(torch.randn(d_out, width, generator=generator, dtype=torch.float64))[0]
    v_big = torch.linalg.qr(torch.randn(d_in, width, generator=generator, dtype=torch.float64))[0]
    blocks = range(0, width, rank)
    return [u_big[:, i : i + rank] for i in blocks], [v_big[:, i : i + rank] for i in blocks]


def layer_epsilon(module: nn.Module | None, eps: float, d_out: int) -> float:
    """eps_layer = eps * ||W_base||_F; without a base weight, the fan-in heuristic eps * sqrt(d_out)
    (the Frobenius norm of a d_out x d_in matrix with entries of variance 1 / d_in)."""
    base = getattr(getattr(module, "base_layer", None), "weight", None)
    if base is None:
        return eps * math.sqrt(d_out)
    return eps * float(torch.linalg.matrix_norm(base.detach().double()))


def orthogonal_adapter_inits(
    model: nn.Module,
    init_state: State,
    num_models: int,
    eps: float = 0.005,
    jitter: float = 0.01,
    generator: torch.Generator | None = None,
) -> list[State]:
    """K adapter states whose updates B_k A_k span mutually orthogonal subspaces (App. B.3, "Adapter init.").

    For every LoRA module (found by walking `model.named_modules()`; linear and embedding LoRA alike),
    A_k = V_k^T and B_k = eps_layer * (1 + jitter * k) * U_k, with k = 1..K as in the paper. Keys that are
    not LoRA (the scalar head) keep their `init_state` value, equal across the K models.
    """
    generator = generator if generator is not None else torch.Generator().manual_seed(0)
    modules = dict(model.named_modules())
    states = [copy_state(init_state) for _ in range(num_models)]
    for a_key, a in init_state.items():
        match = _LORA_A.match(a_key)
        if match is None:
            continue
        b_key = a_key.replace(f".lora_{match['kind'] or ''}A.", f".lora_{match['kind'] or ''}B.", 1)
        rank, d_in = a.shape
        d_out = init_state[b_key].shape[0]
        scale = layer_epsilon(modules.get(match["module"]), eps, d_out)
        us, vs = orthonormal_blocks(d_out, d_in, rank, num_models, generator)
        for k, state in enumerate(states, start=1):
            state[a_key] = vs[k - 1].T.contiguous().to(a.dtype).to(a.device)
            b = init_state[b_key]
            state[b_key] = (scale * (1 + jitter * k) * us[k - 1]).to(b.dtype).to(b.device)
    return states


class SoftFL(StagedAlgorithm):
    """Soft-clustered multi-global models: Algorithm 3 (App. B.3) of the FedGD paper.

    line 1      engine round 0 opens with an EVALUATE stage: every client evaluates the K initial models
                and w_{k,c} = a_{k,c} / sum_j a_{j,c} from validation accuracies (`soft_weights`).
    lines 4-11  each round (engine round i is the paper's r = i + 1): |S| clients sampled uniformly; client
                c trains its fused model sum_k w_{k,c} theta_k.
    lines 12-14 theta_k <- sum_c w_{k,c} theta_c^+ / Z_k, Z_k = sum_c w_{k,c}, with the weights the models
                were fused with (an expert with Z_k = 0 keeps its value).
    lines 15-16 weights refreshed when r mod T == 0 or r == R: an EVALUATE stage opening engine round i
                when i > 0 and i mod T == 0, and the final stage at engine round R.
    lines 21-25 personalization starts from the client's fused model with the final weights; held-out
                clients (`held_out`) evaluate only in the final refresh, to get their weights.

    `initial_models` are the K starting states (the builder passes `orthogonal_adapter_inits`; None gives
    K copies of `init_state`, which the paper notes collapses to a single global model).
    """

    name = "Soft-FL"

    def __init__(
        self,
        clients: list[ClientInfo],
        init_state: State,
        num_rounds: int,
        num_models: int,
        clients_per_round: int,
        local_steps: int,
        refresh_every: int,
        seed: int = 0,
        initial_models: list[State] | None = None,
    ):
        super().__init__(clients, init_state, num_rounds)
        check_models_and_sampling("Soft-FL", len(clients), num_models, clients_per_round, refresh_every)
        if initial_models is not None and len(initial_models) != num_models:
            raise ValueError(f"Soft-FL: {len(initial_models)} initial models given for K = {num_models}")
        self.num_models, self.clients_per_round, self.local_steps = num_models, clients_per_round, local_steps
        self.refresh_every = refresh_every
        self.rng = np.random.default_rng(seed)
        self.models = [copy_state(m) for m in (initial_models or [init_state] * num_models)]
        self.weights = {c.client_id: np.full(num_models, 1.0 / num_models) for c in clients}

    def stage_tasks(self, round_idx: int, stage: str) -> list[Task]:
        if stage == "refresh":
            final = round_idx == self.num_rounds  # held-out clients get their weights here, and only here
            ids = self.final_stage_clients() if final else [c.client_id for c in self.clients]
            return evaluate_models(ids, self.models, stage)
        sampled = uniform_sample([c.client_id for c in self.clients], self.clients_per_round, self.rng)
        log_round(self.history, round_idx, sampled=sampled)
        # the tag carries the weights the model was fused with (JSON-safe for the Flower engine)
        return [Task(c, TRAIN, [self.fused(c)], self.local_steps, tag=self.weights[c].tolist()) for c in sampled]

    def stage_replies(self, round_idx: int, stage: str, replies: list[Reply]) -> None:
        if stage == "refresh":
            for r in replies:
                self.weights[r.client_id] = soft_weights(r.metrics["val_acc"])
            log_round(self.history, round_idx, soft_weights={c: w.round(4).tolist() for c, w in self.weights.items()})
        elif stage == "train" and replies:
            for k in range(self.num_models):
                w = [r.tag[k] for r in replies]
                if sum(w) > 0:
                    self.models[k] = weighted_average([r.state for r in replies], w)

    def fused(self, client_id: str) -> State:
        """A client with no weights yet (held out, and absent from the final refresh) gets the uniform mix."""
        uniform = np.full(self.num_models, 1.0 / self.num_models)
        return fuse(self.models, self.weights.get(client_id, uniform))

    def initialization(self, client_id: str) -> State:
        return self.fused(client_id)

    def server_models(self) -> list[State]:
        return list(self.models)

    def stages(self, r: int) -> list[str]:
        if r == self.num_rounds:
            return ["refresh"]
        if r > self.num_rounds:
            return []
        return (["refresh"] if r % self.refresh_every == 0 else []) + ["train"]


def build_soft_fl(cfg: ExperimentConfig, infos: list[ClientInfo], init: State, model: nn.Module) -> SoftFL:
    a = cfg.algorithm
    inits = orthogonal_adapter_inits(model, init, a.num_models, generator=torch.Generator().manual_seed(cfg.seed))
    return SoftFL(infos, init, **multi_model_arguments(cfg), refresh_every=a.reassign_every, initial_models=inits)


PAPER = "FedGD (baseline)"  # whose method these are (`fedpref list methods`)
SPECS = (
    MethodSpec(
        SoftFL.name,
        build_soft_fl,
        "K global models from orthogonal adapters; each client trains and counts by soft accuracy weights",
        multi_model=True,
    ),
)
