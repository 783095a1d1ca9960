"""Setup: held-out (unseen) clients and the synthetic axis filter."""

import pytest

from fedpref.config import load_config
from fedpref.data.splits import ClientSplits
from fedpref.errors import ConfigError
from fedpref.experiments.setup import load_pairs, pick_unseen


def splits(groups: list[str]) -> list[ClientSplits]:
    return [ClientSplits(f"c{i:03d}", g, [], [], []) for i, g in enumerate(groups)]


def test_unseen_clients_are_spread_evenly_over_groups_and_seeded():
    clients = splits(["G1"] * 6 + ["G2"] * 6)
    picked = pick_unseen(clients, 4, seed=0)
    group_of = {s.client_id: s.group for s in clients}
    assert len(set(picked)) == 4
    assert sorted(group_of[c] for c in picked) == ["G1", "G1", "G2", "G2"]
    assert pick_unseen(clients, 4, seed=0) == picked
    assert len({tuple(pick_unseen(clients, 4, seed=s)) for s in range(5)}) > 1  # the seed matters


def test_unseen_clients_cannot_take_every_client():
    with pytest.raises(ConfigError, match="leaves no client"):
        pick_unseen(splits(["G1", "G2"]), 2, seed=0)


def test_synthetic_axes_keep_only_the_chosen_axis():
    cfg = load_config(
        None,
        [
            "data.group_sizes=[1,1,0,0]",
            "federation.clients_per_round=2",
            "data.pairs_per_axis=3",
            "data.synthetic_axes=['humor']",
        ],
    )
    pairs = load_pairs(cfg)
    assert len(pairs) == 2 * 3  # two clients, three humor pairs each
    both = load_pairs(
        load_config(None, ["data.group_sizes=[1,1,0,0]", "federation.clients_per_round=2", "data.pairs_per_axis=3"])
    )
    assert len(both) == 2 * 6 and set(pairs) < set(both)


def test_bad_synthetic_axes_name_the_key():
    with pytest.raises(ConfigError, match="data.synthetic_axes"):
        load_config(None, ["data.synthetic_axes=['tone']"])
    with pytest.raises(ConfigError, match="data.synthetic_axes"):
        load_config(None, ["data.synthetic_axes=[]"])
