"""FedAvgM (server momentum, docs/extending.md's worked example) with numbers checked by hand."""

import pytest
import torch
from fake_clients import FakeClients, infos, run_with_restart, state, value

from fedpref.algorithms.fedavg import FedAvg
from fedpref.algorithms.fedavgm import FedAvgM, ServerMomentum, momentum_step

SIZES = {"a": 10, "b": 30}
OFFSETS = {"a": 4.0, "b": -4.0}  # a client returns w + offset; FedAvg's average is then w - 2 every round


def fedavgm(rounds=3, momentum=0.5, server_lr=1.0):
    return FedAvgM(infos(SIZES), state(0.0), rounds, 2, 1, seed=0, options=ServerMomentum(momentum, server_lr))


def test_momentum_step_by_hand():
    # g = theta - avg = (1, -2); v' = 0.5 * (2, 2) + g = (2, -1); theta' = theta - 0.5 v' = (2, 1.5)
    theta, v = momentum_step(state(3.0, 1.0), state(2.0, 3.0), state(2.0, 2.0), momentum=0.5, server_lr=0.5)
    assert torch.equal(v["w"], torch.tensor([2.0, -1.0], dtype=torch.float64))
    assert torch.equal(theta["w"], torch.tensor([2.0, 1.5], dtype=torch.float64))


def test_three_rounds_by_hand():
    alg = fedavgm()
    fake = FakeClients(targets={}, offsets=OFFSETS, sizes=SIZES)
    # round 0: replies 4 (n=10) and -4 (n=30), average (40 - 120) / 40 = -2; g = 0 - (-2) = 2, v = 2, theta = -2
    # round 1: replies 2 and -6, average -4; g = 2, v = 0.5 * 2 + 2 = 3, theta = -2 - 3 = -5 (FedAvg: -4)
    # round 2: replies -1 and -9, average -7; g = 2, v = 1.5 + 2 = 3.5, theta = -8.5 (FedAvg: -6)
    thetas, velocities = [], []
    for r in range(3):
        fake.stage(alg, r)
        thetas.append(value(alg.global_state))
        velocities.append(value(alg.velocity))
    assert thetas == [-2.0, -5.0, -8.5] and velocities == [2.0, 3.0, 3.5]
    assert fake.stage(alg, 3) is None and value(alg.initialization("a")) == -8.5


def test_no_momentum_is_fedavg():
    plain, ours = FedAvg(infos(SIZES), state(0.0), 3, 2, 1, seed=0), fedavgm(momentum=0.0)
    FakeClients(targets={}, offsets=OFFSETS, sizes=SIZES).run(plain)
    FakeClients(targets={}, offsets=OFFSETS, sizes=SIZES).run(ours)
    assert value(ours.global_state) == value(plain.global_state) == -6.0


def test_a_round_without_replies_keeps_model_and_velocity():
    alg = fedavgm()
    FakeClients(targets={}, offsets=OFFSETS, sizes=SIZES).stage(alg, 0)
    alg.next_tasks(1)
    alg.receive(1, [])
    assert (value(alg.global_state), value(alg.velocity)) == (-2.0, 2.0)


def test_resuming_from_its_attributes_gives_the_uninterrupted_run():
    whole = fedavgm(rounds=4)
    FakeClients(targets={}, offsets=OFFSETS, sizes=SIZES).run(whole)
    resumed = run_with_restart(lambda: fedavgm(rounds=4), FakeClients(targets={}, offsets=OFFSETS, sizes=SIZES), 1)
    assert value(resumed.global_state) == value(whole.global_state)


def test_options_are_checked():
    with pytest.raises(ValueError, match="momentum"):
        ServerMomentum(momentum=1.0)
    with pytest.raises(ValueError, match="server_lr"):
        ServerMomentum(server_lr=0.0)
