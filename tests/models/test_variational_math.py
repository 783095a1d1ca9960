"""FedVPA-GP math (paper 001, App. A): mixture-prior KL, Gumbel-Softmax weights, prototypes, balanced k-means."""

import math

import numpy as np
import pytest
import torch

from fedpref.models.variational_math import (
    balanced_kmeans,
    cap_logvar,
    gaussian_log_prob,
    gumbel_softmax_log_weights,
    init_prototypes,
    kl_mixture_mc,
    kl_standard_normal,
    latent_separation,
    log_mixture_prob,
    match_clusters,
    mean_spread,
    orthogonal_loss,
    orthonormal_penalty,
    prototype_coordinates,
    pull_loss,
    reparameterize,
    separation_over_rounds,
)

D = 3


def posterior(n: int, mu: list[float], var: list[float], seed: int = 0):
    """n samples z ~ N(mu, var) with the posterior's (mu, logvar) repeated per row."""
    mu_t = torch.tensor(mu, dtype=torch.float64).expand(n, -1)
    logvar = torch.tensor(var, dtype=torch.float64).log().expand(n, -1)
    return reparameterize(mu_t, logvar, torch.Generator().manual_seed(seed)), mu_t, logvar


def test_closed_form_kl_is_zero_at_the_prior_and_matches_eq_37():
    assert float(kl_standard_normal(torch.zeros(1, D), torch.zeros(1, D))) == 0.0
    mu, logvar = torch.tensor([[1.0, -2.0, 0.5]]), torch.tensor([[0.3, -1.0, 0.0]])
    expected = 0.5 * sum(m**2 + math.exp(v) - v - 1 for m, v in zip(mu[0].tolist(), logvar[0].tolist()))
    assert float(kl_standard_normal(mu, logvar)) == pytest.approx(expected)


def test_mixture_kl_with_one_standard_normal_component_matches_the_closed_form():
    z, mu, logvar = posterior(200_000, [0.8, -0.4, 0.2], [0.5, 1.5, 0.3])
    estimate = kl_mixture_mc(z, mu, logvar, torch.zeros(1, dtype=torch.float64), torch.zeros(1, D), torch.ones(1, D))
    closed = float(kl_standard_normal(mu[:1], logvar[:1]))
    assert float(estimate.mean()) == pytest.approx(closed, abs=0.02)


def test_mixture_kl_matches_brute_force_monte_carlo():
    weights = np.array([0.2, 0.5, 0.3])
    peer_mu = np.array([[0.0, 1.0, -1.0], [2.0, 0.0, 0.5], [-1.0, -1.0, 1.0]])
    peer_var = np.array([[1.0, 0.5, 2.0], [0.3, 1.0, 1.0], [1.5, 0.8, 0.4]])
    z, mu, logvar = posterior(200_000, [0.5, 0.2, -0.3], [0.4, 0.6, 0.9], seed=1)
    estimate = kl_mixture_mc(
        z,
        mu,
        logvar,
        torch.tensor(np.log(weights)),
        torch.tensor(peer_mu, dtype=torch.float64),
        torch.tensor(peer_var, dtype=torch.float64),
    )
    # brute force: densities multiplied out in float64, independent samples
    rng = np.random.default_rng(7)
    q_mu, q_var = np.array([0.5, 0.2, -0.3]), np.array([0.4, 0.6, 0.9])
    x = q_mu + np.sqrt(q_var) * rng.standard_normal((200_000, D))

    def density(x, m, v):
        return np.exp(-0.5 * ((x - m) ** 2 / v).sum(-1)) / np.sqrt((2 * np.pi * v).prod())

    mixture = sum(w * density(x, m, v) for w, m, v in zip(weights, peer_mu, peer_var))
    brute = np.mean(np.log(density(x, q_mu, q_var)) - np.log(mixture))
    assert float(estimate.mean()) == pytest.approx(brute, abs=0.03)


