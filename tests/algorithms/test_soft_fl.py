"""Soft-FL (Algorithm 3): soft weights, fused models, expert-wise aggregation, orthogonal adapter init."""

import itertools

import numpy as np
import pytest
import torch
from fake_clients import FakeClients, infos, run_with_restart, state, value
from tiny_runs import tiny

from fedpref.algorithms.soft_fl import SoftFL, fuse, orthogonal_adapter_inits, soft_weights
from fedpref.config import ExperimentConfig
from fedpref.models.adapters import trainable_state
from fedpref.models.factory import build_reward_model
from fedpref.protocol import EVALUATE, TRAIN


def soft(sizes, rounds=3, k=2, per_round=None, every=2, models=(0.0, 10.0)):
    initial = [state(x) for x in models]
    return SoftFL(infos(sizes), state(0.0), rounds, k, per_round or len(sizes), 1, every, 0, initial_models=initial)


def test_soft_weights_normalize_accuracies():
    assert soft_weights([0.8, 0.2]) == pytest.approx([0.8, 0.2])
    assert soft_weights([0.5, 0.25, 0.25, 0.0]) == pytest.approx([0.5, 0.25, 0.25, 0.0])
    assert soft_weights([30.0, 10.0]) == pytest.approx([0.75, 0.25])  # percent or fraction alike
    assert soft_weights([0.0, 0.0]) == pytest.approx([0.5, 0.5])  # no information: uniform
    assert value(fuse([state(0.0), state(10.0)], [0.75, 0.25])) == pytest.approx(2.5)


def test_weights_fused_models_and_expert_wise_aggregation_by_hand():
    sizes = {"a": 10, "b": 30}
    alg = soft(sizes, rounds=3)
    fake = FakeClients(targets={"a": 0.0, "b": 10.0}, offsets={"a": 1.0, "b": -1.0}, sizes=sizes)
    assert [t.action for t in fake.stage(alg, 0)] == [EVALUATE] * 2
    # accuracies 1 / (1 + |theta_k - t|): a: (1, 1/11) -> (11/12, 1/12); b: (1/11, 1) -> (1/12, 11/12)
    assert alg.weights["a"] == pytest.approx([11 / 12, 1 / 12]) and alg.weights["b"] == pytest.approx([1 / 12, 11 / 12])
    assert value(alg.fused("a")) == pytest.approx(10 / 12) and value(alg.fused("b")) == pytest.approx(110 / 12)
    tasks = fake.stage(alg, 0)
    assert [value(t.models[0]) for t in tasks] == pytest.approx([10 / 12, 110 / 12])
    # returned: a 22/12, b 98/12; theta_k = sum_c w_kc theta_c / sum_c w_kc (both Z_k = 1 here)
    assert value(alg.models[0]) == pytest.approx((11 * 22 + 1 * 98) / 144)
    assert value(alg.models[1]) == pytest.approx((1 * 22 + 11 * 98) / 144)
    assert alg.history[0]["sampled"] == ["a", "b"]


def test_weights_are_not_refreshed_between_refresh_rounds_and_fuse_for_personalization():
    sizes = {"a": 10, "b": 30}
    alg = soft(sizes, rounds=3, every=2)
    fake = FakeClients(targets={"a": 0.0, "b": 10.0}, offsets={"a": 1.0, "b": -1.0}, sizes=sizes)
    fake.stage(alg, 0), fake.stage(alg, 0)
    before = {c: w.copy() for c, w in alg.weights.items()}
    assert [t.action for t in fake.stage(alg, 1)] == [TRAIN] * 2  # r = 2 (1-indexed) is refreshed after
    assert all(np.array_equal(alg.weights[c], before[c]) for c in sizes)
    fake.run(alg)
    accs = [1 / (1 + abs(value(m) - 0.0)) for m in alg.models]
    expected = sum(a / sum(accs) * value(m) for a, m in zip(accs, alg.models))
    assert value(alg.initialization("a")) == pytest.approx(expected)


def test_refresh_schedule_every_t_rounds_and_at_the_end():
    sizes = {"a": 10, "b": 30, "c": 5}
    alg = soft(sizes, rounds=5, per_round=2, every=2)
    fake = FakeClients(targets={"a": 0.0, "b": 10.0, "c": 3.0})
    fake.run(alg)
    actions = {r: [t.action for r2, t in fake.tasks if r2 == r] for r in range(6)}
    assert actions[0] == actions[2] == actions[4] == [EVALUATE] * 3 + [TRAIN] * 2
    assert actions[1] == actions[3] == [TRAIN] * 2
    assert actions[5] == [EVALUATE] * 3


