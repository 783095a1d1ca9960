"""HH-RLHF client partitions: by subset (helpful vs harmless clients), iid, or Dirichlet mixtures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from fedpref.data.hh import Triple
from fedpref.data.pairs import PreferencePair
from fedpref.errors import ConfigError, DataError

PARTITION_SCHEMES = ("by_subset", "iid", "dirichlet")


def _check_partition_args(
    num_clients: int,
    scheme: str,
    helpful_fraction: float,
    alpha: float,
    pairs_per_client: int | None,
) -> None:
    if scheme not in PARTITION_SCHEMES:
        choices = ", ".join(PARTITION_SCHEMES)
        raise ConfigError(f"unknown partition scheme {scheme!r} (choose {choices})")
    if num_clients < 1:
        raise ConfigError(f"num_clients must be at least 1, got {num_clients}")
    if not 0.0 <= helpful_fraction <= 1.0:
        raise ConfigError(f"helpful_fraction must be in [0, 1], got {helpful_fraction}")
    if alpha <= 0:
        raise ConfigError(f"alpha must be positive, got {alpha}")
    if pairs_per_client is not None and pairs_per_client < 1:
        raise ConfigError(f"pairs_per_client must be at least 1, got {pairs_per_client}")


def _kind(subset: str) -> str:
    return "harmless" if "harmless" in subset else "helpful"


def _client_ids(num_clients: int) -> list[str]:
    width = max(2, len(str(num_clients - 1)))
    return [f"c{i:0{width}d}" for i in range(num_clients)]


def _deal(
    pool: list[Triple],
    clients: Sequence[str],
    per_client: int | None,
    rng: np.random.Generator,
    what: str,
) -> list[list[Triple]]:
    """Shuffle `pool` and give each client a disjoint share (even, or fixed size)."""
    need = len(clients) * (per_client or 1)
    if len(pool) < need:
        raise DataError(f"{what}: {len(clients)} client(s) need {need} pairs, only {len(pool)}")
    order = rng.permutation(len(pool))
    if per_client is not None:
        order = order[:need]
    return [[pool[i] for i in part] for part in np.array_split(order, len(clients))]


def _pairs(shares: Sequence[list[Triple]], clients: Sequence[str], groups: Sequence) -> list[PreferencePair]:
    return [
        PreferencePair(prompt=p, chosen=c, rejected=r, client=client, group=group)
        for share, client, group in zip(shares, clients, groups, strict=True)
        for p, c, r in share
    ]


def _by_subset(triples_by_subset, clients, helpful_fraction, per_client, rng):
    n_helpful = round(len(clients) * helpful_fraction)
    groups = ["helpful"] * n_helpful + ["harmless"] * (len(clients) - n_helpful)
    shares: list[list[Triple]] = [[] for _ in clients]
    for kind in ("helpful", "harmless"):
        mine = [i for i, g in enumerate(groups) if g == kind]
        if not mine:
            continue
        pool = [t for s, ts in triples_by_subset.items() if _kind(s) == kind for t in ts]
        dealt = _deal(pool, mine, per_client, rng, f"{kind} subsets")
        for i, share in zip(mine, dealt, strict=True):
            shares[i] = share
    return _pairs(shares, clients, groups)


def _capped_counts(n: int, probs: np.ndarray, left: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Multinomial(n, probs) counts, re-drawing over subsets not yet used up."""
    counts = np.zeros_like(left)
    while n > 0:
        room = left - counts
        weights = np.where(room > 0, probs, 0.0)
        weights = weights if weights.sum() > 0 else (room > 0).astype(float)
        take = np.minimum(rng.multinomial(n, weights / weights.sum()), room)
        counts += take
        n -= int(take.sum())
    return counts


def _dirichlet(triples_by_subset, clients, alpha, per_client, rng):
    names = [s for s, ts in triples_by_subset.items() if ts]
    pools = [list(triples_by_subset[s]) for s in names]
    total = sum(map(len, pools))
    size = per_client if per_client is not None else total // len(clients)
    if size < 1 or size * len(clients) > total:
        raise DataError(
            f"HH-RLHF: {len(clients)} client(s) x {max(size, 1)} pairs need "
            f"{max(size, 1) * len(clients)} pairs, only {total}"
        )
    orders = [list(rng.permutation(len(p))) for p in pools]
    left = np.array([len(p) for p in pools])
    shares = []
    for _ in clients:
        counts = _capped_counts(size, rng.dirichlet([alpha] * len(names)), left, rng)
        share = []
        for k, n in enumerate(counts):
            share += [pools[k][orders[k].pop()] for _ in range(n)]
        left -= counts
        shares.append(share)
    return _pairs(shares, clients, [None] * len(clients))


def partition_hh(
    triples_by_subset: Mapping[str, Sequence[Triple]],
    *,
    num_clients: int,
    scheme: str,
    helpful_fraction: float = 0.5,
    alpha: float = 0.5,
    pairs_per_client: int | None = None,
    seed: int,
) -> list[PreferencePair]:
    """Deal HH-RLHF triples to clients c00, c01, ...; no pair goes to two clients.

    by_subset: round(num_clients * helpful_fraction) "helpful" clients draw from
    the helpful subsets, the rest ("harmless") from subsets named *harmless*;
    `group` is the client's kind. iid: all pairs shuffled and dealt evenly.
    dirichlet: each client's subset proportions ~ Dir(alpha), drawn without
    replacement (a used-up subset's share goes to the others); `group` is None.
    Without `pairs_per_client`, by_subset and iid deal every pair and dirichlet
    gives each client total // num_clients.
    """
    _check_partition_args(num_clients, scheme, helpful_fraction, alpha, pairs_per_client)
    rng = np.random.default_rng(seed)
    clients = _client_ids(num_clients)
    if scheme == "by_subset":
        return _by_subset(triples_by_subset, clients, helpful_fraction, pairs_per_client, rng)
    if scheme == "dirichlet":
        return _dirichlet(triples_by_subset, clients, alpha, pairs_per_client, rng)
    pool = [t for ts in triples_by_subset.values() for t in ts]
    shares = _deal(pool, clients, pairs_per_client, rng, "HH-RLHF")
    return _pairs(shares, clients, [None] * num_clients)
