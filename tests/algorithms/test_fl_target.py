"""FL_target: FedAvg with one client per ground-truth group in every round."""

from collections import Counter

import numpy as np
import pytest
from fake_clients import FakeClients, infos, state, value
from tiny_runs import tiny

from fedpref.algorithms.fl_target import FLTarget

GROUPS = {f"c{i}": f"G{1 + i % 4}" for i in range(12)}


def test_every_round_has_one_client_per_group_and_the_rest_uniform():
    alg = FLTarget(infos(dict.fromkeys(GROUPS, 10), GROUPS), state(0.0), 2000, 5, 1, seed=0)
    fake = FakeClients(targets=dict.fromkeys(GROUPS, 0.0))
    extra = Counter()
    for r in range(2000):
        sampled = [t.client_id for t in fake.stage(alg, r)]
        per_group = Counter(GROUPS[c] for c in sampled)
        assert len(set(sampled)) == 5 and set(per_group) == {"G1", "G2", "G3", "G4"}
        extra.update(g for g, n in per_group.items() if n == 2)
    assert all(400 < extra[g] < 600 for g in ("G1", "G2", "G3", "G4"))  # the fifth client is uniform
    assert alg.history[0]["sampled"] == sorted(alg.history[0]["sampled"])


def test_aggregation_is_fedavg_size_weighted():
    sizes, groups = {"a": 10, "b": 30}, {"a": "G1", "b": "G2"}
    alg = FLTarget(infos(sizes, groups), state(0.0), 1, 2, 1, seed=0)
    FakeClients(targets={"a": 0.0, "b": 0.0}, offsets={"a": 1, "b": 3}, sizes=sizes).run(alg)
    assert value(alg.initialization("a")) == pytest.approx((10 * 1 + 30 * 3) / 40)


def test_needs_the_true_group_of_every_client():
    with pytest.raises(ValueError, match="ground-truth group of every client"):
        FLTarget(infos({"a": 1, "b": 1}, {"a": "G1"}), state(0.0), 1, 2, 1, seed=0)


def test_fewer_clients_than_groups_take_turns():
    """3 clients a round, 4 groups: 3 distinct groups a round, and every group heard equally often."""
    alg = FLTarget(infos(dict.fromkeys(GROUPS, 10), GROUPS), state(0.0), 4000, 3, 1, seed=0)
    fake = FakeClients(targets=dict.fromkeys(GROUPS, 0.0))
    heard = Counter()
    for r in range(2000):
        groups = [GROUPS[t.client_id] for t in fake.stage(alg, r)]
        assert len(set(groups)) == 3
        heard.update(groups)
        assert max(heard.values()) - min(heard[g] for g in ("G1", "G2", "G3", "G4")) <= 1, r
    assert all(heard[g] == 1500 for g in ("G1", "G2", "G3", "G4"))


def test_end_to_end_tiny(tiny_setup):
    from fedpref.experiments.runner import run_method

    cfg = tiny(["FL_target"], "federation.clients_per_round=5")
    result, log = run_method("FL_target", cfg, tiny_setup)
    groups = {c.client_id: c.true_group for c in tiny_setup.infos}
    assert all({groups[c] for c in rec["sampled"]} == {"G1", "G2", "G3", "G4"} for rec in log)
    assert np.isfinite(result["personalization"]["acc_mean"]).all()
