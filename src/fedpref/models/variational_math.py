"""Pure math of FedVPA-GP (paper 001, Sec. 4 and App. A): priors, KL terms, prototypes, balanced k-means."""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

LOG_2PI = math.log(2.0 * math.pi)
VAR_FLOOR = 1e-6  # smallest variance a peer component may have (a peer with one example reports var 0)


# ---------------------------------------------------------------- Gaussians and KL terms (App. A.1, A.5)


def gaussian_log_prob(z: torch.Tensor, mu: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    """log N(z; mu, diag(var)), summed over the last axis (Eq. 14 / Eq. 22); broadcasts."""
    return -0.5 * (LOG_2PI + var.log() + (z - mu) ** 2 / var).sum(-1)


def kl_standard_normal(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """Closed-form KL(N(mu, e^logvar) || N(0, I)) per row (Eq. 37)."""
    return 0.5 * (mu**2 + logvar.exp() - logvar - 1.0).sum(-1)


def check_prior(peer_mu: torch.Tensor, peer_var: torch.Tensor, latent_dim: int) -> None:
    """Raise a clear error for an empty prior or components whose size is not the posterior's."""
    if peer_mu.ndim != 2 or peer_mu.shape[0] == 0:
        raise ValueError("mixture prior has no components (need at least one peer (mu, var))")
    if peer_mu.shape != peer_var.shape:
        raise ValueError(f"mixture prior: mu {tuple(peer_mu.shape)} and var {tuple(peer_var.shape)} differ")
    if peer_mu.shape[1] != latent_dim:
        raise ValueError(f"mixture prior components have latent size {peer_mu.shape[1]}, the posterior {latent_dim}")


def log_mixture_prob(
    z: torch.Tensor, log_weights: torch.Tensor, peer_mu: torch.Tensor, peer_var: torch.Tensor
) -> torch.Tensor:
    """log sum_j w_j N(z; mu_j, var_j) per row of z (B, d), by log-sum-exp (Eq. 7, 18-21).

    The peer statistics are detached (App. A.7): they receive no gradient; the weights do.
    """
    check_prior(peer_mu, peer_var, z.shape[-1])
    mu, var = peer_mu.detach(), peer_var.detach().clamp_min(VAR_FLOOR)
    a = log_weights + gaussian_log_prob(z.unsqueeze(-2), mu, var)  # (B, S): a_j = log w_j + log N_j(z)
    top = a.max(-1, keepdim=True).values.detach()
    return top.squeeze(-1) + (a - top).exp().sum(-1).log()


def kl_mixture_mc(
    z: torch.Tensor,
    mu: torch.Tensor,
    logvar: torch.Tensor,
    log_weights: torch.Tensor,
    peer_mu: torch.Tensor,
    peer_var: torch.Tensor,
) -> torch.Tensor:
    """One-sample Monte Carlo KL(q || p_mixture) per row: log q(z) - log p_mixture(z), z ~ q (Eq. 12, 16)."""
    return gaussian_log_prob(z, mu, logvar.exp()) - log_mixture_prob(z, log_weights, peer_mu, peer_var)


def reparameterize(mu: torch.Tensor, logvar: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """z = mu + sigma * eps, eps ~ N(0, I) (Eq. 17 / 23)."""
    eps = torch.randn(mu.shape, generator=generator, dtype=mu.dtype).to(mu.device)
    return mu + (0.5 * logvar).exp() * eps


def cap_logvar(logvar: torch.Tensor, sigma_max: float) -> torch.Tensor:
    """log sigma^2 <- min(log sigma^2, log sigma_max^2) (Sec. 4.1)."""
    return logvar.clamp_max(2.0 * math.log(sigma_max))


# ---------------------------------------------------------------- Gumbel-Softmax mixture weights (Eq. 8)


def gumbel_softmax_log_weights(
    logits: torch.Tensor, tau: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """log w_j with w_j = softmax((log pi_j + g_j) / tau), g_j ~ Gumbel(0, 1) (Eq. 8); `logits` are log pi."""
    u = torch.rand(logits.shape, generator=generator, dtype=logits.dtype).to(logits.device)
    gumbel = -torch.log(-torch.log(u.clamp(1e-10, 1.0 - 1e-10)))
    return torch.log_softmax((logits + gumbel) / tau, dim=-1)


# ---------------------------------------------------------------- orthogonal prototypes (Sec. 4.2, App. A.3)


def init_prototypes(num: int, dim: int, scale: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """M x d prototypes: orthonormal rows from the QR of a Gaussian matrix, scaled to radius `scale` (Sec. 4.2)."""
    if num > dim:
        raise ValueError(f"cannot make {num} orthogonal prototypes in a latent space of size {dim}")
    q, r = torch.linalg.qr(torch.randn(dim, num, generator=generator, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)  # a unique QR (positive diagonal of R)
    return (scale * q.T).float()


def orthonormal_penalty(prototypes: torch.Tensor, scale: float) -> torch.Tensor:
    """||P P^T / s^2 - I_M||_F^2: Eq. 11's orthonormality term on the prototypes divided by their radius s.

    Eq. 11 writes ||P P^T - I||_F^2 while Sec. 4.2 scales the prototypes to radius s; the two agree only
    for s = 1. We penalize the unit-norm directions P / s, so prototypes of radius s with orthogonal
    directions cost nothing and the penalty's size does not grow with s (it is ||P P^T - s^2 I||_F^2 / s^4).
    """
    unit = prototypes / scale
    eye = torch.eye(unit.shape[0], dtype=unit.dtype, device=unit.device)
    return ((unit @ unit.T - eye) ** 2).sum()


def prototype_coordinates(z: torch.Tensor, prototypes: torch.Tensor) -> torch.Tensor:
    """z's coordinates along the M prototypes, (z . p_m) / |p_m|, in the first M of d axes (the rest 0).

    A latent at its prototype p_m reads as |p_m| e_m: one axis per preference mode, so the selector's
    first layer gives each mode weights of its own. The prototypes enter as constants (no gradient).
    """
    unit = prototypes.detach() / prototypes.detach().norm(dim=-1, keepdim=True)  # (M, d)
    coords = z @ unit.T  # (..., M)
    return torch.nn.functional.pad(coords, (0, z.shape[-1] - coords.shape[-1]))


def pull_loss(z: torch.Tensor, prototype: torch.Tensor) -> torch.Tensor:
    """||z - p_y||_2^2 per row (Eq. 28)."""
    return ((z - prototype) ** 2).sum(-1)


def orthogonal_loss(
    z: torch.Tensor, prototypes: torch.Tensor, index: int | None, gamma: float, scale: float
) -> torch.Tensor:
    """Batch mean of ||z - p_y||^2, plus gamma * orthonormality (Eq. 11); no pull term while y is unknown."""
    penalty = gamma * orthonormal_penalty(prototypes, scale)
    if index is None:
        return penalty
    return pull_loss(z, prototypes[index]).mean() + penalty


# ---------------------------------------------------------------- server: balanced k-means (Sec. 4.2)


def _farthest_first(points: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k initial centroids: a random point, then repeatedly the point farthest from the chosen ones."""
    chosen = [int(rng.integers(len(points)))]
    for _ in range(1, k):
        dist = ((points[:, None, :] - points[chosen][None]) ** 2).sum(-1).min(1)
        chosen.append(int(dist.argmax()))
    return points[chosen].copy()


def _balanced_assign(points: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """The least-cost assignment with cluster sizes floor(n/k) or ceil(n/k) (an exact min-cost matching)."""
    n, k = len(points), len(centroids)
    slots = np.array([c for c in range(k) for _ in range(n // k + (c < n % k))])
    cost = ((points[:, None, :] - centroids[slots][None]) ** 2).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    labels = np.empty(n, dtype=int)
    labels[rows] = slots[cols]
    return labels


def balanced_kmeans(points: np.ndarray, k: int, seed: int = 0, iters: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """(labels, centroids) of k-means whose cluster sizes differ by at most one (Sec. 4.2, Table 4).

    With fewer points than k, k is lowered to the number of points (each point its own cluster).
    """
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or len(points) == 0:
        raise ValueError("balanced k-means needs a non-empty (n, d) array of points")
    k = min(k, len(points))
    centroids = _farthest_first(points, k, np.random.default_rng(seed))
    labels = _balanced_assign(points, centroids)
    for _ in range(iters):
        centroids = np.stack([points[labels == c].mean(0) for c in range(k)])
        new = _balanced_assign(points, centroids)
        if np.array_equal(new, labels):
            break
        labels = new
    return labels, centroids


def match_clusters(centroids: np.ndarray, prototypes: np.ndarray) -> list[int]:
    """Prototype index of each cluster: the matching of centroids to prototypes with least total distance.

    k-means labels are arbitrary; matching them to the (shared, learned) prototypes keeps a cluster pulled
    towards the same prototype from round to round.
    """
    cost = ((np.asarray(centroids)[:, None, :] - np.asarray(prototypes)[None]) ** 2).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    out = [0] * len(centroids)
    for r, c in zip(rows, cols):
        out[int(r)] = int(c)
    return out


# ---------------------------------------------------------------- evaluation summaries (Sec. 5, Fig. 3)


def latent_separation(means: np.ndarray, groups: list[str], seed: int = 0) -> dict:
    """Silhouette of client means by true type, and cross-validated accuracy (%) of a linear probe.

    Either is None where undefined (one type only, or too few clients of a type for the folds).
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    means, labels = np.asarray(means, dtype=np.float64), np.asarray(groups)
    kinds, counts = np.unique(labels, return_counts=True)
    out: dict = {"silhouette": type_silhouette(means, groups), "probe_acc": None}
    folds = int(min(5, counts.min())) if len(kinds) >= 2 else 0
    if folds >= 2:
        cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
        scores = cross_val_score(LogisticRegression(max_iter=1000), means, labels, cv=cv)
        out["probe_acc"] = float(100.0 * scores.mean())
    return out


def type_silhouette(means: np.ndarray, groups: list[str]) -> float | None:
    """Silhouette of client means by true type; None where undefined (one type, or a type per client)."""
    from sklearn.metrics import silhouette_score

    means, labels = np.asarray(means, dtype=np.float64), np.asarray(groups)
    if not 2 <= len(np.unique(labels)) <= len(means) - 1:
        return None
    return float(silhouette_score(means, labels))


def separation_over_rounds(trace: list[dict], group_of: dict[str, str]) -> list[tuple[int, float | None]]:
    """(round, silhouette) after each round of a `latent_trace`: every client's latest uploaded mean so far, by
    true type (the server's view of the clients over the rounds, FedVPA-GP paper Fig. 3). Clients without a type
    in `group_of` are left out; None while the silhouette is undefined."""
    latest: dict[str, list[float]] = {}
    out = []
    for record in trace:
        latest.update({c: mu for c, mu in record["means"].items() if c in group_of})
        ids = sorted(latest)
        silhouette = type_silhouette(np.array([latest[c] for c in ids]), [group_of[c] for c in ids]) if ids else None
        out.append((record["round"], silhouette))
    return out


def mean_spread(means: np.ndarray) -> float:
    """Mean distance of the client means to their centroid: near 0 when the latents collapse."""
    means = np.asarray(means, dtype=np.float64)
    return float(np.linalg.norm(means - means.mean(0), axis=1).mean())
