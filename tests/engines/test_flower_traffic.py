"""The Flower engine records the bytes the in-process engine records, per client and round (tiny config)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.flower, pytest.mark.slow]  # one Flower simulation (about a minute here)
pytest.importorskip("ray", reason="the Flower Simulation Engine needs flwr[simulation] (Ray)")

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "src/fedpref/configs/quick/tiny.toml"
METHODS = ["FL", "FedVPA-GP"]


@pytest.fixture(scope="module")
def cfg():
    from fedpref.config import load_config

    return load_config(TINY, ["federation.rounds=2", f"algorithm.methods={METHODS!r}", "variational.latent_dim=4"])


@pytest.fixture(scope="module")
def inprocess(cfg) -> dict[str, list[dict]]:
    from fedpref.algorithms.registry import build_algorithm
    from fedpref.client.trainer import LocalTrainer, optim_configs
    from fedpref.client.worker import Trainers
    from fedpref.engines.inprocess import InProcessTransport
    from fedpref.engines.loop import run_rounds
    from fedpref.experiments.setup import build_setup

    setup, (train_opt, pers_opt) = build_setup(cfg), optim_configs(cfg)
    logs = {}
    for name in METHODS:
        algorithm = build_algorithm(name, cfg, setup.infos, setup.init_state, setup.model, setup.unseen)
        trainers = Trainers(LocalTrainer(setup.model, train_opt), LocalTrainer(setup.model, pers_opt), cfg.seed)
        logs[name] = run_rounds(algorithm, InProcessTransport(setup.clients, trainers))
    return logs


@pytest.fixture(scope="module")
def flower(cfg) -> dict[str, list[dict]]:
    from fedpref.algorithms.registry import build_algorithm
    from fedpref.engines.flower.run import run_simulated
    from fedpref.engines.loop import run_rounds
    from fedpref.models.adapters import trainable_state
    from fedpref.models.factory import build_reward_model

    model = build_reward_model(cfg)

    def body(transport) -> dict[str, list[dict]]:
        peers, logs = transport.peers, {}
        for name in METHODS:
            algorithm = build_algorithm(name, cfg, peers.trained(), trainable_state(model), model, peers.held_out)
            transport.begin_method(name)
            logs[name] = run_rounds(algorithm, transport)
        return logs

    return run_simulated(cfg, body)


@pytest.mark.parametrize("method", METHODS)
def test_same_bytes_per_client_and_round(method, inprocess, flower) -> None:
    """Flower's counts come from the Messages it sends and receives; the in-process ones from the Tasks and Replies."""
    ours, theirs = inprocess[method], flower[method]
    assert [r["bytes_down"] for r in ours] == [r["bytes_down"] for r in theirs]
    assert [r["bytes_up"] for r in ours] == [r["bytes_up"] for r in theirs]
    assert sum(n for r in theirs for n in r["bytes_down"].values()) > 0


@pytest.mark.parametrize("method", METHODS)
def test_flower_records_the_cost_the_in_process_engine_records(method, inprocess, flower) -> None:
    """The same numbers to and from each client; the clients' time and peak memory come back over the Messages,
    and each round's split sums to its wall time on both engines."""
    ours, theirs = inprocess[method], flower[method]
    assert [(r["params_down"], r["params_up"]) for r in ours] == [(r["params_down"], r["params_up"]) for r in theirs]
    for record in ours + theirs:
        parts = [record[k] for k in ("client_s", "server_s", "transport_s")]
        assert all(p >= 0 for p in parts) and record["client_s"] > 0
        assert sum(parts) == pytest.approx(record["wall_s"], abs=1e-9)
        assert record["peak_memory_bytes"] > 0 and record["peak_memory_kind"] in ("cpu_max_rss", "cuda_max_allocated")
