"""SecAgg+ end to end on the Simulation Engine (configs/quick/tiny.toml, FL, one round of 3 clients): the same global
model as the in-process engine's clear mean within quantization, and no client's trained state in any message.

One round: from the second on, local AdamW steps from a start that differs by the quantization error can move a
weight by far more than that error, so only the first round compares the aggregation alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.flower
pytest.importorskip("ray", reason="the Flower Simulation Engine needs flwr[simulation] (Ray)")

TINY = Path(__file__).resolve().parents[2] / "src/fedpref/configs/quick/tiny.toml"
OVERRIDES = ["algorithm.methods=['FL']", "secure_aggregation.enabled=true", "federation.rounds=1"]
# Flower's quantization: 2^22 levels over [-8, 8], so each weighted value is off by <= 1.9e-6; the mean of 3 clients
# whose weights sum to >= the largest one is off by <= 3 x 1.9e-6.
QUANTIZATION_ATOL = 3 * 8 / (2**22 - 1)


@pytest.fixture(scope="module")
def cfg():
    from fedpref.config import load_config

    return load_config(TINY, OVERRIDES)


@pytest.fixture(scope="module")
def inprocess(cfg) -> tuple:
    """(final FL, round log, every trained state a client sent), in-process: the clear reference."""
    from fedpref.algorithms.registry import build_algorithm
    from fedpref.client.trainer import LocalTrainer, optim_configs
    from fedpref.client.worker import Trainers
    from fedpref.engines.inprocess import InProcessTransport
    from fedpref.engines.loop import run_rounds
    from fedpref.experiments.setup import build_setup

    setup, (train_opt, pers_opt) = build_setup(cfg), optim_configs(cfg)
    trainers = Trainers(LocalTrainer(setup.model, train_opt), LocalTrainer(setup.model, pers_opt), cfg.seed)
    transport, sent = InProcessTransport(setup.clients, trainers), []
    exchange = transport.exchange

    def keep(tasks, key):
        replies = exchange(tasks, key)
        sent.extend(r.state for r in replies if r.state is not None)
        return replies

    transport.exchange = keep
    algorithm = build_algorithm("FL", cfg, setup.infos, setup.init_state, setup.model)
    return algorithm, run_rounds(algorithm, transport), sent


@pytest.fixture(scope="module")
def flower(cfg, tmp_path_factory, message_recorder) -> tuple:
    """(final FL, round log, folder of every message the server grid pushed or pulled), on Flower with SecAgg+."""
    from fedpref.algorithms.registry import build_algorithm
    from fedpref.engines.flower.run import run_simulated
    from fedpref.engines.loop import run_rounds
    from fedpref.models.adapters import trainable_state
    from fedpref.models.factory import build_reward_model

    model, folder = build_reward_model(cfg), tmp_path_factory.mktemp("secure") / "messages"

    def body(transport):
        algorithm = build_algorithm("FL", cfg, transport.peers.trained(), trainable_state(model), model)
        transport.begin_method("FL")
        return algorithm, run_rounds(algorithm, transport)

    with message_recorder(folder):
        algorithm, log = run_simulated(cfg, body)
    return algorithm, log, folder


def test_same_global_model_within_quantization(inprocess, flower) -> None:
    for key, value in inprocess[0].global_state.items():
        torch.testing.assert_close(flower[0].global_state[key], value, rtol=0, atol=QUANTIZATION_ATOL, msg=key)
    assert [r["sampled"] for r in flower[1]] == [r["sampled"] for r in inprocess[1]]
    assert all(not r["dropped"] and "secure_aggregation_failed" not in r for r in flower[1])


def test_no_trained_state_in_any_message(inprocess, flower) -> None:
    """The trained states are the same in both engines (same model, same seeds); none travels in the clear."""
    blobs = [p.read_bytes() for p in sorted(flower[2].glob("*.pb"))]
    assert len(blobs) >= 2 * 8 + 4 * 2 * 3  # discovery of 8 nodes, then four SecAgg+ stages of 3 messages each way
    needles = [t.numpy().tobytes()[:32] for state in inprocess[2] for k, t in state.items() if "lora_B" in k]
    assert needles and all(len(n) == 32 for n in needles)
    assert not any(n in blob for n in needles for blob in blobs)
