"""benchmarks/fedvpa_cost.py: its parameter and byte counts on the toy Llama and on tiny, against a hand count."""

from __future__ import annotations

import pytest
from load_script import load_script

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # peft on a directly built Llama


@pytest.fixture(scope="module")
def cost():
    return load_script("benchmarks/fedvpa_cost.py")


def test_parameters_of_the_toy_llama_by_hand(cost):
    # vpa_hh: LoRA rank 8 on the top 2 layers' q, k, v, o, gate, up; the toy Llama: hidden 16, FFN 32, 2 layers
    h, ffn, vocab, r, d, f = 16, 32, 30522, 8, 32, 64
    layer = 4 * h * h + 3 * h * ffn + 2 * h  # q, k, v, o (2 kv heads of 8: k, v are h x h), gate, up, down, 2 norms
    base = 2 * vocab * h + 2 * layer + h  # embedding and untied lm_head, the layers, the final norm
    lora = 2 * r * (4 * (h + h) + 2 * (h + ffn))
    variational = (
        (h * 2 * f + 2 * f) + (2 * f * f + f)  # feature extractor H -> 128 -> 64
        + (f * 2 * d + 2 * d)  # posterior head 64 -> 2 x 32 (mean and log-variance)
        + (d * 64 + 64) + (64 * 32 + 32) + (32 * 2 + 2)  # f: 32 -> 64 -> 32 -> 2
        + 2 * d  # two prototypes
        + h * 2  # W: H -> 2, no bias
    )  # fmt: skip
    assert (base, lora, variational) == (981_904, 3_584, 18_946)
    row = cost.parameters("vpa_hh", ["toy-llama"])["toy-llama"]
    assert row == {
        "base": base,
        "reward_model_trainable": lora,
        "variational": variational,
        "share_pct": round(100 * variational / base, 4),
    }


def test_statistics_bytes_split_the_vectors_from_the_scalars(cost):
    metrics = {"latent_mu": [0.0] * 32, "latent_var": [1.0] * 32, "train_loss": 0.5, "kl": 0.1, "note": "x"}
    assert cost.statistics_bytes(metrics) == {"statistics": 2 * 32 * 8, "scalars": 2 * 8, "latent_dim": 32}


def test_one_round_on_tiny_carries_the_statistics_and_the_variational_modules(cost):
    t = cost.traffic("tiny", [])
    vpa, fl = t["FedVPA-GP"], t["FL"]
    assert (vpa["statistics"], vpa["latent_dim"], fl["statistics"]) == (512, 32, 0)  # 2 x 32 float64
    assert vpa["scalars"] == 6 * 8  # recon, kl, orth, grad_base, grad_latent_path, train_loss
    assert fl["state"] == 112_132  # tests/engines/test_traffic.py: 28,033 fp32 LoRA + head parameters
    assert vpa["state"] - fl["state"] == 66_786 * 4  # the variational modules on MiniLM (C45's count) travel too
    assert vpa["reply"] == vpa["flower_content"] == vpa["state"] + 512 + 48 == vpa["up_per_client_round"]


def test_the_matched_config_sets_both_methods_alike(cost):
    cfg = cost.matched_config("tiny", "smollm2", cost.Matched(clients=2, steps=3, batch=5, max_length=96, rounds=4))
    assert cfg.algorithm.methods == ["FedVPA-GP", "FL"] and cfg.model.head == "selector" and cfg.lora.top_layers == 0
    assert (cfg.federation.clients_per_round, cfg.train.local_steps, cfg.train.batch_size) == (2, 3, 5)
    assert (cfg.data.max_length, cfg.federation.rounds, cfg.data.group_sizes) == (96, 4, [1, 1, 0, 0])  # 2 clients


def test_the_table_has_a_row_per_part(cost):
    result = {
        "parameters": {"qwen2-0.5b": {"base": 10, "reward_model_trainable": 2, "variational": 1, "share_pct": 10.0}},
        "round_time": {
            "median_s": {"FedVPA-GP": 2.0, "FL": 1.0, "FedDPO": 1.6},
            "matched": {"clients": 2, "steps": 2, "batch": 4, "rounds": 4},
            "ratio_fedvpa_over_feddpo": 1.25,
            "ratio_fedvpa_over_fl": 2.0,
            "backbone": "smollm2",
        },
    }
    lines = cost.table(result)
    assert len(lines) == 4 and "0.9M (0.18% of 494M)" in lines[2] and "| 1.18x | 1.25x" in lines[3]
