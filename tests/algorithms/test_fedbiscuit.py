"""FedBiscuit (Algorithm 2): warm-up, size-balanced reassignment, residual aggregation, final selection."""

import numpy as np
import pytest
from fake_clients import FakeClients, infos, run_with_restart, state, value
from tiny_runs import tiny

from fedpref.algorithms.fedbiscuit import FedBiscuit, balance_clusters, balancing_moves, residual_average
from fedpref.protocol import EVALUATE, TRAIN

SIZES = {"a": 10, "b": 30, "c": 20, "d": 40}


def biscuit(sizes=SIZES, rounds=5, k=2, per_round=None, every=2, seed=0):
    return FedBiscuit(infos(sizes), state(0.0), rounds, k, per_round or len(sizes), 1, every, seed)


def test_balancing_moves_least_cost_clients_from_largest_to_smallest():
    losses = np.array(
        [
            [0.1, 0.9, 0.5],  # cost of moving 0 -> 2: 0.40
            [0.2, 0.8, 0.3],  # 0.10  <- first move
            [0.3, 0.7, 0.9],  # 0.60
            [0.1, 0.6, 0.35],  # 0.25  <- second move
            [0.9, 0.1, 0.5],
            [0.8, 0.2, 0.6],
        ]
    )
    assignment = [int(k) for k in losses.argmin(axis=1)]  # sizes 4 / 2 / 0
    assert balancing_moves(losses, assignment) == [(1, 0, 2), (3, 0, 2)]
    assert balance_clusters(losses, assignment) == [0, 2, 0, 2, 1, 1]


def test_balancing_breaks_ties_by_lowest_cluster_and_fills_every_empty_cluster():
    losses = np.array(
        [
            [0.1, 0.5, 0.9, 0.9],  # cluster 0; to 2 costs 0.8
            [0.1, 0.5, 0.3, 0.9],  # cluster 0; to 2 costs 0.2  <- move 1 (sizes 3/3/0/0: largest 0, smallest 2)
            [0.1, 0.5, 0.6, 0.9],  # cluster 0; to 2 costs 0.5
            [0.5, 0.1, 0.9, 0.4],  # cluster 1; to 3 costs 0.3
            [0.5, 0.1, 0.9, 0.2],  # cluster 1; to 3 costs 0.1  <- move 2 (sizes 2/3/1/0: largest 1, smallest 3)
            [0.5, 0.1, 0.9, 0.9],  # cluster 1; to 3 costs 0.8
        ]
    )
    assert balancing_moves(losses, [0, 0, 0, 1, 1, 1]) == [(1, 0, 2), (4, 1, 3)]
    assert balancing_moves(losses, [0, 0, 1, 1, 2, 3]) == []  # sizes already differ by at most one


def test_residual_aggregation_by_hand():
    # p = N_c / sum N = 0.1 and 0.3: (1 - 0.4) * 1 + 0.1 * 2 + 0.3 * 4 = 2.0
    assert value(residual_average(state(1.0), [state(2.0), state(4.0)], [0.1, 0.3])) == pytest.approx(2.0)
    alg = biscuit(rounds=3, every=1)
    alg.models = [state(1.0), state(-1.0)]
    alg.assignment = {"a": 0, "b": 0, "c": 1, "d": 1}
    fake = FakeClients(targets=dict.fromkeys(SIZES, 0.0), offsets={"a": 1, "b": 3, "c": -2, "d": -4}, sizes=SIZES)
    tasks = alg.next_tasks(2)
    assert [t.action for t in tasks] == [EVALUATE] * 4
    alg.receive(2, [])  # nobody answers the evaluation: the assignment stays
    fake.stage(alg, 2)
    assert alg.p == {"a": 0.1, "b": 0.3, "c": 0.2, "d": 0.4}
    assert value(alg.models[0]) == pytest.approx(0.6 * 1 + 0.1 * 2 + 0.3 * 4)
    assert value(alg.models[1]) == pytest.approx(0.4 * -1 + 0.2 * -3 + 0.4 * -5)


def test_warmup_is_independent_uniform_fedavg_per_model_for_t_rounds():
    alg = biscuit(rounds=5, k=2, per_round=2, every=2, seed=1)
    fake = FakeClients(targets=dict.fromkeys(SIZES, 0.0), offsets={"a": 1, "b": 3, "c": -2, "d": -4})
    tasks = fake.stage(alg, 0)
    assert [t.tag for t in tasks] == [0, 0, 1, 1] and all(t.action == TRAIN for t in tasks)
    for k in (0, 1):
        clients = [t.client_id for t in tasks if t.tag == k]
        expected = np.mean([fake.offsets[c] for c in clients])  # uniform, not size-weighted
        assert value(alg.models[k]) == pytest.approx(expected)
    assert alg.history[0]["sampled"] == [[t.client_id for t in tasks if t.tag == k] for k in (0, 1)]


