"""Client side of FedVPA-GP / FedVPL (paper 001, Algorithm 2) and its leakage-free evaluation."""

from __future__ import annotations

import dataclasses
import logging
import statistics
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fedpref.client.trainer import BatchStream, LocalTrainer, OptimConfig, seed_global_rng
from fedpref.config import VariationalConfig, VPADiagnosisConfig, derive
from fedpref.models.adapters import load_trainable_state, trainable_state
from fedpref.models.encoded import EncodedPairs
from fedpref.models.variational import (
    BASE_PREFIX,
    TrainOutputs,
    VariationalSelector,
    VariationalSpec,
    position_flags,
    variational_model,
)
from fedpref.models.variational_math import (
    gumbel_softmax_log_weights,
    kl_mixture_mc,
    kl_standard_normal,
    latent_separation,
    mean_spread,
    orthogonal_loss,
)
from fedpref.protocol import Reply, Task

log = logging.getLogger(__name__)
GUMBEL_KEY = "gumbel_logits"  # client.memory[GUMBEL_KEY]: {peer client id: log pi_j}, never sent


@dataclass(frozen=True)
class LossSettings:
    """Weights of Eq. 10 and the prior's settings, sent by the server in `Task.payload["loss"]` (every field but
    the warm-up's is required: the server derives them from `VariationalConfig`)."""

    beta: float
    lambda_orth: float
    gamma: float
    tau: float
    orthogonal: bool
    gumbel_lr: float  # 0: the training learning rate
    latent_lr_scale: float  # lr of the variational modules (inference net, f, W, prototypes) / training lr
    base_lr_scale: float  # lr of the wrapped reward model (LoRA, scalar head) / training lr; 0 freezes it
    inference_lr_scale: float  # lr of the inference network and prototypes / the z path's lr; 0 freezes them
    z_path_lr_scale: float = 1.0  # set to 0 in latent warm-up rounds only (f and W stay as received)

    @classmethod
    def from_config(cls, options: VariationalConfig, study: VPADiagnosisConfig, orthogonal: bool) -> LossSettings:
        """The loss settings of a variant: each field by name from the method's options, else the study's."""
        return derive(cls, options, study, orthogonal=orthogonal)


@dataclass
class PeerPrior:
    """The previous round's participants' (mu_j, var_j) (Algorithm 1 line 13), as detached tensors."""

    ids: list[str]
    mu: torch.Tensor  # (S, d)
    var: torch.Tensor  # (S, d)

    @classmethod
    def from_payload(cls, prior: dict, device: torch.device | str) -> PeerPrior:
        mu = torch.tensor(prior["mu"], dtype=torch.float32, device=device)
        var = torch.tensor(prior["var"], dtype=torch.float32, device=device)
        return cls(list(prior["ids"]), mu, var)


# ---------------------------------------------------------------- local training (Algorithm 2)


def local_loss(
    out: TrainOutputs,
    settings: LossSettings,
    prototypes: torch.Tensor,
    scale: float,
    prototype_index: int | None,
    prior: PeerPrior | None,
    log_weights: torch.Tensor | None,
) -> dict[str, torch.Tensor]:
    """L_recon + beta * KL(q || prior) + lambda * L_orth (Eq. 10-11; Algorithm 2 lines 19-22), batch means.

    The KL and the pull term use each pair's context posterior and its sample z; with the mixture prior the
    KL is the one-sample Monte Carlo estimate of Eq. 16 under Gumbel-Softmax weights (Eq. 8).
    """
    recon = F.cross_entropy(out.logits.float(), out.target)
    z, mu, logvar = out.z.float(), out.ctx_mu.float(), out.ctx_logvar.float()
    if prior is None:
        kl = kl_standard_normal(mu, logvar).mean()  # Eq. 37 (first round, FedVPL)
    else:
        kl = kl_mixture_mc(z, mu, logvar, log_weights, prior.mu, prior.var).mean()  # Eq. 16
    orth = torch.zeros((), device=recon.device)
    if settings.orthogonal:
        orth = orthogonal_loss(z, prototypes, prototype_index, settings.gamma, scale)
    loss = recon + settings.beta * kl + settings.lambda_orth * orth
    return {"loss": loss, "recon": recon, "kl": kl, "orth": orth}


def gumbel_logits(memory: dict, peer_ids: list[str], device: torch.device | str) -> torch.Tensor:
    """The client's learnable log pi_j for the current peers (new peers start at 0: uniform weights)."""
    known = memory.setdefault(GUMBEL_KEY, {})
    values = [known.get(pid, 0.0) for pid in peer_ids]
    return torch.tensor(values, dtype=torch.float32, device=device, requires_grad=True)


def store_gumbel_logits(memory: dict, peer_ids: list[str], logits: torch.Tensor) -> None:
    memory.setdefault(GUMBEL_KEY, {}).update(zip(peer_ids, logits.detach().cpu().tolist()))


SELECTOR_PATH = ("latent.", "projection.")  # f and W: how the selector reads z


