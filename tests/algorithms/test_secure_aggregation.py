"""Secure aggregation on the server side: tasks carry each client's FedAvg weight, the methods take the same step
from the securely summed mean as from the replies, and the config refuses what SecAgg+ cannot serve."""

import pytest
import torch
from fake_clients import FakeClients, infos, state, value
from tiny_runs import tiny

from fedpref.algorithms.aggregation import clear_aggregate
from fedpref.algorithms.fedavg import FedAvg
from fedpref.algorithms.fedavgm import FedAvgM, ServerMomentum
from fedpref.algorithms.privacy import ClientLevelDP
from fedpref.algorithms.registry import check_methods
from fedpref.config import PrivacyConfig, load_config
from fedpref.errors import ConfigError
from fedpref.protocol import SECURE_WEIGHT, Aggregate, Reply, Task, is_secure

SIZES = {"a": 10, "b": 30}
OFFSETS = {"a": 4.0, "b": -2.0}


def run(algorithm) -> list[Task]:
    fake = FakeClients(targets={}, offsets=OFFSETS, sizes=SIZES)
    fake.run(algorithm)
    return [t for _, t in fake.tasks]


def test_clear_aggregate_is_the_weighted_mean_of_the_answers():
    tasks = [Task(c, "train", [], payload={SECURE_WEIGHT: w}) for c, w in (("a", 1), ("b", 3), ("c", 5))]
    replies = [Reply("a", 0, state(2.0), {"train_loss": 1.0}), Reply("b", 0, state(6.0), {"train_loss": 3.0})]
    aggregate = clear_aggregate(tasks, replies)  # c did not answer: (1 * 2 + 3 * 6) / 4
    assert value(aggregate.state) == 5.0 and aggregate.weight == 4.0 and aggregate.client_ids == ["a", "b"]
    assert aggregate.metrics == [{"train_loss": 1.0}, {"train_loss": 3.0}]
    assert clear_aggregate(tasks, []).state is None and is_secure(tasks) and not is_secure([])


def test_secure_fedavg_sends_sizes_and_takes_the_size_weighted_mean():
    tasks = run(secure := FedAvg(infos(SIZES), state(0.0), 1, 2, 1, seed=0, secure=True))
    assert sorted(t.payload[SECURE_WEIGHT] for t in tasks) == [10, 30]
    assert value(secure.global_state) == -0.5  # (10 * 4 + 30 * -2) / 40, as plain FedAvg
    plain = FedAvg(infos(SIZES), state(0.0), 1, 2, 1, seed=0)
    run(plain)
    assert torch.equal(secure.global_state["w"], plain.global_state["w"])


def test_secure_fedavg_under_dp_sends_equal_weights_and_noises_the_same_mean():
    def dp():
        return ClientLevelDP.from_config(PrivacyConfig(10.0, 1.0, 1e-3), 2, 2, True, 0)

    secure, plain = (FedAvg(infos(SIZES), state(0.0), 2, 2, 1, seed=0, privacy=dp(), secure=s) for s in (True, False))
    tasks = run(secure)
    run(plain)
    assert all(t.payload == {"clip_norm": 10.0, SECURE_WEIGHT: 1} for t in tasks)
    assert torch.equal(secure.global_state["w"], plain.global_state["w"])  # same mean, same seeded noise
    assert secure.privacy_spent() == plain.privacy_spent()


def test_secure_fedavgm_takes_the_same_momentum_step():
    secure, plain = (
        FedAvgM(infos(SIZES), state(0.0), 3, 2, 1, 0, None, s, options=ServerMomentum(0.5)) for s in (True, False)
    )
    run(secure)
    run(plain)
    assert torch.equal(secure.global_state["w"], plain.global_state["w"])


def test_a_failed_sum_keeps_the_model():
    algorithm = FedAvg(infos(SIZES), state(1.5), 1, 2, 1, seed=0, secure=True)
    algorithm.receive_aggregate(0, Aggregate(None, [], 0.0, failure="halted"))
    assert value(algorithm.global_state) == 1.5


def test_secure_in_process_run_equals_the_plain_one(tiny_setup):
    from fedpref.experiments.runner import run_method

    plain, _ = run_method("FL", tiny(["FL"]), tiny_setup)
    secure, log = run_method("FL", tiny(["FL"], "secure_aggregation.enabled=true"), tiny_setup)
    assert secure["personalization"] == plain["personalization"]
    assert all(not r["dropped"] for r in log)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["algorithm.methods=['FL','FedGD']"], "FedGD needs each client's update"),
        (["federation.clients_per_round=2"], "federation.clients_per_round"),
        (["secure_aggregation.num_shares=2"], "secure_aggregation.num_shares"),
        (["secure_aggregation.num_shares=3", "secure_aggregation.reconstruction_threshold=3"], "below num_shares"),
        (["secure_aggregation.quantization_bits=31"], "secure_aggregation.quantization_bits"),
    ],
)
def test_what_secure_aggregation_cannot_serve_is_a_config_error(overrides, message):
    with pytest.raises(ConfigError, match=message):
        check_methods(load_config("tiny", ["secure_aggregation.enabled=true", *overrides]))


def test_off_by_default_and_the_config_digest_unchanged():
    cfg = load_config("tiny")
    assert not cfg.secure_aggregation.enabled and "secure_aggregation" not in cfg.to_dict()
    assert "secure_aggregation" in load_config("tiny", ["secure_aggregation.enabled=true"]).to_dict()
