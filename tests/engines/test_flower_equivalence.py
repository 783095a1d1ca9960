"""The Flower Simulation Engine gives what the in-process engine gives (configs/quick/tiny.toml, 2 rounds)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

# slow: a second Flower simulation (about 2 min here); tests/test_pinned_numbers.py already pins both engines to
# the same literal numbers in `make test`, this adds unseen clients and exact model/assignment equality.
pytestmark = [pytest.mark.flower, pytest.mark.slow]
pytest.importorskip("ray", reason="the Flower Simulation Engine needs flwr[simulation] (Ray)")

TINY = Path(__file__).resolve().parents[2] / "src/fedpref/configs/quick/tiny.toml"
HAS_FEDGD = importlib.util.find_spec("fedpref.algorithms.fedgd") is not None
METHODS = ["FL", "FedBiscuit"] + (["FedGD"] if HAS_FEDGD else [])
# LoRA dropout stays on (tiny: 0.05): its masks come from the global RNG, reseeded from each task's generator.
# Two clients are held out (unseen): never trained in either engine, still personalized and evaluated.
OVERRIDES = ["federation.rounds=2", f"algorithm.methods={METHODS!r}", "data.unseen_clients=2"]


@pytest.fixture(scope="module")
def cfg():
    from fedpref.config import load_config

    return load_config(TINY, OVERRIDES)


@pytest.fixture(scope="module")
def inprocess(cfg) -> dict:
    """method -> (final algorithm, round log, per-client personalization curves), from the in-process engine."""
    from fedpref.algorithms.registry import build_algorithm
    from fedpref.client.trainer import LocalTrainer, optim_configs
    from fedpref.client.worker import Trainers
    from fedpref.engines.inprocess import InProcessTransport
    from fedpref.engines.loop import run_rounds
    from fedpref.experiments.setup import build_setup

    setup, (train_opt, pers_opt) = build_setup(cfg), optim_configs(cfg)
    runs = {}
    for name in METHODS:
        algorithm = build_algorithm(name, cfg, setup.infos, setup.init_state, setup.model, setup.unseen)
        trainers = Trainers(LocalTrainer(setup.model, train_opt), LocalTrainer(setup.model, pers_opt), cfg.seed)
        log = run_rounds(algorithm, InProcessTransport(setup.clients, trainers))
        runs[name] = (
            algorithm,
            log,
            personalize_every_client(name, algorithm, setup, cfg, LocalTrainer(setup.model, pers_opt)),
        )
    return runs


def personalize_every_client(name, algorithm, setup, cfg, trainer) -> dict[str, list[float]]:
    """What the runner's personalization does in-process, client by client."""
    from fedpref.client.personalize import personalize
    from fedpref.client.worker import task_generator

    steps = cfg.personalization.steps
    return {
        cid: personalize(
            trainer,
            algorithm.initialization(cid),
            c.train,
            c.test,
            steps,
            task_generator(cfg.seed, name, "personalize", cid),
        )
        for cid, c in setup.clients.items()
    }


@pytest.fixture(scope="module")
def flower(cfg) -> dict:
    """method -> (final algorithm, result, round log), all methods in one Flower simulation."""
    from fedpref.algorithms.registry import build_algorithm
    from fedpref.engines.flower.run import run_simulated
    from fedpref.engines.loop import finish_method, run_rounds
    from fedpref.models.adapters import trainable_state
    from fedpref.models.factory import build_reward_model

    model = build_reward_model(cfg)

    def body(transport) -> dict:
        peers, runs = transport.peers, {}
        for name in METHODS:
            algorithm = build_algorithm(name, cfg, peers.trained(), trainable_state(model), model, peers.held_out)
            transport.begin_method(name)
            log = run_rounds(algorithm, transport)
            result, _ = finish_method(algorithm, transport, peers.infos, cfg.personalization.steps)
            runs[name] = (algorithm, result, log)
        return runs

    return run_simulated(cfg, body)


def assert_states_close(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-6, msg=key)


def without_timing(log: list[dict]) -> list[dict]:
    from fedpref.engines.loop import MEASURED  # wall_s, its split and peak memory: the machine's, not the run's

    return [{k: v for k, v in record.items() if k not in ("train_loss", *MEASURED)} for record in log]


def test_fedavg_same_global_model(inprocess, flower) -> None:
    assert_states_close(inprocess["FL"][0].global_state, flower["FL"][0].global_state)


@pytest.mark.parametrize("method", METHODS)
def test_same_round_log(method, inprocess, flower) -> None:
    ours, theirs = inprocess[method][1], flower[method][2]
    assert without_timing(ours) == without_timing(theirs)
    losses = [(a["train_loss"], b["train_loss"]) for a, b in zip(ours, theirs)]
    assert [a is None for a, _ in losses] == [b is None for _, b in losses]  # evaluation-only stages: no loss
    assert [a for a, _ in losses if a is not None] == pytest.approx([b for _, b in losses if b is not None], rel=1e-5)


@pytest.mark.parametrize("method", METHODS)
def test_same_personalization(method, inprocess, flower) -> None:
    per_client, result = inprocess[method][2], flower[method][1]
    assert result["personalization"]["per_client"] == per_client


def sampled_clients(log: list[dict]) -> set[str]:
    """Every client sampled for training in a round log (FedBiscuit's warm-up logs one list per model)."""
    flat = (c for r in log for item in r.get("sampled", []) for c in ([item] if isinstance(item, str) else item))
    return set(flat)


@pytest.mark.parametrize("method", METHODS)
def test_unseen_clients_are_held_out_in_both_engines(method, inprocess, flower) -> None:
    held_out = inprocess[method][0].held_out
    assert len(held_out) == 2 and flower[method][0].held_out == held_out
    assert not {c.client_id for c in flower[method][0].clients} & set(held_out)
    assert sampled_clients(flower[method][2]) and not sampled_clients(flower[method][2]) & set(held_out)
    assert set(held_out) <= set(flower[method][1]["personalization"]["per_client"])


def test_fedbiscuit_unseen_clients_pick_the_same_model_in_both_engines(inprocess, flower) -> None:
    ours, theirs = inprocess["FedBiscuit"][0], flower["FedBiscuit"][0]
    assert set(ours.held_out) <= set(ours.best) and ours.best == theirs.best


@pytest.mark.skipif(not HAS_FEDGD, reason="fedpref.algorithms.fedgd is not there yet")
def test_fedgd_same_assignments_and_model(inprocess, flower) -> None:
    ours, theirs = inprocess["FedGD"][0], flower["FedGD"][0]
    assert [h for h in ours.history if "assignment" in h] == flower["FedGD"][1]["assignments"]
    assert ours.history == theirs.history
    assert ours.frozen == theirs.frozen
    assert_states_close(ours.phi, theirs.phi)