def split_parameters(model: VariationalSelector) -> dict[str, list[nn.Parameter]]:
    """The trainable parameters of the selector by part: base reward model, z path (f, W), inference network
    (feature extractor, posterior head and prototypes)."""
    parts: dict[str, list[nn.Parameter]] = {"base": [], "z_path": [], "inference": []}
    for name, p in model.named_parameters():
        if p.requires_grad:
            part = (
                "base" if name.startswith(BASE_PREFIX) else "z_path" if name.startswith(SELECTOR_PATH) else "inference"
            )
            parts[part].append(p)
    return parts


def make_optimizer(
    model: VariationalSelector, optim: OptimConfig, settings: LossSettings, extra: list[torch.Tensor]
) -> torch.optim.AdamW:
    """AdamW over the shared trainable weights (each part at its own lr scale), plus the client-only Gumbel
    logits (no weight decay). A part at scale 0 is left out: it stays as received."""
    parts = split_parameters(model)
    scales = {
        "base": settings.base_lr_scale,
        "z_path": settings.latent_lr_scale * settings.z_path_lr_scale,
        "inference": settings.latent_lr_scale * settings.inference_lr_scale,
    }
    groups = [{"params": parts[k], "lr": optim.lr * scale} for k, scale in scales.items() if scale > 0]
    if extra:
        groups.append({"params": extra, "weight_decay": 0.0, "lr": settings.gumbel_lr or optim.lr})
    return torch.optim.AdamW(groups, lr=optim.lr, betas=(optim.beta1, optim.beta2), weight_decay=optim.weight_decay)


def gradient_norms(model: VariationalSelector) -> dict[str, float]:
    """L2 norms of the current gradients reaching the base reward model and the z path (f and W)."""
    parts = {"grad_base": [], "grad_latent_path": []}
    for name, p in model.named_parameters():
        if p.grad is None:
            continue
        if name.startswith(BASE_PREFIX):
            parts["grad_base"].append(p.grad)
        elif name.startswith(SELECTOR_PATH):
            parts["grad_latent_path"].append(p.grad)
    return {
        k: float(torch.linalg.vector_norm(torch.stack([g.norm() for g in v]))) if v else 0.0 for k, v in parts.items()
    }


def train_variational(task: Task, client, trainer: LocalTrainer, generator: torch.Generator) -> Reply:
    """Run `task.steps` local steps of Algorithm 2; reply with the shared weights and (mean mu, var z).

    `task.payload`: "spec" (VariationalSpec fields), "loss" (LossSettings fields), optional "prior"
    ({"ids", "mu", "var"}: mixture prior; absent: N(0, I)) and "prototype" (index y_i or None).
    """
    payload = task.payload
    model = variational_model(trainer.model, VariationalSpec(**payload["spec"]))
    settings = LossSettings(**payload["loss"])
    device = model.prototypes.device
    prior = PeerPrior.from_payload(payload["prior"], device) if payload.get("prior") else None
    load_trainable_state(model, task.models[0])
    seed_global_rng(generator)
    pi = gumbel_logits(client.memory, prior.ids, device) if prior else None
    if payload.get("latent_warmup"):  # latent_warmup_rounds: base and z path stay as received
        settings = dataclasses.replace(settings, base_lr_scale=0.0, latent_lr_scale=1.0, z_path_lr_scale=0.0)
    optimizer = make_optimizer(model, trainer.optim, settings, [pi] if pi is not None else [])
    oracle_z = model.oracle(client.group, blind=bool(payload.get("oracle_blind")))  # the study's; else None
    center, scale = latent_center(payload, device)
    stream = BatchStream(len(client.train), trainer.optim.batch_size, generator)
    terms, mus, zs = [], [], []
    model.train()
    k = trainer.optim.accumulation
    for _ in range(task.steps):
        optimizer.zero_grad(set_to_none=True)
        micro = []
        for _ in range(k):  # one AdamW step on the mean gradient of k micro-batches (Table 4: 4-8)
            with trainer.autocast():
                out = model.training_outputs(client.train, stream.next(), generator, oracle_z, center, scale)
            log_w = gumbel_softmax_log_weights(pi, settings.tau, generator) if pi is not None else None
            radius = model.spec.prototype_scale
            parts = local_loss(out, settings, model.prototypes, radius, payload.get("prototype"), prior, log_w)
            (parts["loss"] / k).backward()
            micro.append({name: v.item() for name, v in parts.items()})
            mus.append(out.mu.detach().float())
            zs.append(out.z.detach().float())
        optimizer.step()
        terms.append({**{name: statistics.fmean(m[name] for m in micro) for name in micro[0]}, **gradient_norms(model)})
    model.eval()
    if pi is not None:
        store_gumbel_logits(client.memory, prior.ids, pi)
    metrics = {k: statistics.fmean(t[k] for t in terms) for k in terms[0]}
    metrics["train_loss"] = metrics.pop("loss")
    metrics.update(latent_statistics(torch.cat(mus), torch.cat(zs)))
    return Reply(client.client_id, len(client.train), state=trainable_state(model), metrics=metrics, tag=task.tag)


