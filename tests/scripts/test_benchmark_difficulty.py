"""scripts/benchmark_difficulty.py: the probe on hand-made features, and main() end to end on the tiny config."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from load_script import load_script


@pytest.fixture(scope="module")
def bd():
    return load_script("scripts/benchmark_difficulty.py")


def _pairs(rng: np.random.Generator, n: int, label) -> np.ndarray:
    """Chosen-minus-rejected features of n pairs: z = f(a) - f(b) is 2-D Gaussian, a is chosen iff label(z)."""
    z = rng.standard_normal((n, 2))
    return np.where(label(z)[:, None], z, -z)


def test_probe_separable_is_perfect(bd):
    rng = np.random.default_rng(0)
    by_sign = lambda z: z[:, 0] > 0  # noqa: E731 - the sign of x0 decides which response is chosen
    assert bd.probe_accuracy(_pairs(rng, 200, by_sign), _pairs(rng, 500, by_sign)) == 100.0


def test_probe_on_labels_independent_of_features_is_chance(bd):
    # With a coin-flip label, x is symmetric noise whatever the fitted w, so each of the n test pairs is right
    # with probability 1/2 independently: accuracy ~ 50 +- 100 * 0.5 / sqrt(n) = 50 +- 1.1 at n = 2000;
    # the bound of 6 points is over 5 standard deviations.
    rng = np.random.default_rng(1)
    coin = lambda z: rng.random(len(z)) < 0.5  # noqa: E731
    acc = bd.probe_accuracy(_pairs(rng, 200, coin), _pairs(rng, 2000, coin))
    assert abs(acc - 50.0) < 6.0


def test_probe_counts_ties_as_half(bd):
    train = np.array([[1.0, 0.0], [2.0, 0.0]])
    test = np.array([[1.0, 0.0], [0.0, 0.0]])  # one right, one with w.x == 0
    assert bd.probe_accuracy(train, test) == 75.0


def test_main_on_tiny(bd, tmp_path, capsys):
    torch.set_num_threads(1)
    out = tmp_path / "d.json"
    result = bd.main(["tiny", "--json", str(out), "--md", str(tmp_path / "d.md")])
    table = capsys.readouterr().out.strip().splitlines()
    rows = [line for line in table if line.startswith("| ") and not line.startswith("| group")]
    groups = ["G1", "G2", "G3", "G4"]
    assert [r.split("|")[1].strip() for r in rows] == [*groups, "all"]
    data = json.loads(out.read_text())
    assert data == json.loads(json.dumps(result))
    assert {"config", "probe", "groups", "all", "clients", "unseen"} <= set(data)
    assert sorted(data["groups"]) == groups
    assert len(data["clients"]) == 8
    for row in [*data["groups"].values(), data["all"]]:
        assert {"clients", "train_pairs_per_client", "test_pairs_per_client"} <= set(row)
        assert row["test_pairs_per_client"] == 6 and row["train_pairs_per_client"] == 14  # 24 - 4 val - 6 test
        for key in bd.COLUMNS:
            stats = row[key]
            assert 0.0 <= stats["min"] <= stats["mean"] <= stats["max"] <= 100.0
    for client in data["clients"].values():
        assert all(0.0 <= client[key] <= 100.0 for key in bd.COLUMNS)


def test_selector_feature_is_what_the_letters_read_signed_by_the_chosen_side(bd, stories_path):
    """x.(w_A - w_B) is the selector's own margin (chosen minus rejected letter logit) on every pair."""
    from fedpref.config import load_config
    from fedpref.experiments.setup import load_pairs
    from fedpref.models.factory import build_reward_model

    torch.set_num_threads(1)
    cfg = load_config("tiny", [f"model.backbone='{stories_path}'", "model.head='selector'", "data.max_length=96"])
    pairs = load_pairs(cfg)[:12]
    model = build_reward_model(cfg).eval()
    x = bd.encode_selector(model, pairs, chunk=5)  # chunks of unequal size: padding must not move the position
    weight = model.lm.get_base_model().get_output_embeddings().weight[model.letters].double()  # (2, H)
    with torch.no_grad():
        enc = model.encode(pairs)
        margins = model.margins(enc, torch.arange(len(pairs))).double()
    assert x.shape == (12, weight.shape[1])
    assert enc.chosen_is_a.any() and not enc.chosen_is_a.all()  # both signs are exercised
    np.testing.assert_allclose(x @ (weight[0] - weight[1]).numpy(), margins.numpy(), atol=1e-4)


def test_main_on_tiny_with_a_selector(bd, stories_path, tmp_path):
    torch.set_num_threads(1)
    sets = ["--set", f"model.backbone='{stories_path}'", "--set", "model.head='selector'"]
    sets += ["--set", "data.max_length=96"]
    result = bd.main(["tiny", *sets, "--json", str(tmp_path / "d.json")])
    assert result["head"] == "selector" and result["probe"]["feature"] == "encode_selector"
    assert sorted(result["groups"]) == ["G1", "G2", "G3", "G4"]
    assert all(0.0 <= c["one_client_frozen"] <= 100.0 for c in result["clients"].values())


def test_a_task_without_groups_has_only_the_all_row(bd):
    stats = {"mean": 60.0, "min": 50.0, "max": 70.0}
    row = {"clients": 2, "train_pairs_per_client": 10, "test_pairs_per_client": 5} | {k: stats for k in bd.COLUMNS}
    table = bd.markdown({"groups": {bd.NO_GROUP: row}, "all": row, "unseen": []})
    names = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")][1:]
    assert names == ["all"]
