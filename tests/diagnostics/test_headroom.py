"""Headroom: first-order margin change, batched JVP = per-pair backward, R/W statistics, diagnose and errors."""

import json

import pytest
import torch

from fedpref.client.trainer import OptimConfig
from fedpref.client.worker import EncodedClient
from fedpref.config import ExperimentConfig
from fedpref.data.pairs import PreferencePair
from fedpref.diagnostics.gradient_quotient import full_batch_gradient, gradient_step
from fedpref.diagnostics.headroom import client_headroom, headroom, headroom_naive, partition_stats
from fedpref.diagnostics.report import HEADER, diagnose, table_rows
from fedpref.errors import ConfigError, DataError, FedprefError
from fedpref.models.adapters import load_trainable_state, trainable_state
from fedpref.models.factory import build_reward_model

TRAIN_XZ = [(1.0, 0.5), (-2.0, 1.0), (0.5, -1.5), (1.5, 0.25)]
TEST_XZ = [(0.7, -0.2), (-1.2, 0.9), (2.0, 0.1)]
THETA = (0.3, -0.7, 0.2, 0.4)


def text_pairs(n: int, stem: str) -> list[PreferencePair]:
    return [
        PreferencePair(f"{stem} {i}: why is the sky blue?", f"Light scatters, friend {i}!", f"Case {i}: no idea.", "c0")
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def minilm():
    """MiniLM, top layer adapted, in float64 with small random LoRA B (non-trivial lora_A gradients)."""
    cfg = ExperimentConfig()
    cfg.data.max_length, cfg.lora.top_layers, cfg.lora.rank = 40, 1, 4
    model = build_reward_model(cfg).double()
    gen = torch.Generator().manual_seed(3)
    state = {
        k: v + 0.05 * torch.randn(v.shape, generator=gen, dtype=v.dtype) if "lora_B" in k else v
        for k, v in trainable_state(model).items()
    }
    load_trainable_state(model, state)
    train = model.encode(text_pairs(10, "Train"))
    return model, full_batch_gradient(model, train, chunk=4), model.encode(text_pairs(6, "Test"))


def margins_after_step(model, data, g, eta) -> torch.Tensor:
    saved = trainable_state(model)
    gradient_step(model, g, eta)
    with torch.no_grad():
        m1 = model.margins(data, torch.arange(len(data)))
    load_trainable_state(model, saved)
    return m1


def test_tiny_headroom_is_the_exact_first_order_term(tiny, tiny_pairs):
    """Δm_i = H_i + η² x_i g_a g_b for m = x (a b + c) + w z, so H/Δm → 1 as η → 0."""
    model, train, test = tiny(*THETA), tiny_pairs(TRAIN_XZ), tiny_pairs(TEST_XZ)
    g = full_batch_gradient(model, train)
    for eta in (1e-1, 1e-3):
        m0, h = headroom(model, test, g, eta)
        dm = margins_after_step(model, test, g, eta) - model.margins(test, torch.arange(3)).detach()
        x = torch.tensor([x for x, _ in TEST_XZ], dtype=torch.float64)
        ga, gb = (g[n].item() for n in list(g)[:2])
        assert torch.allclose(h.double(), dm - eta**2 * x * ga * gb, rtol=1e-5, atol=1e-9)


def test_minilm_headroom_approximates_the_true_margin_change(minilm):
    model, g, test = minilm
    eta = 1e-3
    _, h = headroom(model, test, g, eta)
    with torch.no_grad():
        m0 = model.margins(test, torch.arange(len(test)))
    dm = margins_after_step(model, test, g, eta) - m0
    rel = ((h.double() - dm).norm() / dm.norm()).item()
    assert rel < 1e-2, f"relative error ‖H − Δm‖/‖Δm‖ = {rel:.2e} at eta = {eta}"


@pytest.mark.parametrize("mode", ["forward", "double_backward", "auto"])
def test_batched_headroom_equals_the_per_pair_reference(minilm, mode):
    model, g, test = minilm
    m_ref, h_ref = headroom_naive(model, test, g, 0.01)
    m0, h = headroom(model, test, g, 0.01, chunk=4, mode=mode)
    assert torch.allclose(m0, m_ref, rtol=1e-5, atol=1e-6)
    assert torch.allclose(h, h_ref, rtol=1e-5, atol=1e-7), (h - h_ref).abs().max()


def test_selector_batched_equals_naive(stories_path):
    cfg = ExperimentConfig()
    cfg.model.backbone, cfg.model.head, cfg.data.max_length = str(stories_path), "selector", 96
    model = build_reward_model(cfg)
    gen = torch.Generator().manual_seed(0)
    load_trainable_state(
        model, {k: v + 0.01 * torch.randn(v.shape, generator=gen) for k, v in trainable_state(model).items()}
    )
    g = full_batch_gradient(model, model.encode(text_pairs(6, "Train")))
    test = model.encode(text_pairs(4, "Test"))
    h_ref = headroom_naive(model, test, g, 0.01)[1]
    h = headroom(model, test, g, 0.01, mode="forward")[1]
    assert torch.allclose(h, h_ref, rtol=1e-4, atol=1e-5 * h_ref.abs().max().item()), (h - h_ref).abs().max()


def test_tiny_batched_equals_naive(tiny, tiny_pairs):
    model, test = tiny(*THETA), tiny_pairs(TEST_XZ)
    g = full_batch_gradient(model, tiny_pairs(TRAIN_XZ))
    assert torch.allclose(headroom(model, test, g, 0.3)[1], headroom_naive(model, test, g, 0.3)[1], atol=1e-7)


def test_partition_on_hand_made_margins():
    m0 = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0])  # R = first 3, W = last 3 (a tie is wrong)
    h = torch.tensor([0.1, -0.2, -0.3, 0.4, 0.5, -0.6])
    m10 = torch.tensor([1.0, -1.0, 0.2, 0.3, 0.1, -2.0])
    s = partition_stats(m0, h, m10)
    assert (s["n_R"], s["n_W"]) == (3, 3)
    assert s["m0_R"] == pytest.approx(3.5 / 3) and s["m0_W"] == pytest.approx(-4 / 3)
    assert s["H0_R"] == pytest.approx(-0.4 / 3) and s["H0_W"] == pytest.approx(0.3 / 3)
    assert s["H+_R"] == pytest.approx(100 / 3) and s["H+_W"] == pytest.approx(200 / 3)
    assert s["P10_R"] == pytest.approx(200 / 3) and s["P10_W"] == pytest.approx(200 / 3)
    assert s["acc0"] == pytest.approx(50.0) and s["acc10"] == pytest.approx(400 / 6)
    empty_w = partition_stats(torch.ones(2), torch.ones(2), torch.ones(2))
    assert empty_w["n_W"] == 0 and empty_w["m0_W"] is None and empty_w["H+_W"] is None


