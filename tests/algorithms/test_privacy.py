"""Server-side client-level DP: equal-weight mean, noise of std z C / n, and Flower's accountant across a resume."""

import pickle

import pytest
import torch
from fake_clients import FakeClients, infos, run_with_restart, state, value

from fedpref.algorithms.fedavg import FedAvg
from fedpref.algorithms.privacy import ClientLevelDP
from fedpref.algorithms.registry import check_methods
from fedpref.config import PrivacyConfig, load_config
from fedpref.errors import ConfigError

SIZES = {"a": 10, "b": 30}
OFFSETS = {"a": 4.0, "b": -2.0}


def dp(noise=0.0, clip=1.0, amplified=True, population=100, cohort=5, seed=0) -> ClientLevelDP:
    return ClientLevelDP.from_config(PrivacyConfig(clip, noise, 1e-5), population, cohort, amplified, seed)


def test_off_by_default():
    assert ClientLevelDP.from_config(PrivacyConfig(), 10, 5, True, 0) is None


def test_fedavg_with_clipping_sends_the_norm_and_averages_with_equal_weights():
    alg = FedAvg(infos(SIZES), state(0.0), 1, 2, 1, seed=0, privacy=dp(clip=10.0, population=2, cohort=2))
    fake = FakeClients(targets={}, offsets=OFFSETS, sizes=SIZES)
    tasks = fake.stage(alg, 0)
    assert all(t.payload == {"clip_norm": 10.0} for t in tasks)
    assert value(alg.global_state) == 1.0  # (4 + -2) / 2; size-weighted would be (40 - 60) / 40 = -0.5
    assert alg.privacy_spent()["releases"] == 1


def test_noise_std_is_z_c_over_n_and_the_same_for_the_same_round():
    d = dp(noise=2.0, clip=0.5)
    zeros = [{"w": torch.zeros(100_000)} for _ in range(4)]
    noised = d.aggregate(zeros, round_idx=7)["w"]
    assert float(noised.std()) == pytest.approx(2.0 * 0.5 / 4, rel=0.01)
    again = dp(noise=2.0, clip=0.5).aggregate(zeros, round_idx=7)["w"]
    other = dp(noise=2.0, clip=0.5).aggregate(zeros, round_idx=8)["w"]
    assert torch.equal(noised, again) and not torch.equal(noised, other)


def releases(d: ClientLevelDP, count: int) -> ClientLevelDP:
    for _ in range(count):
        d.record_release()
    return d


def test_gaussian_releases_compose_like_one_with_less_noise():
    # RDP of the Gaussian mechanism is alpha / (2 z^2): R releases at z are exactly one release at z / sqrt(R)
    many = releases(dp(noise=2.0, amplified=False), 4).spent()["epsilon"]
    one = releases(dp(noise=1.0, amplified=False), 1).spent()["epsilon"]
    assert many == pytest.approx(one, rel=1e-9)


def test_more_noise_or_subsampling_spends_less():
    base = releases(dp(noise=1.0, amplified=False), 10).spent()["epsilon"]
    assert releases(dp(noise=2.0, amplified=False), 10).spent()["epsilon"] < base
    assert releases(dp(noise=1.0, amplified=True), 10).spent()["epsilon"] < base
    assert releases(dp(noise=1.0, amplified=False), 20).spent()["epsilon"] > base


def test_clipping_without_noise_promises_nothing():
    assert releases(dp(noise=0.0), 0).spent()["epsilon"] == 0.0  # nothing released yet
    d = dp(noise=0.0)
    d.aggregate([state(1.0), state(3.0)], round_idx=0)
    assert d.spent()["releases"] == 1 and d.spent()["epsilon"] == float("inf")


def test_the_accountant_survives_a_checkpoint():
    d = releases(dp(noise=1.0), 3)
    restored = pickle.loads(pickle.dumps(d))  # what a checkpoint does with the algorithm's attributes
    assert restored._accountant is None and restored.spent() == d.spent()
    assert releases(restored, 2).spent() == releases(d, 2).spent()


def test_a_resumed_run_has_the_same_model_and_epsilon():
    def make():
        return FedAvg(infos(SIZES), state(0.0), 5, 2, 1, seed=0, privacy=dp(noise=1.0, population=2, cohort=2))

    straight = make()
    FakeClients(targets={}, offsets=OFFSETS, sizes=SIZES).run(straight)
    resumed = run_with_restart(make, FakeClients(targets={}, offsets=OFFSETS, sizes=SIZES), stop_after=2)
    assert torch.equal(straight.global_state["w"], resumed.global_state["w"])
    assert straight.privacy_spent() == resumed.privacy_spent() and straight.privacy_spent()["releases"] == 5


def test_privacy_with_a_method_that_cannot_use_it_is_a_config_error():
    cfg = load_config("tiny", ["privacy.clip_norm=1.0", "algorithm.methods=['FL','FedGD']"])
    with pytest.raises(ConfigError, match="FedGD cannot clip and noise"):
        check_methods(cfg)
    with pytest.raises(ConfigError, match="privacy.noise_multiplier"):
        load_config("tiny", ["privacy.noise_multiplier=1.0"])
