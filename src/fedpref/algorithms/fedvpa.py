"""FedVPA-GP, FedVPL and their ablations: server side of Stage 1 (paper 001, Algorithm 1 lines 1-14)."""

from __future__ import annotations

import dataclasses
import logging
import math
from functools import partial
from typing import Any

import numpy as np
import torch
from torch import nn

from fedpref.algorithms.aggregation import copy_state, uniform_average
from fedpref.algorithms.base import Algorithm
from fedpref.algorithms.registry import MethodSpec, method_options
from fedpref.algorithms.sampling import group_debiased_sample, uniform_sample
from fedpref.config import (
    VARIATIONAL_CHOICES,
    VPA_DIAGNOSIS_CHOICES,
    ExperimentConfig,
    VariationalConfig,
    VPADiagnosisConfig,
    derive,
)
from fedpref.models.adapters import State
from fedpref.models.variational import BASE_PREFIX, VariationalSpec, variational_model
from fedpref.models.variational_math import balanced_kmeans, match_clusters
from fedpref.protocol import EVALUATE_SELECTOR, TRAIN_VARIATIONAL, ClientInfo, Reply, Task

log = logging.getLogger(__name__)

PRIORS = ("standard", "mixture")
# method name -> (prior, orthogonal loss); FedVPL is the paper's naive federated VPL (App. C.4).
VARIANTS: dict[str, tuple[str, bool]] = {
    "FedVPL": ("standard", False),
    "FedVPL+Ortho": ("standard", True),
    "FedVPL+GB": ("mixture", False),
    "FedVPA-GP": ("mixture", True),
}


SERVER_ONLY = (
    "prior",
    "assignment",
    "sampling",
    "oracle_from_round",
    "latent_warmup_rounds",
    "center_latents",
    "scale_latents",
)  # Settings the clients never need


@dataclasses.dataclass(frozen=True)
class Settings:
    """Variant and loss weights (Eq. 10-11) the server sends to every client (`Task.payload["loss"]`), and its own
    (SERVER_ONLY). Every field is required: a run's settings are `from_config` (the defaults live in
    `VariationalConfig`, the study's switches in `VPADiagnosisConfig`)."""

    prior: str
    orthogonal: bool
    beta: float
    lambda_orth: float
    gamma: float
    tau: float
    gumbel_lr: float
    latent_lr_scale: float
    base_lr_scale: float
    inference_lr_scale: float
    assignment: str
    sampling: str
    oracle_from_round: int
    latent_warmup_rounds: int
    center_latents: bool
    scale_latents: bool

    @classmethod
    def from_config(
        cls, prior: str, orthogonal: bool, options: VariationalConfig, study: VPADiagnosisConfig
    ) -> Settings:
        """The variant's settings: each field by name from the method's options, else the study's switches."""
        return derive(cls, options, study, prior=prior, orthogonal=orthogonal)

    def loss_payload(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in SERVER_ONLY}


def read_statistics(reply: Reply, latent_dim: int) -> tuple[list[float], list[float]] | None:
    """(mu, var) of a reply; None (skip the peer) when non-finite or negative; a size mismatch is an error."""
    mu, var = reply.metrics.get("latent_mu"), reply.metrics.get("latent_var")
    if mu is None or var is None:
        raise ValueError(f"client {reply.client_id} sent no latent statistics (latent_mu / latent_var)")
    if len(mu) != latent_dim or len(var) != latent_dim:
        raise ValueError(
            f"client {reply.client_id} sent latent statistics of sizes {len(mu)}/{len(var)}; "
            f"the latent size is {latent_dim}"
        )
    values = [float(x) for x in (*mu, *var)]
    if not all(math.isfinite(x) for x in values) or min(var) < 0:
        return None
    return [float(x) for x in mu], [float(x) for x in var]


DIAGNOSTICS = ("recon", "kl", "orth", "grad_base", "grad_latent_path")


def mean_diagnostics(replies: list[Reply]) -> dict[str, float]:
    """The participants' mean loss terms, gradient norms reaching the base reward model and the z path, and
    latent_sd: the root mean variance of the z each client's selector read in training (its spread per axis)."""
    out = {
        k: float(np.mean([r.metrics[k] for r in replies])) for k in DIAGNOSTICS if all(k in r.metrics for r in replies)
    }
    if all("latent_var" in r.metrics for r in replies):
        out["latent_sd"] = float(np.mean([np.sqrt(np.mean(r.metrics["latent_var"])) for r in replies]))
    return out