def test_a_held_out_client_gets_weights_in_the_final_refresh_only():
    sizes = {"a": 10, "b": 30, "c": 5}
    alg = soft(sizes, rounds=4, per_round=2, every=2)
    alg.held_out = ["u"]
    fake = FakeClients(targets={"a": 0.0, "b": 10.0, "c": 3.0, "u": 0.0})
    fake.stage(alg, 0)
    assert value(alg.initialization("u")) == pytest.approx(5.0)  # no weights yet: the uniform mix of 0 and 10
    fake.run(alg)
    assert [(r, t.action) for r, t in fake.tasks if t.client_id == "u"] == [(4, EVALUATE)]
    accs = [1 / (1 + abs(value(m))) for m in alg.models]  # u's validation accuracies on the final models
    assert alg.weights["u"] == pytest.approx([a / sum(accs) for a in accs])


def test_an_expert_with_zero_total_weight_keeps_its_value():
    sizes = {"a": 10, "b": 10}
    alg = soft(sizes, rounds=1)
    fake = FakeClients(targets={"a": 0.0, "b": 0.0}, offsets={"a": 2.0, "b": 4.0})
    fake.stage(alg, 0)  # refresh
    alg.weights = {"a": np.array([1.0, 0.0]), "b": np.array([1.0, 0.0])}
    fake.stage(alg, 0)  # train: expert 0 = (2 + 4) / 2, expert 1 has Z = 0
    assert [value(m) for m in alg.models] == pytest.approx([3.0, 10.0])


@pytest.fixture(scope="module")
def minilm():
    cfg = ExperimentConfig()
    cfg.lora.top_layers = 1
    return build_reward_model(cfg)


def test_orthogonal_adapter_inits_on_minilm(minilm):
    init = trainable_state(minilm)
    eps, jitter, k_models = 0.005, 0.01, 4
    states = orthogonal_adapter_inits(minilm, init, k_models, eps, jitter, torch.Generator().manual_seed(0))
    modules = dict(minilm.named_modules())
    a_keys = [key for key in init if ".lora_A." in key]
    assert a_keys and len(states) == k_models
    for a_key in a_keys:
        b_key = a_key.replace(".lora_A.", ".lora_B.")
        base = modules[a_key.split(".lora_A.")[0]].base_layer.weight.detach().double()
        updates = [s[b_key].double() @ s[a_key].double() for s in states]
        for u, v in itertools.combinations(updates, 2):
            assert abs(float((u * v).sum())) < 1e-6 * float(u.norm() * v.norm())  # mutually orthogonal
        for k, (s, u) in enumerate(zip(states, updates), start=1):
            a = s[a_key].double()
            assert torch.allclose(a @ a.T, torch.eye(a.shape[0], dtype=torch.float64), atol=1e-5)  # A_k = V_k^T
            scale = eps * float(base.norm()) * (1 + jitter * k)  # eps_layer (1 + jitter k), ||U_k||_F = sqrt(r)
            assert float(u.norm()) == pytest.approx(scale * a.shape[0] ** 0.5, rel=1e-4)
    heads = [key for key in init if "lora_" not in key]
    assert heads == ["head.weight", "head.bias"]
    assert all(torch.equal(s[key], init[key]) for s in states for key in heads)  # equal across the K models


def test_orthogonal_init_needs_room_for_k_blocks(minilm):
    init = trainable_state(minilm)
    with pytest.raises(ValueError, match="K \\* r"):
        orthogonal_adapter_inits(minilm, init, 100)


def test_resuming_from_its_attributes_gives_the_uninterrupted_run():
    sizes = {"a": 10, "b": 30, "c": 5}
    targets, offsets = {"a": 0.0, "b": 10.0, "c": 3.0}, {"a": 1.0, "b": -1.0, "c": 0.5}

    def make():
        return soft(sizes, rounds=6, per_round=2, every=2)

    whole = make()
    FakeClients(targets=targets, offsets=offsets).run(whole)
    resumed = run_with_restart(make, FakeClients(targets=targets, offsets=offsets), stop_after=2)
    assert resumed.history == whole.history
    assert [value(m) for m in resumed.models] == [value(m) for m in whole.models]


def test_end_to_end_tiny(tiny_setup):
    from fedpref.experiments.runner import run_method

    cfg = tiny(["Soft-FL"], "algorithm.num_models=2", "algorithm.reassign_every=2")
    result, log = run_method("Soft-FL", cfg, tiny_setup)
    assert [rec["stages"] for rec in log] == [2, 1, 1]  # refresh + train, train, final refresh
    weights = log[-1]["soft_weights"]
    assert len(weights) == 8 and all(sum(w) == pytest.approx(1.0, abs=1e-3) for w in weights.values())
    assert np.isfinite(result["personalization"]["acc_mean"]).all()