def test_log_mixture_prob_equals_the_naive_sum_on_moderate_values():
    z = torch.randn(5, D, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    log_w = torch.log(torch.tensor([0.7, 0.3], dtype=torch.float64))
    mu, var = torch.tensor([[0.0] * D, [1.0] * D], dtype=torch.float64), torch.full((2, D), 0.8, dtype=torch.float64)
    naive = torch.log(sum(log_w[j].exp() * gaussian_log_prob(z, mu[j], var[j]).exp() for j in range(2)))
    torch.testing.assert_close(log_mixture_prob(z, log_w, mu, var), naive)


def test_log_sum_exp_is_stable_with_far_apart_components():
    mu = torch.tensor([[-1e3] * D, [1e3] * D])
    var = torch.full((2, D), 1e-2)
    z = torch.tensor([[1e3 + 0.1] * D, [0.0] * D])  # near one component; far from both
    log_w = torch.log(torch.tensor([0.5, 0.5]))
    out = log_mixture_prob(z, log_w, mu, var)
    assert torch.isfinite(out).all()
    nearest = log_w[1] + gaussian_log_prob(z[0], mu[1], var[1])
    assert float(out[0]) == pytest.approx(float(nearest), rel=1e-6)
    kl = kl_mixture_mc(z, z, torch.zeros(2, D), log_w, mu, var)
    assert torch.isfinite(kl).all()


def test_gumbel_softmax_weights_sum_to_one_and_get_gradients_but_peer_statistics_do_not():
    pi = torch.zeros(3, requires_grad=True)
    log_w = gumbel_softmax_log_weights(pi, tau=1.0, generator=torch.Generator().manual_seed(0))
    assert float(log_w.detach().exp().sum()) == pytest.approx(1.0)
    peer_mu = torch.tensor([[0.0] * D, [2.0] * D, [-2.0] * D], requires_grad=True)
    peer_var = torch.ones(3, D, requires_grad=True)
    mu = torch.full((4, D), 1.5, requires_grad=True)
    logvar = torch.zeros(4, D, requires_grad=True)
    z = reparameterize(mu, logvar, torch.Generator().manual_seed(1))
    kl_mixture_mc(z, mu, logvar, log_w, peer_mu, peer_var).mean().backward()
    assert pi.grad is not None and pi.grad.abs().sum() > 0
    assert mu.grad is not None and logvar.grad is not None
    assert peer_mu.grad is None and peer_var.grad is None


def test_gumbel_softmax_is_nearly_one_hot_at_low_temperature():
    w = gumbel_softmax_log_weights(torch.tensor([0.0, 0.0, 5.0]), tau=0.01, generator=torch.Generator()).exp()
    assert float(w.max()) > 0.99


def test_bad_priors_fail_clearly():
    z, log_w = torch.zeros(2, D), torch.zeros(0)
    with pytest.raises(ValueError, match="no components"):
        log_mixture_prob(z, log_w, torch.zeros(0, D), torch.zeros(0, D))
    with pytest.raises(ValueError, match="latent size 4"):
        log_mixture_prob(z, torch.zeros(1), torch.zeros(1, 4), torch.ones(1, 4))


def test_log_variance_is_capped_at_sigma_max():
    capped = cap_logvar(torch.tensor([-3.0, 0.0, 5.0]), sigma_max=0.5)
    assert capped.tolist() == pytest.approx([-3.0, 2 * math.log(0.5), 2 * math.log(0.5)])


def test_prototypes_are_orthogonal_with_radius_s_and_cost_no_orthonormality_penalty():
    p = init_prototypes(2, 32, 5.0, torch.Generator().manual_seed(0))
    assert p.shape == (2, 32)
    torch.testing.assert_close(p @ p.T, 25.0 * torch.eye(2), atol=1e-4, rtol=0)
    assert float(orthonormal_penalty(p, 5.0)) == pytest.approx(0.0, abs=1e-10)
    # the choice: penalize P / s, so unit-norm prototypes are off by (1 - 1/s^2)^2 per prototype
    unit = p / 5.0
    assert float(orthonormal_penalty(unit, 5.0)) == pytest.approx(2 * (1 - 1 / 25) ** 2, rel=1e-5)
    skewed = p.clone()
    skewed[1] = skewed[0]
    assert float(orthonormal_penalty(skewed, 5.0)) > 1.0
    with pytest.raises(ValueError, match="3 orthogonal prototypes"):
        init_prototypes(3, 2, 1.0)


def test_orthogonal_loss_pulls_towards_the_assigned_prototype_only_when_there_is_one():
    p = init_prototypes(2, 4, 5.0, torch.Generator().manual_seed(0))
    z = p[1].expand(3, -1).clone()
    assert float(orthogonal_loss(z, p, 1, gamma=0.1, scale=5.0)) == pytest.approx(0.0, abs=1e-8)
    assert float(orthogonal_loss(z, p, 0, gamma=0.1, scale=5.0)) == pytest.approx(50.0, rel=1e-5)  # ||p0 - p1||^2
    assert float(orthogonal_loss(z, p, None, gamma=0.1, scale=5.0)) == pytest.approx(0.0, abs=1e-8)
    assert pull_loss(z, p[0]).shape == (3,)


@pytest.mark.parametrize("n,k", [(5, 2), (7, 3), (10, 2), (11, 4), (23, 3), (2, 3)])
def test_balanced_kmeans_cluster_sizes_differ_by_at_most_one(n, k):
    points = np.random.default_rng(n).normal(size=(n, 4))
    points[: n // 3] += 10.0  # unbalanced natural clusters
    labels, centroids = balanced_kmeans(points, k, seed=0)
    sizes = np.bincount(labels, minlength=min(k, n))
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == n
    assert len(centroids) == min(k, n)


def test_balanced_kmeans_recovers_two_separated_groups():
    rng = np.random.default_rng(0)
    points = np.concatenate([rng.normal(-5, 0.1, (4, 3)), rng.normal(5, 0.1, (4, 3))])
    labels, _ = balanced_kmeans(points, 2)
    assert len(set(labels[:4])) == 1 and len(set(labels[4:])) == 1 and labels[0] != labels[4]


def test_clusters_match_the_nearest_prototypes():
    prototypes = np.array([[5.0, 0.0], [0.0, 5.0]])
    assert match_clusters(np.array([[0.1, 4.0], [3.0, 0.2]]), prototypes) == [1, 0]
    assert match_clusters(np.array([[4.0, 0.1]]), prototypes) == [0]


def test_latent_separation_and_spread():
    means = np.array([[0.0, 0.0], [0.1, 0.0], [0.0, 0.1], [5.0, 5.0], [5.1, 5.0], [5.0, 5.1]])
    out = latent_separation(means, ["a", "a", "a", "b", "b", "b"])
    assert out["silhouette"] > 0.9 and out["probe_acc"] == 100.0
    assert latent_separation(means, ["a"] * 6) == {"silhouette": None, "probe_acc": None}
    assert mean_spread(np.zeros((4, 2))) == 0.0 and mean_spread(means) > 3.0


def test_separation_over_rounds_keeps_each_clients_latest_mean():
    trace = [
        {"round": 0, "means": {"c1": [0.0, 0.0], "c2": [1.0, 0.0]}},  # one client per type: undefined
        {"round": 1, "means": {"c3": [0.0, 1.0], "x": [9.0, 9.0]}},  # x has no type: left out
        {"round": 2, "means": {"c3": [0.0, 0.0]}},  # c3 moves onto c1
    ]
    groups = {"c1": "a", "c2": "b", "c3": "a"}
    # Round 1, by hand: c1 a = |c1 - c3| = 1, b = |c1 - c2| = 1 -> 0; c3 a = 1, b = sqrt 2 -> 1 - 1/sqrt 2;
    # c2 alone in its type -> 0. Round 2: c1 = c3, so a = 0 and both get 1; c2 0. Means over the three clients.
    (r0, s0), (r1, s1), (r2, s2) = separation_over_rounds(trace, groups)
    assert (r0, r1, r2) == (0, 1, 2) and s0 is None
    assert s1 == pytest.approx((1 - 1 / math.sqrt(2)) / 3)
    assert s2 == pytest.approx(2 / 3)


def test_prototype_coordinates_put_each_mode_on_its_own_axis():
    prototypes = torch.tensor([[0.0, 3.0, 0.0], [4.0, 0.0, 0.0]])  # radius 3 and 4, orthogonal
    z = torch.tensor([[1.0, 2.0, 5.0], [4.0, 0.0, 0.0]])
    # (z . p_m / |p_m|) for m = 0, 1, then zero padding to d = 3; the third axis of z is dropped
    torch.testing.assert_close(prototype_coordinates(z, prototypes), torch.tensor([[2.0, 1.0, 0.0], [0.0, 4.0, 0.0]]))