class FedVPA(Algorithm):
    """Uniform sampling; uniform averaging of the shared weights (Algorithm 1 lines 11-12); the round's
    participants' (mu, var) become the next round's mixture prior (line 13); balanced k-means over their
    means gives the prototype indices (Sec. 4.2). Round 0 (and FedVPL) uses N(0, I).
    """

    has_selector = True

    def __init__(
        self,
        clients: list[ClientInfo],
        init_state: State,
        num_rounds: int,
        clients_per_round: int,
        local_steps: int,
        seed: int,
        spec: VariationalSpec,
        settings: Settings,
        name: str = "FedVPA-GP",
    ):
        super().__init__(clients, init_state, num_rounds)
        if settings.prior not in PRIORS:
            raise ValueError(f"prior must be one of {', '.join(PRIORS)}, got {settings.prior!r}")
        if settings.sampling not in VARIATIONAL_CHOICES["sampling"]:  # who trains each round
            allowed = ", ".join(VARIATIONAL_CHOICES["sampling"])
            raise ValueError(f"sampling must be one of {allowed}, got {settings.sampling!r}")
        self.name, self.spec, self.settings = name, spec, settings
        self.global_state = copy_state(init_state)
        self.clients_per_round, self.local_steps, self.seed = clients_per_round, local_steps, seed
        self.rng = np.random.default_rng(seed)
        self.prior: dict | None = None  # {"ids", "mu", "var"} of the last round's valid participants
        self.prototype_of: dict[str, int] = {}  # k-means label of the last round's participants
        self.cluster_centroids: list[tuple[list[float], int]] = []  # (centroid, prototype index)
        self.last_mean: dict[str, list[float]] = {}
        self.latent_trace: list[dict] = []  # per round: client -> mean mu (for Figure-3-style plots)
        self._trained_round = -1

    # ------------------------------------------------------------ tasks

    def next_tasks(self, round_idx: int) -> list[Task]:
        if round_idx >= self.num_rounds or self._trained_round == round_idx:
            return []
        self._trained_round = round_idx
        sampled = self.sample(round_idx)
        protos = {c: self.prototype_index(c) for c in sampled}
        prior = self.prior if self.settings.prior == "mixture" else None
        self.history.append(
            {"round": round_idx, "sampled": sampled, "prior_components": len(prior["ids"]) if prior else 0}
        )
        if self.settings.orthogonal:
            self.history[-1]["prototype_index"] = protos
        payloads = {c: self.payload(prior, protos[c]) for c in sampled}
        return [Task(c, TRAIN_VARIATIONAL, [self.global_state], self.local_steps, None, payloads[c]) for c in sampled]

    def sample(self, round_idx: int) -> list[str]:
        """This round's participants: uniform, or one group-debiased draw over the clients' labels (a client
        without a prototype label yet is in a group of its own kind, -1)."""
        ids = [c.client_id for c in self.clients]
        if self.settings.sampling == "uniform":
            return uniform_sample(ids, self.clients_per_round, self.rng)
        if self.settings.sampling == "by_true_type":
            labels = [self.true_type_index(c) for c in ids]
        else:
            labels = [-1 if (y := self.prototype_index(c)) is None else y for c in ids]
        return group_debiased_sample(ids, labels, self.clients_per_round, self.rng, round_idx)

    def payload(self, prior: dict | None, prototype: int | None) -> dict:
        out = {"spec": self.spec.to_payload(), "loss": self.settings.loss_payload(), "prototype": prototype}
        if prior is not None:
            out["prior"] = prior
        return {**out, **self.center_payload()}

    def center_payload(self) -> dict:
        """{"center": the mean c of every client's latest latent mean m_i} with `center_latents`, and {"scale": the
        root mean square of every coordinate of m_i - c, one number} with `scale_latents`, once some client has been
        heard."""
        if not (self.settings.center_latents or self.settings.scale_latents) or not self.last_mean:
            return {}
        means = np.array(list(self.last_mean.values()))
        center = means.mean(0)
        out = {"center": center.tolist()} if self.settings.center_latents else {}
        if self.settings.scale_latents:
            out["scale"] = max(float(np.sqrt(((means - center) ** 2).mean())), 1e-6)
        return out

    def prototype_index(self, client_id: str) -> int | None:
        """The client's k-means label from last round; else its last mean's nearest centroid; else none."""
        if not self.settings.orthogonal:
            return None
        if client_id in self.prototype_of:
            return self.prototype_of[client_id]
        if client_id in self.last_mean and self.cluster_centroids:
            mean = np.asarray(self.last_mean[client_id])
            dists = [float(((mean - np.asarray(c)) ** 2).sum()) for c, _ in self.cluster_centroids]
            return self.cluster_centroids[int(np.argmin(dists))][1]
        return None

    # ------------------------------------------------------------ aggregation

    def receive(self, round_idx: int, replies: list[Reply]) -> None:
        if not replies:  # a round with no replies keeps the model and the prior
            return
        self.global_state = uniform_average([r.state for r in replies])
        stats, skipped = {}, []
        for r in replies:
            s = read_statistics(r, self.spec.latent_dim)
            if s is None:
                skipped.append(r.client_id)
            else:
                stats[r.client_id] = s
        if skipped:
            log.warning(
                "%s round %d: non-finite latent statistics from %s; left out of the prior",
                self.name,
                round_idx,
                ", ".join(skipped),
            )
        if self.history and self.history[-1].get("round") == round_idx:
            self.history[-1]["skipped_statistics"] = skipped
            self.history[-1].update(mean_diagnostics(replies))
        self.update_prior(round_idx, stats)

    def update_prior(self, round_idx: int, stats: dict[str, tuple[list[float], list[float]]]) -> None:
        """Next round's prior and prototype labels from this round's valid statistics."""
        self.latent_trace.append({"round": round_idx, "means": {c: mu for c, (mu, _) in stats.items()}})
        self.last_mean.update({c: mu for c, (mu, _) in stats.items()})
        if not stats:
            log.warning("%s round %d: no valid latent statistics; next round uses N(0, I)", self.name, round_idx)
            self.prior, self.prototype_of, self.cluster_centroids = None, {}, []
            return
        ids = list(stats)
        self.prior = {"ids": ids, "mu": [stats[c][0] for c in ids], "var": [stats[c][1] for c in ids]}
        if self.settings.orthogonal:
            self.label_clients(ids)

    def label_clients(self, ids: list[str]) -> None:
        """Prototype labels from balanced k-means over the round's participants' means (Sec. 4.2)."""
        self.assign_prototypes(ids, np.array(self.prior["mu"]))

    def assign_prototypes(self, ids: list[str], means: np.ndarray) -> None:
        """Balanced k-means (k = M) over the client means, clusters matched to the shared prototypes."""
        labels, centroids = balanced_kmeans(means, self.spec.num_prototypes, seed=self.seed)
        prototypes = self.global_state["prototypes"].detach().double().cpu().numpy()
        to_proto = match_clusters(centroids, prototypes)
        self.prototype_of = {c: to_proto[int(k)] for c, k in zip(ids, labels)}
        self.cluster_centroids = [(centroids[k].tolist(), to_proto[k]) for k in range(len(centroids))]

    def true_type_index(self, client_id: str) -> int:
        """The prototype of the client's true type G<k>: k - 1 modulo M (sampling 'by_true_type' and the study's
        assignment 'oracle', diagnostics)."""
        group = next(c.true_group for c in self.clients if c.client_id == client_id)
        if group is None or not group.lstrip("G").isdigit():
            raise ValueError(f"assignment 'oracle' needs true types G<k>; client {client_id} has {group!r}")
        return (int(group.lstrip("G")) - 1) % self.spec.num_prototypes

    def initialization(self, client_id: str) -> State:
        """The reward-model part (LoRA, plus the scalar head on encoders) of the shared state, for personalization.

        The latent-conditioned selector itself is evaluated by the clients (`selector_tasks`).
        """
        return {k[len(BASE_PREFIX) :]: v for k, v in self.global_state.items() if k.startswith(BASE_PREFIX)}

    def server_models(self) -> list[State]:
        """The reward-model part of the shared state (what personalization starts from), not the selector."""
        return [self.initialization("")]

    def selector_tasks(self, client_ids: list[str], chunk: int = 64) -> list[Task]:
        """The selector's evaluation (Tables 1-2), as tasks: each client infers z from its own training pairs
        under the shared state and reports its test accuracy, with no update (seen and unseen clients alike).
        The per-round latent means of the participants are in `self.latent_trace`."""
        payload = {"spec": self.spec.to_payload(), "chunk": chunk, **self.center_payload()}
        return [Task(c, EVALUATE_SELECTOR, [self.global_state], payload=payload) for c in client_ids]

    @staticmethod
    def summarize_selector(replies: list[Reply]) -> dict:
        """Means over clients and per type, latent separation and collapse indicators of the replies."""
        from fedpref.client.variational import summarize

        return summarize({r.client_id: r.metrics for r in replies})


