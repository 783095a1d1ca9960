"""Group pairs by client and split each client's pairs into train / validation / test."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedpref.data.pairs import PreferencePair
from fedpref.errors import ConfigError, DataError


@dataclass
class ClientSplits:
    """One client's pairs; `group` is the ground-truth preference group when known."""

    client_id: str
    group: str | None
    train: list[PreferencePair]
    val: list[PreferencePair]
    test: list[PreferencePair]


def split_clients(pairs: Sequence[PreferencePair], val_pairs: int, test_pairs: int, seed: int) -> list[ClientSplits]:
    """Per client (in first-seen order): shuffle with `seed`, take val, then test, train is the rest.

    A client needs at least val + test + 1 pairs; fewer is an error, never an empty split.
    """
    by_client: dict[str, list[PreferencePair]] = {}
    for p in pairs:
        by_client.setdefault(p.client, []).append(p)
    out = []
    for client_id, own in by_client.items():
        if len(own) < val_pairs + test_pairs + 1:
            raise DataError(
                f"client '{client_id}' has {len(own)} pairs; it needs at least {val_pairs + test_pairs + 1} "
                f"({val_pairs} validation + {test_pairs} test + 1 train). Lower data.val_pairs/test_pairs "
                "or drop the client"
            )
        own = list(own)
        random.Random(f"{seed}/{client_id}").shuffle(own)
        groups = {p.group for p in own}
        group = groups.pop() if len(groups) == 1 else None
        out.append(
            ClientSplits(
                client_id,
                group,
                train=own[val_pairs + test_pairs :],
                val=own[:val_pairs],
                test=own[val_pairs : val_pairs + test_pairs],
            )
        )
    return out


def pick_unseen(splits: list[ClientSplits], count: int, seed: int) -> list[str]:
    """`count` client ids spread evenly over the true groups (round robin over shuffled groups), seeded."""
    if count >= len(splits):
        raise ConfigError(f"data.unseen_clients = {count} leaves no client for training ({len(splits)} clients)")
    rng = np.random.default_rng(seed)
    by_group: dict[str | None, list[str]] = {}
    for s in splits:
        by_group.setdefault(s.group, []).append(s.client_id)
    queues = [list(rng.permutation(ids)) for _, ids in sorted(by_group.items(), key=lambda kv: str(kv[0]))]
    picked: list[str] = []
    while len(picked) < count:
        for queue in queues:
            if queue and len(picked) < count:
                picked.append(str(queue.pop()))
    return sorted(picked)
