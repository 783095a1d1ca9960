"""GQ(c, l) against closed-form gradients of a toy model, its zero-gradient rule, and the layer summaries."""

import math

import pytest
import torch

from fedpref.diagnostics.gradient_quotient import (
    ClientGQ,
    average_over_clients,
    client_gq,
    full_batch_gradient,
    summarize_gq,
)
from fedpref.errors import ConfigError, DataError
from fedpref.models.adapters import trainable_state

XZ = [(1.0, 0.5), (-2.0, 1.0), (0.5, -1.5)]


def hand_gradient(a: float, b: float, c: float, w: float) -> tuple[float, float, float, float]:
    """(g_a, g_b, g_c, g_w) of L = mean_i −log σ(x_i (a b + c) + w z_i), dL/dm_i = −σ(−m_i) / N."""
    s = [-1 / (1 + math.exp(x * (a * b + c) + w * z)) / len(XZ) for x, z in XZ]
    sx = sum(si * x for si, (x, _) in zip(s, XZ))
    sz = sum(si * z for si, (_, z) in zip(s, XZ))
    return sx * b, sx * a, sx, sz


def hand_gq(theta: tuple[float, ...], eta: float) -> tuple[float, float]:
    g0 = hand_gradient(*theta)
    g1 = hand_gradient(*(t - eta * g for t, g in zip(theta, g0)))
    q = [abs(b / a - 1) for a, b in zip(g0, g1)]
    return (q[0] + q[1]) / 2, q[2]  # layer 0: mean over its A and B entries; layer 1: its A entry


@pytest.mark.parametrize("eta", [0.1, 1.0])
def test_gq_matches_the_closed_form(tiny, tiny_pairs, eta):
    theta = (0.3, -0.7, 0.2, 0.4)
    model = tiny(*theta)
    before = trainable_state(model)
    got = client_gq(model, tiny_pairs(XZ), eta, chunk=2)
    want0, want1 = hand_gq(theta, eta)
    assert got.per_layer[0] == pytest.approx(want0, rel=1e-10)
    assert got.per_layer[1] == pytest.approx(want1, rel=1e-10)
    assert got.sizes == {0: 2, 1: 1} and got.excluded == {0: 0, 1: 0}
    after = trainable_state(model)
    assert all(torch.equal(before[n], after[n]) for n in before), "the trainable state was not restored"


def test_chunked_gradient_equals_the_closed_form(tiny, tiny_pairs):
    theta = (0.3, -0.7, 0.2, 0.4)
    model = tiny(*theta)
    g = full_batch_gradient(model, tiny_pairs(XZ), chunk=1)
    got = [g[n].item() for n, _ in model.named_parameters()]
    names = [n for n, _ in model.named_parameters()]
    assert names[0] == "encoder.layer.0.lora_A.default.weight"
    assert got == pytest.approx(list(hand_gradient(*theta)), rel=1e-12)


def test_zero_gradient_entries_are_excluded_and_counted(tiny, tiny_pairs):
    theta = (0.3, 0.0, 0.2, 0.4)  # b = 0, as at a fresh LoRA init: g_a = sx · b = 0 exactly
    got = client_gq(tiny(*theta), tiny_pairs(XZ), 0.5)
    g0 = hand_gradient(*theta)
    g1 = hand_gradient(*(t - 0.5 * g for t, g in zip(theta, g0)))
    assert got.excluded == {0: 1, 1: 0}
    assert got.per_layer[0] == pytest.approx(abs(g1[1] / g0[1] - 1), rel=1e-10)


def test_a_layer_with_only_zero_gradients_is_nan_and_skipped():
    clients = [ClientGQ({0: math.nan, 1: 2.0}, {0: 2, 1: 0}, {0: 2, 1: 1}), ClientGQ({0: 1.0, 1: 4.0}, {}, {})]
    assert average_over_clients(clients) == {0: 1.0, 1: 3.0}


def test_summary_body_head_split():
    s = summarize_gq({10: 1.0, 11: 2.0, 12: 3.0})  # default: front two thirds
    assert (s.body_layers, s.head_layers) == ([10, 11], [12])
    assert (s.mean, s.body, s.head) == (2.0, 1.5, 3.0)
    assert s.std == pytest.approx(math.sqrt(2 / 3))
    paper = summarize_gq({i: float(i) for i in range(24)})
    assert len(paper.body_layers) == 16 and len(paper.head_layers) == 8
    assert summarize_gq({0: 1.0, 1: 2.0}, body_fraction=0.5).head_layers == [1]


def test_bad_inputs(tiny, tiny_pairs):
    with pytest.raises(ConfigError, match="eta"):
        client_gq(tiny(0.3, -0.7, 0.2, 0.4), tiny_pairs(XZ), 0.0)
    with pytest.raises(ConfigError, match="no LoRA"):
        client_gq(tiny(0.3, -0.7, 0.2, 0.4, lora=False), tiny_pairs(XZ), 0.1)
    with pytest.raises(DataError, match="empty"):
        client_gq(tiny(0.3, -0.7, 0.2, 0.4), tiny_pairs([]), 0.1)
    with pytest.raises(ConfigError, match="body_fraction"):
        summarize_gq({0: 1.0}, body_fraction=1.5)