def tiny_client(tiny_pairs, train=TRAIN_XZ, test=TEST_XZ, cid="c0") -> EncodedClient:
    return EncodedClient(cid, None, tiny_pairs(train), tiny_pairs([]), tiny_pairs(test))


def test_client_headroom_restores_state_and_counts_steps(tiny, tiny_pairs):
    model = tiny(*THETA)
    before, c = trainable_state(model), tiny_client(tiny_pairs)
    init = {k: v + 0.1 for k, v in before.items()}
    optim = OptimConfig(lr=0.05, batch_size=2)
    none = client_headroom(model, init, c.train, c.test, 0.1, optim, steps=0)
    assert torch.equal(none.m0, none.m_after)
    some = client_headroom(model, init, c.train, c.test, 0.1, optim, steps=5)
    assert not torch.allclose(some.m0, some.m_after)
    assert all(torch.equal(before[n], v) for n, v in trainable_state(model).items())


def test_diagnose_averages_clients_and_fills_the_table(tiny, tiny_pairs):
    model = tiny(*THETA)
    clients = {"a": tiny_client(tiny_pairs, cid="a"), "b": tiny_client(tiny_pairs, test=[(1.0, 1.0)], cid="b")}
    inits = {"a": trainable_state(model), "b": {k: -v for k, v in trainable_state(model).items()}}
    reported = []
    d = diagnose(
        model,
        clients,
        inits,
        None,
        OptimConfig(lr=0.05, batch_size=2),
        steps=3,
        on_client=lambda *a: reported.append(a),
    )
    json.dumps(d)
    assert reported == [(1, 2), (2, 2)]
    assert d["eta"] == 0.05 and d["body_layers"] == [0] and d["head_layers"] == [1]
    per = d["clients"]
    assert d["acc0"] == pytest.approx((per["a"]["acc0"] + per["b"]["acc0"]) / 2)
    assert d["GQ_layers"]["0"] == pytest.approx((per["a"]["GQ_layers"]["0"] + per["b"]["GQ_layers"]["0"]) / 2)
    present = [c["m0_W"] for c in per.values() if c["m0_W"] is not None]  # an empty W is skipped
    assert d["m0_W"] == pytest.approx(sum(present) / len(present))
    header, rows = table_rows({"FL": d})
    assert header == HEADER and len(rows[0]) == len(header) and rows[0][0] == "FL"


def test_diagnose_bad_inputs(tiny, tiny_pairs):
    model, optim = tiny(*THETA), OptimConfig(lr=0.05, batch_size=2)
    clients, inits = {"a": tiny_client(tiny_pairs)}, {"a": trainable_state(model)}
    with pytest.raises(ConfigError, match="eta"):
        diagnose(model, clients, inits, -1.0, optim)
    with pytest.raises(ConfigError, match="no LoRA"):
        diagnose(tiny(*THETA, lora=False), clients, inits, 0.1, optim)
    with pytest.raises(DataError, match="empty test split"):
        diagnose(model, {"a": tiny_client(tiny_pairs, test=[])}, inits, 0.1, optim)
    with pytest.raises(FedprefError, match="no initialization"):
        diagnose(model, clients, {}, 0.1, optim)
    with pytest.raises(ValueError, match="mode"):
        diagnose(model, clients, inits, 0.1, optim, mode="sideways")