class FedVPAStudy(FedVPA):
    """FedVPA-GP under the diagnosis study's server switches ([vpa_diagnosis]; docs/fedvpa.md, "Diagnosis"):
    who labels the clients (`assignment`) and the rounds whose tasks withhold the oracle z or train the inference
    network alone (`oracle_from_round`, `latent_warmup_rounds`). Built only when the study sets a switch, so the
    method's own path (FedVPA) has no branch for them."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if self.settings.assignment not in VPA_DIAGNOSIS_CHOICES["assignment"]:  # labels for k-means (Sec. 4.2)
            allowed = ", ".join(VPA_DIAGNOSIS_CHOICES["assignment"])
            raise ValueError(f"assignment must be one of {allowed}, got {self.settings.assignment!r}")

    def next_tasks(self, round_idx: int) -> list[Task]:
        tasks = super().next_tasks(round_idx)
        blind = round_idx < self.settings.oracle_from_round  # the oracle z is withheld (zeros)
        warmup = round_idx < self.settings.latent_warmup_rounds  # only the inference network trains
        flags = {**({"oracle_blind": True} if blind else {}), **({"latent_warmup": True} if warmup else {})}
        if tasks and warmup:
            self.history[-1]["latent_warmup"] = True
        for task in tasks:
            task.payload.update(flags)
        return tasks

    def prototype_index(self, client_id: str) -> int | None:
        if self.settings.orthogonal and self.settings.assignment == "oracle":
            return self.true_type_index(client_id)
        return super().prototype_index(client_id)

    def label_clients(self, ids: list[str]) -> None:
        """'participants': the method's; 'all_clients': k-means over every client's latest mean; 'oracle': none
        (`prototype_index` reads the true type)."""
        if self.settings.assignment == "participants":
            super().label_clients(ids)
        elif self.settings.assignment == "all_clients":
            known = list(self.last_mean)
            self.assign_prototypes(known, np.array([self.last_mean[c] for c in known]))


def algorithm_class(study: VPADiagnosisConfig) -> type[FedVPA]:
    """FedVPA for the method itself; FedVPAStudy once the diagnosis study sets one of its switches."""
    return FedVPA if study == VPADiagnosisConfig() else FedVPAStudy


def spec_from_config(cfg: ExperimentConfig) -> VariationalSpec:
    """The architecture part of the FedVPA family's options (seeded by the experiment seed)."""
    return VariationalSpec.from_config(cfg.variational, cfg.vpa_diagnosis, cfg.seed)


