"""A non-finite client update is dropped and named; a non-finite server model stops the run."""

import pytest
import torch

from fedpref.algorithms.fedavg import FedAvg
from fedpref.config import load_config
from fedpref.engines.guards import NonFiniteModelError
from fedpref.experiments.runner import run_global
from fedpref.experiments.setup import build_setup


@pytest.fixture(scope="module")
def setup():
    cfg = load_config("configs/tiny.toml", ["federation.rounds=3", "federation.clients_per_round=8"])
    return cfg, build_setup(cfg)


def test_client_with_infinite_data_is_dropped_and_logged(setup, caplog):
    cfg, s = setup
    poisoned = "c003"
    clean = s.clients[poisoned].train.seqs
    s.clients[poisoned].train.seqs = [torch.full_like(t, float("inf")) for t in clean]  # cached hidden states
    try:
        algorithm = FedAvg(s.infos, s.init_state, 3, 8, 2, seed=0)
        records = run_global(algorithm, cfg, s)
    finally:
        s.clients[poisoned].train.seqs = clean
    assert [r["dropped"] for r in records] == [[poisoned]] * 3  # every client is sampled every round
    assert all(torch.isfinite(t).all() for t in algorithm.global_state.values())
    assert poisoned in caplog.text and "non-finite" in caplog.text


def test_non_finite_server_model_stops_with_round_and_clients(setup, monkeypatch):
    cfg, s = setup

    def broken_receive(self, round_idx, replies):
        self.global_state = {k: v * float("nan") for k, v in replies[0].state.items()}

    monkeypatch.setattr(FedAvg, "receive", broken_receive)
    with pytest.raises(NonFiniteModelError, match=r"round 0 after aggregating clients c000, c001"):
        run_global(FedAvg(s.infos, s.init_state, 3, 8, 2, seed=0), cfg, s)