def test_stage_layout_warmup_counts_against_the_round_budget():
    alg = biscuit(rounds=5, k=2, per_round=2, every=2)
    fake = FakeClients(targets={"a": -1.0, "b": -1.0, "c": 1.0, "d": 1.0}, offsets={"a": -1, "b": -1, "c": 1, "d": 1})
    fake.run(alg)
    actions = {r: [t.action for r2, t in fake.tasks if r2 == r] for r in range(6)}
    assert actions[0] == actions[1] == [TRAIN] * 4  # K x |S| warm-up updates
    assert actions[2] == actions[4] == [EVALUATE] * 4 + [TRAIN] * 2  # reassign at r - 1 = 0 mod T
    assert actions[3] == [TRAIN] * 2
    assert actions[5] == [EVALUATE] * 4  # final selection
    assert [h["round"] for h in alg.history if "assignment" in h] == [2, 4, 5]


def test_final_stage_selects_each_clients_lowest_loss_model():
    alg = biscuit(rounds=1, every=5)
    alg.models = [state(0.0), state(10.0)]
    alg.num_rounds = 0  # straight to the final stage
    FakeClients(targets={"a": 1.0, "b": 9.0, "c": 6.0, "d": 4.0}).run(alg)
    assert alg.best == {"a": 0, "b": 1, "c": 1, "d": 0}
    assert [value(alg.initialization(c)) for c in "abcd"] == [0.0, 10.0, 10.0, 0.0]
    assert alg.history[-1]["final_selection"] is True


def test_a_held_out_client_is_never_trained_and_picks_its_model_in_the_final_stage_only():
    alg = biscuit(rounds=5, k=2, per_round=2, every=2)
    alg.held_out = ["u"]
    targets = {"a": -1.0, "b": -1.0, "c": 1.0, "d": 1.0, "u": 50.0}
    fake = FakeClients(targets=targets, offsets={"a": -1, "b": -1, "c": 1, "d": 1})
    fake.run(alg)
    asked = [(r, t.action) for r, t in fake.tasks if t.client_id == "u"]
    assert asked == [(5, EVALUATE)]  # no training, no reassignment: only the final selection
    assert "u" not in alg.assignment
    k = max(range(2), key=lambda i: value(alg.models[i]))  # u's target 50 is nearest the larger model
    assert alg.best["u"] == k and alg.initialization("u") is alg.models[k]


def test_reassignment_balances_after_argmin():
    sizes = {f"c{i}": 10 for i in range(6)}
    alg = biscuit(sizes, rounds=4, k=3, per_round=2, every=1)
    alg.models = [state(0.0), state(10.0), state(20.0)]
    targets = {"c0": 0.0, "c1": 1.0, "c2": 2.0, "c3": 3.0, "c4": 9.0, "c5": 11.0}
    fake = FakeClients(targets=targets)
    tasks = alg.next_tasks(1)
    alg.receive(1, [fake.answer(t) for t in tasks])
    # argmin: c0..c3 -> 0, c4, c5 -> 1; moving to 2 costs 20 - 2 t: c3 (14) then c2 (16)
    assert alg.assignment == {"c0": 0, "c1": 0, "c2": 2, "c3": 2, "c4": 1, "c5": 1}


def test_more_models_than_clients_is_an_error():
    with pytest.raises(ValueError, match="num_models = 5 models, but there are 4 clients"):
        biscuit(k=5)


def test_resuming_from_its_attributes_gives_the_uninterrupted_run():
    targets = {"a": -3.0, "b": 2.0, "c": 0.5, "d": -1.0}
    offsets = {"a": 1, "b": 3, "c": -2, "d": -4}

    def make():
        return biscuit(rounds=7, k=2, per_round=2, every=2, seed=5)

    whole = make()
    FakeClients(targets=targets, offsets=offsets).run(whole)
    resumed = run_with_restart(make, FakeClients(targets=targets, offsets=offsets), stop_after=2)
    assert resumed.history == whole.history
    assert [value(m) for m in resumed.models] == [value(m) for m in whole.models]


def test_end_to_end_tiny(tiny_setup):
    from fedpref.experiments.runner import run_method

    cfg = tiny(["FedBiscuit"], "algorithm.num_models=2", "algorithm.reassign_every=1")
    result, log = run_method("FedBiscuit", cfg, tiny_setup)
    assert [rec["stages"] for rec in log] == [1, 2, 1]  # warm-up, reassign + train, final selection
    assert len(log[0]["sampled"]) == 2
    sizes = np.bincount(list(result["assignments"][0]["assignment"].values()), minlength=2)
    assert abs(sizes[0] - sizes[1]) <= 1
    assert np.isfinite(result["personalization"]["acc_mean"]).all()
