"""A non-finite client update is dropped and named; a non-finite server model stops the run."""

import pytest
import torch

from fedpref.algorithms.fedavg import FedAvg
from fedpref.config import load_config
from fedpref.engines.guards import NonFiniteModelError, all_finite, nonfinite_tensors, split_finite
from fedpref.experiments.runner import run_global
from fedpref.experiments.setup import build_setup
from fedpref.protocol import Reply


@pytest.fixture(scope="module")
def setup():
    cfg = load_config("tiny", ["federation.rounds=3", "federation.clients_per_round=8"])
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


def test_all_finite_checks_every_tensor_of_any_float_dtype():
    good = [torch.zeros(2, 3), torch.ones(4, dtype=torch.bfloat16), torch.arange(3)]  # ints are finite by type
    assert all_finite(good) and all_finite([])
    assert not all_finite([*good, torch.tensor([1.0, float("nan")])])
    assert not all_finite([torch.tensor([float("-inf")], dtype=torch.float16), *good])
    assert all_finite([torch.tensor([3e38, 3e38])])  # the sum overflows: the exact check decides
    assert all_finite([torch.full((3,), 60000.0, dtype=torch.float16)])  # an fp16 sum would overflow
    assert not all_finite([torch.tensor([float("inf"), float("-inf")])])  # the sum is NaN, not inf
    assert not all_finite([torch.tensor([1 + 1j, complex(float("nan"), 0)])])
    assert all_finite([torch.tensor([1 + 1j])])


def test_nonfinite_tensors_names_the_bad_paths_only():
    state = {"models": [{"a": torch.zeros(2)}, {"a": torch.tensor([float("inf")])}], "w": torch.ones(1), "n": 3}
    assert nonfinite_tensors(state) == ["models[1].a"]
    assert nonfinite_tensors({"w": torch.ones(1), "v": [torch.zeros(2)]}) == []
    assert nonfinite_tensors(torch.tensor(float("nan"))) == ["<tensor>"]


def test_split_finite_keeps_order_and_drops_nan_states_and_losses():
    def reply(cid, value, loss=0.5):
        return Reply(cid, 1, state={"w": torch.tensor([value])}, metrics={"train_loss": loss})

    replies = [reply("a", 1.0), reply("b", float("nan")), reply("c", 2.0, loss=float("inf")), reply("d", 3.0)]
    kept, dropped = split_finite(replies)
    assert [r.client_id for r in kept] == ["a", "d"] and dropped == ["b", "c"]
