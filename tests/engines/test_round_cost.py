"""What each round costs, counted on configs/quick/tiny.toml and by hand: parameter counts, the time split
(client compute, server work, transport) and the peak memory the clients report."""

from __future__ import annotations

import pytest
import torch
from test_traffic import one_round_and_model, tiny_trainable_parameters

from fedpref.engines.loop import RoundCost, exchange, method_cost
from fedpref.experiments.runner import trainable_parameters
from fedpref.models.adapters import trainable_state
from fedpref.protocol import COST, TRAIN, Reply, Task, TaskKey


@pytest.fixture(scope="module")
def fedavg() -> tuple[list[dict], torch.nn.Module]:
    return one_round_and_model("FL", [])


def test_fedavg_parameter_counts_by_hand(fedavg) -> None:
    log, model = fedavg
    assert tiny_trainable_parameters() == 28033
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == 28033  # the LoRA adapters and the head
    assert trainable_parameters(trainable_state(model)) == 28033  # and they are the state FedAvg trains
    for record in log:
        assert set(record["params_down"].values()) == {28033}  # the global state
        assert set(record["params_up"].values()) == {28033 + 1}  # the trained state and its train_loss
    cost = method_cost(log, trainable_parameters(trainable_state(model)))
    assert cost["trainable_params"] == 28033
    assert (cost["params_down_per_client_round"], cost["params_up_per_client_round"]) == (28033, 28034)


def test_fedvpa_gp_trains_its_variational_modules_beside_the_reward_model() -> None:
    from fedpref.algorithms.fedvpa import spec_from_config
    from fedpref.algorithms.registry import build_algorithm
    from fedpref.config import load_config
    from fedpref.experiments.setup import build_setup
    from fedpref.models.variational import variational_model

    cfg = load_config("tiny", ["federation.rounds=1", "algorithm.methods=['FedVPA-GP']"])
    setup = build_setup(cfg)
    algorithm = build_algorithm("FedVPA-GP", cfg, setup.infos, setup.init_state, setup.model, setup.unseen)
    modules = variational_model(setup.model, spec_from_config(cfg)).initial_modules
    assert trainable_parameters(algorithm.init_state) == 28033 + sum(t.numel() for t in modules.values())
    assert sum(t.numel() for t in modules.values()) > 0


def test_fedvpa_gp_sends_up_its_latent_statistics_as_numbers() -> None:
    d = 4
    log, _ = one_round_and_model("FedVPA-GP", [f"variational.latent_dim={d}"])
    first = log[0]
    for client, down in first["params_down"].items():
        # latent_mu and latent_var (d numbers each) and six scalars: recon, kl, orth, grad_base,
        # grad_latent_path, train_loss; the state has the elements of the model it was sent
        assert first["params_up"][client] - down == 2 * d + 6
    assert method_cost(log, federated=False).keys().isdisjoint({"params_down_per_client_round"})


def test_the_time_split_sums_to_the_round_wall_time(fedavg) -> None:
    log, _ = fedavg
    for record in log:
        parts = [record[k] for k in ("client_s", "server_s", "transport_s")]
        assert all(p >= 0 for p in parts) and record["client_s"] > 0
        assert sum(parts) == pytest.approx(record["wall_s"], abs=1e-9)
    cost = method_cost(log)
    total = cost["client_s_per_round"] + cost["server_s_per_round"] + cost["transport_s_per_round"]
    assert total == pytest.approx(sum(r["wall_s"] for r in log) / len(log), abs=1e-3)
    assert cost["rounds"] == len(log)


def test_peak_memory_is_positive_with_its_kind(fedavg) -> None:
    log, _ = fedavg
    kind = "cuda_max_allocated" if torch.cuda.is_available() else "cpu_max_rss"
    for record in log:
        assert record["peak_memory_bytes"] > 0 and record["peak_memory_kind"] == kind
    cost = method_cost(log)
    assert cost["peak_memory_bytes"] == max(r["peak_memory_bytes"] for r in log)
    assert cost["peak_memory_kind"] == kind


def test_client_time_is_the_critical_path_of_each_stage() -> None:
    costs = [{"client_s": 0.3, "peak_memory_bytes": 10, "peak_memory_kind": "cpu_max_rss"}, {"client_s": 0.4}]
    one_after_another, at_once = RoundCost(concurrent=False), RoundCost(concurrent=True)
    for cost in (one_after_another, at_once):
        cost.stage(1.0, costs)  # a transport call of 1 s
        cost.stage(0.2, [{"client_s": 0.5}])  # a client cannot compute longer than its call took
    # in-process: 0.3 + 0.4 + 0.2 (clamped); transport 1.0 - 0.7 + 0; a round of 1.5 s leaves 0.3 s to the server
    assert one_after_another.split(1.5) == {
        "client_s": 0.9,
        "server_s": 0.3,
        "transport_s": 0.3,
        "peak_memory_bytes": 10,
        "peak_memory_kind": "cpu_max_rss",
    }
    # at once: the slowest, 0.4 + 0.2; transport 1.0 - 0.4 + 0; the server 0.3 s again
    assert {k: v for k, v in at_once.split(1.5).items() if k.endswith("_s")} == {
        "client_s": 0.6,
        "server_s": 0.3,
        "transport_s": 0.6,
    }


class _Costly:
    """A transport whose clients report a cost with every reply."""

    def exchange(self, tasks: list[Task], key: TaskKey) -> list[Reply]:
        cost = {"client_s": 0.01, "peak_memory_bytes": 5, "peak_memory_kind": "cpu_max_rss"}
        return [Reply(t.client_id, 1, t.models[0], {"train_loss": 0.5, COST: cost}) for t in tasks]


def test_the_cost_is_taken_out_of_the_replies() -> None:
    cost = RoundCost()
    tasks = [Task("a", TRAIN, [{"w": torch.zeros(3, 2)}]), Task("b", TRAIN, [{"w": torch.zeros(3, 2)}])]
    replies = exchange(_Costly(), tasks, TaskKey("m", 0), cost)
    assert [r.metrics for r in replies] == [{"train_loss": 0.5}] * 2  # what the algorithm gets
    assert (cost.down, cost.up) == ({"a": 6, "b": 6}, {"a": 7, "b": 7})
    assert cost.peak_memory == {"peak_memory_bytes": 5, "peak_memory_kind": "cpu_max_rss"}
