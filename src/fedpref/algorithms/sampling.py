"""Client sampling rules: uniform, and group-debiased over a partition."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def uniform_sample(client_ids: Sequence[str], k: int, rng: np.random.Generator) -> list[str]:
    """k distinct clients, uniformly at random."""
    if k > len(client_ids):
        raise ValueError(f"cannot sample {k} of {len(client_ids)} clients")
    picks = rng.choice(len(client_ids), size=k, replace=False)
    return [client_ids[i] for i in sorted(picks)]


def group_debiased_probabilities(groups: Sequence[int]) -> np.ndarray:
    """P(client c) proportional to 1 / |A_{g(c)}|: every non-empty group gets equal total mass."""
    groups = np.asarray(groups)
    labels, counts = np.unique(groups, return_counts=True)
    size = dict(zip(labels.tolist(), counts.tolist()))
    p = np.array([1.0 / size[g] for g in groups.tolist()])
    return p / p.sum()


def group_debiased_sample(
    client_ids: Sequence[str], groups: Sequence[int], k: int, rng: np.random.Generator
) -> list[str]:
    """k distinct clients drawn with probability inversely proportional to their group's size (FedGD, Sec. 4.1)."""
    if k > len(client_ids):
        raise ValueError(f"cannot sample {k} of {len(client_ids)} clients")
    p = group_debiased_probabilities(groups)
    picks = rng.choice(len(client_ids), size=k, replace=False, p=p)
    return [client_ids[i] for i in sorted(picks)]


def one_per_group_sample(
    client_ids: Sequence[str], groups: Sequence[int], k: int, rng: np.random.Generator
) -> list[str]:
    """One client from each group, the remaining k - #groups uniformly from the rest (FL_target, Sec. 3.2)."""
    labels = sorted(set(groups))
    if k < len(labels):
        raise ValueError(f"one-per-group sampling needs at least {len(labels)} clients per round, got {k}")
    chosen = [client_ids[rng.choice([i for i, g in enumerate(groups) if g == label])] for label in labels]
    rest = [c for c in client_ids if c not in chosen]
    if k > len(labels):
        chosen += [rest[i] for i in rng.choice(len(rest), size=k - len(labels), replace=False)]
    return sorted(chosen)