def build_fedvpa(name: str, cfg: ExperimentConfig, infos: list[ClientInfo], init: State, model: nn.Module) -> FedVPA:
    """The builder of the variant `name` of VARIANTS, configured from its options ([variational]) and the
    diagnosis study's switches ([vpa_diagnosis])."""
    options, study = method_options(cfg, name), cfg.vpa_diagnosis
    spec = VariationalSpec.from_config(options, study, cfg.seed)
    settings = Settings.from_config(*VARIANTS[name], options, study)
    with torch.no_grad():
        init_state = variational_model(model, spec).initial_state(init)
    f = cfg.federation
    return algorithm_class(study)(
        infos, init_state, f.rounds, f.clients_per_round, cfg.train.local_steps, cfg.seed, spec, settings, name
    )


def _variant_help(prior: str, orthogonal: bool) -> str:
    return f"variational preference adapter: {prior} latent prior, {'with' if orthogonal else 'no'} orthogonal loss"


PAPER = "FedVPA-GP"  # whose method these are (`fedpref list methods`)
SPECS = tuple(
    MethodSpec(
        name,
        partial(build_fedvpa, name),
        _variant_help(*variant),
        variational=True,
        options=VariationalConfig,
        options_table="variational",
    )
    for name, variant in VARIANTS.items()
)
