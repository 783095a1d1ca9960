"""FedDPO as an engine Algorithm: its tasks, its uniform average, and the loop's guards (no policy needed)."""

import math

import torch

from fedpref.engines.loop import run_rounds
from fedpref.protocol import ClientInfo, Reply, TaskKey
from fedpref.stage2.feddpo import TRAIN_DPO, FedDPO

INIT = {"lora_A": torch.zeros(2)}


def fed_dpo(rounds: int = 2) -> FedDPO:
    clients = [ClientInfo(f"c{i}", 10) for i in range(4)]
    return FedDPO(clients, INIT, rounds, clients_per_round=2, local_steps=3, seed=5)


def test_one_stage_per_round_of_seeded_dpo_tasks():
    algorithm = fed_dpo()
    tasks = algorithm.next_tasks(1)
    assert [t.action for t in tasks] == [TRAIN_DPO, TRAIN_DPO] and all(t.steps == 3 for t in tasks)
    assert [t.payload["seed"] for t in tasks] == [5 + 7919, 5 + 7919 + 1]
    assert len({t.client_id for t in tasks}) == 2
    assert algorithm.next_tasks(1) == []  # the round's only stage has gone out
    assert algorithm.next_tasks(2) == []  # past the last round


def test_uniform_average_and_the_mean_of_every_step_loss():
    algorithm = fed_dpo()
    algorithm.next_tasks(0)
    replies = [
        Reply("c0", 10, {"lora_A": torch.tensor([1.0, 2.0])}, {"losses": [0.5, 0.7], "train_loss": 0.6}),
        Reply("c1", 30, {"lora_A": torch.tensor([3.0, 6.0])}, {"losses": [0.9], "train_loss": 0.9}),
    ]
    algorithm.receive(0, replies)
    assert torch.equal(algorithm.global_state["lora_A"], torch.tensor([2.0, 4.0]))  # sizes do not weigh
    assert math.isclose(algorithm.history[-1]["loss"], (0.5 + 0.7 + 0.9) / 3)


class Transport:
    """Answers each DPO task with the global state plus one; client c1's update is NaN."""

    def exchange(self, tasks, key: TaskKey):
        out = []
        for t in tasks:
            state = {k: v + (float("nan") if t.client_id == "c1" else 1.0) for k, v in t.models[0].items()}
            out.append(Reply(t.client_id, 10, state, {"losses": [0.4], "train_loss": 0.4}))
        return out

    def begin_method(self, method, next_round=0, saved_memories=None):
        pass

    def memories(self):
        return {}


def test_the_loop_drops_a_nan_client_update_of_feddpo():
    algorithm = fed_dpo(rounds=3)
    log = run_rounds(algorithm, Transport())
    assert [r["round"] for r in log] == [0, 1, 2] and any(r["dropped"] for r in log)
    for record in log:
        assert record["dropped"] == (["c1"] if "c1" in record["sampled"] else [])
    assert torch.isfinite(algorithm.global_state["lora_A"]).all()