def latent_center(payload: dict, device: torch.device | str) -> tuple[torch.Tensor | None, float]:
    """The server's (centre (d,) or None, scale) of the client latents: the selector reads (z - centre) / scale."""
    center = payload.get("center")
    center = None if center is None else torch.tensor(center, dtype=torch.float32, device=device)
    return center, float(payload.get("scale", 1.0))


def latent_statistics(mus: torch.Tensor, zs: torch.Tensor) -> dict[str, list[float]]:
    """Algorithm 2 line 26: mean of the posterior means and variance of the sampled z, d floats each."""
    return {"latent_mu": mus.mean(0).tolist(), "latent_var": zs.var(0, unbiased=False).tolist()}


# ---------------------------------------------------------------- evaluation (no label leakage)


@torch.inference_mode()
def client_latent(model: VariationalSelector, train: EncodedPairs, chunk: int = 64) -> tuple[torch.Tensor, float]:
    """A client's z: the mean posterior mean over its own training pairs; and their mean KL to N(0, I)."""
    model.eval()
    mus, kls = [], []
    for start in range(0, len(train), chunk):
        mu, logvar = model.pair_posteriors(train, torch.arange(start, min(start + chunk, len(train))))
        mus.append(mu.float())
        kls.append(kl_standard_normal(mu, logvar).float())
    return torch.cat(mus).mean(0), float(torch.cat(kls).mean())


@torch.inference_mode()
def selector_accuracy(model: VariationalSelector, data: EncodedPairs, z: torch.Tensor, chunk: int = 64) -> dict:
    """Accuracy (%) of argmax logits(A, B | z) on `data`, and of the base logits alone (z's contribution)."""
    model.eval()
    hits, base_hits = 0, 0
    for start in range(0, len(data), chunk):
        index = torch.arange(start, min(start + chunk, len(data)))
        base, shift = model.logit_parts(data, index, z.unsqueeze(0))
        target = (~position_flags(data)[index]).long().to(base.device)
        hits += int(((base + shift).argmax(-1) == target).sum())
        base_hits += int((base.argmax(-1) == target).sum())
    return {"acc": 100.0 * hits / len(data), "base_acc": 100.0 * base_hits / len(data)}


def evaluate_client(
    model: VariationalSelector, client, chunk: int = 64, center: torch.Tensor | None = None, scale: float = 1.0
) -> dict:
    """z from the client's training pairs only, then its test accuracy; works unchanged for unseen clients.

    The selector reads (z - `center`) / `scale` (as in training); with latent_source 'oracle' it reads the
    client's true-type latent instead of z. The reported latent mean is z itself."""
    z, kl = client_latent(model, client.train, chunk)
    z_read = model.selector_input(model.evaluation_latent(z, client.group), center, scale)
    result = selector_accuracy(model, client.test, z_read, chunk)
    return {**result, "group": client.group, "kl_standard": kl, "latent_mean": z.cpu().tolist()}


def evaluate_selector(task: Task, client, trainer: LocalTrainer) -> Reply:
    """An EVALUATE_SELECTOR task: `evaluate_client` under the shared state `task.models[0]`, no update.

    `task.payload`: "spec" (VariationalSpec fields) and "chunk" (pairs per forward pass). Held-out clients
    (the paper's unseen clients) are evaluated the same way.
    """
    model = variational_model(trainer.model, VariationalSpec(**task.payload["spec"]))
    load_trainable_state(model, task.models[0])
    center, scale = latent_center(task.payload, model.prototypes.device)
    metrics = evaluate_client(model, client, task.payload.get("chunk", 64), center, scale)
    return Reply(client.client_id, len(client.train), metrics=metrics, tag=task.tag)


def summarize(per_client: dict[str, dict]) -> dict:
    """Means over clients and per true type; silhouette/probe of client means by type; collapse indicators."""
    groups = sorted({r["group"] for r in per_client.values() if r["group"] is not None})
    by_group = {
        g: {
            "acc": statistics.fmean(r["acc"] for r in per_client.values() if r["group"] == g),
            "base_acc": statistics.fmean(r["base_acc"] for r in per_client.values() if r["group"] == g),
        }
        for g in groups
    }
    means = np.array([r["latent_mean"] for r in per_client.values()])
    labelled = [(r["latent_mean"], r["group"]) for r in per_client.values() if r["group"] is not None]
    separation = latent_separation(np.array([m for m, _ in labelled]), [g for _, g in labelled]) if labelled else {}
    return {
        "acc_mean": statistics.fmean(r["acc"] for r in per_client.values()),
        "base_acc_mean": statistics.fmean(r["base_acc"] for r in per_client.values()),
        "by_group": by_group,
        "separation": separation,
        "collapse": {
            "kl_standard_mean": statistics.fmean(r["kl_standard"] for r in per_client.values()),
            "mean_spread": mean_spread(means),
        },
        "per_client": per_client,
    }
