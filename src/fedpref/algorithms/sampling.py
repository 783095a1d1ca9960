"""Client sampling rules: uniform, and group-debiased over a partition (FedGD, FL_target)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def uniform_sample(client_ids: Sequence[str], k: int, rng: np.random.Generator) -> list[str]:
    """k distinct clients, uniformly at random."""
    if k > len(client_ids):
        raise ValueError(f"cannot sample {k} of {len(client_ids)} clients")
    picks = rng.choice(len(client_ids), size=k, replace=False)
    return [client_ids[i] for i in sorted(picks)]


def groups_in_turn(labels: Sequence[int], k: int, round_idx: int, order: Sequence[int]) -> list[int]:
    """The k groups heard in round `round_idx` when k < #groups: consecutive windows of a fixed cyclic order.

    `order` ranks the labels (a seeded permutation, fixed for the run); round r takes positions
    r*k .. r*k+k-1 modulo #groups, so after any number of rounds the groups' counts differ by at most one.
    """
    position = {g: i for i, g in enumerate(order)}
    ranked = sorted(labels, key=lambda g: (position.get(g, len(position)), g))
    start = round_idx * k
    return [ranked[(start + j) % len(ranked)] for j in range(k)]


def group_debiased_sample(
    client_ids: Sequence[str],
    groups: Sequence[int],
    k: int,
    rng: np.random.Generator,
    round_idx: int = 0,
    order: Sequence[int] = (),
) -> list[str]:
    """k clients whose group composition is uniform whatever the groups' sizes (FedGD paper, Sec. 3.2, 4.1).

    Every non-empty group gives floor(k / K) clients drawn uniformly from it (a smaller group gives all it
    has), and the remaining clients are drawn uniformly from all clients not yet chosen: with K = 4 groups
    and k = 5 this is FL_target's one client per group plus one. With k < K, the groups take turns
    (`groups_in_turn` over the cyclic `order`) and each heard group gives one client.
    """
    if k > len(client_ids):
        raise ValueError(f"cannot sample {k} of {len(client_ids)} clients")
    labels = sorted(set(groups))
    members = {g: [i for i, gi in enumerate(groups) if gi == g] for g in labels}
    if k < len(labels):
        heard, per_group = groups_in_turn(labels, k, round_idx, order), 1
    else:
        heard, per_group = labels, k // len(labels)
    chosen: list[int] = []
    for g in heard:
        take = min(per_group, len(members[g]))
        chosen += rng.choice(members[g], size=take, replace=False).tolist()
    rest = [i for i in range(len(client_ids)) if i not in set(chosen)]
    chosen += rng.choice(rest, size=k - len(chosen), replace=False).tolist()
    return [client_ids[i] for i in sorted(chosen)]
