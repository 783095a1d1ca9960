"""The bytes each round carries to and from each client, counted by hand on configs/quick/tiny.toml."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedpref.engines.loop import communication
from fedpref.engines.traffic import Traffic, metric_bytes, reply_bytes, task_bytes
from fedpref.protocol import TRAIN, Reply, Task

TINY = Path(__file__).resolve().parents[2] / "src/fedpref/configs/quick/tiny.toml"


def one_round(method: str, overrides: list[str]) -> list[dict]:
    return one_round_and_model(method, overrides)[0]


def one_round_and_model(method: str, overrides: list[str]) -> tuple[list[dict], torch.nn.Module]:
    """One round of `method` on tiny in-process: its round records and the reward model it trained."""
    from fedpref.algorithms.registry import build_algorithm
    from fedpref.client.trainer import LocalTrainer, optim_configs
    from fedpref.client.worker import Trainers
    from fedpref.config import load_config
    from fedpref.engines.inprocess import InProcessTransport
    from fedpref.engines.loop import run_rounds
    from fedpref.experiments.setup import build_setup

    cfg = load_config(TINY, ["federation.rounds=1", f"algorithm.methods=['{method}']", *overrides])
    setup, (train_opt, pers_opt) = build_setup(cfg), optim_configs(cfg)
    algorithm = build_algorithm(method, cfg, setup.infos, setup.init_state, setup.model, setup.unseen)
    trainers = Trainers(LocalTrainer(setup.model, train_opt), LocalTrainer(setup.model, pers_opt), cfg.seed)
    return run_rounds(algorithm, InProcessTransport(setup.clients, trainers)), setup.model


def tiny_trainable_parameters() -> int:
    """tiny: MiniLM (hidden 384, FFN 1536), LoRA rank 4 (A: rank x in, B: out x rank) on the top layer's six
    linear modules, and a scalar head (weight and bias)."""
    rank = 4
    lora = rank * (
        (384 + 384)  # query
        + (384 + 384)  # key
        + (384 + 384)  # value
        + (384 + 384)  # attention output
        + (384 + 1536)  # intermediate
        + (1536 + 384)  # output
    )
    head = 384 + 1
    return lora + head


def test_fedavg_sends_its_lora_state_and_head() -> None:
    state = tiny_trainable_parameters() * 4  # 28033 parameters x 4 bytes (fp32) = 112132
    assert state == 112132
    log = one_round("FL", [])
    first = log[0]
    assert len(first["bytes_down"]) == 3  # clients_per_round
    assert set(first["bytes_down"].values()) == {state}
    assert set(first["bytes_up"].values()) == {state + 8}  # the trained state and its train_loss (a float64)
    summary = communication(log)
    assert summary["bytes_down_per_client_round"] == 112132
    assert summary["bytes_up_per_client_round"] == 112140


def test_fedvpa_gp_sends_its_latent_statistics() -> None:
    d = 4
    log = one_round("FedVPA-GP", [f"variational.latent_dim={d}"])
    first = log[0]
    statistics = 2 * d * 8  # latent_mu and latent_var: d numbers each, carried as float64
    scalars = 6 * 8  # recon, kl, orth, grad_base, grad_latent_path, train_loss
    for client, down in first["bytes_down"].items():
        # the reply's state has the same tensors as the model it was sent
        assert first["bytes_up"][client] - down == statistics + scalars == 112


def test_counts_tensors_at_their_dtype_and_numeric_metrics() -> None:
    task = Task("a", TRAIN, [{"w": torch.zeros(3, 5), "b": torch.zeros(2, dtype=torch.float16)}], payload={"p": 1})
    assert task_bytes(task) == 3 * 5 * 4 + 2 * 2  # a non-tensor payload travels as config, not counted
    reply = Reply("a", 1, {"w": torch.zeros(7, dtype=torch.float64)}, {"loss": 0.5, "mu": [1.0, 2.0], "why": "x"})
    assert reply_bytes(reply) == 7 * 8 + 3 * 8
    assert metric_bytes({"flag": True, "empty": []}) == 0


def test_a_client_that_never_answers_counts_zero_up() -> None:
    traffic = Traffic()
    traffic.count_tasks([Task("a", TRAIN, [{"w": torch.zeros(2)}]), Task("b", TRAIN, [{"w": torch.zeros(2)}])])
    traffic.count_replies([Reply("b", 1, {"w": torch.zeros(2)})])
    assert traffic.take() == {"down": {"a": 8, "b": 8}, "up": {"a": 0, "b": 8}}
    assert traffic.take() == {"down": {}, "up": {}}
    records = [{"round": 0, "bytes_down": {"a": 8, "b": 8}, "bytes_up": {"a": 0, "b": 8}}]
    assert communication(records)["bytes_up_per_client_round"] == pytest.approx(4.0)


def test_flower_messages_carry_the_bytes_counted_in_process() -> None:
    from fedpref.engines.flower.messages import content_bytes, reply_to_content, task_to_content
    from fedpref.protocol import TaskKey

    model = {"w": torch.zeros(3, 5), "b": torch.zeros(2, dtype=torch.float16)}
    task = Task("a", TRAIN, [model, model], payload={"prior": torch.zeros(4), "k": 2})
    assert content_bytes(task_to_content(task, TaskKey("FL", 0))) == task_bytes(task) == 2 * (60 + 4) + 16
    reply = Reply("a", 3, {"w": torch.zeros(3, 5)}, {"train_loss": 0.5, "latent_mu": [0.1, 0.2], "note": "x"})
    assert content_bytes(reply_to_content(reply, 0)) == reply_bytes(reply) == 60 + 3 * 8
